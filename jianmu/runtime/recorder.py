"""`TickRecorder`: after each tick that changed something, one point of the run's history.

It listens to the run and never drives it: the state's change notifications say which keys
to look at, the event bus brings the run's events and the end of each tick (``run.ticked``),
and a pass over the tree's nodes finds the statuses that changed. A point holds only what
changed (`RunHistory` describes the format), so a tick that writes one key stores one key.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import Counter
from typing import TYPE_CHECKING, Any, Protocol

import py_trees
from py_trees.behaviour import Behaviour
from pydantic_core import to_jsonable_python

from jianmu.errors import CheckpointError
from jianmu.runtime.history import Op, RunHistory, short, snapshot_ops

if TYPE_CHECKING:
    from jianmu.runtime.context import RunContext
    from jianmu.runtime.events import Event
    from jianmu.runtime.interaction import Interaction
    from jianmu.state import StateManager

__all__ = ("FLUSH_S", "RecordedRun", "TickRecorder", "composite_kind", "describe_node",
           "node_kind", "walk_tree")

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
        if name in ("interaction.approved", "interaction.rejected"):
            self._add_decision(fields)
        elif name == "run.message":  # the user's next turn (`ReactiveRunner.send`): its text
            self._add_message(fields)
        with self._lock:
            self._events.append((event.timestamp, name, event.node, short(fields)))
        if name == "run.finished":
            self._tick(self.runner.ticks, final=True)

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
        with self._lock:
            changed, self._changed = self._changed, set()
            events, self._events = self._events, []
            writes, self._writes = self._writes, {}
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
                    nodes[key] = statuses[key] = status.name
        events += self._asked_events()
        if not (ops or nodes or added or gone or events or writes):
            return
        if final and not (ops or nodes or added or gone):
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
