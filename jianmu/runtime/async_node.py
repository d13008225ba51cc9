"""`AsyncNode`: a py_trees behaviour whose work is a coroutine, run as an asyncio task.

The runtime's nodes tick and stop with py_trees' own steps in py_trees' order
(`behaviour_tick` here, and for the engine's composites `runtime/_composite_steps.py`, follow
`py_trees.behaviour.Behaviour`, `py_trees.decorators.Decorator` and
`py_trees.composites.Sequence`), minus what nobody reads: the debug-log strings (formatted on
every tick and stop, enum statuses and all, though py_trees prints them only at its debug
level), the list of every status built to check each one, and the fresh ``tick()`` generator a
stop leaves in ``iterator`` (py_trees never reads it). At py_trees' debug level the nodes use
py_trees' own methods, so their logs are as before.

`Ticker` ticks a tree for an event-driven runner and tells what needs the next tick that no
task or state change brings: a decorator returning RUNNING over an ended child, an ended async
leaf that its parent ticks again, a leaf to poll, a running `Timeout`'s deadline.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
import uuid
import weakref
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import py_trees
from py_trees import logging as _py_trees_logging
from py_trees.behaviour import Behaviour
from py_trees.common import Status
from py_trees.composites import Composite, Parallel, Selector, Sequence
from py_trees.decorators import Count, Decorator, EternalGuard, OneShot, Repeat, Timeout

from jianmu.constraints import Constraints
from jianmu.runtime import eager
from jianmu.runtime.cycles import ROUNDS, AtRest, Round, started_now, unstepped
from jianmu.runtime.eager import NOT_YET, FirstStep, not_a_coroutine, read_outcome, refused

if TYPE_CHECKING:
    from jianmu.runtime.context import RunContext, StepRecorder
    from jianmu.runtime.events import NodeEvents
    from jianmu.state import StateManager, StateView

__all__ = ("BINDER", "IDLE_PLAN", "STATUSES", "AsyncNode", "LeanBehaviour", "LeanExtras",
           "RuntimeNode", "TickPlan", "Ticker", "WakeEvent", "adopt", "behaviour_tick",
           "bound_nodes", "checked", "close_tree", "coerce_status", "expire", "logs_debug",
           "ticked_again", "timed_wait")


def coerce_status(value: Any) -> Status:
    """Read ``None`` and booleans as statuses: None/True are SUCCESS, False is FAILURE."""
    if isinstance(value, Status):
        return value
    if value is None or value is True:
        return Status.SUCCESS
    if value is False:
        return Status.FAILURE
    raise TypeError(f"update_async() must return a py_trees Status, got {value!r}")


class _MadeOnRead:
    """One of the extras py_trees gives every node (its id, logger, blackboard clients, a
    spare tick generator), which most runs never read: made when first read, not kept when
    py_trees' ``__init__`` makes it. Thousands of runs in flight hold fewer objects so.

    The value lives in an ordinary attribute (``_made_<name>``), set and read through
    ``object``'s own methods: reading ``node.__dict__`` would make CPython build the node a
    dict of its own (one more object the collector tracks, per node of every run)."""

    def __init__(self, make: Any, keep: Any) -> None:
        self.make = make
        """Makes the value on first read, from the node."""
        self.keep = keep
        """Whether a value assigned is kept (else it is made again when read)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = f"_made_{name}"

    def __get__(self, node: Any, owner: type | None = None) -> Any:
        if node is None:
            return self
        value = getattr(node, self.slot, _UNSET)
        if value is _UNSET:
            value = self.make(node)
            object.__setattr__(node, self.slot, value)
        return value

    def __set__(self, node: Any, value: Any) -> None:
        if self.keep(node, value):
            object.__setattr__(node, self.slot, value)
        elif hasattr(node, self.slot):
            object.__delattr__(node, self.slot)


_UNSET: Any = object()


class LeanExtras:
    """Mixin (before the py_trees class) for nodes whose py_trees extras are made on first
    read: the logger, the blackboard clients and the spare tick generator (and the id, when
    py_trees' ``__init__`` has not made one)."""

    id = _MadeOnRead(lambda node: uuid.uuid4(), keep=lambda node, value: True)
    """py_trees' ``__init__`` makes one (a uuid4 costs several µs): kept when it does."""
    logger = _MadeOnRead(
        lambda node: py_trees.logging.Logger(node.name),
        # py_trees' own logger is a function of the name: made again when asked for
        keep=lambda node, value: not isinstance(value, py_trees.logging.Logger),
    )
    blackboards = _MadeOnRead(lambda node: [], keep=lambda node, value: bool(value))
    iterator = _MadeOnRead(lambda node: None, keep=lambda node, value: False)
    """Never read by py_trees, which sets it on every stop: nothing is kept."""


