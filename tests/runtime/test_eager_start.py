"""An `AsyncNode`'s first step runs in the tick that enters it, as its task: work that ends
without waiting reports in that tick, and what the first step sets up (timeouts, cancel scopes,
task groups, context variables) belongs to the node's task, as if the task had run it."""

from __future__ import annotations

import asyncio
import contextvars
import sys
from collections.abc import Awaitable, Callable

import anyio
import py_trees
import pytest
from py_trees.common import Status

from jianmu.runtime import AsyncNode, ReactiveRunner, RunStatus

pytestmark = pytest.mark.anyio

SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="outside")


class Instant(AsyncNode):
    async def update_async(self) -> Status:
        SEEN.set(self.name)  # the task's own context: not the runner's
        return Status.SUCCESS


async def test_work_that_ends_without_waiting_reports_in_the_same_tick() -> None:
    root = py_trees.composites.Sequence("seq", memory=True, children=[
        Instant("a"), Instant("b"), Instant("c")])
    result = await ReactiveRunner(root).run(timeout=10)
    assert result.status is RunStatus.SUCCESS and result.ticks == 1
    assert SEEN.get() == "outside"


async def test_the_first_step_runs_as_the_nodes_own_task() -> None:
    seen: list[object] = []

    class Who(AsyncNode):
        async def update_async(self) -> Status:
            seen.append(asyncio.current_task())
            await asyncio.sleep(0)
            seen.append(asyncio.current_task())
            return Status.SUCCESS

    node = Who("who")
    runner = ReactiveRunner(node)
    outer = asyncio.current_task()
    assert (await runner.run(timeout=10)).ok
    assert seen[0] is seen[1] and seen[0] is not outer
    assert asyncio.current_task() is outer  # the runner's task is current again


@pytest.mark.parametrize("kind", ["asyncio", "anyio"])
async def test_a_timeout_entered_in_the_first_step_stops_the_node_not_the_runner(
    kind: str,
) -> None:
    class Slow(AsyncNode):
        async def update_async(self) -> Status:
            if kind == "asyncio":
                async with asyncio.timeout(0.05):
                    await asyncio.sleep(30)
            else:
                with anyio.fail_after(0.05):
                    await asyncio.sleep(30)
            return Status.SUCCESS

    node = Slow("slow")
    result = await ReactiveRunner(node).run(timeout=30)
    assert result.status is RunStatus.FAILURE
    assert isinstance(node.error, TimeoutError)


async def test_a_task_group_entered_in_the_first_step_is_the_nodes() -> None:
    class Fans(AsyncNode):
        async def update_async(self) -> Status:
            async with asyncio.TaskGroup() as group:
                for _ in range(3):
                    group.create_task(asyncio.sleep(0.01))
            return Status.SUCCESS

    assert (await ReactiveRunner(Fans("fans")).run(timeout=10)).ok


async def test_a_node_pre_empted_before_its_task_steps_sees_the_cancel_where_it_waits() -> None:
    """A parallel that fails in the tick that started a sibling stops the sibling before its
    task ever ran a step of its own: the cancel still reaches the coroutine where it waits."""
    reached: list[str] = []

    class Waits(AsyncNode):
        async def update_async(self) -> Status:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                reached.append("cancelled")
                raise
            finally:
                reached.append("finally")
            return Status.SUCCESS

    class Fails(AsyncNode):
        async def update_async(self) -> Status:
            return Status.FAILURE

    root = py_trees.composites.Parallel(
        "both", policy=py_trees.common.ParallelPolicy.SuccessOnAll(),
        children=[Waits("waits"), Fails("fails")])
    result = await ReactiveRunner(root).run(timeout=10)
    assert result.status is RunStatus.FAILURE and result.ticks == 1
    assert reached == ["cancelled", "finally"]


@pytest.mark.parametrize("how", ["gather", "task"])
async def test_a_node_pre_empted_before_its_task_steps_cancels_what_it_waits_on(how: str) -> None:
    """A task's cancel cancels what the task waits on (a gather's children, an inner task):
    a node stopped in the tick that started it stops the work it started too (the
    CancelledError was thrown into its coroutine alone, and the inner work went on after
    the run had ended)."""
    inner: list[asyncio.Task[None]] = []

    async def forever() -> None:
        await asyncio.Event().wait()  # never set: only a cancel ends it

    class Fans(AsyncNode):
        async def update_async(self) -> Status:
            inner.append(asyncio.ensure_future(forever()))
            if how == "gather":
                await asyncio.gather(inner[0])
            else:
                await inner[0]
            return Status.SUCCESS

    class Done(AsyncNode):
        async def update_async(self) -> Status:
            return Status.SUCCESS

    root = py_trees.composites.Parallel(
        "first wins", policy=py_trees.common.ParallelPolicy.SuccessOnOne(),
        children=[Fans("fans"), Done("done")])
    result = await ReactiveRunner(root).run(timeout=10)
    assert result.status is RunStatus.SUCCESS and result.ticks == 1
    try:
        await asyncio.wait(inner, timeout=10)  # a cancelled task ends in a loop step or two
        assert [task.cancelled() for task in inner] == [True]
    finally:
        for task in inner:
            task.cancel()


async def test_an_exception_in_the_first_step_fails_the_node_in_that_tick() -> None:
    class Breaks(AsyncNode):
        async def update_async(self) -> Status:
            raise ValueError("broken at once")

    node = Breaks("breaks")
    result = await ReactiveRunner(node).run(timeout=10)
    assert result.status is RunStatus.FAILURE and result.ticks == 1
    assert isinstance(node.error, ValueError)


