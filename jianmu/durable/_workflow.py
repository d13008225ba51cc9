"""The DBOS workflow that is one durable run, and the recorder that makes its steps durable.

A run re-executes from its start when it is recovered. Its tree is rebuilt by the same
factory, and every step that finished before (a model turn, a tool call, a decision) comes back
from the database instead of running again. Steps are found by their key (a tool call's id, a
model node's path and turn), not by their order, so calls that ran in parallel replay however
their timing falls the second time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import pickle
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

import sqlalchemy as sa
from dbos import DBOS
from dbos import error as dbos_error

from jianmu.durable._dbos_adapter import advance_step_counter
from jianmu.errors import TreeMismatchError
from jianmu.runtime.events import replayed
from jianmu.runtime.runner import ReactiveRunner, RunResult, RunStatus
from jianmu.tools.calls import ToolResult

__all__ = ("APPROVAL", "PENDING_EVENT", "WORKFLOW", "approval_topic")

T = TypeVar("T")

WORKFLOW = "jianmu.run"
"""The DBOS workflow name of every run, in every worker."""
PENDING_EVENT = "jianmu.pending"
"""Event key: the approval requests a run waits for (a list of `ApprovalRequest` dicts)."""
APPROVAL = "jianmu.approval"
"""The ``kind`` of an approval message (its recorded ``recv`` output is self-describing)."""
_STEP_PREFIX = "jianmu:"
_STARTED = "started:"
_SHAPE = f"{_STEP_PREFIX}tree"
"""The step that records the tree's shape (`tree_shape`) when the run first builds it."""
_RECONNECT_S, _RECONNECT_MAX_S = 0.5, 30.0
"""First and longest wait before asking an unreachable database again."""
_log = logging.getLogger("jianmu.durable")
_WAIT_S = 24 * 3600.0
"""One ``recv`` waits this long; a run that waits longer simply asks again (no thread held)."""



class _Engine(Protocol):
    name: str
    executor_id: str
    stopping: bool

    @property
    def client(self) -> Any: ...

    def build_runner(self, tree: str, inputs: dict[str, Any], *, run_id: str,
                     user_roles: Any = ()) -> ReactiveRunner: ...


_engines: dict[str, _Engine] = {}


def approval_topic(call_id: str) -> str:
    """The ``recv`` topic on which one approval request's decision arrives."""
    return f"{APPROVAL}:{call_id}"


def register_engine(engine: _Engine) -> None:
    """Make ``engine`` the one whose trees this process's workflows build."""
    _engines[engine.name] = engine


class DBOSSteps:
    """`StepRecorder` on DBOS: a step runs once as a DBOS step; a recorded one is replayed.

    ``owned`` says whether this execution still owns the run; a step that is not replayed
    runs only then. ``stopping`` says whether the worker is shutting down: a step it cuts
    short records nothing, and runs again wherever the run goes on.
    """

    def __init__(self, recorded: dict[str, Any], started: set[str],
                 owned: Callable[[], Awaitable[bool]] | None = None,
                 stopping: Callable[[], bool] | None = None) -> None:
        self._recorded = recorded
        self._started = started
        self._owned = owned
        self._stopping = stopping
        self._counts: dict[str, int] = {}

    def _name(self, key: str) -> str:
        name = self._next(key)
        self._counts[key] = self._counts.get(key, 0) + 1
        return f"{_STEP_PREFIX}{name}"

    def _next(self, key: str) -> str:
        """The name, unprefixed, that the next step under ``key`` runs as (numbered: a
        workflow's step that runs twice in a run is marked and found per run)."""
        count = self._counts.get(key, 0) + 1
        return key if count == 1 else f"{key}#{count}"

    async def run(self, key: str, factory: Callable[[], Awaitable[T]]) -> T:
        """The recorded result of ``key``, or ``factory()``'s, recorded as a DBOS step."""
        name = self._name(key)
        if name in self._recorded:
            replayed()  # the call's span says nothing ran again
            return self._recorded.pop(name)  # type: ignore[no-any-return]

        async def body() -> T:
            # a worker paused (not dead) whose run was taken over must not pay for a step its
            # successor runs: DBOS refuses only the record, after the step's effect
            if self._owned is not None and not await self._owned():
                raise dbos_error.DBOSWorkflowConflictIDError(str(DBOS.workflow_id))
            value = await factory()
            if self._stopping is not None and self._stopping():
                # the shutdown cancelled the run under the step, and a tool call turns a
                # cancel it cannot tell from its own into a failed result: no outcome
                raise asyncio.CancelledError
            return _portable(value)

        return await DBOS.run_step_async({"name": name}, body)

    async def mark_started(self, keys: Sequence[str]) -> None:
        """Record in one write that these steps (each its next run) are about to run."""
        fresh = [k for k in map(self._next, keys) if f"{_STEP_PREFIX}{k}" not in self._recorded]
        if not fresh or all(k in self._started for k in fresh):
            return

        async def body() -> list[str]:
            return list(fresh)

        await DBOS.run_step_async({"name": f"{_STEP_PREFIX}{_STARTED}{fresh[0]}"}, body)

    def maybe_repeated(self, key: str) -> bool:
        """Whether an earlier attempt started ``key``'s next run and recorded no result."""
        name = self._next(key)
        return name in self._started and f"{_STEP_PREFIX}{name}" not in self._recorded

    def replays(self, key: str) -> bool:
        """Whether ``key``'s next run has a recorded result: it replays, running nothing."""
        return f"{_STEP_PREFIX}{self._next(key)}" in self._recorded


