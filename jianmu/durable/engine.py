"""`DurableEngine`: runs that survive their worker, on DBOS Transact (SQLite or PostgreSQL).

`RunInfo` is what the engine knows about one run. The engine's database URL carries a password
(in its user-info or a ``?password=`` parameter), which never reaches a message, a log line or
a ``repr``: the URL is shown redacted (`redact`), and a driver's error, which may quote the URL
or a piece of it (psycopg does for a malformed one), is cleaned of its secrets (`clean_error`)
before it is shown, as is a run's error (a tree's may quote its settings). The loggers of
DBOS, SQLAlchemy and this package drop them too (`guard_logs`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import os
import re
import socket
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from py_trees.behaviour import Behaviour
from pydantic import BaseModel, ValidationError

from jianmu._secrets import filter_logs, redact_text, redact_url, url_secrets
from jianmu.config import AppConfig, load_config
from jianmu.errors import (
    AlreadyDecidedError,
    ConfigError,
    DurableDatabaseError,
    DurableError,
    InteractionError,
    MissingExtraError,
    RunNotFoundError,
    TreeInputError,
    UnknownTreeError,
    WorkerIdTaken,
)
from jianmu.nodes.state import inputs_message
from jianmu.runtime.context import (
    QUESTION,
    UNQUALIFIED,
    ApprovalRequest,
    check_edit,
    check_message,
    named_request,
)
from jianmu.runtime.runner import ReactiveRunner, RunResult, RunStatus
from jianmu.state import StateManager

if TYPE_CHECKING:
    from dbos import DBOSClient

    from jianmu.durable._tables import Decision, DecisionLedger, Heartbeat, WorkerRegistry
    from jianmu.durable._worker_lock import WorkerLock

__all__ = ("RUN_STATUSES", "DurableEngine", "RunInfo", "TreeFactory", "redact")

TreeFactory = Callable[[dict[str, Any]], "tuple[Behaviour, StateManager] | Behaviour"]
"""Builds a run's tree (and its state) from the run's inputs; the same in every worker."""

_log = logging.getLogger("jianmu.durable")
_EXECUTOR_THREADS = 32
"""Threads a worker gives DBOS's database calls, whatever the number of runs."""
_APP_NAME = re.compile(r"[a-z0-9_-]{3,256}", re.ASCII)
"""What DBOS takes as an app's name (it refuses any other at launch, in every worker)."""
_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _dbos_log_level() -> str:
    """``$JIANMU_DBOS_LOG_LEVEL`` (default WARNING), any case.

    Raises:
        ConfigError: not a log level (logging's own error named no variable).
    """
    value = os.environ.get("JIANMU_DBOS_LOG_LEVEL") or "WARNING"
    if value.strip().upper() not in _LOG_LEVELS:
        raise ConfigError(f"JIANMU_DBOS_LOG_LEVEL={value!r} is not a log level; use "
                          f"{', '.join(_LOG_LEVELS[:-1])} or {_LOG_LEVELS[-1]}")
    return value.strip().upper()


@dataclass(frozen=True)
class _Tree:
    factory: TreeFactory
    inputs: type[BaseModel] | None


