"""A run's points, kept beside its checkpoints: the run after each tick, to go back in time.

A point is what a run looked like after one tick that changed something: its state, each
node's status, the tree's nodes and the events since the point before. Points are numbered
0, 1, 2... per run, and that number is the same everywhere: the studio's time slider and
timeline, ``jianmu runs show`` and ``jianmu runs fork --at``. Point 0 is the state a run
started from.

`TickRecorder` makes the points. It listens to the run and never drives it: the state's change
notifications say which keys to look at, the event bus brings the run's events and the end of
each tick (``run.ticked``), and a pass over the tree's nodes finds the statuses that changed.
A point stores only what changed: state keys as operations (a key set, items appended to a
list, a key or namespace removed), statuses that changed, nodes that appeared. So a tick that
writes one key stores one key, and replaying the operations from point 0 gives any point back
(`RunHistory.frame`). A run saved by a checkpointer that recorded no ticks has its checkpoints
as its points instead.

Three tables in the checkpoint file: ``jianmu_points`` (one row per point), ``jianmu_events``
(the run's events, each with the point it led to) and ``jianmu_runs`` (the folder a run was
started in, and the run and point it was forked from).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

import py_trees
from py_trees.behaviour import Behaviour
from py_trees.common import Status
from pydantic_core import to_jsonable_python

from jianmu._json import json_text
from jianmu.errors import CheckpointError, DamagedRowError

if TYPE_CHECKING:
    from jianmu.runtime.context import Interaction, RunContext
    from jianmu.runtime.events import Event
    from jianmu.state import StateManager

__all__ = (
    "EVENT_TEXT_LIMIT",
    "FLUSH_S",
    "STOPPED",
    "DamagedRowError",
    "Frame",
    "PointInfo",
    "RecordedRun",
    "RunHistory",
    "TickRecorder",
    "apply_ops",
    "composite_kind",
    "describe_node",
    "forked_from",
    "node_kind",
    "short",
    "snapshot_ops",
    "walk_tree",
)


STOPPED = "STOPPED"
"""A point's status of a node the runner stopped at the run's end (a timeout, a cancel, a
failure elsewhere): it was running, and py_trees calls it ``INVALID``, as a node never run."""

EVENT_TEXT_LIMIT = 4000
"""A recorded event's text field is cut here; the run's state keeps the whole of it."""

Op = list[Any]
"""One state change: ``["set", ns, key, value]``, ``["add", ns, key, items]`` (appended to a
list), ``["del", ns, key]``, ``["new", ns]`` (a namespace made) or ``["drop", ns]`` (a
namespace removed); ``ns`` is None for the root."""


def short(value: Any) -> Any:
    """``value`` as JSON data with every long text cut at `EVENT_TEXT_LIMIT`."""
    if isinstance(value, str):
        if len(value) <= EVENT_TEXT_LIMIT:
            return value
        return value[:EVENT_TEXT_LIMIT] + f"… ({len(value)} characters)"
    if isinstance(value, dict):
        return {str(k): short(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [short(v) for v in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return short(str(value))


def apply_ops(snapshot: dict[str, Any], ops: list[Op]) -> dict[str, Any]:
    """A new state snapshot: ``snapshot`` with ``ops`` applied (``snapshot`` is not changed)."""
    root = dict(snapshot.get("root") or {})
    spaces = dict(snapshot.get("namespaces") or {})
    fresh: set[str] = set()  # namespaces copied already: the caller's stay as they were

    def store(ns: str | None) -> dict[str, Any]:
        if ns is None:
            return root
        if ns not in fresh:
            fresh.add(ns)
            spaces[ns] = dict(spaces.get(ns) or {})
        return spaces[ns]  # type: ignore[no-any-return]

    for op in ops:
        kind, ns = op[0], op[1]
        if kind == "drop":
            spaces.pop(ns, None)
            fresh.discard(ns)
        elif kind == "new":
            store(ns)
        elif kind == "del":
            store(ns).pop(op[2], None)
        elif kind == "add":
            values = store(ns)
            old = values.get(op[2])
            values[op[2]] = [*(old if isinstance(old, list) else []), *op[3]]
        else:
            store(ns)[op[2]] = op[3]
    return {"version": snapshot.get("version", 1), "root": root, "namespaces": spaces}


def snapshot_ops(snapshot: dict[str, Any]) -> list[Op]:
    """The operations that build ``snapshot`` from nothing (point 0 of a run)."""
    ops: list[Op] = [["set", None, k, v] for k, v in (snapshot.get("root") or {}).items()]
    for ns, values in (snapshot.get("namespaces") or {}).items():
        ops.append(["new", ns])
        ops += [["set", ns, k, v] for k, v in (values or {}).items()]
    return ops


def _changed_keys(ops: list[Op]) -> list[str]:
    out: list[str] = []
    for op in ops:
        ns = op[1]
        if op[0] == "new":
            continue
        name = "*" if op[0] == "drop" else op[2]
        key = f"{ns}/{name}" if ns else name
        if key not in out:
            out.append(key)
    return out


@dataclass(frozen=True, kw_only=True)
class PointInfo:
    """One point of a run, as listed (no state)."""

    number: int
    """The point's number: 0 is where the run started."""
    tick: int
    """The run's tick count at the point."""
    time: float
    """When it was recorded (seconds since the epoch)."""
    kind: Literal["tick", "checkpoint"]
    """A recorded tick, or a checkpoint (a run that recorded no ticks)."""
    keys: tuple[str, ...] = ()
    """State keys that changed (``key``, or ``namespace/key``)."""
    nodes: dict[str, str] = field(default_factory=dict)
    """Nodes whose status changed: node key -> status name."""


