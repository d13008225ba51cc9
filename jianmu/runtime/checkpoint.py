"""Checkpointers: where a suspended or running run is saved so another process can resume it."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from py_trees.common import Status
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from jianmu.errors import (
    CheckpointError,
    RunClaimedError,
    StateValidationError,
    TreeMismatchError,
)
from jianmu.runtime.lease import (
    DEFAULT_LEASE_TTL,
    Lease,
    RunClaim,
    alive_elsewhere,
    of_this_machine,
    process_gone,
    refusal,
    storable,
    this_process,
    until,
)
from jianmu.runtime.points import RecordedRun, RunHistory, TickRecorder

if TYPE_CHECKING:
    from opentelemetry.trace import SpanContext
    from py_trees.behaviour import Behaviour

    from jianmu.state import StateManager

__all__ = (
    "CHECKPOINT_VERSION", "FINISHED_STATUSES", "Checkpointer", "SQLiteCheckpointer", "checked",
    "checkpoint_of", "links_from", "restored", "resume_composite", "save_decisions",
    "unmatched",
)

CHECKPOINT_VERSION = 1
"""The version of the checkpoints runners write; a checkpoint of another is refused."""

# Connections inherited through fork(): never closed in the child (SQLite forbids using one
# across a fork, and closing it could touch the parent's shared-memory index), never collected.
_inherited: list[sqlite3.Connection] = []


class _Envelope(BaseModel):
    """The parts of a checkpoint a restore reads, as `ReactiveRunner.save_checkpoint` writes
    them; other keys are a store's own and pass."""

    model_config = ConfigDict(extra="allow", strict=True)

    version: int
    state: dict[str, Any]
    status: str | None = None
    error: str | None = None
    ticks: int = Field(default=0, ge=0)
    nodes: dict[str, dict[str, Any]] = Field(default_factory=dict)
    interaction: dict[str, list[Any]] = Field(default_factory=dict)
    user_roles: list[str] = Field(default_factory=list)
    constraints: dict[str, Any] | None = None


def checkpoint_of(runner: Any, status: str) -> dict[str, Any]:
    """A `ReactiveRunner`'s checkpoint: the state, every node's status, the pending requests
    and decisions (and why the run ended, once it did)."""
    error = runner._end_error if status != "running" else None
    return {
        "version": CHECKPOINT_VERSION,
        "run_id": runner.run_id,
        "status": status,
        "tree": runner.root.name,
        "ticks": runner.ticks,
        "state": runner.state.snapshot(),
        **({"state_schema": schema_name(runner.state.schema)}
           if runner.state.schema is not None else {}),
        "nodes": {key: _node_entry(node) for key, node in runner._walk(runner.root, "0")},
        "interaction": runner.interaction.snapshot(),
        "user_roles": sorted(runner.ctx.user_roles),
        "constraints": _constraints_of(runner.ctx.constraints),
        "saved": time.time(),
        **({"error": error} if error is not None else {}),
        **({"span": runner._span_ids} if runner._span_ids else {}),
    }


_dumped: dict[int, tuple[Any, dict[str, Any]]] = {}
"""`_constraints_of` by the constraints' id: a run's are fixed, and saved at every checkpoint."""


def _constraints_of(constraints: Any) -> dict[str, Any]:
    """The run's constraints as its checkpoint keeps them (what they set, as JSON)."""
    found = _dumped.get(id(constraints))
    if found is not None and found[0] is constraints:
        return found[1]
    from jianmu.constraints import Constraints

    # a caller's or a team member's layer has fields of its own, which its run re-creates
    dumped = Constraints.model_validate(
        constraints.model_dump(include=set(Constraints.model_fields))
    ).model_dump(mode="json", exclude_defaults=True)
    if len(_dumped) > 256:  # constraints of finished runs: start again
        _dumped.clear()
    _dumped[id(constraints)] = (constraints, dumped)
    return dumped


