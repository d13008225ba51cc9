"""`ReactiveRunner.stream`: a run's events handed to an async reader as they happen.

The reader gets the bus's own events, in order, from an unbounded queue (a slow reader loses
nothing), ending with the run's own ``run.finished`` (a sub-run's end does not end it). A
reader that leaves early stops the run as `ReactiveRunner.cancel` does, and waits for it: its
running tools see ``CancelledError`` and nothing is left running. The stream is an
`EventStream`: an async generator that ``async with`` also closes on the way out.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
import weakref
from collections import deque
from collections.abc import AsyncGenerator, Callable
from typing import TYPE_CHECKING, Any

from jianmu.runtime.eager import FirstStep
from jianmu.runtime.events import Event

__all__ = ("EventStream", "left_behind", "on_drop", "open_stream")

_Opened = tuple[weakref.ref[Any], list[asyncio.Task[Any] | None]]
_OPEN: weakref.WeakKeyDictionary[Any, _Opened] = weakref.WeakKeyDictionary()
"""Per runner, its last stream (held weakly: a dropped one is gone) and that stream's run."""


def _ends(runner: Any, event: Event) -> bool:
    """Whether ``event`` (a ``run.finished``) ends this run, not a nested runner's."""
    return getattr(event.fields.get("result"), "run_id", None) == runner.run_id


_PEERS = frozenset({
    "stream_events", "stream_text", "stream_output", "stream_responses", "stream",
    "get_output", "final_output", "output", "result", "usage", "new_messages", "all_messages",
})
"""What pydantic-ai's ``run_stream`` result and the Agents SDK's ``RunResultStreaming`` have."""
_READ = ("async for event in agent.stream(...): the text as it comes in llm.call.delta "
         "events (event.fields['text']), the result in the last one, run.finished "
         "(event.fields['result'])")


class EventStream(AsyncGenerator[Event, None]):
    """A run's events, as `ReactiveRunner.stream` and `Agent.stream` yield them: an async
    generator, which ``async with`` closes on the way out as `contextlib.aclosing` would
    (pydantic-ai's ``async with agent.run_stream(...)`` ported as it is written).

    ``async for`` reads the generator itself (``__aiter__`` hands it over): no step of this
    wrapper per event, and a plain ``break`` drops it as it dropped the bare generator.
    """

    __slots__ = ("__weakref__", "_events")

    def __init__(self, events: AsyncGenerator[Event, None]) -> None:
        self._events = events

    def __aiter__(self) -> AsyncGenerator[Event, None]:  # type: ignore[override]
        return self._events

    def __anext__(self) -> Any:
        return self._events.__anext__()

    def asend(self, value: None) -> Any:
        """Send ``value`` into the generator (`AsyncGenerator.asend`)."""
        return self._events.asend(value)

    def athrow(self, *args: Any) -> Any:
        """Raise an exception inside the generator (`AsyncGenerator.athrow`)."""
        return self._events.athrow(*args)

    def aclose(self) -> Any:
        """Close the stream: a run still going is stopped, and waited for."""
        return self._events.aclose()

    async def __aenter__(self) -> EventStream:
        return self

    if not TYPE_CHECKING:  # a type checker still flags a misspelt attribute

        def __getattr__(self, name: str) -> Any:
            # only for names the stream lacks: a peer's streamed result, read another way here
            hint = "; Jianmu's stream is read as it is: " + _READ if name in _PEERS else ""
            raise AttributeError(f"'EventStream' object has no attribute {name!r}{hint}",
                                 name=name, obj=self)

    async def __aexit__(self, *exc_info: object) -> None:
        await self._events.aclose()


def open_stream(
    runner: Any, *, max_ticks: int | None = None, timeout: float | None = None
) -> EventStream:
    """Run ``runner`` (a `ReactiveRunner`, as its ``run``) and yield its events as they
    happen; see `ReactiveRunner.stream`.

    Raises:
        RuntimeError: the runner is already running (on the first step, as ``run`` would).
    """
    started: list[asyncio.Task[Any] | None] = [None]
    reader = _stream(runner, started, _OPEN.get(runner), max_ticks, timeout)
    _OPEN[runner] = (weakref.ref(reader), started)
    on_drop(reader, functools.partial(_stop, runner, started))
    return EventStream(reader)


_WATCHED: set[weakref.ref[Any]] = set()
"""The weak references `on_drop` keeps alive (a dead one's callback runs only if it is held)."""


def on_drop(reader: AsyncGenerator[Any, None], stop: Callable[[], None]) -> None:
    """Call ``stop()`` as soon as ``reader``, a stream's generator, is dropped (a plain
    ``break``), not a loop step later when Python closes it: a call the model had just asked
    for would start in between. A weak reference dies as the generator is dropped, before the
    loop is handed its close; a generator closed or run to its end finds nothing to stop."""

    def dropped(ref: weakref.ref[Any]) -> None:
        _WATCHED.discard(ref)
        stop()

    _WATCHED.add(weakref.ref(reader, dropped))


