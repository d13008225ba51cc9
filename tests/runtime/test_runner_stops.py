"""A run that stops its tree stops all of it, whatever a node's ``terminate`` or
``initialise`` raises, and blames what failed it: not an error the tree recovered from."""

from __future__ import annotations

import asyncio
from typing import Any

import py_trees
import pytest
from py_trees.behaviour import Behaviour
from py_trees.common import ParallelPolicy, Status

from jianmu.errors import RunFailed
from jianmu.runtime import AsyncNode, ReactiveRunner, RunStatus
from tests.runtime._runner_nodes import Gate, events_of

pytestmark = pytest.mark.anyio


class BadStop(Gate):
    """A gate whose ``terminate`` raises on a stop, after (or before) the runtime's own."""

    def __init__(self, name: str, *, first: bool = False) -> None:
        super().__init__(name)
        self.first = first
        self.terminated = 0

    def terminate(self, new_status: Status) -> None:
        if new_status is Status.INVALID:
            self.terminated += 1
            if self.first:  # raises before the runtime's part: its task is still cancelled
                raise RuntimeError("terminate failed")
        super().terminate(new_status)
        if new_status is Status.INVALID:
            raise RuntimeError("terminate failed")


def _beside(bad: Behaviour, sibling: Behaviour) -> Behaviour:
    return py_trees.composites.Parallel(
        "both", policy=ParallelPolicy.SuccessOnAll(synchronise=False), children=[bad, sibling])


def _settled(root: Behaviour) -> None:
    """Nothing of the run is left: no node running, no task in flight."""
    for node in root.iterate():
        assert node.status is not Status.RUNNING, node.name
        if isinstance(node, AsyncNode):
            assert node.in_flight is None, node.name


@pytest.mark.parametrize("first", [False, True], ids=["after", "before"])
async def test_a_terminate_raising_as_a_timeout_expires_fails_the_run_and_stops_the_rest(
        first: bool) -> None:
    bad, sibling = BadStop("bad", first=first), Gate("sibling")
    root = _beside(py_trees.decorators.Timeout("t", bad, duration=0.01), sibling)
    runner = ReactiveRunner(root)
    seen = events_of(runner)
    result = await runner.run(timeout=30)
    assert result.status is RunStatus.FAILURE
    assert isinstance(result.exception, RuntimeError)
    assert str(result.exception) == "terminate failed"
    assert bad.cancelled and sibling.cancelled  # both tasks saw their cancel before run() returned
    _settled(root)
    assert [e.node for e in seen if e.name == "node.stop_failed"] == ["both/t/bad"]
    # the runner runs again (the Timeout expired anew, it fails as before: no raise escapes)
    runner.state.root.replace({"again": 1})
    again = await runner.run(timeout=30)
    assert again.status is RunStatus.FAILURE and isinstance(again.exception, RuntimeError)
    _settled(root)


@pytest.mark.parametrize("first", [False, True], ids=["after", "before"])
async def test_a_terminate_raising_on_cancel_still_cancels_the_run_and_stops_the_rest(
        first: bool) -> None:
    bad, sibling = BadStop("bad", first=first), Gate("sibling")
    root = _beside(bad, sibling)
    runner = ReactiveRunner(root)
    seen = events_of(runner)
    task = asyncio.create_task(runner.run(timeout=30))
    await bad.started.wait()
    await sibling.started.wait()
    runner.cancel()
    result = await task
    assert result.status is RunStatus.CANCELLED
    assert result.error == ("the run was cancelled; stopping it raised: bad: RuntimeError: "
                            "terminate failed")
    assert bad.terminated == 1 and bad.cancelled and sibling.cancelled
    _settled(root)
    assert [e.fields["error"] for e in seen if e.name == "node.stop_failed"] == [
        "RuntimeError: terminate failed"]


async def test_a_terminate_raising_at_the_runs_timeout_or_max_ticks_is_said() -> None:
    bad, sibling = BadStop("bad"), Gate("sibling")
    root = _beside(bad, sibling)
    result = await ReactiveRunner(root).run(timeout=0.05)
    assert result.status is RunStatus.TIMEOUT
    assert result.error is not None and result.error.endswith("bad: RuntimeError: terminate failed")
    _settled(root)
    bad, sibling = BadStop("bad"), Gate("sibling")
    root = _beside(bad, py_trees.decorators.Inverter("not", sibling))
    result = await ReactiveRunner(root).run(max_ticks=1)
    assert result.status is RunStatus.FAILURE and isinstance(result.exception, RunFailed)
    assert "max_ticks=1 reached" in str(result.exception)
    assert "terminate failed" in str(result.exception)
    _settled(root)


class _Initialises(AsyncNode):
    """Its own ``initialise`` raises once the runtime's made the task."""

    def __init__(self) -> None:
        super().__init__("n")
        self.task: asyncio.Task[Any] | None = None
        self.ran = False

    def initialise(self) -> None:
        super().initialise()
        self.task = self._task
        raise RuntimeError("bad configuration")

    async def update_async(self) -> Status:
        self.ran = True
        return Status.SUCCESS


