"""Data printed by the CLI is shown, never obeyed by the terminal (issue 27, item 10).

Run ids, tree names, inputs, tool names, arguments, errors and skill texts come from models,
tools, apps and folders a person does not control. Rich markup in them (``[link=...]``,
``[bold red]``) was parsed, and ANSI escapes (clear the screen, OSC 8 links, C1 controls,
bidi overrides) reached the terminal, in ``jianmu runs list``/``runs show`` and wherever rich
printed data. Now every string goes out as written: markup literal, control characters as
escapes.
"""

from __future__ import annotations

import asyncio
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.cli._helpers import REPO, make_config
from tests.support.durable import HERE, ROOT, Workers
from tests.support.forked_cli import DURABLE, run_jianmu

RAW = ("\x1b", "\x9b", "\x07", "\u202e", "\x1b]8;;")
"""What must never reach the terminal raw: ESC, C1 CSI, BEL, a bidi override, an OSC 8 link."""

HOSTILE = "[link=http://evil.test]x[/link][bold red]y[/]\x1b[2J\x1b]8;;http://e\x07z\x9b31m\u202eq"


SHOWN = ("[link=", "[/link][bold", "y[/]", "\\u001b[2J", "\\u0007z", "\\u009b31m", "\\u202eq")
"""Pieces of `HOSTILE` as a terminal must show them (short: a table may wrap at a space)."""


def assert_inert(text: str, shown: tuple[str, ...] = SHOWN) -> None:
    for raw in RAW:
        assert raw not in text, (raw, text)
    for piece in shown:  # the markup printed as written, the escapes visible
        assert piece in text, (piece, text)


def run_cli(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_jianmu(args, cwd=cwd, env=env, timeout=120, preload=DURABLE)


@pytest.fixture
def durable_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Workers, str]:
    """A queued run (no worker: nothing executes) with a hostile id and hostile inputs."""
    pytest.importorskip("dbos")
    workers = Workers(f"sqlite:///{tmp_path / 'durable.sqlite'}", tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.syspath_prepend(str(HERE))
    from durable_app import engine

    from jianmu.durable import DurableEngine

    client = DurableEngine(workers.db, name=engine.name, config=engine.config)
    client._trees = engine._trees
    run_id = "r" + HOSTILE
    try:
        asyncio.run(client.start("confirm", {"path": "p", "note": HOSTILE}, run_id=run_id))
    finally:
        client.shutdown()
    return workers, run_id


def test_runs_list_and_show_print_data_as_written(durable_runs: tuple[Workers, Any]) -> None:
    workers, run_id = durable_runs
    env = workers.env("cli", COLUMNS="400")
    env.pop("JIANMU_TEST_WORKER")
    app = f"{HERE / 'durable_app.py'}:engine"
    listed = run_cli(["runs", "list", "--app", app], ROOT, env)
    assert listed.returncode == 0, listed.stderr
    assert_inert(listed.stdout, SHOWN[:5])  # a table cell may end in "…"
    shown = run_cli(["runs", "show", run_id, "--app", app], ROOT, env)
    assert shown.returncode == 0, shown.stderr
    assert_inert(shown.stdout)
    assert "\\u001b[2J" in shown.stdout.split("inputs: ", 1)[1]  # the inputs too
    as_json = run_cli(["runs", "show", run_id, "--app", app, "--json"], ROOT, env)
    for raw in RAW:
        assert raw not in as_json.stdout
    missing = run_cli(["runs", "show", run_id + "-missing", "--app", app], ROOT, env)
    assert missing.returncode == 2 and "no durable run" in missing.stderr
    assert_inert(missing.stderr, ())  # errors quoting data, too


def test_skill_texts_print_as_written(tmp_path: Path) -> None:
    folder = tmp_path / "skills" / "evil"
    folder.mkdir(parents=True)
    # YAML double quotes spell the escapes; the body carries them raw
    escaped = HOSTILE.replace("\x1b", "\\e").replace("\x07", "\\a").replace(
        "\x9b", "\\x9b").replace("\u202e", "\\u202e")
    (folder / "SKILL.md").write_text(textwrap.dedent(f"""\
        ---
        name: evil
        description: "{escaped}"
        allowed-tools: Task Read
        ---
        """) + HOSTILE + "\n", encoding="utf-8")
    (folder / f"file{HOSTILE.replace('/', '_')}.md").write_text("x")
    env = {"PYTHONPATH": str(REPO), "COLUMNS": "400", "PATH": "/usr/bin:/bin"}
    config = make_config(tmp_path)
    (tmp_path / "ws").mkdir()
    for args in (["skills", "list", "--skills-dir", str(tmp_path / "skills")],
                 ["skills", "show", "evil", "--skills-dir", str(tmp_path / "skills")]):
        done = run_cli([*args, "--config", str(config)], tmp_path, env)
        assert done.returncode == 0, done.stderr
        assert_inert(done.stdout)
    validated = run_cli(["skills", "validate", str(folder), "--config", str(config)],
                        tmp_path, env)
    for raw in RAW:
        assert raw not in validated.stdout


def test_a_runs_tool_arguments_and_errors_print_as_written(tmp_path: Path) -> None:
    script = tmp_path / "flow.py"
    script.write_text(textwrap.dedent(f'''\
        from jianmu.llm import ScriptedLLM
        from jianmu.nodes import AgentState, create_react_node
        from jianmu.state import StateManager
        from jianmu.tools import tool

        HOSTILE = {HOSTILE!r}

        @tool(permission="user_confirm")
        def deploy(target: str) -> str:
            """Deploy (asks first)."""
            raise RuntimeError("failed: " + HOSTILE)

        llm = ScriptedLLM([
            [{{"id": "c" + HOSTILE, "name": "deploy", "arguments": {{"target": HOSTILE}}}}],
            "answer: " + HOSTILE,
        ])
        tree = create_react_node(llm, [deploy])
        state = StateManager(AgentState)
        '''))
    (tmp_path / "ws").mkdir()
    config = make_config(tmp_path)
    env = {"PYTHONPATH": str(REPO), "COLUMNS": "400", "PATH": "/usr/bin:/bin"}
    asked = run_cli(["run", str(script), "--non-interactive", "--config", str(config)],
                    tmp_path, env)
    assert asked.returncode == 3, asked.stdout + asked.stderr
    assert_inert(asked.stdout)  # the pending request: its id and full arguments
    done = run_cli(["run", str(script), "--approve-all", "--config", str(config)], tmp_path, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert_inert(done.stdout)  # the tool's error and the model's answer
