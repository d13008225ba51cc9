"""A durable run's inputs reach its agent: they are the user's first message when the tree's
state has no conversation yet (as `jianmu run SKILL --input` does)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu.config import AppConfig
from jianmu.durable import DurableEngine
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState, create_react_node
from jianmu.state import StateManager


def _engine(tmp_path: Path) -> DurableEngine:
    return DurableEngine(f"sqlite:///{tmp_path / 'db.sqlite'}", config=AppConfig())


def test_inputs_become_the_first_user_message(tmp_path: Path) -> None:
    engine = _engine(tmp_path)

    @engine.tree("greet")
    def build(inputs: dict) -> tuple:
        return create_react_node(ScriptedLLM(["hi"]), []), StateManager(AgentState)

    runner = engine.build_runner("greet", {"name": "Ada", "age": 36}, run_id="r1")
    (message,) = runner.state.get("messages")
    assert (message.role, message.content) == ("user", "name: Ada\nage: 36")
    task = engine.build_runner("greet", {"task": "Say hi to Ada"}, run_id="r2")
    assert task.state.get("messages")[0].content == "Say hi to Ada"


def test_a_tree_that_seeds_its_own_conversation_keeps_it(tmp_path: Path) -> None:
    engine = _engine(tmp_path)

    @engine.tree("own")
    def build(inputs: dict) -> tuple:
        seeded = {"messages": [{"role": "user", "content": f"greet {inputs['name']}"}]}
        return create_react_node(ScriptedLLM(["hi"]), []), StateManager(AgentState, seeded)

    runner = engine.build_runner("own", {"name": "Ada"}, run_id="r3")
    assert [m.content for m in runner.state.get("messages")] == ["greet Ada"]


def test_a_blank_database_url_in_the_config_means_sqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jianmu.config import parse_config

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("JIANMU_DATABASE_URL", raising=False)
    engine = DurableEngine(config=parse_config(
        "durable:\n  database_url: ${JIANMU_DATABASE_URL:-}\n"))
    assert engine.database_url.startswith("sqlite:///")
