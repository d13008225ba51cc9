"""A py_trees user's mistakes with `ReactiveRunner`: each refused where it is made, saying what
is wrong and what is right, with nothing of the run lost (the runner runs again after)."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import py_trees
import pytest
from py_trees.common import Status

from jianmu.runtime import AsyncNode, ReactiveRunner, RunStatus
from jianmu.state import StateManager
from tests.runtime._runner_nodes import Gate

pytestmark = pytest.mark.anyio


class Writes(AsyncNode):
    """Writes its run's id to the state it is bound to."""

    async def update_async(self) -> Status:
        self.state.write_port("run", self.ctx.run_id)
        return Status.SUCCESS


class Forgets(AsyncNode):
    """Forgets to call ``super().__init__()``."""

    def __init__(self, name: str) -> None:
        self.label = name


def _work() -> Status:
    return Status.SUCCESS


@pytest.mark.parametrize(
    ("root", "says"),
    [
        (_work, "a function is no node; subclass AsyncNode"),
        ([Writes("a"), Writes("b")], r"a list of nodes: put them in a composite"),
        ((Writes("a"),), r"a tuple of nodes: put them in a composite"),
        (Writes, r"the class Writes, not a node: ReactiveRunner\(Writes\(...\)\)"),
        ("tree", "got str 'tree'"),
        (py_trees.trees.BehaviourTree(Writes("a")),
         r"got a BehaviourTree: give its root, ReactiveRunner\(tree.root\); .* pre/post tick "
         r"handlers and visitors do not run"),
        (Forgets("f"), r"Forgets.__init__ did not call super\(\).__init__\(name\)"),
    ],
)
def test_a_root_that_is_no_behaviour_is_refused_at_construction(root: Any, says: str) -> None:
    with pytest.raises(TypeError, match=says):
        ReactiveRunner(root)


@pytest.mark.parametrize(
    ("limits", "error", "says"),
    [
        ({"max_ticks": 0}, ValueError, "max_ticks must be at least 1 .None: no limit., got 0"),
        ({"max_ticks": -1}, ValueError, "max_ticks must be at least 1"),
        ({"max_ticks": "3"}, TypeError, "max_ticks is a whole number of ticks, got str '3'"),
        ({"max_ticks": 2.5}, TypeError, "got float 2.5"),
        ({"max_ticks": True}, TypeError, "got bool True"),
        ({"timeout": 0}, ValueError, r"timeout must be a number of seconds > 0 .None: no limit."),
        ({"timeout": -1}, ValueError, "got -1"),
        ({"timeout": math.nan}, ValueError, "got nan"),
        ({"timeout": "5"}, TypeError, "timeout is a number of seconds, got str '5'"),
    ],
)
async def test_a_run_limit_that_is_no_limit_is_refused_before_a_tick(
    limits: dict[str, Any], error: type[Exception], says: str
) -> None:
    gate = Gate("wait")
    runner = ReactiveRunner(gate)
    with pytest.raises(error, match=says):
        await runner.run(**limits)
    # nothing ticked, nothing started: the runner runs as if asked right
    assert runner.ticks == 0 and not gate.started.is_set()
    gate.gate.set()
    assert (await runner.run(timeout=30)).status is RunStatus.SUCCESS


async def test_one_tree_run_by_two_runners_at_once_is_refused_and_the_first_run_keeps_it() -> None:
    gate = Gate("wait")
    tree = py_trees.composites.Sequence("tree", memory=True, children=[gate, Writes("write")])
    first, second = StateManager(), StateManager()
    one = ReactiveRunner(tree, first, run_id="one")
    other = ReactiveRunner(tree, second, run_id="two")
    running = asyncio.create_task(one.run(timeout=30))
    await gate.started.wait()
    with pytest.raises(RuntimeError, match=r"tree .tree. is being ticked by run one: .*"
                                            r"build a tree per run"):
        await other.run(timeout=30)
    gate.gate.set()
    assert (await running).status is RunStatus.SUCCESS
    assert first.get("run") == "one" and second.get("run") is None  # written where it belongs


