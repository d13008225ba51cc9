"""What `ReactiveRunner` promises across threads, loops and streams, and more of its contract
(the mutation score of ``jianmu/runtime/runner.py`` rests here too)."""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sys
import threading
import time
from typing import Any

import py_trees
import pytest
from py_trees.common import ParallelPolicy, Status

from jianmu.config import AppConfig
from jianmu.errors import CheckpointError
from jianmu.runtime import (
    AsyncNode,
    Event,
    ReactiveRunner,
    RunResult,
    RunStatus,
)
from jianmu.state import StateManager
from tests.runtime._runner_nodes import (
    Ask,
    AskFor,
    Closes,
    Gate,
    Log,
    Store,
    checkpoint,
    events_of,
)

pytestmark = pytest.mark.anyio


# -- the loop of run_sync() ----------------------------------------------------------------------
def test_a_threads_loop_is_shut_down_like_asyncio_run_when_the_thread_ends() -> None:
    task_cancelled = threading.Event()
    loops: list[asyncio.AbstractEventLoop] = []

    async def lingering() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            task_cancelled.set()
            raise

    def work() -> None:
        runner = ReactiveRunner(Log("a"))
        assert runner.run_sync(timeout=10).ok
        loop = runner._sync_loop
        assert loop is not None
        loops.append(loop)
        loop.create_task(lingering())  # left on the loop when the thread ends
        loop.run_until_complete(asyncio.sleep(0))  # started

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    assert task_cancelled.wait(30)
    while not loops[0].is_closed():  # closed right after the shutdown cancelled the task
        time.sleep(0.001)


def test_a_loop_is_shut_down_only_by_the_process_that_made_it_and_not_inside_another() -> None:
    import os

    from jianmu.runtime import _sync_loop as module

    loop = asyncio.new_event_loop()
    module.shut_down(loop, os.getpid() + 1)  # a forked child's copy: untouched
    assert not loop.is_closed()
    left: list[asyncio.Future[None]] = []

    async def inside() -> None:
        left.append(loop.create_future())
        module.shut_down(loop, os.getpid())  # cannot drive it from here: closed as it is

    asyncio.run(inside())
    assert loop.is_closed() and not left[0].done()
    module.shut_down(loop, os.getpid())  # closed already: nothing to do


