"""`ReactiveRunner`: ticks a tree only when something changed; `RunResult` says how a run ended."""

from __future__ import annotations

import asyncio
import enum
import threading
import time
import uuid
from collections.abc import Iterable
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from py_trees.behaviour import Behaviour
from py_trees.common import Status

from jianmu.config import AppConfig, default_config
from jianmu.constraints import Constraints
from jianmu.errors import CheckpointError
from jianmu.runtime.async_node import AsyncNode, RuntimeNode, close_tree
from jianmu.runtime.context import ApprovalRequest, Interaction, RunContext, run_constraints
from jianmu.runtime.events import (
    GEN_AI_AGENT_NAME,
    GEN_AI_OPERATION_NAME,
    JIANMU_RUN_ID,
    EventBus,
    get_tracer,
)
from jianmu.state import StateManager

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from jianmu.runtime.checkpoint import Checkpointer

__all__ = (
    "ReactiveRunner",
    "RunResult",
    "RunStatus",
)


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

    @property
    def ok(self) -> bool:
        """Whether the root succeeded."""
        return self.status is RunStatus.SUCCESS


_CHECKPOINT_VERSION = 1
_NO_ROLES: frozenset[str] = frozenset()


@dataclass
class _Outcome:
    status: RunStatus
    error: str | None = None
    pending: list[ApprovalRequest] = field(default_factory=list)


