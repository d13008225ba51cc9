"""A tree changed between two runs of one runner (a child added, inserted or taken out), or
while a run goes on, is run as a fresh runner would run it: every node bound, in its place."""

from __future__ import annotations

import asyncio

import py_trees
import pytest
from py_trees.common import Status

from jianmu.runtime import AsyncNode, ReactiveRunner
from tests.runtime._runner_nodes import Store

pytestmark = pytest.mark.anyio


class Turn(AsyncNode):
    """Ends after a turn of the loop: its task's end must wake the runner (no state write)."""

    async def update_async(self) -> Status:
        await asyncio.sleep(0)
        return Status.SUCCESS


class Writes(AsyncNode):
    """Appends its name to the state's ``log``."""

    async def update_async(self) -> Status:
        self.state.update({"log": [*(self.state.get("log") or []), self.name]})
        return Status.SUCCESS


def _sequence(*children: py_trees.behaviour.Behaviour) -> py_trees.composites.Sequence:
    return py_trees.composites.Sequence("seq", memory=True, children=list(children))


async def test_a_child_added_between_runs_is_bound_and_wakes_the_runner() -> None:
    root = _sequence(Turn("a"))
    runner = ReactiveRunner(root)
    assert (await runner.run(timeout=30)).ok
    added = Turn("b")
    root.add_child(added)
    runner.state.root.replace({"go": 1})  # new input: the next run() runs the tree again
    result = await runner.run(timeout=30)
    assert result.ok, result.error  # once, it waited for a wake-up that never came
    assert added.path == "seq/b" and runner.node_key(added) == "0/1"


async def test_a_child_inserted_between_runs_reads_the_state_and_moves_the_others() -> None:
    first = Turn("c")
    root = _sequence(first)
    store = Store()
    runner = ReactiveRunner(root, checkpointer=store)
    assert (await runner.run(timeout=30)).ok
    root.insert_child(Writes("w"), 0)
    runner.state.root.replace({"go": 1})
    result = await runner.run(timeout=30)
    assert result.ok, result.error  # not "has no state yet"
    assert runner.state.get("log") == ["w"]
    assert runner.node_key(first) == "0/1"  # no longer the key it had
    nodes = store.saves[-1]["nodes"]
    assert {key: node["name"] for key, node in nodes.items()} == {
        "0": "seq", "0/0": "w", "0/1": "c"}


async def test_a_child_taken_out_between_runs_leaves_no_place_behind() -> None:
    gone, kept = Turn("x"), Turn("x")  # siblings sharing a name: their paths hold the index
    root = _sequence(gone, kept)
    runner = ReactiveRunner(root)
    assert (await runner.run(timeout=30)).ok
    assert kept.path == "seq/x[1]"
    root.remove_child(gone)
    runner.state.root.replace({"go": 1})
    assert (await runner.run(timeout=30)).ok
    assert kept.path == "seq/x" and runner.node_key(kept) == "0/0"


class AddsOne(AsyncNode):
    """Adds a node after itself to its parent while the run goes on."""

    def __init__(self, name: str, added: AsyncNode) -> None:
        super().__init__(name)
        self.added = added

    async def update_async(self) -> Status:
        assert self.parent is not None
        self.parent.add_child(self.added)  # type: ignore[attr-defined]
        return Status.SUCCESS


async def test_a_child_added_while_the_run_goes_on_is_bound_when_met() -> None:
    writes, turn = Writes("late"), Turn("later")
    root = _sequence(AddsOne("adds", writes), AddsOne("adds too", turn))
    runner = ReactiveRunner(root)
    result = await runner.run(timeout=30)
    assert result.ok, result.error
    assert runner.state.get("log") == ["late"]
    assert turn.path == "seq/later" and runner.node_key(turn) == "0/3"
