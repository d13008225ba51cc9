"""`ReactiveRunner`: ticks a tree only when something changed; `RunResult` says how a run ended."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import functools
import os
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Self

from py_trees.behaviour import Behaviour
from py_trees.common import Status

from jianmu.config import AppConfig, default_config
from jianmu.constraints import Constraints
from jianmu.errors import CheckpointError, RunFailed, TreeMismatchError
from jianmu.runtime import _turns, eager
from jianmu.runtime._sync_loop import shut_down, thread_started
from jianmu.runtime.async_node import (
    BINDER,
    IDLE_PLAN,
    Ticker,
    WakeEvent,
    bound_nodes,
    close_tree,
    timed_wait,
)
from jianmu.runtime.context import ApprovalRequest, Interaction, RunContext, run_constraints
from jianmu.runtime.events import (
    GEN_AI_AGENT_NAME,
    GEN_AI_OPERATION_NAME,
    JIANMU_RUN_ID,
    EventBus,
    get_tracer,
    run_ended,
)
from jianmu.runtime.lease import RunClaim, storable, store_failed
from jianmu.runtime.stream import EventStream, left_behind, open_stream
from jianmu.state import StateManager

if TYPE_CHECKING:
    from opentelemetry.trace import SpanContext, TracerProvider

    from jianmu.runtime.checkpoint import Checkpointer

__all__ = ("ReactiveRunner", "RunResult", "RunStatus")


class RunStatus(enum.StrEnum):
    """How a call to `ReactiveRunner.run` ended."""

    SUCCESS = "success"
    """The root succeeded."""
    FAILURE = "failure"
    """The root failed (or the tree raised); ``error`` says why."""
    SUSPENDED = "suspended"
    """The run waits for a person: ``pending`` lists the approvals asked for."""
    CANCELLED = "cancelled"
    """The run was cancelled from outside."""
    TIMEOUT = "timeout"
    """``run(timeout=...)`` ran out before the tree finished."""

    @property
    def finished(self) -> bool:
        """Whether the tree ran to its end (SUCCESS or FAILURE), not stopped or waiting."""
        return self in (RunStatus.SUCCESS, RunStatus.FAILURE)


@dataclass(frozen=True, kw_only=True)
class RunResult:
    """The outcome of one `ReactiveRunner.run` call."""

    status: RunStatus
    """SUCCESS or FAILURE of the root, or why the run stopped before it finished."""
    run_id: str
    """The run's id (the checkpoint key)."""
    ticks: int = 0
    """Ticks in this call."""
    duration: float = 0.0
    """Wall time of this call, in seconds."""
    pending: tuple[ApprovalRequest, ...] = ()
    """Approval requests the run waits for (when SUSPENDED)."""
    error: str | None = None
    """Why the run failed, timed out or was cancelled."""
    output: Any = None
    """The agent's typed answer (the state's ``final_output``) when it gave one."""
    exception: BaseException | None = field(default=None, repr=False)
    """The exception that failed the run (FAILURE): a node's error, such as the
    `OutputValidationError` with its problems and the last raw output, else a `RunFailed`
    saying why; None otherwise."""
    messages: tuple[Any, ...] = field(default=(), repr=False)
    """The conversation as it stands: the root state's ``messages`` (`jianmu.llm.Message`)."""
    usage: Any = field(default=None, repr=False)
    """What the run has spent so far: the root state's ``usage`` (`jianmu.llm.Usage`: model
    requests, tool calls, tokens), None when the state keeps none."""

    @property
    def ok(self) -> bool:
        """Whether the root succeeded."""
        return self.status is RunStatus.SUCCESS

    def raise_for_status(self) -> Self:
        """Return this result if the run succeeded or waits for a person; raise otherwise.

        A SUSPENDED run is not a failure: it returns, and ``pending`` lists what to approve.

        Raises:
            Exception: FAILURE: `exception`, the error that failed the run.
            RunFailed: TIMEOUT or CANCELLED (the message says which).
        """
        status = self.status
        if status is RunStatus.SUCCESS or status is RunStatus.SUSPENDED:
            return self
        if status is RunStatus.FAILURE and self.exception is not None:
            raise self.exception
        what = {RunStatus.TIMEOUT: "timed out", RunStatus.CANCELLED: "was cancelled"}.get(
            status, "failed"
        )
        reason = f": {self.error}" if self.error else ""
        raise RunFailed(f"run {self.run_id} {what}{reason}", status=status.value, result=self)


_P = ParamSpec("_P")

_trees: weakref.WeakKeyDictionary[Behaviour, weakref.ref[ReactiveRunner]] = (
    weakref.WeakKeyDictionary())  # each tree's root and the runner whose run last ticked it
_set_up: weakref.WeakSet[Behaviour] = weakref.WeakSet()  # the roots a runner has set up
_NO_SPAN = nullcontext()
"""The span of a run that records none (one for all: a `nullcontext` keeps nothing)."""
_NO_ROLES: frozenset[str] = frozenset()

# The loop of `run_sync`: one per thread, kept across its calls (a provider's kept-alive
# connections with it), shut down as ``asyncio.run`` would when the thread ends or the
# interpreter exits (`jianmu.runtime._sync_loop`, which says why).
_local = threading.local()
# Loops inherited through fork(): never closed (closing one would unregister the parent's
# descriptors from the epoll instance the child shares with it), never collected (the loop's
# __del__ would close it).
_inherited: list[asyncio.AbstractEventLoop] = []