class LeanBehaviour(LeanExtras, Behaviour):
    """`Behaviour` whose ``__init__`` makes none of the extras (`LeanExtras`): no uuid4, no
    logger, no blackboard list, no spare tick generator; each is made when first read.

    Listed as the last base, after a py_trees composite or decorator (``class
    X(Sequence, LeanBehaviour)``), so that their ``__init__`` reaches this one rather than
    `Behaviour.__init__`; the node has every attribute py_trees' own gives it.
    """

    def __init__(self, name: str) -> None:
        # py_trees 2.6's Behaviour.__init__, minus what `LeanExtras` makes on read
        if not isinstance(name, str):
            raise TypeError(f"a behaviour name should be a string, but you passed in {type(name)}")
        self.name = name
        self.qualified_name = f"{self.__class__.__qualname__}/{name}"
        self.status = Status.INVALID
        self.parent: Behaviour | None = None
        self.children: list[Behaviour] = []
        self.feedback_message = ""
        self.blackbox_level = py_trees.common.BlackBoxLevel.NOT_A_BLACKBOX


def adopt(parent: Behaviour, children: Iterable[Behaviour]) -> None:
    """`Composite.add_children` without reading each child's ``id`` (which makes a uuid4 on
    a `LeanBehaviour`): the same checks, the same order."""
    for child in children:
        if not isinstance(child, Behaviour):
            raise TypeError(f"children must be behaviours, but you passed in {type(child)}")
        parent.children.append(child)
        if child.parent is not None:
            raise RuntimeError(f"behaviour '{child.name}' already has parent '{child.parent.name}'")
        child.parent = parent


BINDER: contextvars.ContextVar[weakref.ref[Any]] = contextvars.ContextVar("jianmu_binder")
"""The runner whose run goes on in this context, weakly: a node of its tree that it meets
unbound (added while the run went on) asks it to bind the tree."""