def _kept_constraints(data: dict[str, Any], given: Any, run_id: str) -> Any:
    """The constraints a restored run goes on under: those it ran under (its checkpoint's),
    tightened by ``given``; a restore that names none, or looser ones, never drops them.

    Raises:
        CheckpointError: the checkpoint's constraints cannot be read, or ``given`` cannot
            be merged over them (a workdir outside the run's).
    """
    saved = data.get("constraints")
    if saved is None:  # saved before checkpoints kept them: as given
        return given
    from jianmu.constraints import Constraints
    from jianmu.errors import ConfigError

    try:
        return Constraints.merge(Constraints.model_validate(saved), given)
    except (ValidationError, ConfigError) as exc:
        raise CheckpointError(
            f"the checkpoint of run {run_id!r}: its constraints cannot be kept: {exc}") from None


def _node_entry(node: Any) -> dict[str, Any]:
    """A node as its checkpoint keeps it: name, status, and the status of its finished work
    that no tick read yet (`jianmu.runtime.kept`), which the run going on reads instead of
    doing the work again."""
    entry = {"name": node.name, "status": node.status.name}
    if getattr(node, "_task", None) is not None or getattr(node, "_finished", None) is not None:
        from jianmu.runtime.async_node import coerce_status  # a node with work of its own
        from jianmu.runtime.kept import unread

        finished = unread(node, coerce_status)
        if finished is not None:
            entry["finished"] = finished.name
    return entry


def _keep_finished(runner: Any, nodes: dict[str, Any]) -> None:
    """Each restored node whose checkpoint says its work finished, unread, keeps that status
    for the run going on (`jianmu.runtime.kept`): a payment made as the run suspended is
    read as made, not made again."""
    finished = {key for key, entry in nodes.items()
                if isinstance(entry, dict) and "finished" in entry}
    if not finished:
        return
    from jianmu.runtime.kept import restore

    for key, node in runner._walk(runner.root, "0"):
        if key in finished:
            restore(node, nodes[key], runner)


def schema_name(schema: type) -> str:
    """The name a checkpoint keeps of its state's schema: ``module:QualifiedName``."""
    return f"{schema.__module__}:{schema.__qualname__}"


def _state_for(data: dict[str, Any], run_id: str) -> StateManager:
    """A state of the schema the checkpoint names (``state_schema``), when the restorer gave
    none. Only a class already imported is taken (a checkpoint never makes a module load): a
    free-form state has no reducers, so an agent's next message would replace its whole
    conversation, and the model would read that message alone.

    Raises:
        CheckpointError: the schema it names is not imported in this process.
    """
    from jianmu.state import StateManager

    name = data.get("state_schema")
    if not isinstance(name, str):
        return StateManager()
    module, _, qualname = name.partition(":")
    found: Any = sys.modules.get(module)
    for part in qualname.split(".") if found is not None else ():
        found = getattr(found, part, None)
    if isinstance(found, type) and issubclass(found, BaseModel):
        return StateManager(found)
    raise CheckpointError(
        f"the state of run {run_id!r} has the schema {name}, not a schema imported here: "
        f"pass ReactiveRunner.restore(..., state_manager=StateManager({qualname})); a state "
        "without its schema would lose what its reducers keep (an agent's conversation)"
    )


def checked(data: Any, run_id: str) -> dict[str, Any]:
    """``data``, a loaded checkpoint, if it has the shape a restore reads.

    Raises:
        CheckpointError: naming the run and the first problems (a damaged row, a store's
            bug), instead of a ``KeyError`` or ``AttributeError`` in the middle of a restore.
    """
    if not isinstance(data, dict):
        raise CheckpointError(
            f"the checkpoint of run {run_id!r} is not a JSON object but {type(data).__name__}"
        )
    try:
        _Envelope.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
            for error in exc.errors()[:5]
        )
        raise CheckpointError(f"the checkpoint of run {run_id!r} is damaged: {problems}") from None
    return data