class _Holder:
    """The thread's loop; when the thread's locals go, a finalizer shuts the loop down."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        # the loop's default executor (DNS lookups) is one held here, waited for at the end
        # from the ending thread by the events its threads set as they end: the loop's
        # shutdown_default_executor() starts a thread to join it, which Python 3.12+ refuses
        # once the interpreter exits. No thread starts early.
        ends: list[threading.Event] = []
        executor = ThreadPoolExecutor(thread_name_prefix="jianmu-loop",
                                      initializer=thread_started, initargs=(ends,))
        self.loop.set_default_executor(executor)
        weakref.finalize(self, shut_down, self.loop, self.pid, executor, ends)


def _thread_loop() -> asyncio.AbstractEventLoop:
    """This thread's loop for synchronous callers, made on first use (again after a fork)."""
    holder: _Holder | None = getattr(_local, "holder", None)
    if holder is not None and holder.pid == os.getpid() and not holder.loop.is_closed():
        if not holder.loop.is_running():  # else a thread resumes a run begun here, in it:
            return holder.loop  # this thread's new runs get a loop of their own, the lent
        _local.lent = [*getattr(_local, "lent", ()), holder]  # one kept till the thread ends
    elif holder is not None and holder.pid != os.getpid():
        _inherited.append(holder.loop)
    holder = _local.holder = _Holder()
    return holder.loop


@dataclass
class _Outcome:
    status: RunStatus
    error: str | None = None
    pending: list[ApprovalRequest] = field(default_factory=list)
    exception: BaseException | None = None


def _one_owner(
    run: Callable[Concatenate[ReactiveRunner, _P], Coroutine[Any, Any, RunResult]],
) -> Callable[Concatenate[ReactiveRunner, _P], Coroutine[Any, Any, RunResult]]:
    """Wrap `ReactiveRunner.run`: claim the run first, keep the lease while it goes on, give
    it up when it returns (a sub-agent's run goes under its caller's lease)."""

    @functools.wraps(run)
    async def claimed(self: ReactiveRunner, *args: _P.args, **kwargs: _P.kwargs) -> RunResult:
        claim = self._claim
        if claim is None or self.is_sub_run or self._running:
            return await run(self, *args, **kwargs)
        claim.take()
        try:
            async with claim.kept():
                return await run(self, *args, **kwargs)
        finally:
            claim.release()

    return claimed


def _listening(runner: ReactiveRunner) -> Callable[[frozenset[str]], None]:
    """A state subscriber that wakes ``runner`` while it lives, and unsubscribes itself at the
    first write after the runner is gone."""
    alive = weakref.ref(runner)
    state = runner.state

    def changed(keys: frozenset[str]) -> None:
        held = alive()
        if held is None:
            state.unsubscribe(changed)
        else:
            held._state_changed(keys)

    return changed