class _Unbound:
    """What a runner binds on a node (`RuntimeNode.bind`), read before it has: an
    AttributeError (``hasattr`` and ``getattr`` with a default still work) that says when it
    is bound, not Python's bare one. A bound node's value is its own attribute, found first."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, node: Any, owner: type | None = None) -> Any:
        if node is None:
            return self
        ref = BINDER.get(None)
        runner = ref() if ref is not None else None
        if runner is not None and runner._adopt(node):  # added to the tree the run ticks
            return getattr(node, self.name)
        raise AttributeError(
            f"{type(node).__name__} {getattr(node, 'name', '')!r} has no {self.name} yet: a "
            f"ReactiveRunner binds it when it runs the tree (py_trees' own BehaviourTree does "
            f"not: run its root with ReactiveRunner(root).run_sync()); read self.{self.name} "
            f"in update_async (or initialise), not in __init__", name=self.name, obj=node)


def _no_loop(node: Any) -> RuntimeError:
    """The error for an async leaf ticked with no event loop running (py_trees' own loop)."""
    return RuntimeError(
        f"{type(node).__name__} {node.name!r} was ticked with no event loop running: its work "
        f"runs as an asyncio task, which py_trees' own BehaviourTree cannot run; run the "
        f"tree's root with ReactiveRunner(root).run_sync() (or await its run())")


class RuntimeNode(LeanExtras):
    """Mixin for nodes that the runner binds to the state and the run context."""

    if TYPE_CHECKING:
        state: StateView
        ctx: RunContext
        state_manager: StateManager
    else:
        state, ctx, state_manager = _Unbound(), _Unbound(), _Unbound()
    namespace: str | None = None
    path: str = ""
    constraints: Constraints | None = None
    """This node's layer of constraints, merged under the run's (it may only tighten them)."""
    node_kind: ClassVar[str] = "custom"
    """What the studio draws the node as: ``tool``, ``model``, ``skill`` or ``custom``."""
    _effective: tuple[Constraints | None, Constraints | None, Constraints] | None = None
    _bound_events: NodeEvents | None = None

    def bind(self, state_manager: StateManager, ctx: RunContext, path: str) -> None:
        """Attach the state (scoped to ``self.namespace``) and the run context.

        Called by the runner before ``setup()``, and again when a subtree is compiled or
        re-namespaced. Must not start any work.
        """
        self.state_manager = state_manager
        self.ctx = ctx
        self.path = path
        self.state = state_manager.scope(self.namespace) if self.namespace else state_manager.root
        if getattr(self, "_finished", None) is not None:  # kept by a run: this one? (`forget`)
            from jianmu.runtime.kept import forget
            forget(self, ctx.run_id)

    async def aclose(self) -> None:
        """Release what the node keeps from one run to the next (worker threads, sandboxes).

        `ReactiveRunner.aclose` calls it on every node of the tree; a node that runs again
        afterwards builds what it needs anew. The default keeps nothing.
        """

    @property
    def effective_constraints(self) -> Constraints:
        """The run's constraints with this node's layer merged in (tighten only).

        Merged once and kept until the run's constraints or the node's layer is replaced.
        """
        ctx = getattr(self, "ctx", None)
        run_layer = ctx.constraints if ctx is not None else None
        if run_layer is not None and self.constraints is None:
            # nothing to merge: the run's layer is already the run's own merged copy
            # (`run_constraints`), so it is shared rather than deep-copied per node (and no
            # cache entry is kept for it: one object less per node of every run)
            return run_layer
        cached = self._effective
        if cached is not None and cached[0] is run_layer and cached[1] is self.constraints:
            return cached[2]
        merged = Constraints.merge(run_layer, self.constraints)
        self._effective = (run_layer, self.constraints, merged)
        return merged

    @property
    def events(self) -> NodeEvents:
        """The run's event bus, stamping events with this node's path."""
        bus, bound = self.ctx.events, self._bound_events
        if bound is None or bound.bus is not bus or bound.node != self.path:
            bound = self._bound_events = bus.bind(self.path)  # once, not on every event
        return bound


class AsyncNode(RuntimeNode, LeanBehaviour):
    """A behaviour whose work is ``async def update_async(self) -> Status``.

    ``initialise()`` starts the coroutine as a task; ``update()`` returns RUNNING until it is
    done, then its status. The task's completion wakes the runner. ``terminate(INVALID)``
    (pre-emption or timeout) cancels the task, so its ``finally`` blocks run. An exception
    inside ``update_async`` makes the node FAILURE, is kept on ``self.error`` and is emitted as a
    ``node.failed`` event; it never escapes the runner.

    If ``update_async`` returns RUNNING, the node stays RUNNING and ``update_async`` runs again
    on a later tick: the runner polls such nodes every ``runtime.poll_interval`` seconds (and
    ticks after an approval). Prefer awaiting what you wait for: that costs nothing.
    """

    eager_start: ClassVar[bool] = True
    """Whether ``update_async``'s first step runs in the tick that enters the node (as the
    task, before it is scheduled): work that ends without waiting then reports in that tick,
    as a py_trees leaf does. The engine's model, tool and question nodes always wait (a model,
    a thread, a person) and say False: eager, they would save no tick with a real model, and
    merge a plan and its call's asking into one tick, with no point between to fork from."""

    _quiet_task: asyncio.Task[Status] | None = None
    """Its task whose end waits for the next tick rather than waking the runner: set by
    `Ticker` while the tree rests going round, until the next tick (a later task wakes it)."""

    _said: str | None = None  # the feedback the runtime wrote, an error's text (`_volatile`)
    _finished: Status | None = None  # its work's end no tick read, for the next run: `kept`
    _unwinding: asyncio.Task[Status] | None = None  # its task a stop cancelled, last

    unwinds_first: ClassVar[bool] = False  # no task beside one a stop cancelled (tool calls)
    records_own_steps: ClassVar[bool] = False
    """Whether ``update_async`` records its own steps (model turns, tool calls) in a durable
    run; otherwise the whole ``update_async`` is one step, its state writes recorded with it."""

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name or self.__class__.__name__)
        self.error: BaseException | None = None
        self._task: asyncio.Task[Status] | None = None
        self._settled: Status | None = None
        self._first: tuple[FirstStep, contextvars.Context] | None = None
        """The task's first step, run eagerly by the `update` after `initialise`, same tick."""

    async def update_async(self) -> Status:
        """The node's work. Subclasses override it; the default succeeds at once."""
        return Status.SUCCESS

    def settled(self) -> Status | None:
        """The status the node already knows it would end with, or None to run the work.

        Called on entering the node, before a task starts: a node with nothing to do (an
        executor with no pending call) returns what ``update_async`` would have returned,
        and no task or tick is spent on it. Must not start work; the default is None.
        """
        return None

    # -- py_trees lifecycle ---------------------------------------------------------------------
    def tick(self) -> Iterator[py_trees.behaviour.Behaviour]:
        """py_trees' tick, the same steps without its unread debug strings (`_ticks`)."""
        if logs_debug():
            return super().tick()
        return behaviour_tick(self)

    def stop(self, new_status: Status) -> None:
        """py_trees' stop: `terminate`, then the new status."""
        if logs_debug():
            super().stop(new_status)
            return
        self.terminate(new_status)
        self.status = new_status

    def initialise(self) -> None:
        """Start ``update_async`` as a task (unless `settled` already knows the outcome).
        Called by py_trees when the node is (re)entered."""
        settled, self._finished = self._finished or self.settled(), None
        self._settled = settled
        if settled is None:
            self._start()
        else:
            self.error = None

    def update(self) -> Status:
        """Report the task: RUNNING while it runs, then its status. Never blocks."""
        settled = self._settled
        if settled is not None:
            self._settled = None
            return settled
        task = self._task
        if task is None:  # restored, kept running by a halt, or asked to be called again:
            settled, self._finished = self._finished or self.settled(), None
            if settled is not None:  # ...its work may be done already
                return settled
            self._start()
            task = self._task
        first = self._first
        if first is not None and task is not None:
            # the task's first step now, as the task (an eager start): work that ends without
            # waiting reports in the tick that started it, as a py_trees leaf does (a priority
            # selector re-entering an async condition sees no RUNNING), and no tick waits
            self._first = None
            coro, context = first
            ended = coro.step(asyncio.get_running_loop(), task, context)
            if ended is None:
                if getattr(self, "ctx", None) is not None:
                    task.add_done_callback(self._done, context=context)
                return Status.RUNNING
            self._task = None
            if isinstance(ended.error, asyncio.CancelledError):
                return Status.INVALID  # as a task cancelled in its first step reports
            return self._outcome(ended.value, ended.error)
        if task is None or not task.done():
            return Status.RUNNING
        self._task = None
        if task.cancelled():
            return Status.INVALID
        exc = task.exception()
        return self._outcome(None if exc is not None else task.result(), exc)

    def _outcome(self, value: Any, exc: BaseException | None) -> Status:
        """The status ``update_async`` ended with: its result, or FAILURE for its exception."""
        if exc is None:
            # RUNNING means "call me again": update_async runs anew on a later tick (the
            # runner ticks such nodes every runtime.poll_interval, and after an approval)
            try:
                return coerce_status(value)
            except TypeError as bad:
                exc = bad
        if not isinstance(exc, Exception):
            raise exc
        return self._failed(exc)

    def terminate(self, new_status: Status) -> None:
        """Cancel the task when pre-empted (``INVALID``). Subclasses must call ``super()``."""
        task, self._task = self._task, None
        self._first = None  # never stepped: the cancel below stops it before it starts
        if task is None:
            return
        if task.done():
            if not task.cancelled():
                task.exception()  # a failure nobody will report now: asyncio must not log it
                runner = getattr(getattr(self, "ctx", None), "runner", None)
                if getattr(runner, "halting", False):  # its work done, unread: kept (`kept`)
                    from jianmu.runtime.kept import keep  # stopped runs only
                    keep(self, task, runner, coerce_status)
            return
        first = task.get_coro()
        waits = first.waits if isinstance(first, FirstStep) else NOT_YET
        task.cancel()  # the task's own account (cancelling()), and what it waits on
        if waits is not NOT_YET and isinstance(waits, asyncio.Future):
            # stepped eagerly, the task not yet holding what its coroutine waits on: cancelled
            # as the task's cancel would (a gather's children), its outcome read once it ends
            waits.cancel()
            waits.add_done_callback(read_outcome)
        if isinstance(first, FirstStep):
            # the CancelledError reaches the coroutine in the tick that stops the node, as a
            # py_trees leaf's ``terminate`` runs in it (its handlers in py_trees' order of stops)
            first.cancel(task)
        self._unwinding = task  # the node's next task waits for it (`after_unwound`)
        tracked = getattr(getattr(self, "ctx", None), "cancelled_tasks", None)
        if tracked is not None:
            tracked.add(task)

    @property
    def in_flight(self) -> asyncio.Task[Status] | None:
        """The task running ``update_async``, while it has not finished."""
        task = self._task
        return task if task is not None and not task.done() else None

    @property
    def wants_tick(self) -> bool:
        """Whether the node returned RUNNING and waits for a tick to run update_async again."""
        return self.status is Status.RUNNING and self._task is None

    # -- internals ------------------------------------------------------------------------------
    def _start(self) -> None:
        # the task runs update_async itself (no wrapper coroutine held for the whole work):
        # `update` reads its outcome, an exception included
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise _no_loop(self) from None
        self.error = None
        ctx = getattr(self, "ctx", None)
        steps = getattr(ctx, "steps", None)
        work = (self._as_step(steps) if steps is not None and not self.records_own_steps
                else self.update_async())
        previous, self._unwinding = self._unwinding, None
        if self.unwinds_first and previous is not None and not previous.done():
            work = eager.after_unwound(previous, work)  # type: ignore[arg-type]
        # the task's own copy of the context also serves its done callback (else copied again)
        context = contextvars.copy_context()
        name = f"jianmu:{self.path or self.name}"
        if not self.eager_start:
            if not hasattr(work, "send"):  # a plain def: its node fails saying so, as eager
                work = refused(work)
            task = self._task = loop.create_task(work, name=name, context=context)
            if ctx is not None:
                task.add_done_callback(self._done, context=context)
            return
        first = FirstStep(work, context)
        task = self._task = loop.create_task(first, name=name, context=context)
        if first.started:  # the loop's task factory began it (3.12's eager one)
            if ctx is not None:
                task.add_done_callback(self._done, context=context)
            return
        self._first = (first, context)  # `update`, next in this tick, runs its first step

    def _done(self, task: asyncio.Task[Status]) -> None:
        """Wake the runner to report the finished task, unless a tick already has: a task
        that wrote the state woke it then, and the tick took the result before this runs."""
        if self._task is task and self._quiet_task is not task:
            self.ctx.wake()

    def _failed(self, exc: Exception) -> Status:
        """``update_async`` raised: FAILURE, the error kept and emitted, never raised."""
        self.error = exc
        # the runtime's own words, not the node's: `Ticker` tells no change by them
        self.feedback_message = self._said = f"{type(exc).__name__}: {exc}"
        ctx = getattr(self, "ctx", None)
        if ctx is not None:
            ctx.events.emit(
                "node.failed",
                node=self.path,
                error=f"{type(exc).__name__}: {exc}",
                error_type=type(exc).__name__,
            )
        return Status.FAILURE

    async def _as_step(self, steps: StepRecorder) -> Status:
        """Run ``update_async`` as one durable step: its status and the values it wrote."""
        manager = self.state_manager
        ran = False

        async def body() -> tuple[str, dict[str, Any]]:
            nonlocal ran
            ran = True
            written: set[str] = set()
            unsubscribe = manager.subscribe(written.update)
            try:
                work = self.update_async()
                if not hasattr(work, "send"):  # a plain def: said as a plain run says it
                    raise not_a_coroutine(work)
                status = coerce_status(await work)
            finally:
                unsubscribe()
            # "*" marks a whole restore or clear, which a node's own step never does
            return status.name, {k: _read(manager, k) for k in sorted(written) if k != "*"}

        name, writes = await steps.run(f"node:{self.path or self.name}", body)
        if not ran:  # replayed: the node's writes come back from the record
            for key, value in writes.items():
                namespace, _, field = key.rpartition("/")
                view = manager.scope(namespace) if namespace else manager.root
                view.replace({field: value})
        return Status[name]