def _stop(runner: Any, started: list[asyncio.Task[Any] | None]) -> None:
    """Stop the run of a stream (its task, once started), as its close would."""
    task = started[0]
    if task is not None and not task.done():
        runner.cancel()


async def left_behind(runner: Any, last: _Opened | None = None) -> bool:
    """Whether ``runner``, running, was left by the reader of its stream (``last``, else its
    latest): the generator dropped after a ``break``, not yet closed by the loop. Its run is
    then stopped, as that close would, and waited for: True once the runner is free."""
    reader, started = last or _OPEN.get(runner) or (None, [None])
    task = started[0]
    if reader is None or reader() is not None or task is None or task.done():
        return False
    runner.cancel()  # as the generator's close does (the loop may close it later, or never)
    await asyncio.gather(task, return_exceptions=True)
    return not runner._running


async def _stopped(task: asyncio.Task[Any]) -> None:
    """Wait for the run's ``task``, told to stop, to end as `ReactiveRunner.cancel` ends it.

    The wait is shielded from anyio's cancel scopes (``fail_after``, a Starlette response
    whose client left), which cancel the reader again at every turn of the loop until it
    leaves: a run cancelled outright for that had its tools' clean-up cut short and ended
    with no ``run.finished`` and no checkpoint. A reader cancelled again by asyncio itself
    (``task.cancel()``) still cancels the run outright, and raises once it has ended.
    """
    from anyio import CancelScope  # only for a reader that leaves a run going

    try:
        with CancelScope(shield=True):
            await asyncio.shield(task)
    except asyncio.CancelledError:
        task.cancel()  # the reader itself is being cancelled again: so is the run
        await asyncio.gather(task, return_exceptions=True)
        raise
    except Exception:  # the reader's own exit reason is the one to surface
        pass


async def _stream(
    runner: Any, started: list[asyncio.Task[Any] | None], last: _Opened | None,
    max_ticks: int | None, timeout: float | None,
) -> AsyncGenerator[Event, None]:
    if runner._running and not await left_behind(runner, last):
        raise RuntimeError("this runner is already running")
    loop = asyncio.get_running_loop()
    thread = threading.get_ident()
    queue: deque[Event] = deque()
    # the reader's wait, when it waits: a bare future, one per wait (lighter than an
    # asyncio.Event, whose set() runs on every event)
    waiter: list[asyncio.Future[None] | None] = [None]

    def wake(_: object = None) -> None:
        fut = waiter[0]
        if fut is not None:
            waiter[0] = None
            if not fut.done():
                fut.set_result(None)

    append, ident = queue.append, threading.get_ident

    def arrived(event: Event) -> None:
        append(event)  # deque.append is atomic: a tool's thread may emit too
        if ident() != thread:
            loop.call_soon_threadsafe(wake)
        elif waiter[0] is not None:
            wake()

    began: list[bool] = [False]

    async def reserved_run() -> Any:
        began[0] = True
        runner._running = False  # the reservation passes to run() itself, in this same step
        return await runner.run(max_ticks=max_ticks, timeout=timeout)

    def ended(_: object) -> None:
        if not began[0]:  # cancelled before it began: the reservation ends with it
            runner._running = False
        wake()

    bus = runner.ctx.events
    unsubscribe = bus.subscribe("*", arrived)
    bus.readers += 1  # the model streams its text for this reader (`EventBus.asked_for`)
    # reserved until its task starts: a second stream() (or run()) meanwhile is refused at
    # once, instead of reading this run's events before it finds out
    runner._running = True
    # the run's first step is taken now, as its task (`FirstStep`, as a node's task starts):
    # its first events are read at once, without a turn of the loop to start the task and a
    # wake-up of the reader after it
    context = contextvars.copy_context()
    first = FirstStep(reserved_run(), context)
    task = started[0] = loop.create_task(first, context=context)
    task.add_done_callback(ended)
    # how the run ended in that step, if it did (its task then ends with None, read by none)
    outcome = None if first.started else first.step(loop, task, context)
    try:
        popleft = queue.popleft
        while True:
            while queue:
                event = popleft()
                if event.name == "run.finished" and _ends(runner, event):
                    while outcome is None and not task.done():
                        # told once run() has returned (its lease given up, its resources
                        # closed): a reader that stops at it finds the run free at once
                        # (the task's end wakes this wait: `ended`; a cancelled reader
                        # leaves the run's task be, as asyncio.wait would)
                        waiter[0] = fut = loop.create_future()
                        await fut
                    yield event
                    return
                yield event
            if outcome is not None:
                if outcome.error is not None:
                    raise outcome.error  # run() raised: so does the stream
                return
            if task.done():
                task.result()  # run() raised: so does the stream
                return
            waiter[0] = fut = loop.create_future()
            await fut
    finally:
        unsubscribe()
        bus.readers -= 1
        if outcome is None and not task.done():
            runner.cancel()  # the reader left: stop the run as cancel() does, cleanly
            await _stopped(task)