def unmatched(saved: dict[str, dict[str, Any]], bound: dict[str, Behaviour]) -> None:
    """Refuse a tree that lacks a node of the checkpoint: ``saved``, the checkpoint's nodes
    that no node of the tree took up, by key; ``bound``, the tree's nodes by key.

    A node under one that builds its children later (a skill compiled on its first tick) is
    taken up then; any other left over means the tree is not the run's (a script edited since):
    restored, it would end the run without the step it waits in, and save that end over it.

    Raises:
        TreeMismatchError: naming the first such node.
    """
    for key, node in saved.items():
        parent = bound.get(key.rpartition("/")[0])
        if parent is not None and getattr(parent, "compiled", True) is not False:
            raise TreeMismatchError(
                f"the tree does not match the checkpoint: node {key} ({node.get('name')!r}) of "
                "the checkpoint is not in this tree"
            )


def save_decisions(runner: Any, checkpointer: Checkpointer) -> None:
    """Save the decisions made while a run waits, as they are made: the run's newest
    checkpoint with them added (a restored tree may not have built all of its nodes yet),
    under the run's lease, kept."""
    saved = checkpointer.load(runner.run_id)
    if saved is None:
        return
    checkpoint = {**saved, "interaction": runner.interaction.snapshot(), "saved": time.time()}
    if runner._claim is not None:
        runner._claim.save(checkpoint)  # refused if the run went on past what it read
    else:
        checkpointer.save(runner.run_id, checkpoint)


def resume_composite(node: Behaviour) -> None:
    """After a restore, point a running composite at the child it was running."""
    running = [c for c in node.children if c.status is Status.RUNNING]
    if hasattr(node, "current_child"):
        if running:
            node.current_child = running[0]
        else:
            unfinished = [c for c in node.children if c.status is not Status.SUCCESS]
            node.current_child = unfinished[0] if unfinished else node.children[-1]


def links_from(record: Any) -> tuple[SpanContext, ...]:
    """The span a checkpoint names (`jianmu.runtime.events.span_ids`), for the span of the run
    restored from it to link to; none when it names none, or not in that shape."""
    if not isinstance(record, dict):
        return ()
    try:
        trace_id, span_id = int(record["trace_id"], 16), int(record["span_id"], 16)
    except (KeyError, TypeError, ValueError):
        return ()
    from opentelemetry.trace import SpanContext, TraceFlags

    context = SpanContext(trace_id, span_id, is_remote=True,
                          trace_flags=TraceFlags(TraceFlags.SAMPLED))
    return (context,) if context.is_valid else ()


@runtime_checkable
class Checkpointer(Protocol):
    """Saves and loads run checkpoints (JSON-serialisable dicts) by run id."""

    def save(self, run_id: str, checkpoint: dict[str, Any]) -> None:
        """Store a new checkpoint for ``run_id``."""
        ...

    def load(self, run_id: str) -> dict[str, Any] | None:
        """Return the newest checkpoint of ``run_id``, or None."""
        ...

    def close(self) -> None:
        """Release the store."""
        ...


_CHECKPOINT_COLUMNS = frozenset({"run_id", "seq", "created", "status", "data"})
"""The columns of the ``checkpoints`` table."""
FINISHED_STATUSES = ("success", "failure")
"""The statuses `SQLiteCheckpointer.prune` forgets by default: runs that ended for good (a
suspended, cancelled or timed-out run can still be resumed)."""