def _read(manager: StateManager, key: str) -> Any:
    namespace, _, field = key.rpartition("/")
    view = manager.scope(namespace) if namespace else manager.root
    return view.get(field)


def bound_nodes(root: Behaviour) -> list[Behaviour]:
    """Every node of ``root`` that a runner binds (not the children a node has not compiled
    yet), parents first: compared with an earlier list, it tells a tree changed since."""
    nodes, stack = [], [root]
    while stack:
        nodes.append(node := stack.pop())
        if node.children and getattr(node, "compiled", True) is not False:
            stack.extend(node.children)
    return nodes


async def close_tree(root: Any) -> None:
    """Await ``aclose()`` of every node of ``root`` that has one (each node once)."""
    for node in root.iterate():
        closer = getattr(node, "aclose", None)
        if closer is not None:
            await closer()


_INFO = _py_trees_logging.Level.INFO
STATUSES = tuple(Status)
"""The valid results of ``update()`` (a tuple: membership must not hash what it is given)."""


def logs_debug() -> bool:
    """Whether py_trees logs at its debug level (then the nodes keep py_trees' own methods)."""
    return _py_trees_logging.level < _INFO  # asked on every tick and stop of every node


def checked(node: Behaviour, status: Status) -> Status:
    """``status``, or INVALID (logged as py_trees logs it) when it is not a status."""
    if status in STATUSES:
        return status
    node.logger.error(
        f"A behaviour returned an invalid status, setting to INVALID [{status}][{node.name}]"
    )
    return Status.INVALID