class ReactiveRunner:
    """Ticks a py_trees tree when something changes: a task ends, the state changes, an
    approval arrives, `wake` is called, a node must tick its child again or a `Timeout`
    expires (docs/design.md lists when). Only leaves that need it are polled.

    Args:
        root: the tree.
        state_manager: the run's state; a free-form one is made when omitted.
        config: the configuration (default: `default_config`, the defaults, shared and
            read-only).
        constraints: the caller's constraints, merged under the config's (they may only
            tighten them).
        checkpointer: where to save the run at every suspension and every
            ``checkpoint_every`` ticks.
        run_id: the run's id (default: a fresh one).
        user_roles: roles of the user starting the run (``admin`` unlocks admin_only tools).
        tracer_provider: OpenTelemetry provider for spans (default: the global API's).
        interactive: whether a person can approve; without, confirm policies become deny.
        owner: who runs it, named in the run's lease (default ``host:pid:python:token``); on
            a checkpointer that leases runs (`SQLiteCheckpointer`), `run`, `approve`,
            `reject` and `restore` first claim the run, and a second claimant is refused
            (`jianmu.runtime.lease`).
    """

    is_sub_run = False
    """True for the run of a sub-agent inside another run (it shares the caller's counts)."""
    _went_on_from: tuple[SpanContext, ...] = ()  # the span of the run that suspended, if any
    _span_ids: dict[str, str] | None = None  # its latest run span's, that a checkpoint keeps

    def __init__(
        self,
        root: Behaviour,
        state_manager: StateManager | None = None,
        *,
        config: AppConfig | None = None,
        constraints: Constraints | None = None,
        checkpointer: Checkpointer | None = None,
        run_id: str | None = None,
        user_roles: Iterable[str] = (),
        tracer_provider: TracerProvider | None = None,
        interactive: bool = True,
        checkpoint_every: int | None = None,
        extras: dict[str, Any] | None = None,
        owner: str | None = None,
    ) -> None:
        if not (isinstance(root, Behaviour) and hasattr(root, "name")):
            from jianmu.runtime._checks import check_root  # says what is wrong: no run pays it

            check_root(root)
        self.root = root
        self.state = state_manager if state_manager is not None else StateManager()
        self.config = config if config is not None else default_config()
        self.checkpointer = checkpointer
        self.checkpoint_every = checkpoint_every or self.config.runtime.checkpoint_every
        wake = self.wake  # one bound method for both
        self.interaction = Interaction(on_change=wake)
        # the 48 random bits of uuid4().hex[:12], without building a UUID (several µs a run)
        if run_id == "":  # "" would be replaced by a fresh id: saved under a name nobody knows
            raise ValueError("a run id must not be empty; give none for a fresh one")
        if run_id is not None and not storable(run_id):
            raise ValueError(f"a run id must be text UTF-8 can encode, not {run_id!r}")
        run_id = run_id or os.urandom(6).hex()
        self.ctx = RunContext(
            config=self.config,
            constraints=run_constraints(self.config.constraints(), constraints),
            run_id=run_id,
            events=EventBus(run_id),
            interaction=self.interaction if interactive else None,
            tracer=get_tracer(tracer_provider, enabled=self.config.telemetry.enabled),
            user_roles=RunContext.roles(user_roles) if user_roles else _NO_ROLES,
            wake=wake,
            extras=dict(extras or {}), runner=self,
            namespace=getattr(root, "namespace", None),  # its calls' ids are relative to it
        )
        self.ticks = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._sync_loop: asyncio.AbstractEventLoop | None = None
        self._sync_pid = 0
        self._wake_event: WakeEvent | None = None
        self._cancel_requested = False
        self._running = False
        self.halting = False  # stopping its tree (a timeout, cancel()): a node keeps its work
        self._is_set_up = False
        self._keys: dict[int, str] = {}
        self._shape: list[Behaviour] = []  # the nodes bound, as `bound_nodes` lists them
        self._adopting = False  # binding the tree for a node met unbound (`_adopt`)
        self._restored_nodes: dict[str, dict[str, Any]] = {}
        # how the run ended (SUCCESS or FAILURE, and why), until new input: run() then
        # returns it without ticking, so a finished run never asks the model again
        self._finished: RunResult | None = None
        self._end_error: str | None = None
        self._end_unsaved = False  # the end's checkpoint was refused: the next run() saves it
        self._suspended_at: float | None = None  # when run() last returned SUSPENDED
        # messages sent while a run stopped, with their namespaces: added once it has (`send`)
        self._sent: list[tuple[Any, str | None]] = []
        self._ticker = Ticker(self.config.runtime.poll_interval)
        # weakly: a state kept across runners (a chat's) must not keep each old runner, its
        # tree and its context alive, nor wake them all at every write
        self._listener = _listening(self)
        self.state.subscribe(self._listener)
        # one owner per run, on a checkpointer that leases runs (`jianmu.runtime.lease`)
        self._claim = None if checkpointer is None else RunClaim.new(checkpointer, run_id, owner)
        observe = getattr(checkpointer, "observe", None)
        if callable(observe):  # a checkpointer that keeps every tick (`SQLiteCheckpointer`)
            observe(self)

    def _state_changed(self, keys: frozenset[str]) -> None:
        if not self._running:  # new input written between runs: the next run() runs the tree
            self._finished = None
        self.wake(asked=False)

    def _stop_listening(self) -> None:
        """Stop waking on state changes: for a runner that shares its state with a
        longer-lived one (a sub-agent's), once it is done."""
        self.state.unsubscribe(self._listener)

    # -- public API ------------------------------------------------------------------------------
    @property
    def run_id(self) -> str:
        """The run's id."""
        return self.ctx.run_id

    @property
    def pending(self) -> list[ApprovalRequest]:
        """Approval requests waiting for a decision."""
        return self.interaction.pending

    def wake(self, *, asked: bool = True) -> None:
        """Make the runner tick again soon; safe to call from any thread. A node that asks
        in its tick gets the next one at once (a write to the state, ``asked=False``, brings
        one at once only while the ticks change the tree)."""
        loop, event = self._loop, self._wake_event
        if loop is None or event is None:
            return
        if threading.get_ident() == self._loop_thread:
            event.asked = event.asked or asked
            event.set()
            return
        try:
            loop.call_soon_threadsafe(event.set)
        except RuntimeError:  # the loop has closed: nothing to wake
            pass

    def approve(
        self, request_id: str, message: str | None = None, *,
        arguments: dict[str, Any] | None = None,
    ) -> str:
        """Approve a pending request; ``await run()`` then continues the same tree. Returns
        the request's id: a call id alone names the one pending request of that call id.

        With ``arguments``, a person edits the call: it runs with these, once they fit the
        tool's input schema (checked here) and the guard's policy (checked before it runs). The
        decision, its arguments and ``edited=True`` are checkpointed, and the model is told.

        Raises:
            ApprovalEditError: the edited arguments do not fit; nothing was recorded.
            InteractionError: no such request was asked, it was already decided, it is a
                question (`answer` it), or a call id names several (their ids are listed).
            RunClaimedError: another owner holds the run, or went on with it since.
            CheckpointError: the store could not save the decision; it was not taken.
        """
        self._take_claim()
        with self.deciding():  # saved as it is made: a decision the store refused is not taken
            request_id = self.interaction.approve(request_id, message, arguments=arguments)
        edit: dict[str, Any] = {} if arguments is None else {"edited": True, "arguments": arguments}
        self.ctx.events.emit("interaction.approved", request_id=request_id, **edit)
        return request_id

    def reject(self, request_id: str, message: str | None = None) -> str:
        """Reject a pending request; ``message`` reaches the model. Returns its id (`approve`).

        Raises:
            InteractionError: no such request was asked, it was already decided, or a call id
                names several.
            RunClaimedError: another owner holds the run, or went on with it since.
            CheckpointError: the store could not save the decision; it was not taken.
        """
        self._take_claim()
        with self.deciding():  # saved as it is made: a decision the store refused is not taken
            request_id = self.interaction.reject(request_id, message)
        self.ctx.events.emit("interaction.rejected", request_id=request_id, message=message)
        return request_id

    def answer(self, request_id: str, text: str) -> str:
        """Answer a question (`ApprovalRequest.kind` ``question``); the asker reads ``text``.
        Returns its id (`approve`).

        Raises:
            InteractionError: no such request was asked, it was already decided, it asks
                for approval (approve or reject it), or a call id names several.
            RunClaimedError: another owner holds the run, or went on with it since.
            CheckpointError: the store could not save the decision; it was not taken.
        """
        self._take_claim()
        with self.deciding():  # saved as it is made: a decision the store refused is not taken
            request_id = self.interaction.answer(request_id, text)
        self.ctx.events.emit("interaction.answered", request_id=request_id, answer=text)
        return request_id

    def send(self, message: Any, *, namespace: str | None = None) -> None:
        """Add the user's next message to the conversation; the next ``run()`` answers it.

        The follow-up turn of a chat: ``message`` (text, a `jianmu.llm.Message` or its dict in
        the OpenAI shape) is appended to ``messages`` and the previous turn's
        ``final_answer``, ``final_output`` and ``done`` are cleared, so a result read after
        the next run is that run's. Works the same on a runner restored from a checkpoint in
        another process. ``namespace`` is where the agent's conversation lives, if not at the
        root.

        Sent while a run told to stop is still stopping (`cancel`, a `stream` its reader left
        with a ``break``) or stands suspended, each request decided, the message is checked and
        added as that run (or the one acting on the decisions) ends: the next run answers it.

        Raises:
            RuntimeError: the run is going, or waits for approval (decide that first).
            StateValidationError: ``message`` is not one the conversation takes.
        """
        _turns.send(self, message, namespace)

    def cancel(self) -> None:
        """Stop the run going on at its next wake-up, with status CANCELLED; thread-safe. A
        runner with no run going (ended, or suspended: `reject` what it waits for) has nothing
        to stop, and the next `run` is not affected."""
        self._cancel_requested = True
        self.wake()

    def run_sync(self, max_ticks: int | None = None, timeout: float | None = None) -> RunResult:
        """Run to completion from synchronous code, on the runner's one event loop.

        Every call runs on the same loop, which outlives it (unlike ``asyncio.run``'s): that
        of the runner's first ``run_sync()``, the calling thread's loop for synchronous
        callers, which the thread's runners share (and with it a provider's kept-alive
        connections). It is shut down when its thread ends or the interpreter exits; a
        forked child makes its own. Interrupted (Ctrl-C), the run is cancelled before the
        exception leaves, so the runner can run again.

        Raises:
            RuntimeError: called inside a running event loop (use ``await run()`` there), or
                while the runner's loop runs in another thread.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError(
                "run_sync() cannot be called from a running event loop; await run()"
            )
        loop = self._sync_loop
        if loop is None or loop.is_closed() or self._sync_pid != os.getpid():
            loop = self._sync_loop = _thread_loop()
            self._sync_pid = os.getpid()
        if loop.is_running():
            raise RuntimeError("this runner's event loop is running in another thread")
        task = loop.create_task(self.run(max_ticks=max_ticks, timeout=timeout))
        try:
            return loop.run_until_complete(task)
        except BaseException:
            if not task.done():  # interrupted: let the run stop cleanly on its loop
                task.cancel()
                with suppress(BaseException):
                    loop.run_until_complete(task)
            raise

    @_one_owner
    async def run(self, max_ticks: int | None = None, timeout: float | None = None) -> RunResult:
        """Tick until the root finishes, the run suspends, times out or is cancelled.

        A run's end is final: on a run that finished (SUCCESS or FAILURE, also as recorded
        in the checkpoint it was restored from) it returns that result at once, with no
        tick and no model call, until `send` (or any other write to the state) gives it
        new input.

        Raises:
            RunClaimedError: another owner holds the run, or went on with it since.
        """
        if self._running and not await left_behind(self):  # a stream left by a `break`: ended
            raise RuntimeError("this runner is already running")
        if self._sent:  # sent while the left run stopped: this run answers them
            _turns.add_sent(self)
        if not (max_ticks is None or (type(max_ticks) is int and max_ticks > 0)) or not (
                timeout is None or (type(timeout) in (int, float) and timeout > 0)):
            from jianmu.runtime._checks import check_run  # raises what is wrong (or passes)

            check_run(max_ticks, timeout)
        if self._finished is not None:
            if self._end_unsaved:  # its end stands: saved now, not run again
                self.save_checkpoint(self._finished.status.value)
            ended = dataclasses.replace(self._finished, ticks=0, duration=0.0)
            self.ctx.events.emit("run.finished", status=ended.status.value, error=ended.error,
                                 result=ended)
            return ended
        self._take_tree()
        self._running = True
        self._cancel_requested = False
        self._end_error = None
        if not self.is_sub_run:  # the count of sub-agent runs is per run of the whole tree
            self.ctx.agent_runs[0] = 0
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._wake_event = WakeEvent(self._loop)
        started = time.monotonic()
        if self._suspended_at is not None:  # a person's wait does not count against a Timeout
            from jianmu.runtime.settle import postpone_timeouts  # resumed runs only
            postpone_timeouts(self.root, started - self._suspended_at)
        ticks_before, kept, self._kept = self.ticks, self._kept, ()  # unread work: `kept`
        # a timed run's stopped tasks get its deadline and a grace to clean up, no longer
        until = None if timeout is None else started + timeout + self.config.runtime.cleanup_grace
        # a node added meanwhile is bound by this run (held weakly: a task may outlive it)
        binder = BINDER.set(weakref.ref(self))
        try:
            self._setup_once()
            with self._span() as run_span:
                outcome = await self._loop_until_done(max_ticks, timeout, started)
                while outcome.status is RunStatus.SUSPENDED:
                    settled = await self._settle(timeout, started)
                    if settled is not None:
                        outcome = settled
                        break
                    # everything was decided while the calls finished: the run goes on
                    outcome = await self._loop_until_done(max_ticks, timeout, started)
                if run_span is not None:
                    self._went_on_from = run_ended(run_span, outcome.status.value)
            await self._drain_cancelled(until)  # their finally blocks first, then sandboxes,
            if outcome.status is not RunStatus.SUSPENDED:  # still running: a run() meanwhile is
                await self._close_resources()  # refused, not a second run of the ended tree
        finally:
            try:
                await self._drain_cancelled(until)
            finally:  # cancelled again while draining: the runner must still run again later
                self._running = False
                self._wake_event = None
                BINDER.reset(binder)
        self._suspended_at = time.monotonic() if outcome.status is RunStatus.SUSPENDED else None
        for node in kept:  # not read by this run: a later entry of the node is new work
            node._finished = None
        if outcome.status.finished:  # its tree ended: what it asked waits for nothing now
            for request_id in self.interaction.withdraw():
                self.ctx.events.emit("interaction.withdrawn", request_id=request_id)
        state = self.state
        result = RunResult(
            status=outcome.status,
            run_id=self.run_id,
            ticks=self.ticks - ticks_before,
            duration=time.monotonic() - started,
            pending=tuple(outcome.pending),
            error=outcome.error,
            output=state.get("final_output"),  # an agent's typed answer, if it gave one
            exception=self._failure_exception(outcome),
            messages=tuple(state.get("messages") or ()),
            usage=state.get("usage"),
        )
        if isinstance(result.exception, TreeMismatchError):  # not the run's: nothing saved over it
            raise result.exception
        # the end stands even if its checkpoint is refused below; a store that failed while the
        # run went on interrupted it instead: run() again goes on, so it is saved as going on
        interrupted = self.checkpointer is not None and store_failed(result.exception)
        if outcome.status.finished and not interrupted:
            self._finished = result
        if self.checkpointer is not None:
            self._end_error = None if interrupted else outcome.error  # for a restored run
            self._end_unsaved = self._finished is not None
            going_on = RunStatus.SUSPENDED.value if self.interaction.has_pending else "running"
            self.save_checkpoint(going_on if interrupted else outcome.status.value)
        self.ctx.events.emit(
            "run.finished", status=outcome.status.value, error=outcome.error, result=result
        )
        if self._sent:  # sent while it stopped: the next turn, after this run's end
            _turns.add_sent(self)
        return result

    def stream(
        self, max_ticks: int | None = None, timeout: float | None = None
    ) -> EventStream:
        """Run the tree (as `run`) and yield the run's events as they happen, in order.

        The events are the bus's own (`Event`: ``name``, ``node``, ``fields``), those of
        sub-agents included (under their node paths); the model's text arrives as
        ``llm.call.delta`` events while it answers. The last one is this run's
        ``run.finished``, whose ``fields["result"]`` is the `RunResult`. A run that suspends
        ends its stream there; after ``approve()``, ``stream()`` again goes on.

        No event is dropped for a slow reader: they wait in an unbounded queue. Leaving the
        loop early (``break``, an exception, ``aclose()``, an ``async with`` block) cancels the
        run as it is left: its running tools see ``CancelledError`` and the run ends CANCELLED
        before the generator closes (`jianmu.runtime.stream.EventStream`).

        Raises:
            RuntimeError: the runner is already running.
            Exception: whatever `run` raised.
        """
        return open_stream(self, max_ticks=max_ticks, timeout=timeout)

    async def aclose(self) -> None:
        """Release everything the run and its tree hold: sandboxes, connections, and the
        worker threads that nodes keep between runs (each node's ``aclose``).

        A run that ends closes its sandboxes itself but lets the nodes keep their threads for
        the next run; call this when the runner is done with (a finished agent, a durable
        engine parking a suspended run). The runner may still run again: nodes rebuild what
        they need. ``async with ReactiveRunner(...) as runner:`` calls it on the way out.
        """
        await self._close_resources()
        await close_tree(self.root)
        if self._claim is not None:
            self._claim.release()

    async def __aenter__(self) -> ReactiveRunner:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- checkpoints -----------------------------------------------------------------------------
    def save_checkpoint(self, status: str = "running") -> None:
        """Save the state, every node's status and the pending requests (and why the run
        ended, once it did)."""
        if self.checkpointer is None:
            raise CheckpointError("this runner has no checkpointer")
        from jianmu.runtime.checkpoint import checkpoint_of  # runs that checkpoint only

        self._save_to_store(self.run_id, checkpoint_of(self, status))

    _deciding = 0
    _kept: tuple[Any, ...] = ()

    @contextmanager
    def deciding(self) -> Iterator[None]:
        """Decisions made in the block are saved together as it ends, and none if it raises
        (several decisions given at once, one of them refused, or their save refused: none of
        them was taken, and each can be given again)."""
        with self.interaction.all_or_none():  # one refused, or not saved: all taken back
            self._deciding += 1
            try:
                yield
            finally:
                self._deciding -= 1
            self._save_decision()

    def _save_decision(self) -> None:
        """Save a decision made while the run waits, as it is made: the run's newest
        checkpoint with the decisions added (a restored tree may not have built all of its
        nodes yet), under the run's lease, kept. A runner that only decides and is closed
        loses none, and the process that goes on finds it."""
        if self.checkpointer is None or self._running or self.is_sub_run or self._deciding:
            return  # a running run saves its decisions with its next checkpoint
        from jianmu.runtime.checkpoint import save_decisions  # runs that checkpoint only

        save_decisions(self, self.checkpointer)

    @classmethod
    def restore(
        cls,
        root: Behaviour,
        checkpointer: Checkpointer,
        run_id: str,
        *,
        state_manager: StateManager | None = None,
        **kwargs: Any,
    ) -> ReactiveRunner:
        """Rebuild a runner for ``run_id`` from its newest checkpoint, in any process.

        ``root`` must be the same tree the run was built with (built by the same code);
        ``state_manager`` has the run's schema (default: the checkpoint's, when imported).

        On a checkpointer that leases runs, the new runner first claims the run (as
        ``owner``, a keyword) and holds it until a `run` returns or `aclose`.

        Raises:
            CheckpointError: no checkpoint for ``run_id``, or the tree does not match it.
            RunClaimedError: another owner holds the run.
        """
        from jianmu.runtime.checkpoint import restored  # restores only

        return restored(cls, root, checkpointer, run_id, state_manager, kwargs)

    def _restored_end(self, status: Any, error: str | None) -> None:
        """Take a checkpoint's end (its status, its error) as this run's, if it ended."""
        if status in (RunStatus.SUCCESS.value, RunStatus.FAILURE.value):
            self._finished = self._ended(RunStatus(status), error)

    def _save_to_store(self, run_id: str, checkpoint: dict[str, Any]) -> None:
        """Save under the run's lease when the store keeps leases (a save once the run has
        returned gives the lease up in the same commit)."""
        if self._claim is not None:
            self._claim.save(checkpoint, last=not self._running)
        elif self.checkpointer is not None:
            self.checkpointer.save(run_id, checkpoint)
        self._end_unsaved = False

    def _take_claim(self) -> None:
        """Claim the run (or renew the claim) before deciding or continuing it."""
        if self._claim is not None and not self.is_sub_run:
            self._claim.take()

    # -- binding ---------------------------------------------------------------------------------
    def bind_subtree(self, node: Behaviour) -> None:
        """Bind ``node`` and everything below it to this run (state, context, paths, statuses
        after a restore): a node that compiles its children lazily calls this then."""
        key = self.node_key(node)
        parent = node.parent
        if id(node) in self._keys or parent is None:
            path = getattr(node, "path", "") or node.name
            parent_path, _, label = path.rpartition("/")
        else:  # a freshly compiled child: its place follows from its parent's
            parent_path, label = getattr(parent, "path", "") or parent.name, node.name
        self._bind(node, key, parent_path, label)
        self._shape = bound_nodes(self.root)  # bound as it is: no rebinding for it next run
        if self._restored_nodes:  # a checkpointed node it lacks: not the run's subtree
            from jianmu.runtime.checkpoint import unmatched

            unmatched(self._restored_nodes, dict(self._walk(node, key)))

    def node_key(self, node: Behaviour) -> str:
        """The node's place in the tree as child indices from the root (``0/2/1``)."""
        key = self._keys.get(id(node))
        if key is not None:
            return key
        parent = node.parent
        if parent is None:
            return "0"
        index = next(i for i, child in enumerate(parent.children) if child is node)
        return f"{self.node_key(parent)}/{index}"

    def _bind(self, node: Behaviour, key: str, parent_path: str, label: str) -> None:
        path = f"{parent_path}/{label}" if parent_path else label
        self._keys[id(node)] = key
        bind = getattr(node, "bind", None)
        if callable(bind):
            bind(self.state, self.ctx, path)
        restored = self._restored_nodes.pop(key, None)
        if restored is not None:
            if restored["name"] != node.name:  # (a subtree built late: `run()` raises it)
                raise TreeMismatchError(f"the tree does not match the checkpoint: node {key} is "
                                        f"{node.name!r}, the checkpoint has {restored['name']!r}")
            node.status = Status[restored["status"]]
        children = self._children(node)
        names = [c.name for c in children]
        for index, child in enumerate(children):
            # paths must be unique: siblings sharing a name get their index
            child_label = child.name if names.count(child.name) == 1 else f"{child.name}[{index}]"
            self._bind(child, f"{key}/{index}", path, child_label)
        if restored is not None and node.status is Status.RUNNING and node.children:
            from jianmu.runtime.checkpoint import resume_composite  # restores only

            resume_composite(node)

    @staticmethod
    def _children(node: Behaviour) -> list[Behaviour]:
        """A node's real children: none yet for a node that compiles them on first tick."""
        if getattr(node, "compiled", True) is False:
            return []
        return list(node.children)

    def _take_tree(self) -> None:
        """Make this runner the one whose run ticks its tree, binding it back to this run if
        another's ran it since; refused while another's run ticks it (`runtime._checks`)."""
        known = _trees.get(self.root)
        owner = known() if known is not None else None
        if owner is not self:
            if owner is not None and (owner._running or owner.ctx.cleaning):  # or cleans up
                from jianmu.runtime._checks import tree_taken

                raise tree_taken(self.root, owner.run_id, cleaning=not owner._running)
            _trees[self.root] = weakref.ref(self)
            if self._is_set_up:
                self._bind_tree()

    def _bind_tree(self) -> None:
        """Bind the whole tree as it is now, as a fresh runner would: nodes added since bound,
        the places of nodes moved or taken out forgotten (checkpoints keep the right keys)."""
        self._keys.clear()
        self._bind(self.root, "0", "", self.root.name)
        self._shape = bound_nodes(self.root)

    def _adopt(self, node: Behaviour) -> bool:
        """Bind a node of this run's tree met unbound (added while the run goes on); whether
        it is bound now (not under a node that has not compiled its children). Not again
        from a node's own ``bind`` that reads what it binds."""
        if self._adopting or not self._is_set_up or node not in bound_nodes(self.root):
            return False
        self._adopting = True
        try:
            self._bind_tree()
            return True
        finally:
            self._adopting = False

    def _walk(self, node: Behaviour, key: str) -> Iterable[tuple[str, Behaviour]]:
        yield key, node
        for index, child in enumerate(self._children(node)):
            yield from self._walk(child, f"{key}/{index}")

    def _setup_once(self) -> None:
        if self._is_set_up:
            if self._shape != bound_nodes(self.root):  # a node added or taken out since
                self._bind_tree()
            return
        self._bind_tree()
        if self.root not in _set_up:  # once per tree, as py_trees' loop: not once per runner
            self.root.setup_with_descendants()
            _set_up.add(self.root)
        self._is_set_up = True

    # -- the loop --------------------------------------------------------------------------------
    async def _loop_until_done(
        self, max_ticks: int | None, timeout: float | None, started: float
    ) -> _Outcome:
        if self.interaction.has_pending:
            return _Outcome(RunStatus.SUSPENDED, pending=self.interaction.pending)
        deadline = started + timeout if timeout is not None else None
        ticks = 0
        self._ticker.reset()
        assert self._wake_event is not None
        try:
            while True:
                if self._cancel_requested:
                    return self._stopped(RunStatus.CANCELLED, "the run was cancelled")
                self._wake_event.clear()
                try:
                    plan = self._ticker.tick(self.root, self._wake_event)
                except Exception as exc:  # a synchronous behaviour raised: fail the run cleanly
                    self._stop_tree()  # each node left running: its statuses above are unset
                    return _Outcome(
                        RunStatus.FAILURE, f"{type(exc).__name__}: {exc}", exception=exc
                    )
                ticks += 1
                self.ticks += 1
                self.ctx.events.emit("run.ticked", tick=self.ticks)
                status = self.root.status
                if status is Status.SUCCESS:
                    return _Outcome(RunStatus.SUCCESS)
                if status in (Status.FAILURE, Status.INVALID):
                    from jianmu.runtime.failures import failure_reason  # failed runs only

                    return _Outcome(RunStatus.FAILURE, failure_reason(self.root))
                if self.interaction.has_pending:
                    if self.checkpointer is not None:
                        self.save_checkpoint(RunStatus.SUSPENDED.value)
                    self.ctx.events.emit(
                        "run.suspended", pending=[r.id for r in self.interaction.pending]
                    )
                    return _Outcome(RunStatus.SUSPENDED, pending=self.interaction.pending)
                if max_ticks is not None and ticks >= max_ticks:
                    # the tree did not fail: no error a node keeps (one it recovered from) is why
                    return self._stopped(
                        RunStatus.FAILURE, f"max_ticks={max_ticks} reached before the tree finished"
                    )
                if (
                    self.checkpointer is not None
                    and self.checkpoint_every
                    and self.ticks % self.checkpoint_every == 0
                ):
                    self.save_checkpoint()
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return self._stopped(RunStatus.TIMEOUT, f"the run timed out after {timeout} s")
                # the next tick changes the tree by itself (or a node of this tick cancelled
                # the run): take it now, else once woken; what is ready runs first, a cancel not
                if not (again := plan.again or self._cancel_requested):
                    wait = (remaining if plan is IDLE_PLAN
                            else plan.wait(remaining, self.config.runtime.poll_interval))
                    if not await self._wait_for_wake(wait) and (
                            remaining is not None and wait is not None and wait >= remaining):
                        break
                if (flying := self._ticker.flying and not self._cancel_requested) or again:
                    await (eager.ready_first(again) if flying else asyncio.sleep(0))
            return self._stopped(RunStatus.TIMEOUT, f"the run timed out after {timeout} s")
        except asyncio.CancelledError:
            self._stop_tree()
            raise

    async def _settle(self, timeout: float | None, started: float) -> _Outcome | None:
        """At a suspension, let what the tree started finish (`settle`); None when no request
        is pending any more (all decided meanwhile): the run goes on."""
        from jianmu.runtime.settle import settled  # suspended runs only

        assert self._wake_event is not None
        asked = [r.id for r in self.interaction.pending]
        try:
            stopped = await settled(self.root, self._wake_event, lambda: self._cancel_requested,
                                    None if timeout is None else started + timeout)
        except asyncio.CancelledError:
            self._stop_tree()
            raise
        if stopped == "cancelled":
            return self._stopped(RunStatus.CANCELLED, "the run was cancelled")
        if stopped == "timeout":
            return self._stopped(RunStatus.TIMEOUT, f"the run timed out after {timeout} s")
        # requests asked while the calls finished (a sub-agent's) are the run's too
        pending = self.interaction.pending
        if not pending:
            return None
        if [r.id for r in pending] != asked:  # the timeline says what the run waits for now
            self.ctx.events.emit("run.suspended", pending=[r.id for r in pending])
        return _Outcome(RunStatus.SUSPENDED, pending=pending)

    def _wait_for_wake(self, wait: float | None) -> Awaitable[bool]:
        """Sleep until woken (True) or ``wait`` seconds have passed (False); untimed, the wake
        event's own future (no coroutine kept per sleeping run)."""
        event = self._wake_event
        assert event is not None
        if wait is None:
            return event.wait()
        assert self._loop is not None
        return timed_wait(event, self._loop, wait)

    def _stop_tree(self) -> str | None:
        """Stop every running node, even past a ``terminate`` that raises; what raised, said."""
        from jianmu.runtime.failures import stop_failed, stop_running_nodes  # stopped runs only

        self.halting = True  # a node stopped now keeps what the next run goes on from
        try:
            return stop_failed(self.ctx.events, stop_running_nodes(self.root))
        finally:
            self.halting = False

    def _stopped(self, status: RunStatus, why: str) -> _Outcome:
        """Stop the tree: the run ends with ``status`` for ``why``, and a FAILURE's exception
        is a `RunFailed` saying so, not an error a node keeps (the tree did not fail)."""
        error = why if (raised := self._stop_tree()) is None else f"{why}; {raised}"
        failed = RunFailed(f"run {self.run_id} failed: {error}", status="failure")
        return _Outcome(status, error, exception=failed if status is RunStatus.FAILURE else None)

    def _ended(self, status: RunStatus, error: str | None) -> RunResult:
        """The result of a run its checkpoint says ended: what the state holds, no tick here."""
        state = self.state
        return RunResult(
            status=status, run_id=self.run_id, error=error,
            output=state.get("final_output"),
            exception=self._failure_exception(_Outcome(status, error)),
            messages=tuple(state.get("messages") or ()), usage=state.get("usage"),
        )

    def _failure_exception(self, outcome: _Outcome) -> BaseException | None:
        """The exception a FAILURE outcome carries: a node's error, else a `RunFailed`."""
        if outcome.status is not RunStatus.FAILURE:
            return None
        if outcome.exception is not None:
            return outcome.exception
        from jianmu.runtime.failures import failure_exception  # failed runs only

        return failure_exception(self.root, self.run_id, outcome.error)

    async def _drain_cancelled(self, until: float | None) -> None:
        """Let cancelled tasks run their ``finally`` blocks before run() returns (`drained`)."""
        if self.ctx.cancelled_tasks:
            from jianmu.runtime.failures import drained  # stopped tasks only

            await drained(self.ctx, until, self.config.runtime.cleanup_grace)

    async def _close_resources(self) -> None:
        closers, self.ctx.closers[:] = list(self.ctx.closers), []
        for closer in closers:
            try:
                await closer()
            except Exception as exc:  # cleanup must not turn a finished run into a crash
                self.ctx.events.emit("run.cleanup_failed", error=f"{type(exc).__name__}: {exc}")

    def _span(self) -> Any:
        if self.ctx.tracer is None:  # nothing to record: no generator held for the whole run
            return _NO_SPAN
        from jianmu.runtime.events import run_span, span_ids

        return run_span(
            self.ctx.tracer, f"invoke_workflow {self.root.name}",
            {GEN_AI_OPERATION_NAME: "invoke_workflow", GEN_AI_AGENT_NAME: self.root.name,
             JIANMU_RUN_ID: self.run_id},
            self.ctx.open_spans, links=self._went_on_from,
            opened=lambda current: setattr(self, "_span_ids", span_ids(current)),
        )