class ReactiveRunner:
    """Ticks a py_trees tree when something changes: a task ends, the state changes, an
    approval arrives, or `wake` is called. It never polls.

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
    """

    is_sub_run = False
    """True for the run of a sub-agent inside another run (it shares the caller's counts)."""

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
    ) -> None:
        self.root = root
        self.state = state_manager if state_manager is not None else StateManager()
        self.config = config if config is not None else default_config()
        self.checkpointer = checkpointer
        self.checkpoint_every = checkpoint_every or self.config.runtime.checkpoint_every
        wake = self.wake  # one bound method for both
        self.interaction = Interaction(on_change=wake)
        run_id = run_id or uuid.uuid4().hex[:12]
        self.ctx = RunContext(
            config=self.config,
            constraints=run_constraints(self.config.constraints(), constraints),
            run_id=run_id,
            events=EventBus(run_id),
            interaction=self.interaction if interactive else None,
            tracer=get_tracer(tracer_provider, enabled=self.config.telemetry.enabled),
            user_roles=frozenset(user_roles) if user_roles else _NO_ROLES,
            wake=wake,
            extras=dict(extras or {}),
            runner=self,
        )
        self.ticks = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._wake_event: asyncio.Event | None = None
        self._cancel_requested = False
        self._running = False
        self._is_set_up = False
        self._keys: dict[int, str] = {}
        self._restored_nodes: dict[str, dict[str, Any]] = {}
        self.state.subscribe(self._state_changed)
        observe = getattr(checkpointer, "observe", None)
        if callable(observe):  # a checkpointer that keeps every tick (`SQLiteCheckpointer`)
            observe(self)

    def _state_changed(self, keys: frozenset[str]) -> None:
        self.wake()

    def _stop_listening(self) -> None:
        """Stop waking on state changes: for a runner that shares its state with a
        longer-lived one (a sub-agent's), once it is done."""
        self.state.unsubscribe(self._state_changed)

    # -- public API ------------------------------------------------------------------------------
    @property
    def run_id(self) -> str:
        """The run's id."""
        return self.ctx.run_id

    @property
    def pending(self) -> list[ApprovalRequest]:
        """Approval requests waiting for a decision."""
        return self.interaction.pending

    def wake(self) -> None:
        """Make the runner tick again soon; safe to call from any thread."""
        loop, event = self._loop, self._wake_event
        if loop is None or event is None:
            return
        if threading.get_ident() == self._loop_thread:
            event.set()
            return
        try:
            loop.call_soon_threadsafe(event.set)
        except RuntimeError:  # the loop has closed: nothing to wake
            pass

    def approve(
        self, request_id: str, message: str | None = None, *,
        arguments: dict[str, Any] | None = None,
    ) -> None:
        """Approve a pending request; ``await run()`` then continues the same tree.

        With ``arguments``, a person edits the call: it runs with these instead of the model's,
        once they fit the tool's input schema (checked here) and the guard's policy (checked
        again before the call runs; a denied edit does not run). The decision, its arguments
        and ``edited=True`` are recorded and checkpointed, and the model's observation says
        that a person changed the call.

        Raises:
            ApprovalEditError: the edited arguments do not fit; nothing was recorded.
            InteractionError: no such request was asked, it was already decided, or it is a
                question (`answer` it).
        """
        self.interaction.approve(request_id, message, arguments=arguments)
        if arguments is None:
            self.ctx.events.emit("interaction.approved", request_id=request_id)
        else:
            self.ctx.events.emit("interaction.approved", request_id=request_id, edited=True,
                                 arguments=arguments)

    def reject(self, request_id: str, message: str | None = None) -> None:
        """Reject a pending request; ``message`` reaches the model.

        Raises:
            InteractionError: no such request was asked, or it was already decided.
        """
        self.interaction.reject(request_id, message)
        self.ctx.events.emit("interaction.rejected", request_id=request_id, message=message)

    def answer(self, request_id: str, text: str) -> None:
        """Answer a question (`ApprovalRequest.kind` ``question``); the asker reads ``text``.

        Raises:
            InteractionError: no such request was asked, it was already decided, or it asks
                for approval (approve or reject it).
        """
        self.interaction.answer(request_id, text)
        self.ctx.events.emit("interaction.answered", request_id=request_id, answer=text)

    def send(self, message: Any, *, namespace: str | None = None) -> None:
        """Add the user's next message to the conversation; the next ``run()`` answers it.

        The follow-up turn of a chat: ``message`` (text, a `jianmu.llm.Message` or its dict in
        the OpenAI shape) is appended to ``messages`` and the previous turn's
        ``final_answer``, ``final_output`` and ``done`` are cleared, so a result read after
        the next run is that run's. Works the same on a runner restored from a checkpoint in
        another process. ``namespace`` is where the agent's conversation lives, if not at the
        root.

        Raises:
            RuntimeError: the run is going, or waits for approval (decide that first).
        """
        if self._running:
            raise RuntimeError("send() while the run is going; await run() first")
        if self.interaction.has_pending:
            waiting = ", ".join(r.id for r in self.interaction.pending)
            raise RuntimeError(
                f"the run waits for approval ({waiting}); approve or reject before sending more"
            )
        if isinstance(message, str):
            message = {"role": "user", "content": message}
        view = self.state.scope(namespace) if namespace else self.state.root
        view.append_port_messages(message)
        cleared = {
            key: value for key, value in
            (("final_answer", None), ("final_output", None), ("done", False))
            if self.state.accepts(key) and view.get(key) not in (None, False)
        }
        if cleared:
            view.replace(cleared)
        self.ctx.events.emit("run.message", namespace=namespace)

    def cancel(self) -> None:
        """Stop the run at the next wake-up with status CANCELLED; thread-safe."""
        self._cancel_requested = True
        self.wake()

    def run_sync(self, max_ticks: int | None = None, timeout: float | None = None) -> RunResult:
        """Run to completion from synchronous code.

        Raises:
            RuntimeError: called inside a running event loop (use ``await run()`` there).
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.run(max_ticks=max_ticks, timeout=timeout))
        raise RuntimeError("run_sync() cannot be called from a running event loop; await run()")

    async def run(self, max_ticks: int | None = None, timeout: float | None = None) -> RunResult:
        """Tick until the root finishes, the run suspends, times out or is cancelled."""
        if self._running:
            raise RuntimeError("this runner is already running")
        self._running = True
        self._cancel_requested = False
        if not self.is_sub_run:  # the count of sub-agent runs is per run of the whole tree
            self.ctx.agent_runs[0] = 0
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._wake_event = asyncio.Event()
        started = time.monotonic()
        ticks_before = self.ticks
        try:
            self._setup_once()
            with self._span() as run_span:
                outcome = await self._loop_until_done(max_ticks, timeout, started)
                if run_span is not None:
                    run_span.set_attribute("jianmu.run.status", outcome.status.value)
        finally:
            await self._drain_cancelled()
            self._running = False
            self._wake_event = None
        if outcome.status is not RunStatus.SUSPENDED:
            await self._close_resources()
        if self.checkpointer is not None:
            self.save_checkpoint(outcome.status.value)
        self.ctx.events.emit("run.finished", status=outcome.status.value, error=outcome.error)
        return RunResult(
            status=outcome.status,
            run_id=self.run_id,
            ticks=self.ticks - ticks_before,
            duration=time.monotonic() - started,
            pending=tuple(outcome.pending),
            error=outcome.error,
            output=self.state.get("final_output"),  # an agent's typed answer, if it gave one
        )

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

    async def __aenter__(self) -> ReactiveRunner:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- checkpoints -----------------------------------------------------------------------------
    def save_checkpoint(self, status: str = "running") -> None:
        """Save the state, every node's status and the pending requests."""
        if self.checkpointer is None:
            raise CheckpointError("this runner has no checkpointer")
        nodes = {
            key: {"name": node.name, "status": node.status.name}
            for key, node in self._walk(self.root, "0")
        }
        self.checkpointer.save(
            self.run_id,
            {
                "version": _CHECKPOINT_VERSION,
                "run_id": self.run_id,
                "status": status,
                "tree": self.root.name,
                "ticks": self.ticks,
                "state": self.state.snapshot(),
                "nodes": nodes,
                "interaction": self.interaction.snapshot(),
                "user_roles": sorted(self.ctx.user_roles),
                "saved": time.time(),
            },
        )

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
        ``state_manager`` should have the run's schema.

        Raises:
            CheckpointError: no checkpoint for ``run_id``, or the tree does not match it.
        """
        data = checkpointer.load(run_id)
        if data is None:
            raise CheckpointError(f"no checkpoint for run {run_id!r}")
        if data.get("version") != _CHECKPOINT_VERSION:
            raise CheckpointError(f"unsupported checkpoint version {data.get('version')!r}")
        state = state_manager if state_manager is not None else StateManager()
        state.restore(data["state"])
        kwargs.setdefault("user_roles", data.get("user_roles", ()))
        runner = cls(root, state, checkpointer=checkpointer, run_id=run_id, **kwargs)
        runner.interaction.restore(data.get("interaction", {}))
        runner.ticks = int(data.get("ticks", 0))
        runner._restored_nodes = dict(data.get("nodes", {}))
        runner._setup_once()
        return runner

    # -- binding ---------------------------------------------------------------------------------
    def bind_subtree(self, node: Behaviour) -> None:
        """Bind ``node`` and everything below it to this run (state, context, paths).

        Nodes that compile children lazily call this after compiling, so the children get the
        state, the context and, after a restore, their checkpointed statuses.
        """
        key = self.node_key(node)
        parent = node.parent
        if id(node) in self._keys or parent is None:
            path = getattr(node, "path", "") or node.name
            parent_path, _, label = path.rpartition("/")
        else:  # a freshly compiled child: its place follows from its parent's
            parent_path, label = getattr(parent, "path", "") or parent.name, node.name
        self._bind(node, key, parent_path, label)

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
            if restored["name"] != node.name:
                raise CheckpointError(
                    f"the tree does not match the checkpoint: node {key} is {node.name!r}, "
                    f"the checkpoint has {restored['name']!r}"
                )
            node.status = Status[restored["status"]]
        children = self._children(node)
        names = [c.name for c in children]
        for index, child in enumerate(children):
            # paths must be unique: siblings sharing a name get their index
            child_label = child.name if names.count(child.name) == 1 else f"{child.name}[{index}]"
            self._bind(child, f"{key}/{index}", path, child_label)
        if restored is not None and node.status is Status.RUNNING and node.children:
            self._resume_composite(node)

    @staticmethod
    def _resume_composite(node: Behaviour) -> None:
        """After a restore, point a running composite at the child it was running."""
        running = [c for c in node.children if c.status is Status.RUNNING]
        if hasattr(node, "current_child"):
            if running:
                node.current_child = running[0]
            else:
                unfinished = [c for c in node.children if c.status is not Status.SUCCESS]
                node.current_child = unfinished[0] if unfinished else node.children[-1]

    @staticmethod
    def _children(node: Behaviour) -> list[Behaviour]:
        """A node's real children: none yet for a node that compiles them on first tick."""
        if getattr(node, "compiled", True) is False:
            return []
        return list(node.children)

    def _walk(self, node: Behaviour, key: str) -> Iterable[tuple[str, Behaviour]]:
        yield key, node
        for index, child in enumerate(self._children(node)):
            yield from self._walk(child, f"{key}/{index}")

    def _setup_once(self) -> None:
        if self._is_set_up:
            return
        self._bind(self.root, "0", "", self.root.name)
        self.root.setup_with_descendants()
        self._is_set_up = True

    # -- the loop --------------------------------------------------------------------------------
    async def _loop_until_done(
        self, max_ticks: int | None, timeout: float | None, started: float
    ) -> _Outcome:
        if self.interaction.has_pending:
            return _Outcome(RunStatus.SUSPENDED, pending=self.interaction.pending)
        deadline = started + timeout if timeout is not None else None
        ticks = 0
        assert self._wake_event is not None
        try:
            while True:
                if self._cancel_requested:
                    self._stop_tree()
                    return _Outcome(RunStatus.CANCELLED, "the run was cancelled")
                self._wake_event.clear()
                try:
                    self.root.tick_once()
                except Exception as exc:  # a synchronous behaviour raised: fail the run cleanly
                    self._stop_tree()
                    return _Outcome(RunStatus.FAILURE, f"{type(exc).__name__}: {exc}")
                ticks += 1
                self.ticks += 1
                self.ctx.events.emit("run.ticked", tick=self.ticks)
                status = self.root.status
                if status is Status.SUCCESS:
                    return _Outcome(RunStatus.SUCCESS)
                if status in (Status.FAILURE, Status.INVALID):
                    return _Outcome(RunStatus.FAILURE, self._failure_reason())
                if self.interaction.has_pending:
                    if self.checkpointer is not None:
                        self.save_checkpoint(RunStatus.SUSPENDED.value)
                    self.ctx.events.emit(
                        "run.suspended", pending=[r.id for r in self.interaction.pending]
                    )
                    return _Outcome(RunStatus.SUSPENDED, pending=self.interaction.pending)
                if max_ticks is not None and ticks >= max_ticks:
                    self._stop_tree()
                    return _Outcome(
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
                    self._stop_tree()
                    return _Outcome(RunStatus.TIMEOUT, f"the run timed out after {timeout} s")
                wait = remaining
                if not self._wake_event.is_set() and self._has_pollers():
                    poll = self.config.runtime.poll_interval
                    wait = poll if remaining is None else min(poll, remaining)
                try:
                    if wait is None:  # no deadline: nothing to time (wait_for would only wrap)
                        await self._wake_event.wait()
                    else:
                        await asyncio.wait_for(self._wake_event.wait(), wait)
                except TimeoutError:
                    if remaining is None or (wait is not None and wait < remaining):
                        continue  # a polling node's next tick
                    self._stop_tree()
                    return _Outcome(RunStatus.TIMEOUT, f"the run timed out after {timeout} s")
        except asyncio.CancelledError:
            self._stop_tree()
            raise

    def _has_pollers(self) -> bool:
        """Whether a running leaf needs ticks that no event will bring.

        Jianmu's async nodes wake the runner themselves; a plain py_trees behaviour that
        returns RUNNING (a ``Timer``) or an async node that returned RUNNING must be polled.
        """
        # a plain walk rather than py_trees' recursive iterate(): this runs after every tick
        stack = [self.root]
        while stack:
            node = stack.pop()
            if node.children:
                stack.extend(node.children)
                continue
            if node.status is not Status.RUNNING:
                continue
            if isinstance(node, AsyncNode):
                if node.wants_tick:
                    return True
            elif not isinstance(node, RuntimeNode):
                return True
        return False

    def _stop_tree(self) -> None:
        if self.root.status is Status.RUNNING:
            self.root.stop(Status.INVALID)

    def _failure_reason(self) -> str | None:
        for node in self.root.iterate():
            error = getattr(node, "error", None)
            if error is not None:
                return f"{node.name}: {type(error).__name__}: {error}"
        for node in self.root.iterate():
            if node.status is Status.FAILURE and node.feedback_message:
                return f"{node.name}: {node.feedback_message}"
        return None

    async def _drain_cancelled(self) -> None:
        """Let cancelled tasks run their ``finally`` blocks before run() returns."""
        tasks = self.ctx.cancelled_tasks
        while tasks:
            batch = list(tasks)
            tasks.clear()
            await asyncio.gather(*batch, return_exceptions=True)

    async def _close_resources(self) -> None:
        closers, self.ctx.closers[:] = list(self.ctx.closers), []
        for closer in closers:
            try:
                await closer()
            except Exception as exc:  # cleanup must not turn a finished run into a crash
                self.ctx.events.emit("run.cleanup_failed", error=f"{type(exc).__name__}: {exc}")

    def _span(self) -> Any:
        if self.ctx.tracer is None:  # nothing to record: no generator held for the whole run
            return nullcontext()
        from jianmu.runtime.events import span

        return span(
            self.ctx.tracer,
            f"invoke_workflow {self.root.name}",
            {
                GEN_AI_OPERATION_NAME: "invoke_workflow",
                GEN_AI_AGENT_NAME: self.root.name,
                JIANMU_RUN_ID: self.run_id,
            },
        )