def behaviour_tick(node: Behaviour) -> Iterator[Behaviour]:
    """`Behaviour.tick`: initialise when not running, update, stop when done, yield the node."""
    if node.status is not Status.RUNNING:
        node.initialise()
    new_status = checked(node, node.update())
    if new_status is not Status.RUNNING:
        node.stop(new_status)
    node.status = new_status
    yield node


# -- when to tick: py_trees' loop would tick at a fixed rate, an event-driven runner must
# find the ticks no task or state change brings (docs/design.md says when the runner ticks)
DEADLINE_SLACK = 0.001
"""Seconds past a `Timeout`'s ``finish_time`` at which to wake: py_trees' Timeout fires once
``monotonic() > finish_time``, and the loop's clock may round down."""


class TickPlan(NamedTuple):
    """What the last tick leaves for the next one."""

    again: bool
    """The next tick would change the tree by itself: take it at once."""
    poll: bool
    """A running leaf learns what it does only when ticked: tick every poll interval."""
    due: float | None
    """The earliest ``finish_time`` (``time.monotonic``) of a running `Timeout`."""

    def wait(self, remaining: float | None, poll_interval: float) -> float | None:
        """How long to sleep on the wake event at most (None: until woken)."""
        wait = remaining
        if self.poll:
            wait = poll_interval if wait is None else min(poll_interval, wait)
        if self.due is not None:
            until = self.due - time.monotonic() + DEADLINE_SLACK
            wait = until if wait is None else min(until, wait)
        return wait


IDLE_PLAN = TickPlan(again=False, poll=False, due=None)
"""Nothing to do until woken (one shared plan: most ticks end so)."""


# what the planning asks of a node's class, found once per class: py_trees' classes are
# ABCMeta, whose isinstance() costs about half a microsecond, on every node of every tick
_ASYNC, _RUNTIME, _TIMEOUT, _DECORATOR, _PARALLEL, _SEQUENCE, _GUARD = 1, 2, 4, 8, 16, 32, 64
_TALLY, _REPEAT, _SELECTOR, _ONESHOT = 128, 256, 512, 1024
_KINDS: dict[int, int] = {}
"""By the class's id, forgotten as the class goes (a finalizer): a reloaded skill's tree module
makes new classes per run, and keyed by the class itself they stayed, with their modules."""


def _kind(cls: type) -> int:
    """The flags of ``cls``, remembered."""
    kind = _KINDS.get(id(cls))
    if kind is not None:
        return kind
    kind = 0
    for flag, base in (
        (_ASYNC, AsyncNode), (_RUNTIME, RuntimeNode), (_TIMEOUT, Timeout),
        (_DECORATOR, Decorator), (_PARALLEL, Parallel), (_SEQUENCE, (Sequence, Selector)),
        (_GUARD, EternalGuard), (_TALLY, Count), (_REPEAT, Repeat), (_SELECTOR, Selector),
        (_ONESHOT, OneShot),
    ):
        if issubclass(cls, base):
            kind |= flag
    if issubclass(cls, (Decorator, Composite)):  # a user's own tick or update, if any, may
        for klass in cls.__mro__:  # read anything (a flag, the clock): polled, as a guard
            if klass.__module__.partition(".")[0] in ("py_trees", "jianmu"):
                break
            if "tick" in vars(klass) or "update" in vars(klass):
                kind |= _GUARD
                break
    _KINDS[id(cls)] = kind  # its id is not reused before the finalizer has run
    weakref.finalize(cls, _KINDS.pop, id(cls), None).atexit = False
    return kind