async def test_a_node_that_cancels_its_own_task_at_once_is_cancelled() -> None:
    class Quits(AsyncNode):
        async def update_async(self) -> Status:
            task = asyncio.current_task()
            assert task is not None
            task.cancel()
            await asyncio.sleep(0)  # the cancel lands here, as in any task
            return Status.SUCCESS

    result = await ReactiveRunner(Quits("quits")).run(timeout=10)
    assert result.status is RunStatus.FAILURE


async def test_engine_nodes_keep_their_ticks() -> None:
    """The model, tool and question nodes always wait for something: not eager."""
    from jianmu.nodes import AgentLLMNode, AskUser, ToolExecutor, ToolNode

    assert not any(cls.eager_start for cls in (AgentLLMNode, ToolExecutor, ToolNode, AskUser))
    assert AsyncNode.eager_start


async def test_a_cancelled_error_raised_in_the_first_step_is_a_cancelled_node_not_run() -> None:
    """As a task cancelled in its first step: the node is INVALID (the run fails), and the
    CancelledError never reaches the runner as if the run itself were cancelled."""

    class Awaits(AsyncNode):
        async def update_async(self) -> Status:
            gone = asyncio.get_running_loop().create_future()
            gone.cancel()
            await gone  # raises CancelledError at once, with no cancel of this task
            return Status.SUCCESS

    result = await ReactiveRunner(Awaits("awaits")).run(timeout=10)
    assert result.status is RunStatus.FAILURE


async def _sleep_twice() -> None:
    await asyncio.sleep(0)
    await asyncio.sleep(0)


async def _gather() -> None:
    await asyncio.gather(asyncio.sleep(0), asyncio.sleep(0))


@pytest.mark.parametrize("work", [lambda: asyncio.sleep(0), _sleep_twice, _gather],
                         ids=["sleep0", "sleep0_twice", "gather"])
async def test_work_that_takes_no_time_ends_before_the_next_tick_taken_at_once(
    work: Callable[[], Awaitable[None]],
) -> None:
    """A leaf whose work waits for nothing ends before the runner's next tick taken at once, as
    py_trees' next tick ends a leaf RUNNING for one tick. The task yielded ``sleep(0)``'s step
    a second time, and the runner let one turn of the loop pass: the leaf was RUNNING at that
    tick, and a `Retry` beside it failed a third time, the parallel failed where py_trees'
    succeeds."""
    log: list[str] = []

    class NoTime(AsyncNode):
        async def update_async(self) -> Status:
            await work()
            log.append("no time ended")
            return Status.SUCCESS

    class Fails(AsyncNode):
        async def update_async(self) -> Status:
            log.append("failed")
            return Status.FAILURE

    root = py_trees.composites.Parallel(
        "par", policy=py_trees.common.ParallelPolicy.SuccessOnOne(), children=[
            NoTime("no time"), py_trees.decorators.Retry("retry", Fails("fails"), 3)])
    result = await ReactiveRunner(root).run(timeout=10)
    assert result.status is RunStatus.SUCCESS, result.error
    assert log == ["failed", "no time ended", "failed"]


async def test_work_that_takes_no_time_ends_before_the_tick_another_such_end_wakes() -> None:
    """Two leaves whose work takes no time, one turn of the loop and a few: the first's end
    wakes the runner, whose tick waits for the second's, as py_trees' next tick sees both
    ended. Ticked at once, the parallel succeeded on the first and cancelled the second,
    where py_trees' fails on the second's failure."""

    class Succeeds(AsyncNode):
        async def update_async(self) -> Status:
            await asyncio.sleep(0)
            return Status.SUCCESS

    class Fails(AsyncNode):
        async def update_async(self) -> Status:
            await _gather()
            return Status.FAILURE

    root = py_trees.composites.Parallel(
        "par", policy=py_trees.common.ParallelPolicy.SuccessOnOne(),
        children=[Succeeds("succeeds"), Fails("fails")])
    result = await ReactiveRunner(root).run(timeout=10)
    assert result.status is RunStatus.FAILURE
    assert [child.status for child in root.children] == [Status.SUCCESS, Status.FAILURE]


async def test_a_subclass_initialise_after_super_is_done_before_the_first_step() -> None:
    """The first step runs in `update`, after the whole `initialise` of a subclass that starts
    with ``super().initialise()`` and then sets what ``update_async`` reads."""

    class Counts(AsyncNode):
        def initialise(self) -> None:
            super().initialise()
            self.count = 41

        async def update_async(self) -> Status:
            self.count += 1
            return Status.SUCCESS if self.count == 42 else Status.FAILURE

    result = await ReactiveRunner(Counts("counts")).run(timeout=10)
    assert result.status is RunStatus.SUCCESS and result.ticks == 1


@pytest.mark.skipif(sys.version_info < (3, 12), reason="asyncio.eager_task_factory is 3.12's")
async def test_a_loop_whose_task_factory_starts_tasks_eagerly() -> None:
    """On a loop with 3.12's eager task factory, the factory runs a node's first step itself:
    the node does not run it a second time (an instant node failed with 'cannot reuse already
    awaited coroutine', one that waited was resumed with nothing)."""

    class Waits(AsyncNode):
        async def update_async(self) -> Status:
            await asyncio.sleep(0)
            return Status.SUCCESS

    loop = asyncio.get_running_loop()
    before = loop.get_task_factory()
    loop.set_task_factory(asyncio.eager_task_factory)  # type: ignore[attr-defined]
    try:
        root = py_trees.composites.Sequence("seq", memory=True, children=[
            Instant("instant"), Waits("waits")])
        result = await ReactiveRunner(root).run(timeout=10)
    finally:
        loop.set_task_factory(before)
    assert result.status is RunStatus.SUCCESS, result.error
    assert result.ticks == 2  # the instant node reports in the tick that starts it