def _portable(value: T) -> T:
    """``value``, or for a tool result that pickle cannot store, one with its output as text."""
    try:
        pickle.dumps(value)
    except Exception:
        if isinstance(value, ToolResult):
            return dataclasses.replace(value, output=repr(value.output))  # type: ignore[return-value]
        raise
    return value


def _owner_check(engine: _Engine, workflow_id: str) -> Callable[[], Awaitable[bool]]:
    """Whether the run is still this worker's: running, and by this executor (a takeover
    hands it to the queue, then to another worker)."""

    async def owned() -> bool:
        # the client's listing: inside a workflow, DBOS's own would be a recorded step
        wait = _RECONNECT_S
        while True:
            try:
                found = await engine.client.list_workflows_async(
                    workflow_ids=[workflow_id], load_input=False, load_output=False)
                break
            except (sa.exc.OperationalError, sa.exc.InterfaceError):
                # the database is away (DBOS's own calls wait for it too): a blip must not
                # fail the step; ask again until it answers
                _log.warning("durable database unreachable; run %s waits for it", workflow_id)
                await asyncio.sleep(wait)
                wait = min(wait * 2, _RECONNECT_MAX_S)
        return bool(found) and found[0].status == "PENDING" and (
            found[0].executor_id == engine.executor_id)

    return owned


def _history(
    engine: _Engine, workflow_id: str
) -> tuple[dict[str, Any], set[str], dict[str, dict[str, Any]], int]:
    """What an earlier attempt of this run recorded: steps by name, started keys, decisions."""
    # the client's listing, not DBOS.list_workflow_steps: inside a workflow that one is itself
    # a recorded step, and would replay the (empty) listing of the run's first attempt
    steps = engine.client.list_workflow_steps(workflow_id, load_output=True)
    recorded: dict[str, Any] = {}
    started: set[str] = set()
    decisions: dict[str, dict[str, Any]] = {}
    last = 0
    for step in steps:
        last = max(last, step["function_id"])
        name, output = step["function_name"], step["output"]
        if isinstance(output, dict) and output.get("kind") == APPROVAL:
            decisions[str(output["call_id"])] = output
        elif name.startswith(_STEP_PREFIX + _STARTED) and isinstance(output, list):
            started.update(output)
        elif name.startswith(_STEP_PREFIX) and step["error"] is None:
            recorded[name] = output
    return recorded, started, decisions, last


def tree_shape(runner: ReactiveRunner) -> list[str]:
    """The tree's nodes as ``path (kind)``, in order: what a durable run's step keys hang on (a
    model turn is found by its node's path)."""
    return [f"{getattr(node, 'path', '') or node.name} ({type(node).__qualname__})"
            for node in runner.root.iterate()]