class WakeEvent:
    """`asyncio.Event` for a runner's loop and its one sleeper at a time: ``set``, ``clear``,
    ``is_set`` and ``wait``, where ``wait()`` hands out one future, not a coroutine, and no
    deque of waiters is kept. A runner sleeps on it after most ticks, with thousands of runs
    in flight: each object less per run is one less for the cyclic collector to walk."""

    __slots__ = ("_loop", "_set", "_waiter", "asked")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._set = self.asked = False  # asked: by `ReactiveRunner.wake`, not a state write
        self._waiter: asyncio.Future[bool] | None = None

    def is_set(self) -> bool:
        """Whether it was set since the last `clear`."""
        return self._set

    def set(self) -> None:
        """Set it and end the wait of whoever waits (on the loop's thread only)."""
        self._set = True
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(True)

    def clear(self) -> None:
        """Unset it."""
        self._set = self.asked = False

    def wait(self) -> asyncio.Future[bool]:
        """A future done (True) once it is set; at once if it is. A second waiter meanwhile
        gets the same future, so cancelling it (its sleeper cancelled) ends both waits; the
        next ``wait()`` makes a new one."""
        waiter = self._waiter
        if waiter is None or waiter.done():
            waiter = self._loop.create_future()
            if self._set:
                waiter.set_result(True)
            else:
                self._waiter = waiter
        return waiter


def expire(waiter: asyncio.Future[bool]) -> None:
    """End a `WakeEvent.wait` that timed out (False), unless it ended already."""
    if not waiter.done():
        waiter.set_result(False)


async def timed_wait(event: WakeEvent, loop: asyncio.AbstractEventLoop, wait: float) -> bool:
    """Sleep on ``event`` until it is set (True) or ``wait`` seconds have passed (False)."""
    waiter = event.wait()
    timer = loop.call_later(max(wait, 0.0), expire, waiter)
    try:
        return await waiter or event.is_set()
    finally:
        timer.cancel()