async def test_a_runner_runs_its_tree_again_after_another_runner_ran_it() -> None:
    tree = py_trees.composites.Sequence("tree", memory=False, children=[Writes("write")])
    first, second = StateManager(), StateManager()
    one = ReactiveRunner(tree, first, run_id="one")
    assert (await one.run(timeout=30)).ok
    other = ReactiveRunner(tree, second, run_id="two")
    assert (await other.run(timeout=30)).ok
    first.write_port("run", None)  # new input: the first runner runs its tree again
    assert (await one.run(timeout=30)).ok
    # bound back to its own state and context: its node writes there and wakes it
    assert first.get("run") == "one" and second.get("run") == "two"


class Plain(AsyncNode):
    """Writes ``update_async`` as a plain ``def``, as a py_trees ``update`` is written."""

    def update_async(self) -> Status:  # type: ignore[override]
        return Status.SUCCESS


async def test_an_update_async_written_as_a_plain_def_fails_its_node_saying_async_def() -> None:
    runner = ReactiveRunner(Plain("plain"), StateManager(initial={"kept": 1}))
    result = await runner.run(timeout=30)
    assert result.status is RunStatus.FAILURE
    assert isinstance(result.exception, TypeError)
    assert str(result.exception).startswith(
        "update_async must be a coroutine function, `async def update_async(self) -> Status`, "
        "but it returned <Status.SUCCESS: 'SUCCESS'>, not a coroutine")
    assert result.error is not None and result.error.startswith("plain: TypeError: update_async")
    assert runner.state.get("kept") == 1


class PlainLater(Plain):
    """`Plain`, not stepped eagerly (as the engine's model and tool nodes are not)."""

    eager_start = False


class Steps:
    """A durable run's step recorder that records nothing: each step runs."""

    async def run(self, key: str, factory: Any) -> Any:
        return await factory()

    async def mark_started(self, keys: Any) -> None:
        pass

    def maybe_repeated(self, key: str) -> bool:
        return False


@pytest.mark.parametrize("how", ["not eager", "durable"])
async def test_a_plain_def_update_async_says_async_def_however_the_node_runs(how: str) -> None:
    """Not stepped eagerly, asyncio's "a coroutine was expected" escaped the node; in a durable
    run (the node's work one step), "object Status can't be used in 'await' expression"."""
    node = PlainLater("plain") if how == "not eager" else Plain("plain")
    runner = ReactiveRunner(node, StateManager(initial={"kept": 1}))
    if how == "durable":
        runner.ctx.steps = Steps()
    result = await runner.run(timeout=30)
    assert result.status is RunStatus.FAILURE
    assert isinstance(result.exception, TypeError)
    assert str(result.exception).startswith(
        "update_async must be a coroutine function, `async def update_async(self) -> Status`, "
        "but it returned <Status.SUCCESS: 'SUCCESS'>, not a coroutine")
    assert result.error is not None and result.error.startswith("plain: TypeError: update_async")
    assert runner.state.get("kept") == 1


class ReadsTooEarly(AsyncNode):
    """Reads its state in ``__init__``, before a runner bound it."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.start = self.state.get("start")


async def test_a_node_that_reads_its_state_in_init_is_told_when_it_is_bound() -> None:
    with pytest.raises(AttributeError, match=(
            r"ReadsTooEarly 'early' has no state yet: a ReactiveRunner binds it when it runs "
            r"the tree .*; read self.state in update_async \(or initialise\), not in __init__")):
        ReadsTooEarly("early")
    node = Writes("writes")
    assert not hasattr(node, "state") and getattr(node, "ctx", None) is None
    with pytest.raises(AttributeError, match="has no ctx yet") as error:
        node.events  # noqa: B018 - the run's events come with its context
    assert error.value.name == "ctx" and error.value.obj is node
    runner = ReactiveRunner(node, StateManager())
    assert (await runner.run(timeout=30)).ok  # bound by its run: its own, found first
    assert node.ctx is runner.ctx and runner.state.get("run") == runner.ctx.run_id


def test_a_tree_ticked_by_py_trees_own_tree_is_told_to_run_under_a_runner() -> None:
    tree = py_trees.trees.BehaviourTree(Writes("writes"))
    with pytest.raises(RuntimeError, match=r"Writes 'writes' was ticked with no event loop "
                       r"running: .* run the tree's root with ReactiveRunner\(root\)"):
        tree.tick()  # and no coroutine made, never awaited (a warning: an error here)