async def check_shape(tree: str, run_id: str, runner: ReactiveRunner,
                      recorded: dict[str, Any]) -> None:
    """Record the tree's shape on the run's first build; on a later one (a recovery, a decision
    after a wait), refuse a tree whose shape changed since (a worker deployed with the tree
    edited): none of its recorded turns would be found under the new paths, so the model would
    be asked again and, with new call ids, calls that finished would run a second time."""
    shape = tree_shape(runner)
    known = recorded.pop(_SHAPE, None)
    if known is None:  # the first build (or a run begun before shapes were recorded)

        async def body() -> list[str]:
            return shape

        await DBOS.run_step_async({"name": _SHAPE}, body)
        return
    if known == shape:
        return
    at = next((i for i, (a, b) in enumerate(zip(known, shape, strict=False)) if a != b),
              min(len(known), len(shape)))
    was = known[at] if at < len(known) else "nothing"
    now = shape[at] if at < len(shape) else "nothing"
    raise TreeMismatchError(
        f"the tree {tree!r} changed since run {run_id!r} began (its node {was!r} is now "
        f"{now!r}): the run's recorded steps would not be found, so its model would be asked "
        f"again and finished calls could run twice. Finish it with the tree it began with, "
        f"or start it again"
    )


@DBOS.workflow(name=WORKFLOW)
async def run_workflow(engine_name: str, tree: str, inputs: dict[str, Any],
                       options: dict[str, Any]) -> dict[str, Any]:
    """One durable run: build the tree, tick it, wait for decisions, return how it ended.

    While it waits for a person the run keeps nothing but the questions: the tree, its state
    and its resources are let go, and rebuilt by replay when the answers have arrived.
    """
    engine = _engines.get(engine_name)
    if engine is None:
        raise RuntimeError(f"no durable engine {engine_name!r} was launched in this worker")
    workflow_id = DBOS.workflow_id
    assert workflow_id is not None
    roles = options.get("user_roles", ())
    ticks, published = 0, False
    while True:
        recorded, started, decisions, last = await asyncio.to_thread(
            _history, engine, workflow_id
        )
        # replayed steps are skipped by key, so new ones must not reuse their numbers
        advance_step_counter(last)
        runner = engine.build_runner(tree, inputs, run_id=workflow_id, user_roles=roles)
        await check_shape(tree, workflow_id, runner, recorded)
        runner.ctx.steps = DBOSSteps(recorded, started, _owner_check(engine, workflow_id),
                                     lambda: engine.stopping)
        result, spent = await _until_parked(runner, decisions)
        ticks += spent
        if result.status is not RunStatus.SUSPENDED:
            break
        await runner.aclose()
        del runner
        asked = [r.to_dict() for r in result.pending]
        await DBOS.set_event_async(PENDING_EVENT, asked)
        published = True
        for request in asked:
            message = None
            while message is None:  # a run may wait days: each recv holds no thread
                message = await DBOS.recv_async(approval_topic(request["id"]), _WAIT_S)
    if published:
        await DBOS.set_event_async(PENDING_EVENT, [])
    return {"status": result.status.value, "error": result.error, "ticks": ticks,
            "state": runner.state.snapshot()}


async def _until_parked(runner: ReactiveRunner,
                        decisions: dict[str, dict[str, Any]]) -> tuple[RunResult, int]:
    """Tick until the run ends or waits for a request that has no recorded decision."""
    ticks = 0
    while True:
        result = await runner.run()
        ticks += result.ticks
        if result.status is not RunStatus.SUSPENDED:
            return result, ticks
        known = [r.id for r in result.pending if r.id in decisions]
        if not known:
            return result, ticks
        for request_id in known:
            message = decisions.pop(request_id)
            said = message.get("message")  # text since engines refuse other: one sent before
            said = said if said is None or isinstance(said, str) else str(said)
            if message.get("answer") is not None:
                runner.answer(request_id, str(message["answer"]))
            elif message.get("approved"):
                runner.approve(request_id, said, arguments=message.get("arguments"))
            else:
                runner.reject(request_id, said)