class Ticker:
    """Ticks a tree and plans the next tick; keeps what it needs to see the tree at rest."""

    def __init__(self, poll_interval: float = 0.05) -> None:
        self.poll_interval = poll_interval
        """A round through tasks faster than this rests and is polled at it (`Round`)."""
        # a clock that stops while a round through tasks rests: how long a round took
        self._rested = 0.0  # seconds that rounds rested, in all
        self._rest_began: float | None = None  # when the resting round's wait began
        self._at_rest: AtRest | None = None  # the last `CYCLE` ticks taken at once, once any
        self._volatile: set[str] = set()  # the last tick's feedback that changes by itself
        self._rounds: list[Round] = []  # the last `ROUNDS` ticks taken at once
        self._quiet: list[AsyncNode] = []  # started when a round rested: wake no more
        self._waits = 0  # ticks after which the runner waited (a task, a wake-up)
        self._nodes: int | None = None  # the tree's size, once a round needed it
        self.flying = False  # the last tick started an eager leaf's task: `ready_first`

    def reset(self) -> None:
        """Forget the last ticks (a new run starts)."""
        self._at_rest = self._rest_began = self._nodes = None
        self._rounds.clear()
        self._wake_again()

    def _wake_again(self) -> None:
        """Let the tasks quietened by the last tick wake the runner again."""
        for node in self._quiet:
            node._quiet_task = None
        self._quiet.clear()

    def tick(self, root: Behaviour, woken: asyncio.Event | WakeEvent) -> TickPlan:
        """Tick ``root`` once and plan the next tick.

        The next tick is due at once after a node returned RUNNING with no running child (a
        `Retry` after a failed attempt, a `Condition` not yet met), and after an async leaf
        or a subtree ended that its parent ticks again (a sequence without memory re-enters
        its earlier children), as py_trees' loop would tick them. A tick that leaves every
        status and feedback as the last did (`ticks_back`) finds the tree at rest: polled
        if an async node, a plain leaf or a shut guard was re-entered (`_restarts`), else
        it waits for a wake-up (the runtime's own leaves give the same results until the
        state changes). A running plain leaf or `EternalGuard` is polled too. A tick taken at
        once that finds the tree as at one of the last such ticks, with a wait for a task
        between, finds a round through tasks: polled too (`Round`). Only the nodes this tick
        visited are looked at for the plan: every running node is among them."""
        if self._quiet:
            self._wake_again()
        if self._rest_began is not None:  # a round rested until now
            self._rested += time.monotonic() - self._rest_began
            self._rest_began = None
        visited = list(root.tick())  # as tick_once(), keeping what it visited; statuses after
        # woken by the tick itself (a node wrote the state; a task's or a thread's wake comes
        # through the loop): the next tick sees the writes at once while they change the tree;
        # at rest, polled at py_trees' rate (a node writing at every tick kept a core busy)
        wrote, asked = woken.is_set(), getattr(woken, "asked", False)
        woken.clear()
        if asked:  # a node asked for the next tick (`wake()` in its tick): at once, as asked
            return TickPlan(True, False, None)
        # a node RUNNING with no running child, a selector stopping earlier ones, an ended
        # node that its parent ticks again (it starts anew): the next tick changes the tree
        again = poll = flying = False
        loops = False  # a Repeat without end starts its child's next run
        due: float | None = None
        kinds = _KINDS
        for node in visited:
            cls = type(node)
            kind = kinds.get(id(cls))
            if kind is None:
                kind = _kind(cls)
            if node.status is Status.RUNNING:
                children = node.children
                if children:
                    # a decorator's child, a composite's current one: most often the running one
                    first = (children[0] if len(children) == 1
                             else getattr(node, "current_child", None))
                    if (not again or kind & _REPEAT) and (
                            first is None or first.status is not Status.RUNNING):
                        for child in children:
                            if child.status is Status.RUNNING:
                                break
                        else:
                            again = True
                            # a Repeat without end between two runs loops on purpose (its
                            # successes, left out of what is compared, tell the runs apart)
                            loops = loops or bool(
                                kind & _REPEAT and node.num_success < 1  # type: ignore[attr-defined]
                                and children[0].status is Status.SUCCESS)
                    if not again and kind & _SELECTOR and node.memory:  # type: ignore[attr-defined]
                        again = _clears_before(node, first)
                    if kind & _TIMEOUT:
                        finish = node.finish_time  # type: ignore[attr-defined]
                        due = finish if due is None or finish < due else due
                    elif kind & _GUARD:
                        # its condition is checked at every tick and may read anything (a
                        # device, py_trees' blackboard), not only the state, whose writes
                        # wake the runner: polled, as py_trees' loop would tick it (so is a
                        # user's own composite or decorator that ticks or updates itself)
                        poll = True
                elif kind & _ASYNC:
                    poll = poll or node.wants_tick  # type: ignore[attr-defined]
                    if node.eager_start:  # type: ignore[attr-defined]
                        flying = flying or started_now(node)
                elif not kind & _RUNTIME:
                    # a plain py_trees leaf (a ``Timer``): only a tick tells what it does
                    poll = True
            elif not again and (node.children or _restarts(node, kind)):
                # ended, and re-entered next tick: its subtree starts anew, and so does an
                # async or a plain py_trees leaf; a leaf of the runtime's own ended gives the
                # same result until the state changes: no tick for it
                again = ticked_again(node)
        self.flying = flying
        if not (again or wrote):
            self._at_rest = None
            self._waits += 1
            return IDLE_PLAN if not poll and due is None else TickPlan(False, poll, due)
        seen = _seen(visited, self._volatile)
        at_rest = self._at_rest = self._at_rest or AtRest()
        back, statuses_now = at_rest.back(seen, root, _statuses)
        if back is not None:
            restarts = wrote or poll or (statuses_now is not None and at_rest.leafy(
                seen, back)) or any(  # what any tick of the cycle re-entered
                status is not Status.RUNNING and _restarts(node, _kind(type(node)))
                for ticked in (seen, *at_rest.seen[:back - 1])
                for node, status, _ in ticked
            )
            # a cycle is of ticks taken at once: once the runner waits (a task, a poll), the
            # ticks before the wait are no part of the next one (a tree polled at rest kept
            # them, and a selector's action that ended a second time, the tree as at its first
            # end, rested a poll interval before the selector re-entered its earlier child)
            at_rest.keep(seen)
            if restarts:
                return self._rest(visited, due)
            self._waits += 1
            return TickPlan(False, False, due)
        at_rest.push(seen, statuses_now)
        if loops:
            self._rounds.clear()
            return TickPlan(True, poll, due)
        rounds = self._rounds
        waits = self._waits
        statuses: list[Any] | None = None
        found: int | None = None
        # a round that took a poll interval or more (a check that sleeps 0.5 s, an action
        # ending under SuccessIsRunning) goes round no faster than polling would: ticked at
        # once, as py_trees' loop ticks it, not a poll interval late (its next start once
        # came after another leaf's end that py_trees' loop saw after it); the time a round
        # spent resting, waiting for its poll, is not the round's
        now = time.monotonic() - self._rested
        since = now - self.poll_interval
        for i, then in enumerate(rounds):
            if then.waits == waits or then.at <= since or then.seen != seen:
                continue
            if statuses is None:  # the nodes this tick left unvisited, if any, as they are
                if len({id(node) for node in visited}) == self._size(root):
                    found = i
                    break
                statuses = _statuses(root)
            if then.statuses == statuses:
                found = i
                break
        if found is not None:
            # back where it was at a tick taken at once, with a wait for a task between: the
            # tree goes round through tasks (a check re-entered before a running action, its
            # task ending after a turn of the loop, pre-empts the action, which starts again
            # once the check failed; a Retry of such a check; "wait until" it passes). Ticked
            # at once, that went round at the loop's speed, a full core: polled, as py_trees'
            # loop goes round at its rate. (Ticks all taken at once are `ticks_back`'s: a node
            # they leave unvisited may move on unseen, a leaf running again for the third time)
            at_rest.keep(seen)  # as above: the next cycle starts after the wait
            rounds[found] = rounds[found]._replace(at=now)  # the next round is timed from here
            self._rest_began = now + self._rested
            return self._rest(visited, due)
        rounds[:ROUNDS] = [Round(seen, statuses, waits, now), *rounds[:ROUNDS - 1]]
        return TickPlan(True, poll, due)

    def _size(self, root: Behaviour) -> int:
        """How many nodes the tree has (counted once a run)."""
        size = self._nodes
        if size is None:
            size = self._nodes = sum(1 for _ in root.iterate())
        return size

    def _rest(self, visited: list[Behaviour], due: float | None) -> TickPlan:
        """Poll a tree found going round. The tasks this tick started (a check entered
        again) end after a turn of the loop or a thread's hop: waking the runner, they would
        take it round again at once; they wait for the poll's tick instead (which lets them
        wake it again). Tasks running from before (an action) still wake it when they end."""
        self._waits += 1
        quiet = self._quiet
        for node in visited:
            if node.status is Status.RUNNING and _kind(type(node)) & _ASYNC:
                task = node._task  # type: ignore[attr-defined]
                if task is not None and unstepped(task):
                    node._quiet_task = task  # type: ignore[attr-defined]
                    quiet.append(node)  # type: ignore[arg-type]
        return TickPlan(False, True, due)


