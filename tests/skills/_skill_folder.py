"""A skill folder in the public format, with files and scripts, for the skill-tool tests;
and the sandboxes that mount it read-only (fixtures, imported by the test modules)."""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from jianmu.skills import Skill, load_skill
from tests.execution._helpers import local_problem, make_sandbox, require_docker

GUIDE = "".join(f"guide line {i}\n" for i in range(1, 13))

ECHO_PY = textwrap.dedent('''\
    """Echo the arguments and stdin; show where it runs."""
    import argparse, os, sys

    parser = argparse.ArgumentParser(description="Echo what the skill was given.")
    parser.add_argument("words", nargs="*", help="words to echo")
    parser.add_argument("--stdin", action="store_true", help="also echo standard input")
    ns = parser.parse_args()
    print("args:", ns.words)
    if ns.stdin:
        print("stdin:", sys.stdin.read().strip())
    print("cwd:", os.getcwd())
    print("file:", __file__)
    print("skill dir:", os.environ.get("JIANMU_SKILL_DIR"))
''')

WRITE_PY = textwrap.dedent('''\
    """Try to change the skill's own folder; report each attempt."""
    import os
    here = os.path.dirname(os.path.abspath(__file__))
    for name, attempt in [
        ("create", lambda: open(os.path.join(here, "planted.txt"), "w").write("x")),
        ("overwrite", lambda: open(os.path.join(here, "echo.py"), "a").write("# x")),
        ("remove", lambda: os.remove(os.path.join(here, "echo.py"))),
        ("mkdir", lambda: os.mkdir(os.path.join(os.path.dirname(here), "new"))),
    ]:
        try:
            attempt()
            print(name, "SUCCEEDED")
        except OSError as exc:
            print(name, "refused", exc.errno)
    open("written-to-workspace.txt", "w").write("ok")
''')


def make_skill(root: Path, name: str = "demo") -> Skill:
    """Write skill ``name`` under ``root`` (world-readable, as a skills folder is) and load it."""
    folder = root / name
    (folder / "references").mkdir(parents=True)
    (folder / "examples").mkdir()
    (folder / "scripts").mkdir()
    (folder / "assets").mkdir()
    (folder / "SKILL.md").write_text(textwrap.dedent(f"""\
        ---
        name: {name}
        description: A demo skill with references, examples and scripts. Use it in tests.
        license: Apache-2.0
        allowed-tools: Read Bash
        metadata:
          author: tests
        ---

        # Demo

        Read `references/guide.md`, follow `examples/report.md`, and run
        `python scripts/echo.py --help` first.
        """))
    (folder / "references" / "guide.md").write_text(GUIDE)
    (folder / "examples" / "report.md").write_text("# Report\n\nOne line per change.\n")
    (folder / "forms.md").write_text("top-level file\n")
    (folder / "assets" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00" + bytes(500))
    (folder / "scripts" / "echo.py").write_text(ECHO_PY)
    (folder / "scripts" / "write_here.py").write_text(WRITE_PY)
    (folder / "scripts" / "hello.sh").write_text('echo "hello from sh: $*"\n')
    run = folder / "scripts" / "run"
    run.write_text('#!/bin/sh\necho "ran itself: $1"\n')
    run.chmod(0o755)
    (folder / "scripts" / "noexec").write_text('#!/bin/sh\necho never\n')
    (folder / "scripts" / "data.txt").write_text("not a script\n")
    for path in [folder, *folder.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o444 | (0o111 if path.is_dir() else 0))
    return load_skill(folder)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module scope, so that one container serves a module's Docker tests."""
    return "asyncio"


@pytest.fixture(scope="module")
def skill_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace the sandbox's unprivileged user may write to."""
    path = tmp_path_factory.mktemp("ws")
    path.chmod(0o777)
    for parent in path.parents:  # pytest's folders are 0700: let the sandbox user through
        if parent == Path(tmp_path_factory.getbasetemp()).parent:
            break
        parent.chmod(parent.stat().st_mode | 0o011)
    return path


@pytest.fixture(
    scope="module",
    params=[pytest.param("local-bwrap"), pytest.param("docker", marks=pytest.mark.docker)],
)
async def mounting_sandbox(
    request: pytest.FixtureRequest, skill_workspace: Path
) -> AsyncIterator[Any]:
    """A started sandbox that mounts read-only: bubblewrap, and one Docker container."""
    if request.param == "docker":
        require_docker()
    elif (problem := local_problem(request.param)) is not None:
        pytest.skip(problem)
    box = make_sandbox(request.param, skill_workspace)
    await box.start()
    try:
        yield box
    finally:
        await box.close()