@dataclass(frozen=True, kw_only=True)
class Frame:
    """A run at one point: its state, its nodes and what changed there."""

    run_id: str
    number: int
    """The point's number."""
    tick: int
    """The run's tick count at the point."""
    time: float
    """When the point was recorded."""
    kind: Literal["tick", "checkpoint"]
    """A recorded tick or a checkpoint."""
    state: dict[str, Any]
    """The state snapshot (`StateManager.snapshot` format)."""
    statuses: dict[str, str]
    """Each node's status name (``SUCCESS``...) by node key (``0/1``)."""
    tree: dict[str, dict[str, Any]]
    """Each node by key: name, path, kind, type, namespace, reads, writes."""
    changed: tuple[str, ...] = ()
    """State keys this point changed (``key`` or ``namespace/key``; ``namespace/*``)."""
    changed_nodes: tuple[str, ...] = ()
    """Node keys whose status changed at this point."""
    errors: dict[str, str] = field(default_factory=dict)
    """The last error of each node that failed, by node key."""
    written: dict[str, list[str]] = field(default_factory=dict)
    """State keys each node wrote up to this point, by node path (where known)."""


_EMPTY_STATE: dict[str, Any] = {"version": 1, "root": {}, "namespaces": {}}


_FRAMES_KEPT = 64
"""Runs whose last frame read is kept to go on from (a studio open for days reads thousands)."""