class SQLiteCheckpointer:
    """A `Checkpointer` on SQLite (stdlib); ``":memory:"`` is the in-process stand-in.

    ``load`` returns a run's newest checkpoint. With ``record_ticks`` (the default) it keeps
    every tick that changed something (`RunHistory`, in the same file): Jianmu Studio travels
    back through them, and ``jianmu runs fork`` starts a new run from any of them; of the
    checkpoints, the run's first and its newest are kept. Without it, every save appends a
    row, and the checkpoints are the run's history.

    It also leases each run to one owner at a time (`claim`, in the ``jianmu_leases`` table of
    the same file): whoever decides, resumes or continues a run holds it, renewed by each save
    made under it; a lease not renewed for ``lease_ttl`` seconds has expired (its owner
    crashed), and one whose process on this machine has died is taken over at once, while one
    whose process on this machine is another live one is not taken even once it expired.
    ``clock`` (default `time.time`) is what leases are timed by. ``busy_timeout`` is how many
    seconds a read or save waits while another connection (another process) holds the file's
    write lock, before it fails with `CheckpointError` ("database is locked").
    """

    def __init__(self, path: str | Path = ":memory:", *, record_ticks: bool = True,
                 lease_ttl: float = DEFAULT_LEASE_TTL,
                 clock: Callable[[], float] = time.time, busy_timeout: float = 5.0) -> None:
        if lease_ttl <= 0:
            raise ValueError(f"lease_ttl must be positive, got {lease_ttl!r}")
        if isinstance(busy_timeout, bool) or not isinstance(busy_timeout, int | float) or not (
                0 <= busy_timeout < float("inf")):
            raise ValueError(f"busy_timeout must be a number of seconds, 0 or more, got "
                             f"{busy_timeout!r}")
        self.path = str(path)
        self.record_ticks = record_ticks
        self.lease_ttl = lease_ttl
        """Seconds a lease lasts unless renewed."""
        self._clock = clock
        # (run, owner) -> the pid that took it: released on close(), in that process only (a
        # forked child that closes the store it inherited must not give up its parent's runs)
        self._granted: dict[tuple[str, str], int] = {}
        self._pid = os.getpid()
        if self.path != ":memory:":
            try:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:  # one line naming the file, as an unopenable one gets
                raise CheckpointError(f"cannot open checkpoint store {self.path!r}: cannot make "
                                      f"its folder: {exc.strerror or exc}") from exc
        if Path(self.path).is_dir():  # sqlite3 says only "unable to open database file"
            raise CheckpointError(f"cannot open checkpoint store {self.path!r}: it is a folder; "
                                  "name a file (in it, say)")
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False,
                                       timeout=busy_timeout)
            self._check_foreign_table()
            self._db.create_function("jianmu_alive_elsewhere", 1, alive_elsewhere)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS checkpoints ("
                " run_id TEXT NOT NULL, seq INTEGER NOT NULL, created REAL NOT NULL,"
                " status TEXT, data TEXT NOT NULL, PRIMARY KEY (run_id, seq))"
            )
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS jianmu_leases (run_id TEXT PRIMARY KEY,"
                " owner TEXT NOT NULL, expires REAL NOT NULL, process TEXT NOT NULL)"
            )
            if "process" not in self._lease_columns():  # a file from before leases named
                # their process; under the write lock, read again: two processes opening the
                # file at once both saw the column missing, and the second's ALTER failed
                self._db.execute("BEGIN IMMEDIATE")
                if "process" not in self._lease_columns():
                    self._db.execute("ALTER TABLE jianmu_leases ADD COLUMN process TEXT"
                                     " NOT NULL DEFAULT ''")
            self._db.commit()
        except sqlite3.Error as exc:
            raise CheckpointError(f"cannot open checkpoint store {self.path!r}: {exc}") from exc
        self.history = RunHistory(self._db, self._lock)
        """The run's points and events, beside its checkpoints."""

    def _lease_columns(self) -> set[str]:
        """The columns of the ``jianmu_leases`` table."""
        return {row[1] for row in self._db.execute("PRAGMA table_info(jianmu_leases)")}

    def _check_foreign_table(self) -> None:
        """Refuse a file whose ``checkpoints`` table is another program's, before anything is
        written to it (it failed mid-run, "no such column: seq", after our tables were added).

        Raises:
            CheckpointError: naming the columns it lacks.
        """
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(checkpoints)")}
        missing = sorted(_CHECKPOINT_COLUMNS - columns) if columns else []
        if missing:
            self._db.close()
            raise CheckpointError(
                f"cannot open checkpoint store {self.path!r}: its table 'checkpoints' is not "
                f"Jianmu's (no column {', '.join(missing)}): the file is another program's "
                "database; give the checkpoints a file of their own"
            )

    def observe(self, runner: RecordedRun) -> None:
        """Record ``runner``'s ticks (the runner calls this when it is made)."""
        if self.record_ticks:
            TickRecorder(runner, self.history).attach()

    def save(self, run_id: str, checkpoint: dict[str, Any], *, owner: str | None = None,
             release: bool = False, after: int | None = None) -> None:
        """Append a checkpoint for ``run_id`` (one transaction).

        With ``owner``, only while ``owner`` holds the run's lease, which the save renews, or
        with ``release``, gives up (the run returned: one commit for both); with ``after``,
        only on top of checkpoint number ``after`` (the newest the saver knows).

        Raises:
            RunClaimedError: ``owner`` no longer holds the run (its lease expired and another
                owner took it), or the run went on past ``after``; nothing was saved.
        """
        try:
            data = json.dumps(checkpoint)
        except (TypeError, ValueError) as exc:
            raise CheckpointError(f"checkpoint of run {run_id!r} is not JSON: {exc}") from exc
        with self._lock:
            try:
                with self._db:
                    if owner is not None:
                        self._renew(run_id, owner)
                        if release:
                            self._db.execute("DELETE FROM jianmu_leases WHERE run_id = ?",
                                             (run_id,))
                    self.history.write_pending()  # the points up to this checkpoint first
                    row = self._db.execute(
                        "SELECT COALESCE(MAX(seq), 0) FROM checkpoints WHERE run_id = ?", (run_id,)
                    ).fetchone()
                    if after is not None and row[0] != after:  # a runner of the same name
                        raise RunClaimedError(
                            f"run {run_id!r} went on elsewhere (its newest checkpoint is number "
                            f"{row[0]}, this runner has number {after}); this checkpoint was "
                            "not saved: restore the run again", run_id=run_id)
                    self._db.execute(
                        "INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?)",
                        (run_id, row[0] + 1, time.time(), checkpoint.get("status"), data),
                    )
                    if self.record_ticks and row[0] > 1 and self._db.execute(
                            "SELECT 1 FROM jianmu_points WHERE run_id = ? LIMIT 1",
                            (run_id,)).fetchone():
                        # its points hold its history: the checkpoints between its first (its
                        # start) and this one are read by nothing, and kept, each a whole
                        # state, they grew the file with the square of the run's length
                        self._db.execute("DELETE FROM checkpoints WHERE run_id = ? AND seq > 1"
                                         " AND seq <= ?", (run_id, row[0]))
            except sqlite3.Error as exc:
                raise CheckpointError(f"cannot save run {run_id!r}: {exc}") from exc
            if owner is not None and release:  # given up once committed: else `close` does
                self._granted.pop((run_id, owner), None)

    def _renew(self, run_id: str, owner: str) -> None:
        """Extend ``owner``'s lease (inside the caller's transaction), or refuse: the run is
        no longer ``owner``'s once another owner has taken it, even if that one let it go."""
        now = self._clock()
        if not self._extended(run_id, owner, now):
            held = self._held(run_id, now)
            by = f"{held.owner!r} holds it until {until(held.expires, now)}" if held else \
                "another owner may have continued it"
            raise RunClaimedError(
                f"run {run_id!r} is no longer held by {owner!r} (its lease ran out; {by}); "
                "this checkpoint was not saved: restore the run again",
                run_id=run_id, owner=held.owner if held else None,
                expires=held.expires if held else None,
            )

    def claim(self, run_id: str, owner: str, *, ttl: float | None = None) -> Lease:
        """Take the lease on ``run_id`` for ``owner``, or renew it if ``owner`` holds it; one
        atomic statement, so of two claimants at the same moment exactly one gets it.

        Raises:
            RunClaimedError: another owner holds an unexpired lease (or an expired one, as
                another live process of this machine); the message names it and when the
                lease ends.
        """
        ttl = self.lease_ttl if ttl is None else ttl
        with self._lock:
            try:
                with self._db:
                    now = self._clock()
                    process = this_process()
                    # a lapsed lease is taken, unless its holder is another live process of
                    # this machine: that one is known to be alive (slow, paused, or its clock
                    # and ours disagree), and keeps the run until it lets go or dies
                    taken = self._db.execute(
                        "INSERT INTO jianmu_leases (run_id, owner, expires, process)"
                        " VALUES (?, ?, ?, ?)"
                        " ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner,"
                        " expires = excluded.expires, process = excluded.process"
                        " WHERE jianmu_leases.owner = excluded.owner"
                        " OR (jianmu_leases.expires <= ?"
                        " AND NOT jianmu_alive_elsewhere(jianmu_leases.process))",
                        (run_id, owner, now + ttl, process, now),
                    ).rowcount or self._take_over(run_id, owner, now + ttl, process)
                    held = None if taken else self._holding(run_id)
                    seq = self._db.execute(
                        "SELECT COALESCE(MAX(seq), 0) FROM checkpoints WHERE run_id = ?",
                        (run_id,),
                    ).fetchone()[0]
            except sqlite3.Error as exc:
                raise CheckpointError(f"cannot claim run {run_id!r}: {exc}") from exc
            if held is not None:
                raise RunClaimedError(refusal(run_id, held, now), run_id=run_id,
                                      owner=held.owner, expires=held.expires)
            self._granted[(run_id, owner)] = os.getpid()
        return Lease(run_id=run_id, owner=owner, expires=now + ttl, seq=int(seq))

    def renew(self, run_id: str, owner: str) -> bool:
        """Extend ``owner``'s lease on ``run_id`` if it still holds it, and say whether it did;
        never takes the run anew (a lease given up or taken since is not ``owner``'s)."""
        with self._lock:
            try:
                with self._db:
                    return self._extended(run_id, owner, self._clock())
            except sqlite3.Error as exc:
                raise CheckpointError(f"cannot renew run {run_id!r}: {exc}") from exc

    def _extended(self, run_id: str, owner: str, now: float) -> bool:
        """Extend ``owner``'s lease on ``run_id`` to ``now`` plus its time-to-live, inside the
        caller's transaction; False if it is not ``owner``'s."""
        return bool(self._db.execute(
            "UPDATE jianmu_leases SET expires = ? WHERE run_id = ? AND owner = ?",
            (now + self.lease_ttl, run_id, owner),
        ).rowcount)

    def _holding(self, run_id: str) -> Lease | None:
        """The lease on ``run_id`` whatever its expiry (one a claim could not take)."""
        row = self._db.execute(
            "SELECT owner, expires, process FROM jianmu_leases WHERE run_id = ?", (run_id,)
        ).fetchone()
        return None if row is None else Lease(run_id=run_id, owner=row[0], expires=row[1],
                                              process=row[2])

    def _take_over(self, run_id: str, owner: str, expires: float, process: str) -> int:
        """Take a lease whose holder was a process of this machine that has died (killed,
        crashed): no need to wait for it to expire. 1 if taken, else 0."""
        row = self._db.execute("SELECT owner, process FROM jianmu_leases WHERE run_id = ?",
                               (run_id,)).fetchone()
        if row is None or not process_gone(row[1]):
            return 0
        return int(self._db.execute(  # only if it is still that dead holder's
            "UPDATE jianmu_leases SET owner = ?, expires = ?, process = ?"
            " WHERE run_id = ? AND owner = ? AND process = ?",
            (owner, expires, process, run_id, row[0], row[1]),
        ).rowcount)

    def release(self, run_id: str, owner: str) -> None:
        """Give up ``owner``'s lease on ``run_id`` (nothing if it does not hold it, or if this
        store granted it to another process: a forked child does not give up its parent's)."""
        if self._granted.get((run_id, owner), os.getpid()) != os.getpid():
            return
        with self._lock:
            try:
                with self._db:
                    self._db.execute("DELETE FROM jianmu_leases WHERE run_id = ? AND owner = ?",
                                     (run_id, owner))
            except sqlite3.Error as exc:  # still granted: `close` tries again (a live
                # process's lease is not taken once it expires, so it would hold the run)
                raise CheckpointError(f"cannot release run {run_id!r}: {exc}") from exc
            self._granted.pop((run_id, owner), None)

    def stopped(self, run_id: str) -> bool:
        """Whether ``run_id``, whose newest checkpoint says it is running, is run by no one:
        its owner's lease is gone (or never taken), its owner was a process of this machine
        that died (killed, crashed), or, of another machine, its lease has expired. A live
        owner of this machine renewing late (its loop held up) is still running."""
        with self._lock, self._reading(f"run {run_id!r}"):
            row = self._db.execute(
                "SELECT expires, process FROM jianmu_leases WHERE run_id = ?", (run_id,)
            ).fetchone()
            now = self._clock()
        if row is None:
            return True
        expires, process = row
        if process_gone(process):
            return True
        return not of_this_machine(process) and expires <= now

    def holder(self, run_id: str) -> Lease | None:
        """The unexpired lease on ``run_id``, if any."""
        if not storable(run_id):
            return None
        with self._lock, self._reading(f"run {run_id!r}"):
            return self._held(run_id, self._clock())

    def _held(self, run_id: str, now: float) -> Lease | None:
        row = self._db.execute(
            "SELECT owner, expires FROM jianmu_leases WHERE run_id = ? AND expires > ?",
            (run_id, now),
        ).fetchone()
        return None if row is None else Lease(run_id=run_id, owner=row[0], expires=row[1])

    def load(self, run_id: str) -> dict[str, Any] | None:
        """Return the newest checkpoint of ``run_id``, or None.

        Raises:
            CheckpointError: the row is not a JSON object, or the file is damaged.
        """
        if not storable(run_id):  # no run has it (SQLite would raise on the text)
            return None
        with self._lock, self._reading(f"the checkpoint of run {run_id!r}"):
            row = self._db.execute(
                "SELECT data FROM checkpoints WHERE run_id = ? ORDER BY seq DESC LIMIT 1",
                (run_id,),
            ).fetchone()
        if not row:
            return None
        try:
            data = json.loads(row[0])
        except ValueError as exc:
            raise CheckpointError(
                f"the checkpoint of run {run_id!r} in {self.path!r} is not JSON: {exc}"
            ) from None
        if not isinstance(data, dict):
            raise CheckpointError(
                f"the checkpoint of run {run_id!r} in {self.path!r} is not a JSON object"
            )
        return data

    def list_runs(self) -> list[tuple[str, str | None, float]]:
        """Each run's id, newest status and time of its newest checkpoint, newest first."""
        with self._lock, self._reading("the list of runs"):
            rows = self._db.execute(
                "SELECT run_id, status, created FROM checkpoints c WHERE seq = "
                "(SELECT MAX(seq) FROM checkpoints WHERE run_id = c.run_id) ORDER BY created DESC"
            ).fetchall()
        return [(r[0], r[1], r[2]) for r in rows]

    def delete(self, run_id: str) -> None:
        """Forget every checkpoint of ``run_id``."""
        with self._lock, self._db:
            self._forget(run_id)

    def _forget(self, run_id: str) -> None:
        """Delete ``run_id``'s checkpoints, lease and history (under the lock, in a
        transaction)."""
        self._db.execute("DELETE FROM checkpoints WHERE run_id = ?", (run_id,))
        self._db.execute("DELETE FROM jianmu_leases WHERE run_id = ?", (run_id,))
        self.history.delete(run_id)

    def prune(self, older_than: float, *,
              statuses: Iterable[str] = FINISHED_STATUSES) -> list[str]:
        """Forget the runs that ended (their newest checkpoint's status is one of ``statuses``)
        at least ``older_than`` seconds ago, as `delete` does, and return their ids. A run
        someone holds (an unexpired lease) is kept. Every run appends its checkpoints (and,
        with ``record_ticks``, its points and events) to the file for good: a service that
        saves thousands of runs calls this now and then to bound it (SQLite reuses the pages
        freed; ``VACUUM`` gives them back to the disk).

        Raises:
            ValueError: ``older_than`` is negative.
        """
        if not older_than >= 0:
            raise ValueError(f"older_than must be seconds >= 0, got {older_than!r}")
        wanted = tuple(dict.fromkeys(statuses))
        if not wanted:
            return []
        marks = ", ".join("?" * len(wanted))
        now = self._clock()
        with self._lock, self._reading("the list of runs"):
            rows = self._db.execute(
                "SELECT run_id FROM checkpoints c WHERE seq = (SELECT MAX(seq) FROM checkpoints"
                f" WHERE run_id = c.run_id) AND status IN ({marks}) AND created <= ? AND NOT"
                " EXISTS (SELECT 1 FROM jianmu_leases l WHERE l.run_id = c.run_id"
                " AND l.expires > ?)", (*wanted, time.time() - older_than, now),
            ).fetchall()
            gone = [row[0] for row in rows]
            with self._db:
                for run_id in gone:
                    self._forget(run_id)
        return gone

    def close(self) -> None:
        """Write what the history holds, give up this process's leases, close the database.

        In a forked child, closing the store it inherited does none of that: the history it
        holds and the leases are the parent's, and the connection is the parent's to close.
        """
        if os.getpid() != self._pid:
            _inherited.append(self._db)
            return
        try:
            self.history.flush()
        except CheckpointError:
            pass  # closing must not fail on the history: the checkpoints are what resumes
        for run_id, owner in list(self._granted):  # this process is done with them
            try:
                self.release(run_id, owner)
            except CheckpointError:
                pass  # the process's end frees it (a lease of a gone process is taken at once)
        with self._lock:
            self._db.close()

    @contextmanager
    def _reading(self, what: str) -> Iterator[None]:
        """Turn sqlite3's bare error on a damaged file into a `CheckpointError` naming it."""
        try:
            yield
        except sqlite3.Error as exc:
            raise CheckpointError(f"cannot read {what} in {self.path!r}: {exc}") from exc

    def __enter__(self) -> SQLiteCheckpointer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def restored(
    cls: Any, root: Behaviour, checkpointer: Checkpointer, run_id: str,
    state_manager: StateManager | None, kwargs: dict[str, Any],
) -> Any:
    """`ReactiveRunner.restore`: a runner of ``cls`` for ``run_id``, rebuilt from its newest
    checkpoint and claimed first where the store leases runs."""
    claim = RunClaim.of(checkpointer, run_id, kwargs.get("owner"))
    if claim is not None:  # claimed before it is read: no other owner moves it on meanwhile
        claim.take()
    try:
        data = checkpointer.load(run_id)
        if data is None:
            raise CheckpointError(f"no checkpoint for run {run_id!r}")
        if isinstance(data, dict) and data.get("version") != CHECKPOINT_VERSION:
            raise CheckpointError(
                f"unsupported checkpoint version {data.get('version')!r}: run {run_id!r} was "
                f"saved by another version of Jianmu (this one reads version "
                f"{CHECKPOINT_VERSION}); continue it with the Jianmu that saved it")
        checked(data, run_id)  # the parts read below have their shapes
        state = state_manager if state_manager is not None else _state_for(data, run_id)
        try:
            state.restore(data["state"])
        except StateValidationError as exc:  # the schema changed since: say which run
            raise StateValidationError(f"the checkpoint of run {run_id!r}: {exc}") from exc
        kwargs.setdefault("user_roles", data.get("user_roles", ()))
        kwargs["constraints"] = _kept_constraints(data, kwargs.get("constraints"), run_id)
        runner = cls(root, state, checkpointer=checkpointer, run_id=run_id, **kwargs)
        runner._claim = claim
        try:
            runner.interaction.restore(data.get("interaction", {}))
        except CheckpointError as exc:
            raise CheckpointError(f"the checkpoint of run {run_id!r}: {exc}") from None
        runner.ticks = int(data.get("ticks", 0))
        runner._restored_nodes = dict(data.get("nodes", {}))
        runner._went_on_from = links_from(data.get("span"))  # the run that saved it
        runner._setup_once()  # before the end is known: binding may write (a typed answer)
        _keep_finished(runner, data.get("nodes", {}))
        unmatched(runner._restored_nodes, dict(runner._walk(runner.root, "0")))
        runner._restored_end(data.get("status"), data.get("error"))
        if data.get("status") == "suspended":  # it stands suspended: a `send` waits for it
            runner._suspended_at = time.monotonic()
    except BaseException:
        if claim is not None:
            claim.release()
        raise
    return runner