async def test_an_initialise_raising_after_the_task_was_made_leaves_no_task() -> None:
    node = _Initialises()
    result = await ReactiveRunner(node).run(timeout=30)
    assert result.status is RunStatus.FAILURE and result.error == "RuntimeError: bad configuration"
    assert node.task is not None and node.task.done()  # cancelled: it never runs now
    assert not node.ran and node.in_flight is None


# -- what failed the run -------------------------------------------------------------------------
class _Raises(AsyncNode):
    async def update_async(self) -> Status:
        raise ConnectionError("primary mirror down")


class _Says(AsyncNode):
    def __init__(self, name: str, status: Status, feedback: str = "") -> None:
        super().__init__(name)
        self.result, self.feedback = status, feedback

    async def update_async(self) -> Status:
        self.feedback_message = self.feedback
        return self.result


def _download() -> Behaviour:
    """A selector whose first child raises and whose fallback succeeds: handled."""
    return py_trees.composites.Selector("download", memory=True, children=[
        _Raises("primary"), _Says("fallback", Status.SUCCESS)])


async def test_an_error_the_tree_recovered_from_is_not_why_the_run_failed() -> None:
    root = py_trees.composites.Sequence("job", memory=True, children=[
        _download(), _Says("verify", Status.FAILURE, "checksum mismatch")])
    runner = ReactiveRunner(root)
    result = await runner.run(timeout=30)
    assert result.status is RunStatus.FAILURE
    assert result.error == "verify: checksum mismatch"
    assert isinstance(result.exception, RunFailed)
    assert str(result.exception) == f"run {runner.run_id} failed: verify: checksum mismatch"
    # nothing on the failing path says why: no reason, and no recovered error either
    quiet = py_trees.composites.Sequence("job", memory=True, children=[
        _download(), _Says("verify", Status.FAILURE)])
    result = await ReactiveRunner(quiet).run(timeout=30)
    assert result.error is None and isinstance(result.exception, RunFailed)
    # an error on the failing path is still the one
    failing = py_trees.composites.Sequence("job", memory=True, children=[
        _download(), py_trees.composites.Selector("both", memory=True, children=[
            _Says("said", Status.FAILURE, "no"), _Raises("again")])])
    result = await ReactiveRunner(failing).run(timeout=30)
    assert result.error == "again: ConnectionError: primary mirror down"
    assert isinstance(result.exception, ConnectionError)


async def test_a_run_cut_by_max_ticks_carries_no_old_error() -> None:
    root = py_trees.composites.Sequence("job", memory=True, children=[
        _download(), py_trees.behaviours.Running("polled")])
    result = await ReactiveRunner(root).run(max_ticks=2, timeout=30)
    assert result.status is RunStatus.FAILURE
    assert result.error == "max_ticks=2 reached before the tree finished"
    assert isinstance(result.exception, RunFailed)
    assert "max_ticks=2" in str(result.exception)


# -- a stopped task's cleanup and the run's timeout ---------------------------------------------
class SlowCleanup(AsyncNode):
    """Waits for ever; stopped, its ``finally`` waits for ``release`` (a server that hangs)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.release = asyncio.Event()
        self.cleaned = False
        self.task: asyncio.Task[Any] | None = None

    async def update_async(self) -> Status:
        self.task = asyncio.current_task()
        try:
            await asyncio.Event().wait()
        finally:
            await self.release.wait()
            self.cleaned = True
        return Status.SUCCESS  # pragma: no cover - never reached


@pytest.mark.parametrize("by_timeout_node", [False, True], ids=["run-timeout", "Timeout"])
async def test_a_cleanup_that_never_ends_holds_a_timed_run_only_for_its_grace(
        by_timeout_node: bool) -> None:
    from jianmu.config import AppConfig

    leaf = SlowCleanup("work")
    root = (py_trees.decorators.Timeout("deadline", leaf, duration=0.01) if by_timeout_node
            else leaf)
    runner = ReactiveRunner(root, config=AppConfig(runtime={"cleanup_grace": 0.01}))
    seen = events_of(runner)
    # an unbounded drain never returned: bounded here so that the test fails, not hangs
    result = await asyncio.wait_for(runner.run(timeout=0.05), 30)
    assert result.status is (RunStatus.FAILURE if by_timeout_node else RunStatus.TIMEOUT)
    assert not leaf.cleaned  # still at it: run() did not say it was stopped
    pending = [e.fields for e in seen if e.name == "run.cleanup_pending"]
    assert pending == [{"tasks": [f"jianmu:{leaf.path}"], "grace": 0.01}]
    assert leaf.task is not None and not leaf.task.done()
    leaf.release.set()  # the cleanup ends after the run
    await asyncio.wait([leaf.task])
    assert leaf.cleaned


async def test_a_cleanup_that_ends_is_awaited_before_the_run_returns() -> None:
    leaf = SlowCleanup("work")
    leaf.release.set()  # its finally ends at once
    runner = ReactiveRunner(leaf)
    result = await runner.run(timeout=0.05)
    assert result.status is RunStatus.TIMEOUT and leaf.cleaned