class DurableEngine:
    """Runs registered trees as durable DBOS workflows, in any number of worker processes.

    Args:
        database_url: ``postgresql://user:password@host:port/db`` (many workers on many
            machines), ``sqlite:///path``, or None for the config's ``durable.database_url``,
            else an SQLite file in the user's state folder (one machine).
        name: the application's name; workers and clients of one app share it.
        config: the configuration (default: ``jianmu.yaml`` or ``$JIANMU_CONFIG`` if found).
        executor_id: this worker's stable id. A worker restarted with the same id resumes its
            runs at once; by default each process gets a fresh id, and a dead worker's runs are
            taken over after ``durable.takeover_after_s``.
    """

    def __init__(
        self,
        database_url: str | None = None,
        *,
        name: str = "jianmu",
        config: AppConfig | None = None,
        executor_id: str | None = None,
    ) -> None:
        if not isinstance(name, str) or not _APP_NAME.fullmatch(name):
            raise ConfigError(f"durable app name {name!r} must be 3-256 lowercase letters, "
                              "digits, '-' and '_' (DBOS's rule)")
        self.config = config if config is not None else _default_config()
        settings = self.config.durable
        url = database_url or settings.database_url
        if url is None:
            path = settings.sqlite_path
            os.makedirs(os.path.dirname(path), exist_ok=True)
            url = f"sqlite:///{path}"
        guard_logs(url)
        check_url(url)
        self.database_url = url  # whoever logs the URL (a driver, DBOS), its secrets stay out
        self.name = name
        self.executor_id = executor_id or f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"
        # an id made here is never started again: its runs are handed over when it stops
        self._fresh_id = None if executor_id else self.executor_id
        self.queue_name = f"{name}.runs"
        self._trees: dict[str, _Tree] = {}
        self._client: DBOSClient | None = None
        self._decisions: DecisionLedger | None = None
        self._heartbeat: Heartbeat | None = None
        self._worker_lock: WorkerLock | None = None
        self.launched = False
        self.stopping = False
        """Whether `shutdown` is under way (what it cuts short is no step's outcome)."""

    # -- trees ------------------------------------------------------------------------------------
    def tree(
        self, name: str, *, inputs: type[BaseModel] | None = None
    ) -> Callable[[TreeFactory], TreeFactory]:
        """Register a tree factory under ``name``; ``inputs`` is the runs' input schema.

        Raises:
            ConfigError: another factory (or schema) is registered under ``name`` already, the
                name is not a non-empty string (a bare ``@engine.tree``), or ``inputs`` is not
                a pydantic model class.
        """
        if not isinstance(name, str) or not name:
            # a bare @engine.tree passed the factory as the name and registered nothing
            raise ConfigError(f"a tree's name is a non-empty string, got {name!r}: write "
                              "@engine.tree('NAME')")
        if inputs is not None and not (isinstance(inputs, type) and issubclass(inputs, BaseModel)):
            raise ConfigError(f"the inputs of tree {name!r} are a pydantic model class (class "
                              f"Inputs(BaseModel): ...), got {inputs!r}")

        def register(factory: TreeFactory) -> TreeFactory:
            entry, known = _Tree(factory, inputs), self._trees.get(name)
            if known is not None and known != entry:
                # the second would silently replace the first in this worker only: runs of
                # one name would build different trees in different workers
                raise ConfigError(
                    f"tree {name!r} is registered already (by "
                    f"{getattr(known.factory, '__qualname__', known.factory)!r}); give "
                    f"{getattr(factory, '__qualname__', factory)!r} a name of its own")
            self._trees[name] = entry
            return factory

        return register

    @property
    def trees(self) -> list[str]:
        """The registered trees' names."""
        return sorted(self._trees)

    def check_inputs(self, tree: str, inputs: dict[str, Any] | BaseModel | None) -> dict[str, Any]:
        """``inputs`` validated against ``tree``'s schema, as a JSON-ready dict.

        Raises:
            UnknownTreeError: no tree of that name is registered.
            TreeInputError: the inputs do not fit the tree's schema.
        """
        entry = self._trees.get(tree)
        if entry is None:
            known = ", ".join(self.trees) or "none"
            raise UnknownTreeError(f"no tree {tree!r} is registered (registered: {known})")
        if isinstance(inputs, BaseModel):
            inputs = inputs.model_dump(mode="json")
        if inputs is None:
            inputs = {}
        if not isinstance(inputs, dict):
            raise TreeInputError(f"the inputs of tree {tree!r} must be a JSON object, "
                                 f"got {type(inputs).__name__}")
        if entry.inputs is None:
            return dict(inputs)
        try:
            return entry.inputs.model_validate(inputs).model_dump(mode="json")
        except ValidationError as exc:
            raise TreeInputError(f"the inputs do not fit tree {tree!r}: {exc}") from None

    def build_runner(self, tree: str, inputs: dict[str, Any], *, run_id: str,
                     user_roles: Iterable[str] = ()) -> ReactiveRunner:
        """A fresh runner of ``tree`` for ``inputs`` (what a worker executes)."""
        inputs = self.check_inputs(tree, inputs)
        built = self._trees[tree].factory(inputs)
        if isinstance(built, tuple) and (
                len(built) != 2 or not isinstance(built[1], StateManager | None)):
            # unpacked as it was, it failed as "too many values to unpack" or on the state
            kinds = ", ".join(type(part).__name__ for part in built)
            raise TypeError(f"the factory of tree {tree!r} returned ({kinds}); return the root, "
                            "or (root, StateManager)")
        root, state = built if isinstance(built, tuple) else (built, None)
        if state is not None and inputs and state.accepts("messages") and not state.get("messages"):
            # an agent's tree with no conversation yet: the inputs are the user's request
            state.append_port_messages({"role": "user", "content": inputs_message(inputs)})
        return ReactiveRunner(root, state, config=self.config, run_id=run_id,
                              user_roles=user_roles, extras={"durable_engine": self})

    # -- the worker -------------------------------------------------------------------------------
    def launch(self) -> None:
        """Make this process a worker: it takes runs from the queue and recovers its own.

        Callable from synchronous code and from inside a running event loop alike.
        """
        if self.launched:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self._launch()
            return
        # DBOS refuses its blocking set-up calls on a thread that runs a loop: do it beside
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(self._launch).result()

    def _launch(self) -> None:
        require_dbos()
        from dbos import DBOS

        from jianmu.durable import _workflow
        from jianmu.durable._tables import APP_VERSION, Heartbeat, WorkerRegistry
        from jianmu.durable._worker_lock import hold_worker_id

        log_level = _dbos_log_level()  # before anything is set up
        check_reachable(self.database_url)
        # before DBOS recovers this id's runs: a second live worker of the id is refused
        self._worker_lock = self._hold_id(self.executor_id)
        _workflow.register_engine(self)
        DBOS(config={
            "name": self.name,
            "system_database_url": self.database_url,
            "executor_id": self.executor_id,
            "application_version": APP_VERSION,
            "log_level": log_level,
            # DBOS's pool is unbounded by default: its database calls would grow a thread per
            # concurrent run; a bounded pool queues them instead
            "max_executor_threads": _EXECUTOR_THREADS,
            "notification_listener_polling_interval_sec": self.config.durable.notify_poll_s,
        })
        try:
            DBOS.launch()
            if self._worker_lock is None:  # a database DBOS has just made: locked now
                self._worker_lock = self._hold_id(self.executor_id)
        except Exception as exc:
            DBOS.destroy()
            self._release_id()
            if isinstance(exc, DurableError):
                raise
            raise DurableDatabaseError(
                f"cannot start a worker on {redact(self.database_url)}"
                f"{_old_sqlite_hint(self.database_url)}: {clean_error(exc, self.database_url)}"
            ) from None
        settings = self.config.durable
        DBOS.register_queue(self.queue_name, worker_concurrency=settings.worker_concurrency,
                            polling_interval_sec=settings.poll_interval_s)
        registry = WorkerRegistry(self.database_url, self.name)
        self._heartbeat = Heartbeat(
            registry, self.executor_id, self.config.durable.takeover_after_s,
            self.client,
            on_error=lambda exc: _log.warning(
                "heartbeat failed: %s", clean_error(exc, self.database_url)),
            lock=self._worker_lock,
            hold=functools.partial(hold_worker_id, self.database_url, self.name),
        )
        self._heartbeat.start()
        self.launched = True

    def _hold_id(self, executor_id: str) -> WorkerLock | None:
        """The lock on ``executor_id`` (`hold_worker_id`): held by a worker for its life, so
        a second worker of the id is refused, and so is a `recover` of it, while it lives.

        Raises:
            WorkerIdTaken: a live worker holds it.
        """
        from jianmu.durable._worker_lock import hold_worker_id

        try:
            return hold_worker_id(self.database_url, self.name, executor_id)
        except DurableError:
            raise
        except Exception as exc:  # a driver's message may quote the URL: cleaned
            raise DurableDatabaseError(
                f"cannot take worker id {executor_id!r} on {redact(self.database_url)}: "
                f"{clean_error(exc, self.database_url)}") from None

    def _release_id(self) -> None:
        lock, self._worker_lock = self._worker_lock, None
        if lock is not None:
            lock.release()

    def shutdown(self) -> None:
        """Stop being a worker and close the client. A worker with a stable ``executor_id``
        resumes its runs in flight when it starts again; one whose id was made for this
        process (never started again) hands them to the queue for the other workers."""
        heartbeat, self._heartbeat = self._heartbeat, None
        if heartbeat is not None:
            heartbeat.stop()
        if self.launched:
            from dbos import DBOS

            self.stopping = True  # before DBOS cancels the runs in flight

            try:
                asyncio.get_running_loop()
            except RuntimeError:
                DBOS.destroy(workflow_completion_timeout_sec=0)
            else:
                with concurrent.futures.ThreadPoolExecutor(1) as pool:
                    pool.submit(DBOS.destroy, workflow_completion_timeout_sec=0).result()
            self.launched = self.stopping = False
        self._release_id()  # DBOS runs none of the id's runs any more
        if heartbeat is not None:
            if self.executor_id == self._fresh_id:
                self._hand_over(heartbeat.registry)
            heartbeat.registry.close()
        if self._client is not None:
            self._client.destroy()
            self._client = None
        if self._decisions is not None:
            self._decisions.close()
            self._decisions = None

    def _hand_over(self, registry: WorkerRegistry) -> None:
        """Give this stopped worker's pending runs to the queue now, not after a takeover."""
        from jianmu.durable._tables import recover_worker

        try:
            recover_worker(self.client, self.executor_id)
            registry.claim(self.executor_id, None)  # only once its runs are handed over
        except Exception as exc:  # the database is away: the others take them over later
            _log.warning("could not hand this worker's runs over (the other workers take them "
                         "over after durable.takeover_after_s): %s",
                         clean_error(exc, self.database_url))

    def __repr__(self) -> str:
        return f"<DurableEngine {self.name!r} on {redact(self.database_url)}>"

    def __enter__(self) -> DurableEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- the client: any process --------------------------------------------------------------
    @property
    def client(self) -> DBOSClient:
        """The DBOS client this engine starts, answers and lists runs with."""
        if self._client is None:
            require_dbos()
            from dbos import DBOS, DBOSClient

            check_reachable(self.database_url)
            try:
                # a client never creates DBOS's tables; a fresh database must still take runs
                DBOS.migrate(self.database_url)
                client = DBOSClient(system_database_url=self.database_url,
                                    application_name=self.name, retry_connection_errors=False)
            except Exception as exc:
                raise DurableDatabaseError(
                    f"cannot reach the durable database {redact(self.database_url)}: "
                    f"{clean_error(exc, self.database_url)}"
                ) from None
            self._client = client
        return self._client

    async def start(self, tree: str, inputs: dict[str, Any] | BaseModel | None = None, *,
                    run_id: str | None = None, user_roles: Iterable[str] = ()) -> str:
        """Enqueue a run of ``tree``; its id. A run id already used returns that run.

        Raises:
            UnknownTreeError: no tree of that name is registered here.
            TreeInputError: the inputs do not fit the tree's schema.
            DurableDatabaseError: the database cannot be reached.
        """
        require_dbos()  # before the modules that import DBOS: say the extra, not a traceback
        from jianmu.durable._tables import APP_VERSION
        from jianmu.durable._workflow import WORKFLOW

        checked = self.check_inputs(tree, inputs)
        run_id = run_id or uuid.uuid4().hex[:16]
        await self.client.enqueue_async(
            {"queue_name": self.queue_name, "workflow_name": WORKFLOW, "workflow_id": run_id,
             "app_version": APP_VERSION},
            self.name, tree, checked, {"user_roles": sorted(user_roles)},
        )
        return run_id

    async def run(self, tree: str, inputs: dict[str, Any] | BaseModel | None = None, *,
                  run_id: str | None = None, user_roles: Iterable[str] = ()) -> RunResult:
        """Run ``tree`` durably in this worker, not through the queue, and wait for its end.

        The run is the same durable workflow `start` enqueues (recovered, approved and listed
        alike); it only skips the queue's wait. A run that asks a person waits for the answer.

        Raises:
            DurableError: this process has not called `launch`.
        """
        if not self.launched:
            raise DurableError("run() executes the run here: call launch() first, or start() it")
        from dbos import DBOS, SetWorkflowID

        from jianmu.durable._workflow import run_workflow

        checked = self.check_inputs(tree, inputs)
        run_id = run_id or uuid.uuid4().hex[:16]
        with SetWorkflowID(run_id):
            handle = await DBOS.start_workflow_async(
                run_workflow, self.name, tree, checked, {"user_roles": sorted(user_roles)}
            )
        return _run_result(run_id, await handle.get_result(), self.database_url)

    async def result(self, run_id: str, timeout: float | None = None) -> RunResult:
        """How the run ended; waits for it. After ``timeout``, a run waiting for approvals is
        SUSPENDED (with them); one still working raises `TimeoutError`.

        Raises:
            RunNotFoundError: no run with that id.
        """
        require_dbos()
        from dbos import error

        try:
            handle: Any = await self.client.retrieve_workflow_async(run_id)
        except error.DBOSNonExistentWorkflowError:
            raise RunNotFoundError(f"no durable run {run_id!r}") from None
        try:
            output = await asyncio.wait_for(handle.get_result(polling_interval_sec=0.05), timeout)
        except TimeoutError:
            pending = await self.pending(run_id)
            if pending:
                return RunResult(status=RunStatus.SUSPENDED, run_id=run_id,
                                 pending=tuple(pending))
            raise TimeoutError(f"run {run_id!r} is still running after {timeout} s") from None
        except error.DBOSAwaitedWorkflowCancelledError:
            return RunResult(status=RunStatus.CANCELLED, run_id=run_id,
                             error="the run was cancelled")
        except Exception as exc:  # the workflow itself failed (a tree that cannot be built)
            return RunResult(status=RunStatus.FAILURE, run_id=run_id,
                             error=clean_error(f"{type(exc).__name__}: {exc}",
                                               self.database_url))
        return _run_result(run_id, output, self.database_url)

    async def wait(self, run_id: str, timeout: float | None = None) -> RunResult:
        """Wait until the run ends or waits for a person; SUSPENDED (with the requests) then.

        Raises:
            RunNotFoundError: no run with that id.
            TimeoutError: still working after ``timeout`` seconds.
        """
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            info = await asyncio.to_thread(self.run_info, run_id)
            if info.status == "suspended":
                return RunResult(status=RunStatus.SUSPENDED, run_id=run_id, pending=info.pending)
            if info.status not in ("queued", "running"):
                return await self.result(run_id)
            if deadline is not None and loop.time() >= deadline:
                raise TimeoutError(f"run {run_id!r} is still running after {timeout} s")
            await asyncio.sleep(0.1)

    async def pending(self, run_id: str) -> list[ApprovalRequest]:
        """The approval requests ``run_id`` waits for, oldest first: none once decided (before
        its worker has taken the decision too), none once it has ended or was cancelled."""
        require_dbos()
        from jianmu.durable._workflow import PENDING_EVENT

        value = await self.client.get_event_async(run_id, PENDING_EVENT, timeout_seconds=0)
        if not value:
            return []
        # a cancelled run keeps the requests it published last: it waits for none of them
        found = await self.client.list_workflows_async(workflow_ids=[run_id], load_input=False,
                                                       load_output=False)
        if found and found[0].status in _ENDED:
            return []
        asked = [ApprovalRequest.from_dict(r) for r in value]
        return await asyncio.to_thread(self._undecided, run_id, asked)

    def _undecided(self, run_id: str, asked: list[ApprovalRequest]) -> list[ApprovalRequest]:
        """``asked`` without the requests decided already: a run publishes its requests anew
        only once it asks again, so until then its last list still names those decided."""
        if not asked:
            return asked
        decided = self._ledger().decided(run_id, [r.id for r in asked])
        return [r for r in asked if r.id not in decided]

    async def state(self, run_id: str) -> dict[str, Any] | None:
        """A finished run's final state snapshot (`StateManager.snapshot`), else None."""
        require_dbos()
        from jianmu.durable._workflow import WORKFLOW

        found = await self.client.list_workflows_async(workflow_ids=[run_id], name=WORKFLOW,
                                                       load_input=False)
        if not found:
            raise RunNotFoundError(f"no durable run {run_id!r}")
        output = found[0].output
        return output.get("state") if isinstance(output, dict) else None

    async def approve(self, run_id: str, call_id: str, message: str | None = None, *,
                      arguments: dict[str, Any] | None = None) -> None:
        """Approve a pending request of ``run_id``, from any process; with ``arguments``, the
        call runs with those instead (checked against the tool's schema here, and by the
        guard again before it runs). A call id alone names the one pending request of it.

        Raises:
            ApprovalEditError: the edited arguments do not fit (nothing was recorded).
            InteractionError: the request is a question (`answer` it), or ``call_id`` is a
                call id alone that names several requests (their ids are listed).
            RunNotFoundError: no such run, or it waits for no request ``call_id``.
            AlreadyDecidedError: the request was decided before (the first decision stands;
                the error names it).
        """
        await self._decide(run_id, call_id, True, message, arguments=arguments)

    async def answer(self, run_id: str, call_id: str, text: str) -> None:
        """Answer a pending question (``ask_user``, `AskUser`) of ``run_id``, from any process.

        Raises:
            InteractionError: the request asks for approval, not an answer.
            RunNotFoundError: no such run, or it waits for no request ``call_id``.
            AlreadyDecidedError: the request was decided before.
        """
        if not isinstance(text, str):
            raise TypeError(f"an answer is text, got {type(text).__name__}")
        await self._decide(run_id, call_id, True, None, answer=text)

    async def reject(self, run_id: str, call_id: str, reason: str = "") -> None:
        """Reject a pending request; ``reason`` reaches the model.

        Raises:
            RunNotFoundError: no such run, or it waits for no request ``call_id``.
            AlreadyDecidedError: the request was decided before (the first decision stands;
                the error names it).
        """
        await self._decide(run_id, call_id, False, reason or None)

    def decision(self, run_id: str, call_id: str) -> Decision | None:
        """How request ``call_id`` of ``run_id`` was decided (from any process), if it was.

        A call id alone names the one decided request of that call, as `approve` takes it
        (``call_0`` for ``left/call_0``).

        Raises:
            InteractionError: ``call_id`` is a call id alone that names several decided
                requests (their ids are listed).
        """
        if not _is_utf8(run_id, call_id):  # no run nor request has such an id
            return None
        ledger = self._ledger()
        found = ledger.first(run_id, call_id)
        if found is not None:
            return found
        named = named_request(call_id, (), (), ledger.named(run_id, call_id))
        return None if named == call_id else ledger.first(run_id, named)

    def _ledger(self) -> DecisionLedger:
        if self._decisions is None:
            require_dbos()
            from jianmu.durable._tables import DecisionLedger

            self.client  # noqa: B018 - reached (and named without its password) first
            self._decisions = DecisionLedger(self.database_url)
        return self._decisions

    async def _decide(self, run_id: str, call_id: str, approved: bool,
                      message: str | None, *, arguments: dict[str, Any] | None = None,
                      answer: str | None = None) -> None:
        check_message(message)  # as `Interaction` refuses it
        require_dbos()
        from jianmu.durable._workflow import APPROVAL, approval_topic

        info = await asyncio.to_thread(self.run_info, run_id)  # raises for an unknown run
        if not _is_utf8(call_id):  # the database cannot look it up, and no request has it
            raise RunNotFoundError(f"run {run_id!r} waits for no approval {call_id!r}")
        ledger = self._ledger()
        first = await asyncio.to_thread(ledger.first, run_id, call_id)
        if first is not None:
            raise _already_decided(run_id, call_id, first)
        # none once the run ended: a cancelled run still lists what it asked, and a decision
        # was recorded and reported as taken that nothing would ever read
        pending = await self.pending(run_id)
        if call_id not in {r.id for r in pending}:
            # a call id alone names the one request of that call, pending or decided (its name
            # kept with its decision), as `Interaction.resolve` does; one of several is refused
            earlier = await asyncio.to_thread(ledger.named, run_id, call_id)
            call_id = named_request(call_id, pending, (), earlier)
        if call_id not in {r.id for r in pending}:
            # decided (and gone on) since the look above: name that decision
            first = await asyncio.to_thread(ledger.first, run_id, call_id)
            if first is not None:
                raise _already_decided(run_id, call_id, first)
            known = f"pending: {', '.join(r.id for r in pending) or 'none'}"
            if info.status in ("success", "failure", "cancelled"):
                known = ("it was cancelled" if info.status == "cancelled"
                         else f"it has ended: {info.status}")
            raise RunNotFoundError(
                f"run {run_id!r} waits for no approval {call_id!r} ({known})"
            )
        (request,) = [r for r in pending if r.id == call_id]
        _check_decision(request, approved, arguments, answer)
        decision = {"kind": APPROVAL, "call_id": call_id, "approved": approved,
                    "message": message}
        if arguments is not None:
            decision["arguments"] = arguments
        if answer is not None:
            decision["answer"] = answer
        client = self.client

        def send(conn: Any) -> None:
            client.send_in_transaction(conn, run_id, decision, approval_topic(call_id),
                                       idempotency_key=f"{run_id}:{call_id}")

        # recorded and sent in one transaction: a second decision, even one racing this one,
        # finds this row and is refused
        first = await asyncio.to_thread(functools.partial(
            ledger.decide, run_id, call_id, approved, message, send,
            name=request.payload.get(UNQUALIFIED)))
        if first is not None:
            raise _already_decided(run_id, call_id, first)

    def steps(self, run_id: str) -> list[dict[str, Any]]:
        """The steps ``run_id`` recorded so far, oldest first: model turns, tool calls, node
        steps and answers, each with ``name``, ``output``, ``error``, ``started`` and
        ``completed`` (seconds since the epoch, or None).

        Raises:
            RunNotFoundError: no run with that id.
        """
        self.run_info(run_id)
        steps = self.client.list_workflow_steps(run_id)

        def seconds(ms: int | None) -> float | None:
            return ms / 1000 if ms else None

        return [{"name": s["function_name"], "output": s["output"], "error": s["error"],
                 "started": seconds(s.get("started_at_epoch_ms")),
                 "completed": seconds(s.get("completed_at_epoch_ms"))} for s in steps]

    def runs(self, status: str | None = None, *, limit: int | None = None) -> list[RunInfo]:
        """The runs of this app, oldest first, optionally only those with ``status``; the
        first ``limit`` of them."""
        if status is not None and status not in RUN_STATUSES:
            raise ValueError(f"unknown run status {status!r}; one of {', '.join(RUN_STATUSES)}")
        require_dbos()
        from jianmu.durable._workflow import WORKFLOW

        if status is None:
            statuses = self.client.list_workflows(name=WORKFLOW, limit=limit, load_output=True)
            return [self._info(s) for s in statuses]
        # a status is told from DBOS's, the output and the requests: the limit counts the runs
        # that have it (given to DBOS, it counted every run, and hid those past it)
        dbos = [d for d, ours in _DBOS_STATUS.items()
                if ours == status or (ours, status) in _SPLIT]
        statuses = self.client.list_workflows(name=WORKFLOW, status=dbos, load_output=True)
        infos = [i for i in map(self._info, statuses) if i.status == status]
        return infos if limit is None else infos[:max(limit, 0)]

    def run_info(self, run_id: str) -> RunInfo:
        """What the engine knows of ``run_id``.

        Raises:
            RunNotFoundError: no run with that id.
        """
        require_dbos()
        from jianmu.durable._workflow import WORKFLOW

        # an id UTF-8 cannot encode (argv's byte of another encoding) names no run, and the
        # database refused the look-up with an internal error
        found = _is_utf8(run_id) and self.client.list_workflows(workflow_ids=[run_id],
                                                                 name=WORKFLOW)
        if not found:
            raise RunNotFoundError(f"no durable run {run_id!r}")
        return self._info(found[0])

    def recover(self, worker: str) -> list[str]:
        """Declare ``worker`` dead and hand its pending runs to the live workers; their ids.

        Raises:
            DurableError: ``worker`` is alive (it holds its id, `hold_worker_id`), if only
                paused: its runs are its own, and handing them over would run its calls in
                flight twice.
        """
        require_dbos()
        from jianmu.durable._tables import WorkerRegistry, recover_worker
        try:  # held while its runs are handed over: the id cannot start meanwhile
            lock = self._hold_id(worker)
        except WorkerIdTaken:
            raise DurableError(
                f"worker {worker!r} is alive (it holds its id, if only paused): its runs are its "
                f"own, and handing them over would run its calls in flight twice. Stop it "
                f"(SIGTERM hands its runs over) or kill it, then recover") from None
        try:
            registry = WorkerRegistry(self.database_url, self.name)
            try:
                registry.claim(worker, None)
            finally:
                registry.close()
            return recover_worker(self.client, worker)
        finally:
            if lock is not None:
                lock.release()

    def workers(self) -> list[dict[str, Any]]:
        """The workers that ever beat on this database: executor_id, host, started, last_seen."""
        require_dbos()
        from jianmu.durable._tables import WorkerRegistry

        registry = WorkerRegistry(self.database_url, self.name)
        try:
            return registry.workers()
        finally:
            registry.close()

    def _info(self, status: Any) -> RunInfo:
        from jianmu.durable._workflow import PENDING_EVENT

        given = status.input if isinstance(status.input, dict) else {}
        args = list(given.get("args") or ())
        tree = args[1] if len(args) > 1 else "?"
        inputs = args[2] if len(args) > 2 and isinstance(args[2], dict) else {}
        pending: list[ApprovalRequest] = []
        if status.status == "PENDING":
            value = self.client.get_event(status.workflow_id, PENDING_EVENT, timeout_seconds=0)
            pending = self._undecided(status.workflow_id,
                                      [ApprovalRequest.from_dict(r) for r in value or ()])
        output = status.output
        error = output.get("error") if isinstance(output, dict) else None
        if status.error is not None:
            error = f"{type(status.error).__name__}: {status.error}"
        if error is not None:  # a tree's error may quote the database URL (its settings')
            error = clean_error(str(error), self.database_url)
        return RunInfo(
            run_id=status.workflow_id, tree=tree,
            status=run_status(status.status, output, pending), pending=tuple(pending),
            created=status.created_at / 1000 if status.created_at else None,
            updated=status.updated_at / 1000 if status.updated_at else None,
            worker=status.executor_id, error=error, inputs=inputs,
        )


