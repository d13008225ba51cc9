"""A lone surrogate (``"\\ud800"``, valid JSON) in a call that asks a person failed the run.

The guard's fingerprint of the call (what an approval holds for) encoded the arguments as
strict UTF-8: a model's call to a ``user_confirm`` tool with such text failed its tool node
as it asked (nothing to approve, the run over), and ``approve(id, arguments=...)`` with such
text (``jianmu resume --arguments '{"text": "\\ud800"}'``) was recorded and then failed the
run at the guard's second look. The call now asks, and runs once as decided, restored too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu import AgentState, ReactiveRunner, RunStatus, StateManager, tool
from jianmu.llm import ScriptedLLM
from jianmu.nodes import create_react_node
from jianmu.runtime import SQLiteCheckpointer

pytestmark = pytest.mark.anyio

LONE = "a\ud800b"


def _build(ran: list[str], text: str = LONE) -> tuple[object, StateManager]:
    @tool(category="write", permission="user_confirm")
    def note(text: str) -> str:
        """Write a note.

        Args:
            text: The note.
        """
        ran.append(text)
        return f"noted {text!a}"

    def respond(messages: list) -> object:
        said = [m.content for m in messages if m.role == "tool"]
        if said:
            return "done: " + said[-1]
        return [{"id": "c1", "name": "note", "arguments": {"text": text}}]

    tree = create_react_node(ScriptedLLM([respond, respond]), [note], max_iterations=3)
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "note"}]})
    return tree, state


async def test_a_models_call_with_a_lone_surrogate_asks_and_runs_once() -> None:
    ran: list[str] = []
    runner = ReactiveRunner(*_build(ran))
    asked = await runner.run(timeout=30)
    assert asked.status is RunStatus.SUSPENDED, asked.error
    assert asked.pending[0].arguments == {"text": LONE}
    runner.approve(asked.pending[0].id)
    done = await runner.run(timeout=30)
    assert done.status is RunStatus.SUCCESS, done.error
    assert ran == [LONE]


@pytest.mark.parametrize("restored", [False, True])
async def test_an_edit_to_a_lone_surrogate_runs_the_edited_call_once(
    tmp_path: Path, restored: bool
) -> None:
    ran: list[str] = []
    store = SQLiteCheckpointer(str(tmp_path / "runs.sqlite"))
    runner = ReactiveRunner(*_build(ran, "plain"), checkpointer=store, run_id="r1")
    asked = await runner.run(timeout=30)
    assert asked.status is RunStatus.SUSPENDED, asked.error
    request = asked.pending[0].id
    if restored:  # decided by another runner, on the checkpoint alone
        await runner.aclose()
        tree, state = _build(ran, "plain")
        runner = ReactiveRunner.restore(tree, store, "r1", state_manager=state)
    runner.approve(request, arguments={"text": "edited " + LONE})
    done = await runner.run(timeout=30)
    assert done.status is RunStatus.SUCCESS, done.error
    assert ran == ["edited " + LONE]
    await runner.aclose()
