"""An async leaf's first step, taken eagerly: in the tick that starts its task, as the task.

`FirstStep` is the coroutine a node's task runs: `step` takes the node's coroutine's first step
at once (Python 3.12's eager tasks, by hand on 3.11), `cancel` throws a stop's CancelledError
into it in the tick that stops the node; the task then goes on from there.
"""

from __future__ import annotations

import asyncio
import contextvars
from asyncio.tasks import _enter_task, _leave_task
from asyncio.tasks import current_task as _current_task
from collections.abc import Coroutine
from typing import Any, NamedTuple, TypeVar

T = TypeVar("T")

__all__ = (
    "NOT_YET",
    "EagerOutcome",
    "FirstStep",
    "after_unwound",
    "not_a_coroutine",
    "read_outcome",
    "refused",
    "started_task",
)


class EagerOutcome(NamedTuple):
    """How a coroutine's first step ended it: its value, or its exception."""

    value: Any
    error: BaseException | None


class FirstStep(Coroutine[Any, Any, Any]):
    """A node's coroutine, as its task's: the first step runs eagerly, in the tick that
    starts the task (`step`); the task then goes on from what that step waits for.

    A coroutine object of its own (not a generator around the node's), so a cancel that
    reaches the task before its first step is thrown into the node's coroutine where it
    waits, as it would be into a task's own coroutine; a stop throws it in at once
    (`cancel`), in the tick, and the task takes up from there.
    """

    __slots__ = ("context", "coro", "ended", "started", "thrown", "waits")

    def __init__(self, coro: Coroutine[Any, Any, Any], context: contextvars.Context) -> None:
        self.coro = coro
        self.context = context
        """The task's context, where `step` and `cancel` run the coroutine."""
        self.waits: Any = NOT_YET
        self.ended = False
        self.started = False
        """Whether the coroutine has begun (`step`, or the task: the loop's factory may start
        it itself)."""
        self.thrown: EagerOutcome | None = None
        """How a cancel thrown in by `cancel` left the coroutine (``value``: what it waits
        on next), for the task's next step, which would throw it in again."""

    def cancel(self, task: asyncio.Task[Any]) -> None:
        """Throw the task's CancelledError into the coroutine now, as ``task`` (`step`), if it
        has begun and waits (not while it runs, nor once it ended); the task, cancelled too,
        takes the outcome at its next step (`throw`) instead of throwing it in again."""
        if not self.started or self.ended or self.thrown is not None or getattr(
                self.coro, "cr_running", False):
            return
        self.waits = NOT_YET
        loop = task.get_loop()
        current = _current_task(loop)
        if current is not None:
            _leave_task(loop, current)
        _enter_task(loop, task)
        try:
            self.thrown = EagerOutcome(self.context.run(self.coro.throw, asyncio.CancelledError()),
                                 None)
        except (KeyboardInterrupt, SystemExit):
            raise  # as a task would: out of the loop
        except BaseException as exc:  # it ended: a StopIteration, its CancelledError
            self.thrown = EagerOutcome(NOT_YET, exc)
        finally:
            _leave_task(loop, task)
            if current is not None:
                _enter_task(loop, current)

    def _take_thrown(self, thrown: EagerOutcome) -> Any:
        """Give the task what the cancel thrown in by `cancel` left: what the coroutine
        waits on next, or its end."""
        self.thrown = None
        if thrown.error is not None:
            self.ended = True
            raise thrown.error
        return thrown.value

    def step(
        self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any],
        context: contextvars.Context,
    ) -> EagerOutcome | None:
        """Run the first step as ``task`` (the current task, in its context): timeouts, cancel
        scopes and task groups entered there belong to it. Its outcome if it ended there."""
        current = _current_task(loop)
        if current is not None:
            _leave_task(loop, current)
        _enter_task(loop, task)
        self.started = True
        try:
            self.waits = context.run(self.coro.send, None)
        except StopIteration as stop:
            self.ended = True
            return EagerOutcome(stop.value, None)
        except (KeyboardInterrupt, SystemExit):
            self.ended = True
            raise  # as a task would: out of the loop
        except BaseException as exc:  # the task's failure, reported as the task's would be
            self.ended = True
            return EagerOutcome(None, _explained(exc, self.coro))
        finally:
            _leave_task(loop, task)
            if current is not None:
                _enter_task(loop, current)
        return None

    # -- the coroutine the task runs -----------------------------------------------------------
    def send(self, value: Any) -> Any:
        if self.ended:  # reported in the tick that started it: nobody reads this task
            raise StopIteration
        thrown = self.thrown
        if thrown is not None:
            return self._take_thrown(thrown)
        waits = self.waits
        if waits is not NOT_YET:  # the task's first step: wait for what the eager one did
            self.waits = NOT_YET
            if waits is not None:
                return waits
            # a bare yield (``sleep(0)``) asked for one turn of the loop, and this is it:
            # yielded again, the coroutine went on a turn late, after a tick at once
        self.started = True
        return self.coro.send(value)

    def throw(self, exc: Any, value: Any = None, tb: Any = None) -> Any:  # type: ignore[override]
        if self.ended:
            raise exc if value is None else value
        thrown = self.thrown
        if thrown is not None:  # the task's cancel: thrown in already (`cancel`)
            return self._take_thrown(thrown)
        self.waits = NOT_YET
        return self.coro.throw(exc if value is None else value)

    def close(self) -> None:
        self.coro.close()

    def __await__(self) -> Any:
        return self

    @property
    def __name__(self) -> str:  # the task's repr names the node's coroutine
        return str(getattr(self.coro, "__qualname__", "update_async"))


