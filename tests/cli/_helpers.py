"""Helpers for the CLI tests: run ``python -m jianmu.cli`` in a project folder under tmp."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support.forked_cli import run_jianmu

REPO = Path(__file__).resolve().parents[2]
SHIPPED_SKILLS = REPO / "skills"
WITHOUT = (
    "import runpy, sys\n"
    "for name in {!r}:\n"
    "    sys.modules[name] = None  # `import name` now fails as for a package not installed\n"
    "runpy.run_module('jianmu.cli', run_name='__main__')\n"
)
"""``python -c`` code that runs ``jianmu`` with some packages impossible to import."""


@dataclass
class Done:
    """A finished ``jianmu`` process."""

    code: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err


@dataclass
class Project:
    """A folder with a config (checkpoints and workspace inside it) to run commands in."""

    root: Path
    config: Path
    workspace: Path

    def write(self, relative: str, text: str) -> Path:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def jianmu(self, *args: str, stdin: str | None = None, config: bool = True,
               timeout: float = 90, env: dict[str, str] | None = None,
               without: Sequence[str] = (), preload: Sequence[str] = ()) -> Done:
        """Run ``jianmu ARGS --config CONFIG`` here; ``stdin`` is piped in (else empty).

        ``without`` names packages (top-level import names) that the process cannot import,
        as if their extra were not installed. ``preload`` names modules the process finds
        imported already (`tests.support.forked_cli.MCP` for commands that connect to MCP).
        """
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("JIANMU_", "OPENAI_"))}
        clean.update(COLUMNS="200", NO_COLOR="1", PYTHONPATH=str(REPO), **(env or {}))
        extra = ["--config", str(self.config)] if config else []
        if not without:
            done = run_jianmu([*args, *extra], cwd=self.root, env=clean, input=stdin,
                              timeout=timeout, preload=preload)
            return Done(done.returncode, done.stdout, done.stderr)
        done = subprocess.run(
            [sys.executable, "-c", WITHOUT.format(list(without)), *args, *extra], cwd=self.root,
            env=clean, input=stdin if stdin is not None else "", capture_output=True, text=True,
            timeout=timeout,
        )
        return Done(done.returncode, done.stdout, done.stderr)


def make_config(root: Path, extra: str = "") -> Path:
    """A config whose checkpoints and workspace are under ``root``."""
    path = root / "jianmu-test.yaml"
    path.write_text(
        f"runtime:\n  checkpoint_path: {root / '.jianmu' / 'runs.sqlite'}\n"
        f"execution:\n  workdir: {root / 'ws'}\n{extra}",
        encoding="utf-8",
    )
    return path


def pending_of(out: str) -> tuple[str, list[str]]:
    """The run id and the pending request ids that a suspended run printed."""
    run = re.search(r"^suspended: run (\w+) waits", out, re.M)
    assert run is not None, out
    return run.group(1), re.findall(r"^  pending (\S+)", out, re.M)


def assert_clean_error(done: Done, code: int, *fragments: str) -> None:
    """Exit ``code``, one ``jianmu: error:`` line naming the fragments, no traceback."""
    assert done.code == code, done.text
    assert "Traceback" not in done.text, done.text
    assert "jianmu: error:" in done.err, done.text
    for fragment in fragments:
        assert fragment in done.err, done.err


def ctrl_c_as_in_a_terminal() -> None:
    """In the child: Ctrl-C at its default, as a terminal starts a command. An xdist worker
    ignores SIGINT, and an ignored signal is inherited: Python then installs no handler, and
    the command rightly goes on (as a job started in the background does)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