def _is_utf8(*texts: str) -> bool:
    """Whether each of ``texts`` encodes as UTF-8 (holds no lone surrogate)."""
    try:
        for text in texts:
            text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _already_decided(run_id: str, call_id: str, first: Decision) -> AlreadyDecidedError:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(first.decided_at))
    said = f" ({first.message!r})" if first.message else ""
    return AlreadyDecidedError(
        f"request {call_id!r} of run {run_id!r} was already {first.verb} at {when}{said}; "
        "the first decision stands and this one was not recorded",
        run_id=run_id, call_id=call_id, approved=first.approved, first_message=first.message,
        decided_at=first.decided_at,
    )


def _run_result(run_id: str, output: dict[str, Any], url: str) -> RunResult:
    error = output.get("error")
    return RunResult(status=RunStatus(output["status"]), run_id=run_id,
                     ticks=int(output.get("ticks", 0)),
                     error=None if error is None else clean_error(str(error), url))


def _default_config() -> AppConfig:
    return load_config()

# -- a run's information -----------------------------------------------------------------------


def _check_decision(request: ApprovalRequest, approved: bool,
                    arguments: dict[str, Any] | None, answer: str | None) -> None:
    """Refuse, before it is sent, a decision the run's own channel would refuse: a question
    approved or rejected, an approval answered, edited arguments that do not fit."""
    if (request.kind == QUESTION) != (answer is not None):
        if answer is None:
            raise InteractionError(
                f"request {request.id!r} is a question ({request.question!r}); answer it "
                "rather than approve or reject it")
        raise InteractionError(
            f"request {request.id!r} asks for approval ({request.summary}), not for an answer; "
            "approve or reject it")
    if arguments is not None and approved:
        check_edit(request, arguments)