def _explained(exc: BaseException, coro: Any) -> BaseException:
    """``exc``, or, when what was to be stepped is no coroutine (``update_async`` written as a
    plain ``def``: it ran when called and returned its status), a TypeError saying so."""
    if isinstance(exc, AttributeError) and not hasattr(coro, "send"):
        return not_a_coroutine(coro)
    return exc


def not_a_coroutine(returned: Any) -> TypeError:
    """The error for an ``update_async`` written as a plain ``def``, which ran when called and
    returned ``returned``, not a coroutine: however its node runs (eagerly, as a task, as a
    durable run's step), it says the same."""
    return TypeError(
        f"update_async must be a coroutine function, `async def update_async(self) -> "
        f"Status`, but it returned {returned!r}, not a coroutine: a plain def runs when called, "
        f"blocking the event loop"
    )


async def after_unwound(previous: asyncio.Task[Any], work: Coroutine[Any, Any, T]) -> T:
    """``work`` once ``previous``, the node's task a stop cancelled, has unwound (its outcome
    left to whoever reads it): a node entered again while its last task still cleans up (a
    parallel batch's calls recording themselves, a tool's ``finally``) starts no second task
    beside it, which ran again the writes the first had begun and not yet recorded."""
    try:
        await asyncio.wait([previous])
    except BaseException:
        close = getattr(work, "close", None)
        if close is not None:
            close()  # never started: no "never awaited" warning
        raise
    return await work


async def refused(returned: Any) -> Any:
    """Raise `not_a_coroutine`: the work of a task started for an ``update_async`` written as
    a plain ``def`` (a node not stepped eagerly), so its node fails as an eager one's does."""
    raise not_a_coroutine(returned)


NOT_YET: Any = object()
"""`FirstStep.waits` before the eager step, and once the task has taken it."""


def read_outcome(future: asyncio.Future[Any]) -> None:
    """Read how ``future`` ended (nobody else will): asyncio must not log it as unread."""
    if not future.cancelled():
        future.exception()


def started_task(coro: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
    """``coro`` as a task of its own whose first step is taken now, as that task (its
    timeouts and cancel scopes are the task's): what it waits on is awaited by the task;
    one that ended in that step is a future already done, which its caller reads at once,
    without waiting a turn of the loop for the task."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    first = FirstStep(coro, context)
    task = loop.create_task(first, context=context)
    if first.started:  # the loop's task factory began it (eager tasks): it is the task's
        return task
    outcome = first.step(loop, task, context)
    if outcome is None:
        return task
    done: asyncio.Future[T] = loop.create_future()
    if isinstance(outcome.error, asyncio.CancelledError):
        done.cancel()
    elif outcome.error is not None:
        done.set_exception(outcome.error)
    else:
        done.set_result(outcome.value)
    return done


TURNS = 8
"""Turns of the loop the runner's next tick waits at most for what is ready to run first."""


async def ready_first(turn: bool) -> None:
    """Let the loop run what is ready before the runner's next tick, once the last tick started
    an eager leaf's task: one ``turn`` (a tick taken at once), and up to `TURNS` while the loop
    has callbacks ready: work that waits for nothing (a gather of steps that end at once) ends
    before the tick, as before py_trees' next: its leaf was RUNNING there (a sibling ``Retry``
    ran again; another such leaf's end woke the runner first)."""
    if turn:
        await asyncio.sleep(0)
    # asyncio's own loops' queue of ready callbacks (none known on another loop: no more)
    ready = getattr(asyncio.get_running_loop(), "_ready", None)
    for _ in range(TURNS - 1):
        if not ready:
            return
        await asyncio.sleep(0)