def test_a_forked_thread_loop_is_kept_and_a_new_one_made(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from jianmu.runtime import runner as module

    made: list[Any] = []
    pid = os.getpid()

    def work() -> None:
        first = module._thread_loop()
        assert module._thread_loop() is first
        with monkeypatch.context() as patch:
            patch.setattr(module.os, "getpid", lambda: pid + 1)  # as in a forked child
            second = module._thread_loop()
            made.extend([second is not first, first in module._inherited, first.is_closed()])
        module._inherited.remove(first)
        first.close()
        second.close()  # made "in the child": closed here, by hand
        third = module._thread_loop()  # the child's holder, seen from the parent: a new one
        module._inherited.remove(second)
        third.close()
        made.append(module._thread_loop() is not third)  # a closed loop is replaced too

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    assert made == [True, True, False, True]


class Nested(AsyncNode):
    """Emits the ends of two nested runs (ids sorting before and after any), then its own."""

    async def update_async(self) -> Status:
        for run_id in ("000000000000", "zzzzzzzzzzzz"):
            self.ctx.events.emit("run.finished", status="success", error=None,
                                 result=RunResult(status=RunStatus.SUCCESS, run_id=run_id))
        await asyncio.sleep(0)
        self.ctx.events.emit("after.nested")
        return Status.SUCCESS


async def test_a_nested_runs_end_does_not_end_the_stream() -> None:
    runner = ReactiveRunner(Nested("outer"))
    names = [event.name async for event in runner.stream(timeout=10)]
    assert names.count("run.finished") == 3 and "after.nested" in names
    assert names[-1] == "run.finished"


class FromThread(AsyncNode):
    """Has another thread emit an event, then waits until the stream's reader has seen it."""

    def __init__(self, name: str, emit_in: Any) -> None:
        super().__init__(name)
        self.emit_in = emit_in
        self.seen: asyncio.Event | None = None

    async def update_async(self) -> Status:
        self.seen = asyncio.Event()
        bus = self.ctx.events
        self.emit_in(lambda: bus.emit("from.thread"))
        await self.seen.wait()
        return Status.SUCCESS


async def read_until_seen(node: FromThread) -> RunResult:
    runner = ReactiveRunner(node)
    # no timeout: the loop has no timer to wake it, only the event's own wake-up
    async for event in runner.stream():
        if event.name == "from.thread":
            assert node.seen is not None
            node.seen.set()
        if event.name == "run.finished":
            result = event.fields["result"]
    return result


@pytest.mark.parametrize("loop_here", [True, False])
def test_an_event_from_another_thread_wakes_an_idle_stream(loop_here: bool) -> None:
    # thread idents have no order: the loop runs on this thread and the event comes from a
    # new one, or the other way round
    asked: queue.Queue[Any] = queue.Queue()
    results: list[RunResult] = []

    def loop() -> None:
        results.append(asyncio.run(read_until_seen(FromThread("a", asked.put))))

    def emit() -> None:
        asked.get(timeout=60)()

    other = threading.Thread(target=emit if loop_here else loop)
    other.start()
    loop() if loop_here else emit()
    other.join()
    assert results[0].status is RunStatus.SUCCESS


async def test_a_timed_out_run_closes_its_resources() -> None:
    closed: list[str] = []

    async def close() -> None:
        closed.append("closed")

    root = py_trees.composites.Sequence(
        "Root", memory=True, children=[Closes("open", [close]), Gate("wait")]
    )
    result = await ReactiveRunner(root).run(timeout=0.05)
    assert result.status is RunStatus.TIMEOUT and closed == ["closed"]


@pytest.mark.parametrize("saved", ["Alpha", "Zulu"])  # sorting before and after "Middle"
def test_a_checkpoint_of_another_tree_is_refused_naming_the_node(saved: str) -> None:
    store = Store()
    store.rows["r1"] = checkpoint(["SUCCESS", "RUNNING"], names=["c0", saved])
    root = py_trees.composites.Sequence("Root", memory=True, children=[Log("c0"), Log("Middle")])
    with pytest.raises(CheckpointError) as raised:
        ReactiveRunner.restore(root, store, "r1")
    assert str(raised.value) == (
        f"the tree does not match the checkpoint: node 0/1 is 'Middle', "
        f"the checkpoint has {saved!r}"
    )


async def test_max_ticks_counts_past_the_small_integers() -> None:
    forever = py_trees.decorators.Repeat(
        "forever", child=py_trees.behaviours.Success("step"), num_success=-1
    )
    # at rest between its runs, the tree is polled: at once here (the count is what is
    # checked, not py_trees' rate; 300 polls of 50 ms took a test worker 15 s)
    quick = AppConfig.model_validate({"runtime": {"poll_interval": 0.001}})
    result = await ReactiveRunner(forever, config=quick).run(max_ticks=300, timeout=60)
    assert result.status is RunStatus.FAILURE and result.ticks == 300


async def test_a_stream_counts_as_a_reader_only_while_it_reads() -> None:
    gate = Gate("wait")
    runner = ReactiveRunner(gate)
    readers: list[int] = []
    async for event in runner.stream(timeout=10):
        readers.append(runner.ctx.events.readers)
        if event.name == "run.ticked":
            gate.gate.set()
    assert set(readers) == {1} and runner.ctx.events.readers == 0


async def test_a_request_decided_while_siblings_finish_is_told_as_no_longer_pending() -> None:
    gate = Gate("sibling")
    root = py_trees.composites.Parallel(
        "Root", policy=ParallelPolicy.SuccessOnAll(synchronise=False),
        children=[AskFor("y"), AskFor("x"), gate],  # asked in this order: y, then x
    )
    runner = ReactiveRunner(root)
    said: list[list[str]] = []
    told = asyncio.Event()

    def on_suspend(event: Event) -> None:
        said.append(event.fields["pending"])
        told.set()

    runner.ctx.events.subscribe("run.suspended", on_suspend)
    task = asyncio.create_task(runner.run(timeout=30))
    await told.wait()
    runner.approve("y")  # decided while the sibling still runs
    gate.gate.set()
    result = await task
    assert result.status is RunStatus.SUSPENDED and [r.id for r in result.pending] == ["x"]
    assert said == [["y", "x"], ["x"]]


def test_send_appends_the_message_and_clears_the_last_turns_answer() -> None:
    runner = ReactiveRunner(Log("a"))
    assert runner.run_sync(timeout=10).ok
    runner.state.update({"final_answer": "42", "final_output": {"n": 42}, "done": True})
    seen = events_of(runner)
    runner.send("and then?")
    runner.send({"role": "user", "content": "well?"})
    state = runner.state
    assert [m["content"] if isinstance(m, dict) else m.content
            for m in state.get("messages")] == ["and then?", "well?"]
    assert state.get("final_answer") is None and state.get("final_output") is None
    assert state.get("done") is False
    assert [(e.name, e.fields["namespace"]) for e in seen] == [("run.message", None)] * 2
    assert runner.run_sync(timeout=10).ticks > 0  # a new turn runs the tree


def test_send_into_a_namespace_leaves_the_root_alone() -> None:
    runner = ReactiveRunner(Log("a"))
    runner.state.update({"final_answer": "root's"})
    runner.state.scope("agent").update({"final_answer": "agent's"})
    runner.send("hi", namespace="agent")
    agent = runner.state.scope("agent")
    assert len(agent.get("messages")) == 1 and agent.get("final_answer") is None
    assert runner.state.get("final_answer") == "root's" and not runner.state.get("messages")


def test_decisions_are_told_on_the_bus() -> None:
    runner = ReactiveRunner(py_trees.composites.Parallel(
        "Root", policy=ParallelPolicy.SuccessOnAll(synchronise=False),
        children=[AskFor("y"), AskFor("x")],
    ))
    assert runner.run_sync(timeout=10).status is RunStatus.SUSPENDED
    seen = events_of(runner)
    runner.approve("y", "fine")
    runner.reject("x", "not now")
    assert [(e.name, e.fields) for e in seen] == [
        ("interaction.approved", {"request_id": "y"}),
        ("interaction.rejected", {"request_id": "x", "message": "not now"}),
    ]
    assert runner.pending == []


class WaitForKey(py_trees.behaviour.Behaviour):
    """A synchronous node: only a wake-up (a state write) makes the runner tick it again."""

    def __init__(self, name: str, state: StateManager) -> None:
        super().__init__(name)
        self.state = state

    def update(self) -> Status:
        return Status.SUCCESS if self.state.get("go") else Status.RUNNING


@pytest.mark.parametrize("loop_here", [True, False])
def test_a_state_write_from_another_thread_wakes_an_idle_run(loop_here: bool) -> None:
    # thread idents have no order: the run goes on this thread and the write comes from a
    # new one, or the other way round
    state = StateManager()
    runner = ReactiveRunner(WaitForKey("waiter", state), state)
    ticked = threading.Event()
    runner.ctx.events.subscribe("run.ticked", lambda event: ticked.set())
    results: list[RunResult] = []

    def run() -> None:
        results.append(asyncio.run(runner.run()))

    def write() -> None:
        assert ticked.wait(60)
        state.write_port("go", True)

    other = threading.Thread(target=write if loop_here else run)
    other.start()
    run() if loop_here else write()
    other.join()
    assert results[0].status is RunStatus.SUCCESS and results[0].ticks == 2


def asleep_in_select(thread: int) -> bool:
    """Whether ``thread``'s event loop sleeps in its selector (nothing else would wake it)."""
    frame = sys._current_frames().get(thread)
    return frame is not None and frame.f_code.co_name == "select"


@pytest.mark.parametrize("loop_here", [True, False])
def test_wake_from_another_thread_reaches_a_sleeping_loop(loop_here: bool) -> None:
    # thread idents have no order: the loop runs on this thread and wake() comes from a new
    # one, or the other way round; the waker waits until the loop sleeps, so only its own
    # wake-up can bring the next tick
    runner = ReactiveRunner(Gate("idle"))
    first, second = threading.Event(), threading.Event()
    runner.ctx.events.subscribe(
        "run.ticked", lambda event: (first if event.fields["tick"] == 1 else second).set()
    )
    loop_thread: list[int] = []
    results: list[RunResult] = []
    woken: list[bool] = []

    def run() -> None:
        loop_thread.append(threading.get_ident())
        results.append(asyncio.run(runner.run(timeout=60)))

    def wake() -> None:
        assert first.wait(60)
        while not asleep_in_select(loop_thread[0]):
            time.sleep(0.001)
        runner.wake()
        woken.append(second.wait(30))
        runner.cancel()

    other = threading.Thread(target=wake if loop_here else run)
    other.start()
    run() if loop_here else wake()
    other.join()
    assert woken == [True] and results[0].status is RunStatus.CANCELLED


class Slow(AsyncNode):
    """Finishes after ``seconds`` (a timer of the loop), unless cancelled first."""

    def __init__(self, name: str, seconds: float) -> None:
        super().__init__(name)
        self.seconds = seconds
        self.finished = False

    async def update_async(self) -> Status:
        await asyncio.sleep(self.seconds)
        self.finished = True
        return Status.SUCCESS


async def test_siblings_settling_past_the_runs_deadline_are_stopped_at_it() -> None:
    # the loop's timers run in order: the run's deadline comes before the sibling's end
    slow = Slow("slow", 0.8)
    root = py_trees.composites.Parallel(
        "Root", policy=ParallelPolicy.SuccessOnAll(synchronise=False),
        children=[Ask("ask"), slow],
    )
    result = await ReactiveRunner(root).run(timeout=0.05)
    assert result.status is RunStatus.TIMEOUT and not slow.finished
    assert slow.in_flight is None


def test_run_sync_in_a_forked_child_makes_the_childs_own_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    from jianmu.runtime import runner as module

    made: list[bool] = []
    pid = os.getpid()

    def work() -> None:
        runner = ReactiveRunner(Log("a"))
        assert runner.run_sync(timeout=10).ok
        first = runner._sync_loop
        runner.state.update({"again": True})  # new input: the tree runs again
        with monkeypatch.context() as patch:
            patch.setattr(module.os, "getpid", lambda: pid - 1)  # a child, numbered lower
            assert runner.run_sync(timeout=10).ok
            second = runner._sync_loop
        made.extend([second is not first, first in module._inherited])
        if first in module._inherited:
            module._inherited.remove(first)
        for loop in {first, second}:
            loop.close()  # type: ignore[union-attr]

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    assert made == [True, True]


class Stubborn(AsyncNode):
    """Takes its time to stop: once cancelled, it waits for ``release`` (or a second cancel)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.started = asyncio.Event()
        self.stopping = asyncio.Event()
        self.release = asyncio.Event()
        self.ended = False

    async def update_async(self) -> Status:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.stopping.set()
            await self.release.wait()
            raise
        finally:
            self.ended = True
        return Status.SUCCESS  # pragma: no cover - never reached


async def test_a_reader_cancelled_while_the_run_stops_cancels_the_run_outright() -> None:
    node = Stubborn("stubborn")
    runner = ReactiveRunner(node)

    async def read() -> None:
        async with contextlib.aclosing(runner.stream()) as events:
            async for _event in events:
                await node.started.wait()
                break  # the reader leaves: the run is asked to stop; closing waits for it

    reader = asyncio.ensure_future(read())
    await node.stopping.wait()
    reader.cancel()  # cancelled again while it waits: the run is cancelled, not left behind
    with pytest.raises(asyncio.CancelledError):
        await reader
    assert node.ended and node.in_flight is None
    assert not runner._running  # the runner may run again


_EXIT_SCRIPT = """
import asyncio, atexit, threading, time
from py_trees.common import Status
from jianmu import ReactiveRunner
from jianmu.runtime.async_node import AsyncNode

class Lookup(AsyncNode):
    async def update_async(self):  # as a DNS lookup does: on the loop's default executor
        await asyncio.get_running_loop().run_in_executor(None, time.sleep, 0)
        return Status.SUCCESS

assert ReactiveRunner(Lookup("lookup")).run_sync(timeout=60).ok

def refuse(self):
    raise RuntimeError("can't create new thread at interpreter shutdown")

# as Python 3.12 and later do once the interpreter exits (registered last: runs first)
atexit.register(lambda: setattr(threading.Thread, "start", refuse))
print("done")
"""


def test_the_loop_is_shut_down_at_exit_without_starting_a_thread() -> None:
    # Python 3.12+ refuses a new thread once the interpreter exits; the loop's own
    # shutdown_default_executor() starts one, so every script that had run_sync() make a DNS
    # lookup printed a traceback as it ended
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", _EXIT_SCRIPT], cwd=root, capture_output=True,
                          text=True, timeout=120, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, "done\n", "")