RUN_STATUSES = ("queued", "running", "suspended", "success", "failure", "cancelled")
"""A durable run's statuses, as `RunInfo.status` and ``runs(status=...)`` spell them."""

_ENDED = frozenset({"SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"})
"""DBOS's statuses of a run that has ended: it waits for nothing."""

_SPLIT = {("running", "suspended"), ("success", "failure")}
"""Statuses of ours told apart within one of DBOS's (by the requests, by the output)."""

_DBOS_STATUS = {
    "ENQUEUED": "queued",
    "DELAYED": "queued",
    "PENDING": "running",
    "SUCCESS": "success",
    "ERROR": "failure",
    "MAX_RECOVERY_ATTEMPTS_EXCEEDED": "failure",
    "CANCELLED": "cancelled",
}


def run_status(dbos_status: str, output: Any, pending: list[ApprovalRequest]) -> str:
    """A run's status from DBOS's workflow status, its output and its pending approvals."""
    status = _DBOS_STATUS.get(dbos_status, dbos_status.lower())
    if status == "running" and pending:
        return "suspended"
    if status == "success" and isinstance(output, dict):
        return "success" if output.get("status") == "success" else "failure"
    return status


@dataclass(frozen=True, kw_only=True)
class RunInfo:
    """One durable run, as `DurableEngine.runs` lists it."""

    run_id: str
    """The run's id, which is its DBOS workflow id."""
    tree: str
    """The registered tree it runs."""
    status: str
    """One of `RUN_STATUSES`."""
    pending: tuple[ApprovalRequest, ...] = ()
    """Approval requests it waits for (when ``suspended``)."""
    created: float | None = None
    """When it was started (Unix time)."""
    updated: float | None = None
    """When its status last changed."""
    worker: str | None = None
    """The executor id of the worker that runs (or last ran) it."""
    error: str | None = None
    """Why it failed."""
    inputs: dict[str, Any] = field(default_factory=dict)
    """The inputs it was started with."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict."""
        return {
            "run_id": self.run_id, "tree": self.tree, "status": self.status,
            "pending": [r.to_dict() for r in self.pending], "created": self.created,
            "updated": self.updated, "worker": self.worker, "error": self.error,
            "inputs": self.inputs,
        }