def _statuses(root: Behaviour) -> list[Any]:
    """The status of every node under ``root`` (and a `OneShot`'s final one), in one walk."""
    found: list[Any] = []
    stack = [root]
    while stack:
        node = stack.pop()
        found.append(node.status)
        children = node.children
        if children:
            stack.extend(children)
            if _kind(type(node)) & _ONESHOT:  # done, it returns its outcome untouched
                found.append(node.final_status)  # type: ignore[attr-defined]
    return found


def _seen(visited: list[Behaviour], before: set[str]) -> list[tuple[Behaviour, Status, str]]:
    """Each visited node, its status and its feedback without what changes at every tick by
    itself (a running `Timeout`'s time left, a `Count`'s tallies, a `Repeat` without end's
    successes, a running leaf's text), also where a decorator quotes it as it was a tick ago
    (``before``, updated: a stopped Count tallies after its parent quoted it; RunningIsSuccess
    over Count over a leaf, re-entered by a parallel, never rested, a full core)."""
    volatile = {
        node.feedback_message for node in visited
        if node.feedback_message and _volatile(node)
    }
    steady = volatile | before
    before.clear()
    before.update(volatile)
    return [(node, node.status, _steady(node.feedback_message, steady)) for node in visited]


def _restarts(node: Behaviour, kind: int) -> bool:
    """Whether ``node`` (of `_kind` ``kind``), ended and re-entered, may do what no status
    shows: an async leaf's task, a plain py_trees leaf's own work (a ``Timer``), a shut
    `EternalGuard`'s check of what it reads (it opens with no state write). A tree at rest
    with such a node is polled, as py_trees' loop ticks it; the runtime's own synchronous
    leaves give the same result until the state changes."""
    return bool(kind & (_ASYNC | _GUARD) or not (kind & _RUNTIME or node.children))


def _clears_before(selector: Behaviour, current: Behaviour | None) -> bool:
    """Whether the next tick of ``selector`` (running, with memory) stops a child before
    ``current``, the one it runs: py_trees' does, to each that is not INVALID (one that
    failed before), a change of the tree that no task brings."""
    for child in selector.children:
        if child is current:
            return False
        if child.status is not Status.INVALID:
            return True
    return False


def _volatile(node: Behaviour) -> bool:
    """Whether ``node``'s feedback changes on every tick by itself, with nothing it will do
    changed: a running `Timeout`'s time left, a `Count`'s tallies, the successes of a
    `Repeat` without end (``num_success`` under 1: no count of them ends it), whatever a
    running leaf says, the text of the error an async leaf ended with (the runtime wrote it,
    not the node: a request id or a time in it changed every run, and a check re-entered
    before a running action spun the runner at a full core)."""
    kind = _kind(type(node))
    if kind & (_TIMEOUT | _TALLY):
        return True
    if kind & _ASYNC and node.feedback_message is node._said:  # type: ignore[attr-defined]
        return True  # the text of the error it ended with: the runtime's, not the node's
    if kind & _REPEAT:
        return bool(node.num_success < 1)  # type: ignore[attr-defined]
    return not node.children and node.status is Status.RUNNING


def _steady(message: str, volatile: set[str]) -> str:
    """``message`` without the texts that change on every tick (`Ticker.tick`)."""
    for text in volatile:
        if text in message:
            message = message.replace(text, "")
    return message


def ticked_again(node: Behaviour) -> bool:
    """Whether the next tick, with nothing else changed, ticks ``node`` (ended) again.

    Follows py_trees' composites: a decorator ticks its child on every tick; a sequence or
    selector without memory ticks again the children before the one it runs, with memory
    only that one; a parallel ticks every child but, when it synchronises, the succeeded
    ones. A parent that ended is ticked again, so re-entered, when its own parent ticks it.
    Unknown composites are assumed to tick the child: one spare tick at worst.
    """
    while True:
        parent = node.parent
        if parent is None:  # the root ended: the run is over
            return False
        if parent.status is not Status.RUNNING:
            node = parent
            continue
        cls = type(parent)
        kind = _KINDS.get(id(cls))
        if kind is None:
            kind = _kind(cls)
        if kind & _DECORATOR:
            return True
        if kind & _PARALLEL:
            policy = parent.policy  # type: ignore[attr-defined]
            return not (policy.synchronise and node.status is Status.SUCCESS)
        if kind & _SEQUENCE:
            current = parent.current_child  # type: ignore[attr-defined]
            if current is None or current is node:
                return True
            if parent.memory:  # type: ignore[attr-defined]
                return False
            children = parent.children
            return children.index(node) < children.index(current)
        return True