class RunHistory:
    """Reads and writes points, events and run records in a checkpoint file.

    It shares the `SQLiteCheckpointer`'s connection and lock. Writes are buffered and land in
    one transaction on `flush` (the recorder flushes a few times a second, and every checkpoint
    flushes first), so recording costs no disk write per tick.
    """

    def __init__(self, db: sqlite3.Connection, lock: threading.Lock) -> None:
        self._db = db
        self._lock = lock
        self._points: list[tuple[str, int, int, float, str]] = []
        self._events: list[tuple[str, int, float, str, str | None, str]] = []
        self._runs: list[tuple[str, float, str | None, str | None, int | None]] = []
        self._frames: dict[str, Frame] = {}
        try:
            with self._db:
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS jianmu_points (run_id TEXT NOT NULL,"
                    " point INTEGER NOT NULL, tick INTEGER NOT NULL, time REAL NOT NULL,"
                    " data TEXT NOT NULL, PRIMARY KEY (run_id, point))")
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS jianmu_events (run_id TEXT NOT NULL,"
                    " point INTEGER NOT NULL, time REAL NOT NULL, name TEXT NOT NULL,"
                    " node TEXT, fields TEXT NOT NULL)")
                self._db.execute(
                    "CREATE INDEX IF NOT EXISTS jianmu_events_run ON jianmu_events (run_id)")
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS jianmu_runs (run_id TEXT PRIMARY KEY,"
                    " created REAL NOT NULL, cwd TEXT, parent TEXT, parent_point INTEGER)")
        except sqlite3.Error as exc:
            raise CheckpointError(f"cannot open the run history: {exc}") from exc

    # -- writing -------------------------------------------------------------------------------
    def begin(self, run_id: str, *, cwd: str | None, parent: str | None = None,
              parent_point: int | None = None) -> None:
        """Record where ``run_id`` was started (kept if it was recorded before)."""
        self._runs.append((run_id, time.time(), cwd, parent, parent_point))

    def add_point(self, run_id: str, number: int, tick: int, data: dict[str, Any],
                  events: list[tuple[float, str, str | None, dict[str, Any]]],
                  at: float | None = None) -> None:
        """Buffer point ``number`` of ``run_id`` and the events that led to it."""
        self._points.append((run_id, number, tick, at or time.time(),
                             json_text(data, default=repr)))
        self.add_events(run_id, number, events)

    def add_events(self, run_id: str, number: int,
                   events: list[tuple[float, str, str | None, dict[str, Any]]]) -> None:
        """Buffer events that belong to point ``number`` (they led to it)."""
        for stamp, name, node, fields in events:
            self._events.append((run_id, number, stamp, name, node,
                                 json_text(short(fields))))

    @property
    def has_pending(self) -> bool:
        """Whether anything waits to be written."""
        return bool(self._points or self._events or self._runs)

    def flush(self) -> None:
        """Write what is buffered, in one transaction."""
        if not self.has_pending:
            return
        with self._lock:
            try:
                with self._db:
                    self.write_pending()
            except sqlite3.Error as exc:
                raise CheckpointError(f"cannot save the run history: {exc}") from exc

    def write_pending(self) -> None:
        """Write what is buffered on the shared connection; the caller holds the lock and the
        transaction (a checkpoint writes the points before it in its own)."""
        points, self._points = self._points, []
        events, self._events = self._events, []
        runs, self._runs = self._runs, []
        if runs:
            self._db.executemany("INSERT OR IGNORE INTO jianmu_runs VALUES (?, ?, ?, ?, ?)", runs)
        if points:
            self._db.executemany("INSERT OR REPLACE INTO jianmu_points VALUES (?, ?, ?, ?, ?)",
                                 points)
        if events:
            self._db.executemany("INSERT INTO jianmu_events VALUES (?, ?, ?, ?, ?, ?)", events)

    def delete(self, run_id: str) -> None:
        """Forget ``run_id``'s points, events and record (the caller holds the transaction)."""
        self._points = [p for p in self._points if p[0] != run_id]
        self._events = [e for e in self._events if e[0] != run_id]
        self._runs = [r for r in self._runs if r[0] != run_id]
        self._frames.pop(run_id, None)
        for table in ("jianmu_points", "jianmu_events", "jianmu_runs"):
            self._db.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))

    # -- reading -------------------------------------------------------------------------------
    def _rows(self, sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def last_point(self, run_id: str) -> int | None:
        """The number of ``run_id``'s newest recorded point (buffered ones included)."""
        buffered = [p[1] for p in self._points if p[0] == run_id]
        if buffered:
            return max(buffered)
        row = self._rows("SELECT MAX(point) FROM jianmu_points WHERE run_id = ?", (run_id,))
        return None if row[0][0] is None else int(row[0][0])

    def run(self, run_id: str) -> dict[str, Any] | None:
        """Where ``run_id`` was started and what it was forked from, or None."""
        return self.runs([run_id]).get(run_id)

    def runs(self, run_ids: list[str] | None = None) -> dict[str, dict[str, Any]]:
        """Each recorded run's folder (``cwd``) and origin (``parent``, ``parent_point``)."""
        sql = "SELECT run_id, created, cwd, parent, parent_point FROM jianmu_runs"
        rows = self._rows(sql, ())
        wanted = None if run_ids is None else set(run_ids)
        return {r[0]: {"created": r[1], "cwd": r[2], "parent": r[3], "parent_point": r[4]}
                for r in rows if wanted is None or r[0] in wanted}

    def points(self, run_id: str) -> list[PointInfo]:
        """Every point of ``run_id``, oldest first (its checkpoints if it recorded no ticks)."""
        rows = self._rows("SELECT point, tick, time, data FROM jianmu_points WHERE run_id = ?"
                          " ORDER BY point", (run_id,))
        if rows:
            out = []
            for number, tick, stamp, data in rows:
                parsed = _loaded(data, f"point {number} of run {run_id!r}")
                out.append(PointInfo(number=number, tick=tick, time=stamp, kind="tick",
                                     keys=tuple(_changed_keys(parsed.get("state", []))),
                                     nodes=dict(parsed.get("nodes", {}))))
            return out
        out, before = [], None
        for number, (stamp, data) in enumerate(self._checkpoints(run_id)):
            nodes = {k: str(v.get("status")) for k, v in (data.get("nodes") or {}).items()}
            state = data.get("state") or _EMPTY_STATE
            keys = _diff_keys(before, state)
            out.append(PointInfo(number=number, tick=int(data.get("ticks", 0)), time=stamp,
                                 kind="checkpoint", keys=tuple(keys), nodes=nodes))
            before = state
        return out

    def _checkpoints(self, run_id: str) -> list[tuple[float, dict[str, Any]]]:
        rows = self._rows("SELECT created, data FROM checkpoints WHERE run_id = ? ORDER BY seq",
                          (run_id,))
        return [(r[0], _loaded(r[1], f"the checkpoint of run {run_id!r}")) for r in rows]

    def frame(self, run_id: str, number: int) -> Frame:
        """``run_id`` at point ``number``.

        Raises:
            CheckpointError: the run has no such point.
        """
        if not 0 <= number < 2**63:  # none is recorded there, and SQLite cannot even look
            raise CheckpointError(self._no_point(run_id, number))
        cached = self._frames.get(run_id)
        if cached is not None and self._rows(
                "SELECT time FROM jianmu_points WHERE run_id = ? AND point = ?",
                (run_id, cached.number)) != [(cached.time,)]:
            # deleted by another process (and maybe run again under the same id): a frame of
            # the old run would show its state as the new one's, and a fork would start from it
            del self._frames[run_id]
            cached = None
        start = cached if cached is not None and cached.number <= number else None
        if start is not None and start.number == number:
            return start
        after = -1 if start is None else start.number
        rows = self._rows("SELECT point, tick, time, data FROM jianmu_points WHERE run_id = ?"
                          " AND point > ? AND point <= ? ORDER BY point", (run_id, after, number))
        if not rows:
            if start is None and not self._rows(
                    "SELECT 1 FROM jianmu_points WHERE run_id = ? LIMIT 1", (run_id,)):
                return self._checkpoint_frame(run_id, number)
            raise CheckpointError(self._no_point(run_id, number))
        frame = start
        for point, tick, stamp, data in rows:
            frame = _advance(run_id, frame, point, tick, stamp,
                             _loaded(data, f"point {point} of run {run_id!r}"))
        assert frame is not None
        if frame.number != number:
            raise CheckpointError(self._no_point(run_id, number))
        if run_id not in self._frames and len(self._frames) >= _FRAMES_KEPT:
            del self._frames[next(iter(self._frames))]  # the oldest: a studio pages through
        self._frames[run_id] = frame
        return frame

    def _no_point(self, run_id: str, number: int) -> str:
        last = self.last_point(run_id)
        if last is None:
            count = len(self._checkpoints(run_id))
            if not count:
                return f"run {run_id!r} has no recorded points"
            last = count - 1
        return f"run {run_id!r} has no point {number}: its points are 0 to {last}"

    def _checkpoint_frame(self, run_id: str, number: int) -> Frame:
        saved = self._checkpoints(run_id)
        if not 0 <= number < len(saved):
            raise CheckpointError(self._no_point(run_id, number))
        stamp, data = saved[number]
        nodes = data.get("nodes") or {}
        before = saved[number - 1][1].get("state") if number else None
        state = data.get("state") or _EMPTY_STATE
        return Frame(run_id=run_id, number=number, tick=int(data.get("ticks", 0)), time=stamp,
                     kind="checkpoint", state=state,
                     statuses={k: str(v.get("status")) for k, v in nodes.items()},
                     tree={k: {"name": str(v.get("name", "?"))} for k, v in nodes.items()},
                     changed=tuple(_diff_keys(before, state)))

    def events(self, run_id: str) -> list[dict[str, Any]]:
        """``run_id``'s recorded events, in the order they happened."""
        rows = self._rows("SELECT point, time, name, node, fields FROM jianmu_events"
                          " WHERE run_id = ? ORDER BY rowid", (run_id,))
        out = [{"point": r[0], "time": r[1], "name": r[2], "node": r[3],
                "fields": _loaded(r[4], f"an event of run {run_id!r}")} for r in rows]
        out.sort(key=lambda e: e["time"])  # stable: events of one instant keep their order
        return out


def _loaded(text: str, what: str) -> dict[str, Any]:
    """A stored row's JSON object; a damaged row is a `DamagedRowError` that names it (the
    studio and ``jianmu runs show`` say it, rather than fail with a traceback)."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise DamagedRowError(f"{what} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise DamagedRowError(f"{what} is not a JSON object")
    return value


def _advance(run_id: str, before: Frame | None, number: int, tick: int, stamp: float,
             data: dict[str, Any]) -> Frame:
    ops = data.get("state") or []
    state = apply_ops(before.state if before is not None else _EMPTY_STATE, ops)
    statuses = dict(before.statuses) if before is not None else {}
    tree = dict(before.tree) if before is not None else {}
    nodes = data.get("nodes") or {}
    statuses.update(nodes)
    tree.update(data.get("tree") or {})
    for gone in data.get("gone") or []:
        tree.pop(gone, None)
        statuses.pop(gone, None)
    errors = dict(before.errors) if before is not None else {}
    errors.update(data.get("errors") or {})
    written = {k: list(v) for k, v in before.written.items()} if before is not None else {}
    for path, keys in (data.get("writes") or {}).items():
        known = written.setdefault(path, [])
        known += [k for k in keys if k not in known]
    first = before is None  # where the run started: nothing "changed" yet
    return Frame(run_id=run_id, number=number, tick=tick, time=stamp, kind="tick",
                 state=state, statuses=statuses, tree=tree,
                 changed=() if first else tuple(_changed_keys(ops)),
                 changed_nodes=() if first else tuple(nodes), errors=errors, written=written)


def _diff_keys(before: dict[str, Any] | None, after: dict[str, Any]) -> list[str]:
    """The keys that differ between two snapshots (for points that are checkpoints)."""
    if before is None:
        return []
    out = []
    spaces = [(None, before.get("root") or {}, after.get("root") or {})]
    old_spaces, new_spaces = before.get("namespaces") or {}, after.get("namespaces") or {}
    spaces += [(ns, old_spaces.get(ns) or {}, new_spaces.get(ns) or {})
               for ns in {*old_spaces, *new_spaces}]
    for ns, old, new in spaces:
        for key in {*old, *new}:
            if old.get(key) != new.get(key):
                out.append(f"{ns}/{key}" if ns else key)
    return sorted(out)


def forked_from(db: sqlite3.Connection, run_id: str) -> tuple[str, int] | None:
    """The run and point ``run_id`` was forked from, or None (also when nothing is recorded)."""
    try:
        row = db.execute("SELECT parent, parent_point FROM jianmu_runs WHERE run_id = ?",
                         (run_id,)).fetchone()
    except sqlite3.Error:  # a file without the table: nothing was forked there
        return None
    if row is None or row[0] is None:
        return None
    return str(row[0]), int(row[1] or 0)


FLUSH_S = 0.2
"""Points wait at most this long (between ticks) before they are written, so a studio
watching the run from another process sees it as it goes."""
_SKIPPED = frozenset({"llm.call.delta"})
"""Events not kept: a model's streamed text arrives whole with its turn."""
_MISSING: Any = object()


class RecordedRun(Protocol):
    """What the recorder reads of a run (a `ReactiveRunner`)."""

    root: Behaviour
    state: StateManager
    ctx: RunContext
    interaction: Interaction
    ticks: int

    @property
    def run_id(self) -> str: ...


def composite_kind(node: Behaviour) -> str | None:
    """``sequence``, ``selector``, ``parallel`` or ``decorator``; None for a leaf."""
    if isinstance(node, py_trees.composites.Sequence):
        return "sequence"
    if isinstance(node, py_trees.composites.Selector):
        return "selector"
    if isinstance(node, py_trees.composites.Parallel):
        return "parallel"
    if isinstance(node, py_trees.decorators.Decorator):
        return "decorator"
    return None


def node_kind(node: Behaviour) -> str:
    """What a node is: its class's ``node_kind`` (``tool``, ``model``, ``skill``), else its
    composite kind (`composite_kind`), else ``custom``."""
    kind = getattr(node, "node_kind", None)
    if isinstance(kind, str) and kind != "custom":
        return kind
    return composite_kind(node) or "custom"


def _children(node: Behaviour) -> list[Behaviour]:
    """A node's children; none yet for a node that compiles them on its first tick."""
    if getattr(node, "compiled", True) is False:
        return []
    return list(node.children)


def walk_tree(root: Behaviour) -> list[tuple[str, Behaviour, str, int]]:
    """Every node depth-first: its key (``0/2/1``), the node, its path from the root (as the
    runner names paths: siblings sharing a name get their index) and its number of children."""
    out: list[tuple[str, Behaviour, str, int]] = []

    def visit(node: Behaviour, key: str, path: str) -> None:
        kids = _children(node)
        out.append((key, node, path, len(kids)))
        names = Counter(child.name for child in kids)
        for index, child in enumerate(kids):
            label = child.name if names[child.name] == 1 else f"{child.name}[{index}]"
            visit(child, f"{key}/{index}", f"{path}/{label}")

    visit(root, "0", root.name)
    return out


def describe_node(node: Behaviour, path: str) -> dict[str, Any]:
    """What the studio shows of a node: name, path, kind, type, namespace, declared ports."""
    info: dict[str, Any] = {"name": node.name, "path": path, "kind": node_kind(node),
                            "type": type(node).__name__}
    namespace = getattr(node, "namespace", None)
    if namespace:
        info["ns"] = str(namespace)
    for attr, port in (("input_key", "reads"), ("output_key", "writes")):
        value = getattr(node, attr, None)
        if isinstance(value, str) and value:
            info[port] = [value]
    # the sub-agents a node calls as tools (`agent_tool`): they run trees of their own, which
    # the graph draws under it
    agents = [tool.name for tool in getattr(node, "toolset", None) or ()
              if getattr(tool, "node_kind", None) == "agent"]
    if agents:
        info["agents"] = agents
    return info


def _dump(value: Any) -> Any:
    return to_jsonable_python(value, fallback=repr)  # as `StateManager.snapshot` does


class TickRecorder:
    """Records ``runner``'s points in ``history``; `attach` starts it (the checkpointer's
    ``observe`` does, when the runner is made)."""

    def __init__(self, runner: RecordedRun, history: RunHistory) -> None:
        self.runner = runner
        self.history = history
        self.run_id = runner.run_id
        self._lock = threading.Lock()  # state writes and events may come from other threads
        self._changed: set[str] = set()
        self._events: list[tuple[float, str, str | None, dict[str, Any]]] = []
        self._writes: dict[str, set[str]] = {}
        self._mirror: dict[str | None, dict[str, Any]] = {None: {}}
        self._lists: dict[tuple[str | None, str], tuple[int, int]] = {}
        """For each list value last seen: its identity and length (see `_compare`)."""
        self._statuses: dict[str, str] = {}
        self._tree: dict[str, dict[str, Any]] = {}
        self._nodes: list[tuple[str, Behaviour]] = []
        self._seen: list[Any] = []
        """Each node's status at the last point, in `_nodes` order (compared by identity)."""
        self._shapes: list[tuple[Behaviour, int, bool]] = []
        """Each node that has or may get children: its count, whether it compiles them."""
        self._asked: set[str] = set()
        self._next = 0
        self._flushed = time.monotonic()
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._between = False
        """Whether events that came between ticks wait to be written (`_write_between`)."""
        self._ahead = False
        """Whether events of the next point are written before it (`_write_between`)."""

    def attach(self) -> None:
        """Take the run's starting point (or continue its history) and start listening."""
        self.history.flush()
        last = self.history.last_point(self.run_id)
        if last is None:
            self._start()
        else:
            self._resume(last)
        self.runner.state.subscribe(self._on_state)
        self.runner.ctx.events.subscribe("*", self._on_event)

    # -- the first point -----------------------------------------------------------------------
    def _start(self) -> None:
        snapshot = self.runner.state.snapshot()
        self._mirror = {None: dict(snapshot["root"])}
        self._mirror.update({ns: dict(v) for ns, v in snapshot["namespaces"].items()})
        self._rebuild()
        self._statuses = {key: node.status.name for key, node in self._nodes}
        try:
            cwd: str | None = os.getcwd()
        except OSError:  # the folder was removed under us
            cwd = None
        self.history.begin(self.run_id, cwd=cwd)
        data = {"state": snapshot_ops(snapshot), "nodes": dict(self._statuses),
                "tree": dict(self._tree)}
        self.history.add_point(self.run_id, 0, self.runner.ticks, data, [])
        self._next = 1

    def _resume(self, last: int) -> None:
        frame = self.history.frame(self.run_id, last)
        self._mirror = {None: dict(frame.state.get("root") or {})}
        self._mirror.update({ns: dict(v) for ns, v in
                             (frame.state.get("namespaces") or {}).items()})
        self._statuses = dict(frame.statuses)
        self._tree = dict(frame.tree)
        self._changed = {"*"}  # a checkpoint taken between ticks may be ahead of the last point
        self._next = last + 1

    # -- listening -----------------------------------------------------------------------------
    def _on_state(self, keys: frozenset[str]) -> None:
        try:
            task = asyncio.current_task()
        except RuntimeError:  # written from a thread without a loop
            task = None
        with self._lock:
            self._changed.update(keys)
            if task is not None:
                name = task.get_name()
                if name.startswith("jianmu:"):  # an async node's task: `AsyncNode._start`
                    written = self._writes.setdefault(name[7:], set())
                    written.update(k for k in keys if not k.endswith("*"))

    def _on_event(self, event: Event) -> None:
        name = event.name
        if name == "run.ticked":
            self._tick(int(event.fields.get("tick", self.runner.ticks)))
            return
        if name in _SKIPPED:
            return
        fields = dict(event.fields)
        fields.pop("result", None)  # run.finished's RunResult: the run's own record says it
        if name in ("interaction.approved", "interaction.rejected"):
            self._add_decision(fields)
        elif name == "interaction.answered":  # a question's answer (ask_user, AskUser)
            self._add_decision(fields)
        elif name == "run.message":  # the user's next turn (`ReactiveRunner.send`): its text
            self._add_message(fields)
        with self._lock:
            self._events.append((event.timestamp, name, event.node, short(fields)))
            soon, self._between = not self._between, True
        if name == "run.finished":
            self._tick(self.runner.ticks, final=True)
        elif soon and self._loop is not None:
            # a tool call starts in its own task, after the tick that launched it: its events
            # would wait for the next tick, which only its end brings
            with contextlib.suppress(RuntimeError):  # the loop is closed: the run is over
                self._loop.call_soon_threadsafe(self._write_between_later)

    def _write_between_later(self) -> None:
        asyncio.get_running_loop().call_later(FLUSH_S, self._write_between)

    def _write_between(self) -> None:
        """Write the events that came since the last tick as those of the next point (they
        lead to it), so a studio sees a long tool call start while it runs."""
        with self._lock:
            events, self._events = self._events, []
            self._between = False
        if events:
            self.history.add_events(self.run_id, self._next, events)
            self._ahead = True
            self._flush()

    def _add_message(self, fields: dict[str, Any]) -> None:
        namespace = fields.get("namespace")
        manager = self.runner.state
        view = manager.scope(str(namespace)) if namespace else manager.root
        messages = view.get("messages") or []
        if messages:
            last = _dump(messages[-1])
            fields.setdefault("content", last.get("content") if isinstance(last, dict) else last)

    def _add_decision(self, fields: dict[str, Any]) -> None:
        """Who answered and what they said (the event carries the request id only)."""
        interaction = self.runner.interaction
        request_id = str(fields.get("request_id"))
        decision = interaction.decision(request_id)
        if decision is not None and decision.message:
            fields["message"] = decision.message
        request = interaction.request(request_id)
        if request is not None:
            fields.setdefault("tool", request.payload.get("tool") or request.kind)

    # -- one point -----------------------------------------------------------------------------
    def _tick(self, tick: int, *, final: bool = False) -> None:
        with contextlib.suppress(RuntimeError):  # no loop: a test ticking by hand
            self._loop = asyncio.get_running_loop()  # each run_sync has a loop of its own
        with self._lock:
            changed, self._changed = self._changed, set()
            events, self._events = self._events, []
            writes, self._writes = self._writes, {}
            self._between = False
        ops = self._state_ops(changed) if changed else []
        grown = not self._nodes or any(
            count != (0 if lazy and not node.compiled else len(node.children))  # type: ignore[attr-defined]
            for node, count, lazy in self._shapes)
        added, gone = self._structure() if grown else ({}, [])
        nodes: dict[str, str] = {}
        statuses, seen = self._statuses, self._seen
        for index, (key, node) in enumerate(self._nodes):  # a tight loop: it runs every tick
            status = node.status
            if status is not seen[index]:
                seen[index] = status
                if statuses.get(key) != status.name:
                    if final and status is Status.INVALID:
                        # no tick ends a run: the runner stopped the tree (a timeout, a cancel,
                        # a failure elsewhere). A node running at the last tick was stopped,
                        # not left unrun; one that had ended keeps how it ended. Compared
                        # again if the run goes on
                        seen[index] = None
                        if statuses.get(key) == "RUNNING":
                            nodes[key] = statuses[key] = STOPPED
                    else:
                        nodes[key] = statuses[key] = status.name
        events += self._asked_events()
        if not (ops or nodes or added or gone or events or writes or self._ahead):
            return
        if final and not (ops or nodes or added or gone or self._ahead):
            # the run ended without another change: its last events belong to its last point
            self.history.add_events(self.run_id, self._next - 1, events)
        else:
            data: dict[str, Any] = {"state": ops, "nodes": nodes}
            if added:
                data["tree"] = added
            if gone:
                data["gone"] = gone
            errors = self._errors(nodes)
            if errors:
                data["errors"] = errors
            if writes:
                data["writes"] = {path: sorted(keys) for path, keys in writes.items()}
            self.history.add_point(self.run_id, self._next, tick, data, events)
            self._next += 1
            self._ahead = False
        if final or time.monotonic() - self._flushed >= FLUSH_S:
            self._flush()
        elif self._timer is None:  # the run may now wait a long time: write it down soon
            try:
                self._timer = asyncio.get_running_loop().call_later(FLUSH_S, self._flush)
            except RuntimeError:  # no loop here (a test ticking by hand): the next tick writes
                pass

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._flushed = time.monotonic()
        try:
            self.history.flush()
        except CheckpointError:  # the history is for looking back: never fail the run for it
            pass

    def _asked_events(self) -> list[tuple[float, str, str | None, dict[str, Any]]]:
        """A question the run started to wait for, with what it asks about."""
        interaction = self.runner.interaction
        if not interaction.has_pending:
            return []
        out = []
        for request in interaction.pending:
            if request.id in self._asked:
                continue
            self._asked.add(request.id)
            payload = request.payload
            out.append((request.created, "interaction.asked", request.node, short({
                "request_id": request.id, "tool": payload.get("tool") or request.kind,
                "arguments": payload.get("arguments"), "reason": payload.get("reason"),
                "rule": payload.get("rule"), "summary": request.summary})))
        return out

    def _errors(self, nodes: dict[str, str]) -> dict[str, str]:
        failed = {key for key, status in nodes.items() if status == "FAILURE"}
        out = {}
        for key, node in self._nodes:
            if key in failed:
                error = getattr(node, "error", None)
                text = node.feedback_message or (f"{type(error).__name__}: {error}"
                                                 if error is not None else "")
                if text:
                    out[key] = short(text)
        return out

    # -- the tree ------------------------------------------------------------------------------
    def _structure(self) -> tuple[dict[str, dict[str, Any]], list[str]]:
        """Nodes that appeared (a compiled skill's subtree) or went, since the last point."""
        before = self._tree
        self._rebuild()
        added = {k: v for k, v in self._tree.items() if before.get(k) != v}
        gone = [k for k in before if k not in self._tree]
        for key in gone:
            self._statuses.pop(key, None)
        return added, gone

    def _rebuild(self) -> None:
        walked = walk_tree(self.runner.root)
        self._nodes = [(key, node) for key, node, _, _ in walked]
        self._seen = [None] * len(self._nodes)  # compared again on the next point
        self._shapes = [(node, count, hasattr(type(node), "compiled")) for _, node, _, count
                        in walked if count or hasattr(type(node), "compiled")
                        or isinstance(node, py_trees.composites.Composite)]
        self._tree = {key: describe_node(node, path) for key, node, path, _ in walked}

    # -- the state -----------------------------------------------------------------------------
    def _state_ops(self, changed: set[str]) -> list[Op]:
        manager = self.runner.state
        ops: list[Op] = []
        if "*" in changed:
            spaces: set[str | None] = {None, *manager.namespaces(), *self._mirror}
            for ns in sorted(spaces, key=lambda s: (s is not None, s or "")):
                self._compare_space(ns, ops)
            return ops
        spaces_now: list[str] | None = None
        for full in sorted(changed):
            ns_part, _, key = full.rpartition("/")
            ns = ns_part or None
            if key == "*":
                self._compare_space(ns, ops)
                continue
            if ns is not None:
                if spaces_now is None:
                    spaces_now = manager.namespaces()
                if ns not in spaces_now or ns not in self._mirror:  # gone, or new
                    self._compare_space(ns, ops)
                    continue
            self._compare(ns, key, ops)
        return ops

    def _compare_space(self, ns: str | None, ops: list[Op]) -> None:
        manager = self.runner.state
        if ns is not None and ns not in manager.namespaces():
            if self._mirror.pop(ns, None) is not None:
                ops.append(["drop", ns])
            return
        view = manager.scope(ns) if ns else manager.root
        if ns not in self._mirror:
            self._mirror[ns] = {}
            ops.append(["new", ns])
        for key in sorted({*view.keys(), *self._mirror.get(ns, {})}):
            self._compare(ns, key, ops)

    def _compare(self, ns: str | None, key: str, ops: list[Op]) -> None:
        manager = self.runner.state
        view = manager.scope(ns) if ns else manager.root
        mirror = self._mirror.setdefault(ns, {})
        raw = view.get(key, _MISSING)
        old = mirror.get(key, _MISSING)
        if raw is _MISSING:
            if old is not _MISSING:
                del mirror[key]
                ops.append(["del", ns, key])
            return
        seen = self._lists.get((ns, key))
        if isinstance(raw, list):
            self._lists[(ns, key)] = (id(raw), len(raw))
            if (seen is not None and seen[0] == id(raw) and len(raw) > seen[1]
                    and isinstance(old, list) and len(old) == seen[1]):
                # the same list, grown: a reducer appended to it (`StateManager` extends a
                # list in place), so only the new items are dumped, however long it is
                added = _dump(raw[seen[1]:])
                mirror[key] = [*old, *added]
                ops.append(["add", ns, key, added])
                return
        new = _dump(raw)
        if old is not _MISSING and new == old:
            return
        mirror[key] = new
        if (isinstance(old, list) and isinstance(new, list) and len(new) > len(old)
                and new[:len(old)] == old):
            ops.append(["add", ns, key, new[len(old):]])  # an appended list stores the news
        else:
            ops.append(["set", ns, key, new])