# -- the database ------------------------------------------------------------------------------


_LOGGERS = ("dbos", "sqlalchemy", "sqlalchemy.engine", "sqlalchemy.pool", "jianmu.durable")


def redact(url: str) -> str:
    """``url`` without its password (user-info or query parameter), for messages and logs."""
    return redact_url(url)


def clean_error(exc: BaseException | str, url: str) -> str:
    """An error's text (a driver's, say) without the secrets of ``url`` or any other URL's."""
    return redact_text(str(exc), *url_secrets(url))


def guard_logs(url: str) -> None:
    """Keep the secrets of ``url`` out of the log records of DBOS, SQLAlchemy and Jianmu's
    durable engine, whoever logs them."""
    filter_logs(_LOGGERS, url_secrets(url))


def require_dbos() -> None:
    """Fail with the extra to install when DBOS or psycopg is missing."""
    try:
        import dbos  # noqa: F401
        import psycopg  # noqa: F401
    except ImportError as exc:
        raise MissingExtraError(exc.name or "dbos", "dbos") from exc


def _prepare_sqlite(url: str) -> None:
    """Put an SQLite database in WAL mode (a setting kept in the file).

    DBOS leaves SQLite in its rollback-journal mode, which syncs the disk several times per
    commit; with a write-ahead log every step still commits durably (synchronous=FULL), at one
    sync each, and readers (a CLI listing runs) no longer wait for the worker's writes.
    """
    import sqlite3

    path = url.removeprefix("sqlite:///")
    if not path or path == ":memory:":
        return
    if os.path.isdir(path):  # SQLite said only "unable to open database file"
        raise DurableDatabaseError(
            f"cannot open the durable database {redact(url)}: {path} is a folder; name a file "
            f"in it (sqlite:///{os.path.join(path, 'durable.sqlite')})")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    try:
        with contextlib.closing(sqlite3.connect(path, timeout=30)) as conn:
            conn.execute("PRAGMA journal_mode=WAL")
    except sqlite3.Error as exc:
        raise DurableDatabaseError(
            f"cannot open the durable database {redact(url)}: {clean_error(exc, url)}"
        ) from None


