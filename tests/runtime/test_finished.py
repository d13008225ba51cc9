"""A run's end is final: ``run()`` on a finished run returns its result without ticking or
asking the model; only new input (``send``, a write to the state) starts a new turn."""

from __future__ import annotations

import asyncio
from pathlib import Path

import py_trees
from py_trees.common import Status

from jianmu import (
    AgentState,
    AsyncNode,
    ReactiveRunner,
    ScriptedLLM,
    StateManager,
    create_react_node,
)
from jianmu.runtime import RunStatus, SQLiteCheckpointer


def chat(llm: ScriptedLLM) -> tuple[ReactiveRunner, StateManager]:
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "Hi."}]})
    return ReactiveRunner(create_react_node(llm, []), state), state


def test_running_a_finished_run_again_asks_nothing() -> None:
    llm = ScriptedLLM(["Hello.", "A second turn nobody asked for."])
    runner, state = chat(llm)
    first = runner.run_sync()
    assert first.ok and state.get("final_answer") == "Hello."
    again = runner.run_sync()
    assert again.ok and again.ticks == 0 and again.run_id == first.run_id
    assert len(llm.requests) == 1
    assert [m.role for m in state.get("messages")] == ["user", "assistant"]
    assert asyncio.run(runner.run()).ok and len(llm.requests) == 1


def test_send_starts_the_next_turn() -> None:
    llm = ScriptedLLM(["Hello.", "Fine, thanks."])
    runner, state = chat(llm)
    assert runner.run_sync().ok
    runner.send("How are you?")
    result = runner.run_sync()
    assert result.ok and result.ticks > 0
    assert state.get("final_answer") == "Fine, thanks." and len(llm.requests) == 2


def test_new_input_written_to_the_state_starts_the_next_turn() -> None:
    llm = ScriptedLLM(["Hello.", "Noted."])
    runner, state = chat(llm)
    assert runner.run_sync().ok
    state.update({"messages": [{"role": "user", "content": "Note this."}],
                  "final_answer": None})
    assert runner.run_sync().ok
    assert state.get("final_answer") == "Noted." and len(llm.requests) == 2


class Counted(AsyncNode):
    """Fails, counting its starts."""

    starts = 0

    async def update_async(self) -> Status:
        Counted.starts += 1
        raise ValueError("the disk is full")


def test_a_failed_run_stays_failed_with_its_error() -> None:
    Counted.starts = 0
    runner = ReactiveRunner(Counted("write"), StateManager())
    first = runner.run_sync()
    assert first.status is RunStatus.FAILURE and "the disk is full" in (first.error or "")
    again = runner.run_sync()
    assert again.status is RunStatus.FAILURE and again.error == first.error
    assert again.ticks == 0 and Counted.starts == 1


def test_a_run_restored_from_its_finished_checkpoint_is_final(tmp_path: Path) -> None:
    checkpointer = SQLiteCheckpointer(tmp_path / "runs.db")
    llm = ScriptedLLM(["Hello.", "Asked again.", "Fine, thanks."])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "Hi."}]})
    runner = ReactiveRunner(create_react_node(llm, []), state, checkpointer=checkpointer)
    assert runner.run_sync().ok

    restored_state = StateManager(AgentState)
    restored = ReactiveRunner.restore(create_react_node(llm, []), checkpointer, runner.run_id,
                                      state_manager=restored_state)
    result = restored.run_sync()
    assert result.ok and result.ticks == 0 and len(llm.requests) == 1
    assert restored_state.get("final_answer") == "Hello."
    restored.send("How are you?")  # a new turn: send clears the finished mark
    assert restored.run_sync().ok and len(llm.requests) == 2


def test_a_failure_restored_keeps_its_error(tmp_path: Path) -> None:
    Counted.starts = 0
    checkpointer = SQLiteCheckpointer(tmp_path / "runs.db")
    first = ReactiveRunner(Counted("write"), StateManager(), checkpointer=checkpointer).run_sync()
    restored = ReactiveRunner.restore(Counted("write"), checkpointer, first.run_id)
    again = restored.run_sync()
    assert again.status is RunStatus.FAILURE and again.error == first.error
    assert Counted.starts == 1


def test_a_timed_out_run_goes_on() -> None:
    # only SUCCESS and FAILURE are ends: a run stopped by its timeout continues on run()
    gate = asyncio.Event()

    class Wait(AsyncNode):
        async def update_async(self) -> Status:
            await gate.wait()
            return Status.SUCCESS

    async def main() -> tuple[RunStatus, RunStatus]:
        tree = py_trees.composites.Sequence("s", memory=True, children=[Wait("wait")])
        runner = ReactiveRunner(tree, StateManager())
        stopped = await runner.run(timeout=0.01)
        gate.set()
        return stopped.status, (await runner.run()).status

    assert asyncio.run(main()) == (RunStatus.TIMEOUT, RunStatus.SUCCESS)


def test_a_typed_answer_restored_from_its_finished_checkpoint_is_final(tmp_path: Path) -> None:
    """Binding the restored tree makes the typed answer an object again (a write to the
    state): that is not new input, and the model is not asked again."""
    from pydantic import BaseModel

    class City(BaseModel):
        name: str

    def answer(name: str) -> list[dict[str, object]]:
        return [{"name": "final_result", "arguments": {"name": name}}]

    checkpointer = SQLiteCheckpointer(tmp_path / "runs.db")
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "Where?"}]})
    first = ReactiveRunner(create_react_node(ScriptedLLM([answer("Paris")]), [], output_type=City),
                           state, checkpointer=checkpointer).run_sync()
    assert first.ok and first.output == City(name="Paris")

    llm = ScriptedLLM([answer("Rome")])
    restored = ReactiveRunner.restore(create_react_node(llm, [], output_type=City), checkpointer,
                                      first.run_id, state_manager=StateManager(AgentState))
    result = restored.run_sync()
    assert result.ok and result.ticks == 0 and llm.requests == []
    assert result.output == City(name="Paris")