def _old_sqlite_hint(url: str) -> str:
    """Why DBOS may have failed on this SQLite, when the cause is this Python's SQLite itself.

    DBOS 3.x on Python 3.12 and later stamps rows with SQLite's ``unixepoch('subsec')``, new
    in SQLite 3.42: an older library makes that NULL, and the first insert fails on a NOT NULL
    column, which says nothing of the cause.
    """
    import sqlite3
    import sys

    if (not url.startswith("sqlite:") or sys.version_info < (3, 12)
            or sqlite3.sqlite_version_info >= (3, 42)):
        return ""
    return (f" (DBOS on Python 3.12 and later needs SQLite 3.42 or later; this Python's "
            f"sqlite3 module has SQLite {sqlite3.sqlite_version}: use PostgreSQL, Python 3.11, "
            "or a Python built with a newer SQLite)")


def check_url(url: str) -> None:
    """Refuse a database URL DBOS cannot use as the engine is made, not at the first run,
    in a driver's words (DBOS takes any other scheme for PostgreSQL's: ``mysql://db/app``
    failed as a host it could not resolve).

    Raises:
        ConfigError: not a PostgreSQL URL nor an SQLite file's.
    """
    if url.startswith(("postgresql://", "postgres://", "postgresql+")):
        return
    if url.startswith("sqlite:///") and url != "sqlite:///":
        return
    raise ConfigError(f"durable database URL {redact(url)!r} is not one DBOS takes: give "
                      "postgresql://user:password@host:port/db or sqlite:///path/to/file")


def check_reachable(url: str) -> None:
    """Fail fast, naming the database without its password, when it cannot be reached."""
    if url.startswith("sqlite:///"):
        _prepare_sqlite(url)
        return
    if not url.startswith(("postgresql://", "postgres://", "postgresql+")):
        return
    import psycopg

    from jianmu.durable._tables import libpq_url

    raw = libpq_url(url)
    try:
        psycopg.connect(raw, connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        if "does not exist" in str(exc):
            return  # DBOS creates its database on first launch
        reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        raise DurableDatabaseError(
            f"cannot reach the durable database {redact(url)}: {clean_error(reason, url)}"
        ) from None
    except Exception as exc:  # psycopg quotes a malformed URL (its password too): cleaned
        raise DurableError(
            f"bad durable database URL {redact(url)}: {clean_error(exc, url)}"
        ) from None
