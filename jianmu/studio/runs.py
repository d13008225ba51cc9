"""Where the studio finds the CLI's runs and answers them: the SQLite checkpoints, with each
run's recorded points. It answers through the same path as the CLI (`ReactiveRunner.approve`
on a restored run), so an approval is used once, and forks a run from any of its points.

The studio's own record of what it did to a run (who answered which approval, which run it
forked, what went wrong continuing one) is its `Journal`: a table beside the checkpoints, in
the same SQLite file; the runs' own events are with their points (`jianmu.runtime.points`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from jianmu._json import json_text
from jianmu.errors import CheckpointError, InteractionError, JianmuError, RunNotFoundError
from jianmu.runtime.checkpoint import CHECKPOINT_VERSION, SQLiteCheckpointer, checked
from jianmu.runtime.context import ApprovalRequest, Interaction
from jianmu.runtime.fork import fork_run
from jianmu.runtime.lease import default_owner
from jianmu.runtime.points import DamagedRowError, Frame, short
from jianmu.runtime.runner import ReactiveRunner
from jianmu.studio.timeline import ended_agent_calls, event_timeline, message_timeline, shown
from jianmu.studio.views import (
    agent_statuses,
    asking_at,
    final_answer,
    node_rows,
    pending_rows,
    point_rows,
    usage_text,
)

__all__ = (
    "FINISHED", "CheckpointRuns", "Journal", "Restored", "Restorer", "decision_message", "verb",
)

FINISHED = frozenset({"success", "failure", "timeout", "cancelled"})
_ENDED = frozenset({"success", "failure"})  # final; a run timed out or cancelled goes on
_DECISIONS = frozenset({"studio.approved", "studio.rejected", "studio.answered"})


@dataclass
class Restored:
    """A checkpointed run rebuilt in this process, ready to be answered and continued."""

    runner: ReactiveRunner
    close: Callable[[], Awaitable[None]]
    """Releases what the target holds (its model provider) once the run stops."""


_NO_FORK = ("no Fork here: the studio rebuilds only the trees of runs 'jianmu run' started; "
            "fork this one in Python (jianmu.runtime.fork.fork_run, ReactiveRunner.restore)")

Restorer = Callable[[str], "Restored | None"]
"""Rebuilds a checkpointed run's tree (as ``jianmu resume`` does); None when it cannot. One
with a ``rebuilds(run_id) -> bool`` attribute tells beforehand which runs it can rebuild, so
the page offers Fork only for those."""


def _decided(data: dict[str, Any], call_id: str) -> str | None:
    """How ``call_id`` was decided in a checkpoint ("approved ('msg')"), if it was."""
    for decision in data.get("interaction", {}).get("decisions", []):
        if decision.get("request_id") == call_id:
            said = f" ({decision['message']!r})" if decision.get("message") else ""
            if decision.get("answer") is not None:
                return "answered"
            return f"{verb(bool(decision.get('approved')))}{said}"
    return None


def apply_decision(to: ReactiveRunner | Interaction, call_id: str, approved: bool,
                   message: str, arguments: dict[str, Any] | None = None,
                   answer: str | None = None) -> None:
    """Record one decision on a runner or a bare interaction: an answer to a question, an
    approval (``arguments``: the call edited) or a rejection."""
    if answer is not None:
        to.answer(call_id, answer)
    elif approved:
        to.approve(call_id, message, arguments=arguments)
    else:
        to.reject(call_id, message)


def _close_quietly(restored: Restored) -> None:
    """Release a run rebuilt for a decision that was refused (its checkpoint is untouched)."""
    async def close() -> None:
        await restored.close()

    try:
        asyncio.run(close())
    except Exception:  # nothing more to do: the refusal is what the caller hears of
        pass


def verb(approved: bool) -> str:
    """``approved`` or ``rejected``."""
    return "approved" if approved else "rejected"


def decision_message(approved: bool, text: str | None, by: str) -> str:
    """The decision's message: the person's note, and who answered."""
    signed = f"{verb(approved)} by {by} in Jianmu Studio"
    return f"{text} ({signed})" if text else signed


class CheckpointRuns:
    """Runs in a `SQLiteCheckpointer` file (what ``jianmu run`` saves)."""

    kind = "cp"

    def __init__(self, path: str, journal: Journal, restorer: Restorer | None = None) -> None:
        self.path = path
        self.journal = journal
        self.restorer = restorer
        self.store = SQLiteCheckpointer(path)
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._opened = file_identity(path)
        self._lock = threading.Lock()
        self._opening = threading.Lock()
        self._live: dict[str, ReactiveRunner] = {}
        self._threads: list[threading.Thread] = []
        # the calls of ended sub-agents, by (run, its start, point): read once (`ended_agent_calls`)
        self._ended: dict[tuple[str, Any, int], dict[tuple[str, str], dict[str, Any]]] = {}

    def close(self) -> None:
        """Wait for the runs this studio continues, then close the files."""
        for thread in self._threads:
            thread.join(timeout=30)
        self._db.close()
        self.store.close()

    def _follow(self) -> None:
        """Open the file at the path again when it is no longer the one opened: removed, or
        replaced (``rm -rf .jianmu``, then a new ``jianmu run``). The connections opened at
        start read the removed file for ever: its runs shown and the new ones never, and a
        decision "recorded" where nobody reads it. A file removed and not made again is made
        empty, as the studio makes it at start."""
        if file_identity(self.path) == self._opened:
            return
        with self._opening:
            if file_identity(self.path) == self._opened:
                return
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            self.journal.follow()  # its table first: `version` reads it
            store = SQLiteCheckpointer(self.path)
            with self._lock:
                self._db.close()
                self._db = sqlite3.connect(self.path, check_same_thread=False)
                # the old store is left to the collector: a request may still read through it
                self.store = store
                self._ended = {}  # another file's runs: their points are others
                self._opened = file_identity(self.path)

    # -- the list ------------------------------------------------------------------------------
    def runs(self, status: str | None = None) -> list[dict[str, Any]]:
        """Each run, newest first: id, tree, status, start time, pending approvals, the folder
        it was started in and what it was forked from."""
        self._follow()
        with self._lock:
            rows = self._db.execute(
                "SELECT c.run_id, c.data, (SELECT MIN(created) FROM checkpoints WHERE run_id ="
                " c.run_id), c.created FROM checkpoints c WHERE c.seq = (SELECT MAX(seq) FROM"
                " checkpoints WHERE run_id = c.run_id) ORDER BY c.created DESC").fetchall()
        history = self.store.history
        recorded = history.runs()
        out = []
        saved = {row[0] for row in rows}
        for run_id, meta in recorded.items():  # going on elsewhere, not checkpointed yet
            if run_id not in saved and history.last_point(run_id) is not None:
                root = history.frame(run_id, 0).tree.get("0", {})
                rows.append((run_id, json.dumps({"tree": root.get("name", "?")}),
                             meta["created"], meta["created"]))
        rows.sort(key=lambda row: row[3] or 0, reverse=True)
        for run_id, data, started, updated in rows:
            try:
                summary = self._summary(run_id, _json(data), started, updated)
            except (CheckpointError, AttributeError, TypeError):  # one damaged row hides no run
                summary = {"source": self.kind, "run_id": run_id, "tree": "?",
                           "status": "damaged", "started": started, "updated": updated,
                           "pending": 0}
            meta = recorded.get(run_id, {})
            summary["cwd"] = meta.get("cwd")
            summary["forked_from"] = _origin(meta)
            if status is None or summary["status"] == status:
                out.append(summary)
        return out

    def _summary(self, run_id: str, data: dict[str, Any], started: float,
                 updated: float) -> dict[str, Any]:
        pending = data.get("interaction", {}).get("pending", [])
        return {"source": self.kind, "run_id": run_id, "tree": str(data.get("tree", "?")),
                "status": self._status(run_id, data), "started": started, "updated": updated,
                "pending": len(pending)}

    def _status(self, run_id: str, data: dict[str, Any]) -> str:
        if run_id in self._live:
            return "running"
        status = str(data.get("status") or "running")
        if status == "suspended" and not data.get("interaction", {}).get("pending"):
            return "decided"  # answered here without its tree: waits to be resumed
        if status == "running" and self.store.stopped(run_id):
            return "stopped"  # its process ended without ending it (killed, crashed)
        return status

    # -- one run -------------------------------------------------------------------------------
    def view(self, run_id: str) -> dict[str, Any]:
        """What the run page shows: status, tree, state, timeline, points, pending requests."""
        self._follow()
        runner = self._live.get(run_id)
        history = self.store.history
        # the events first: a run's end writes its last point with its last events, so the
        # points read after them hold every point those events belong to; read in the other
        # order, a view could hold "run.finished" (settled) beside the point before the last
        events = history.events(run_id)
        points = history.points(run_id)
        recorded = bool(points) and points[-1].kind == "tick"
        frame = history.frame(run_id, points[-1].number) if recorded else None
        loaded: dict[str, Any] | None = None  # its newest checkpoint, when not running here
        if runner is not None:  # running here: its live state and statuses
            data: dict[str, Any] = {
                "tree": runner.root.name, "state": runner.state.snapshot(),
                "interaction": runner.interaction.snapshot(),
                "nodes": {runner.node_key(n): {"name": n.name, "status": n.status.name}
                          for n in runner.root.iterate()},
            }
        else:
            loaded = self._load(run_id)
            if loaded is None and frame is None:
                raise RunNotFoundError(f"no run {run_id!r} in {self.path}")
            # a run going on elsewhere that saved no checkpoint yet: its points tell it
            data = loaded or {"tree": frame.tree.get("0", {}).get("name", "?") if frame
                              else "?", "status": "running"}
            if frame is not None:  # the points are written as the run goes: the newest view
                data = {**data, "state": frame.state, "nodes": {
                    k: {"name": frame.tree.get(k, {}).get("name", "?"), "status": s}
                    for k, s in frame.statuses.items()}}
        interaction = data.get("interaction", {})
        asked = {r["id"]: r for r in interaction.get("asked", [])}
        pending = [ApprovalRequest.from_dict(asked[i]) for i in interaction.get("pending", [])
                   if i in asked]
        status = self._status(run_id, data)
        state = data.get("state")
        tree = frame.tree if frame is not None else {}
        nesting = [str(i.get("path")) for i in tree.values() if i.get("kind") in ("skill",
                                                                                  "agent")]
        said = [e for e in self.journal.events(run_id)]
        if events:
            if len(self._ended) > 4096:  # a studio left open for days: read again if asked
                self._ended = {}
            ended = ended_agent_calls(history, run_id, events, self._ended)
            entries = event_timeline(events + said, snapshot=state, nesting=nesting, tree=tree,
                                     ended=ended)
        else:
            entries = message_timeline(state, interaction) + event_timeline(said)
        nodes = node_rows(data.get("nodes", {}), tree,
                          asking={r.node or "" for r in pending},
                          errors=frame.errors if frame is not None else None,
                          written=frame.written if frame is not None else None,
                          agents=agent_statuses(events))
        if status == "stopped":  # its process died mid-tick: nothing it was in runs any more
            for row in nodes:
                if row["status"] == "running":
                    row["status"] = "stopped"
        names = {row["key"]: row["name"] for row in nodes}
        other = _other_version(run_id, loaded)
        rebuilds = self._rebuilds(run_id)  # opens the launch records: once a view
        note = ""
        if other is not None:  # its requests are shown, and refused with this if decided
            note = other
        elif status == "decided":
            note = ("answered; the studio cannot rebuild this run's tree (it was not started by "
                    "'jianmu run'): continue it with ReactiveRunner.restore(tree, "
                    f"SQLiteCheckpointer({self.path!r}), {run_id!r})")
        elif status == "stopped":
            note = (f"its process ended before the run did (killed or crashed): "
                    f"'jianmu resume {run_id}' goes on from its last checkpoint")
        return {
            "source": self.kind, "run_id": run_id, "tree": str(data.get("tree", "?")),
            "status": status, "nodes": nodes, "pending": pending_rows(pending), "state": state,
            "timeline": entries, "result": final_answer(state),
            "error": shown(data.get("error") or ""),
            "usage": usage_text(state), "note": note, "points": point_rows(points, entries, names),
            "changed": list(frame.changed) if frame is not None else [],
            "forked_from": _origin(history.run(run_id) or {}),
            "can_fork": bool(points) and other is None and rebuilds,
            "fork_note": "" if rebuilds or not points else _NO_FORK,
            "settled": _end_recorded(events, status),
        }

    def _rebuilds(self, run_id: str) -> bool:
        """Whether the studio can rebuild the run's tree (to fork or continue it)."""
        if self.restorer is None:
            return False
        rebuilds = getattr(self.restorer, "rebuilds", None)
        return bool(rebuilds(run_id)) if callable(rebuilds) else True

    def version(self, run_id: str) -> tuple[Any, ...] | None:
        """A mark that changes whenever the run's view may: its newest checkpoint, point and
        event, the studio's journal of it, whether its owner is gone; while it runs here, its
        tick count too (its tree's statuses and its state change in memory, at its ticks)."""
        self._follow()
        runner = self._live.get(run_id)
        ticks = None if runner is None else ("live", runner.ticks)
        with self._lock:
            row = self._db.execute(
                # a named parameter given by name: Python 3.12 warns of a numbered one given
                # as a sequence, and 3.14 refuses it
                "SELECT (SELECT MAX(seq) FROM checkpoints WHERE run_id = :run),"
                " (SELECT MAX(rowid) FROM jianmu_points WHERE run_id = :run),"
                " (SELECT MAX(rowid) FROM jianmu_events WHERE run_id = :run),"
                " (SELECT MAX(rowid) FROM jianmu_studio_events WHERE run_id = :run)",
                {"run": run_id}).fetchone()
        return (*row, self.store.stopped(run_id), ticks)

    def point(self, run_id: str, number: int) -> dict[str, Any]:
        """The run at one of its points: the state, what changed there, each node's status.

        Raises:
            RunNotFoundError: no such run or point.
        """
        self._follow()
        try:
            frame = self.store.history.frame(run_id, number)
        except DamagedRowError:
            raise  # there, but damaged: said as such (500), not as missing
        except CheckpointError as exc:
            raise RunNotFoundError(str(exc)) from None
        return point_view(frame, self.store.history.events(run_id))

    # -- answering and forking -----------------------------------------------------------------
    def decide(self, run_id: str, call_id: str, approved: bool, text: str | None,
               by: str, *, arguments: dict[str, Any] | None = None,
               answer: str | None = None) -> str:
        """Approve (with ``arguments``: the call edited), reject or ``answer`` a pending
        request, then continue the run here if its tree can be rebuilt; else record the
        decision in a new checkpoint. Returns what was done. A call id alone names the one
        request of that call, pending or decided (`Interaction.resolve`).

        Raises:
            ApprovalEditError: the edited arguments do not fit the tool (nothing recorded).
            InteractionError: no such pending request, the run is not waiting, the
                request is of the other kind (a question approved, an approval answered), or
                a call id alone names several requests.
            RunNotFoundError: no such run.
        """
        self._follow()
        message = decision_message(approved, text, by)
        did = "answered" if answer is not None else verb(approved)
        extra: dict[str, Any] = {}
        if arguments is not None:
            extra.update(edited=True, arguments=arguments)
        if answer is not None:
            extra["answer"] = answer
        with self._lock:
            data = self._load(run_id)
            live = run_id in self._live
            if data is None and not live:
                raise RunNotFoundError(f"no run {run_id!r} in {self.path}")
            data = data or {}
            # a call id alone names the one request of that call (`Interaction.resolve`)
            interaction = Interaction()
            with contextlib.suppress(CheckpointError):  # damaged: the checks below say so
                interaction.restore(data.get("interaction", {}))
            call_id = interaction.resolve(call_id)
            if live or data.get("status") in _ENDED or (
                    call_id not in data.get("interaction", {}).get("pending", [])):
                # answered before (in another tab, say): name the decision that stands, not
                # only that the run is going on or over
                first = self._first_decision(run_id, call_id, data)
                if first is not None:
                    over = (f"; the run already finished ({data['status']})"
                            if data.get("status") in _ENDED else "")
                    raise InteractionError(
                        f"request {call_id!r} of run {run_id!r} was already {first}; the "
                        f"first decision stands and this one was not recorded{over}")
            if live:
                raise InteractionError(f"run {run_id!r} is running; it waits for nothing")
            if data.get("status") in _ENDED:
                raise InteractionError(f"run {run_id!r} already finished ({data['status']})")
            if call_id not in data.get("interaction", {}).get("pending", []):
                raise InteractionError(f"run {run_id!r} waits for no request {call_id!r}")
            other = _other_version(run_id, data)
            if other is not None:  # before the decision is written in a checkpoint of ours
                raise InteractionError(other)
            # rebuilding the run claims it: refused while a terminal (or another studio) holds it
            restored = self.restorer(run_id) if self.restorer is not None else None
            if restored is None:
                self._record(run_id, call_id, approved, message, arguments=arguments,
                             answer=answer)
                self.journal.add(run_id, f"studio.{did}", request_id=call_id, by=by,
                                 message=message, **extra)
                done = "recorded in the checkpoint (the studio cannot rebuild this run's tree)"
            else:
                runner = restored.runner
                try:
                    apply_decision(runner, call_id, approved, message, arguments, answer)
                    # written before the run goes on: a page that sees it end sees who answered
                    self.journal.add(run_id, f"studio.{did}", request_id=call_id, by=by,
                                     message=message, **extra)
                except BaseException:  # refused: give the run (its lease) and its target back
                    _close_quietly(restored)
                    raise
                self._live[run_id] = runner
                self._continue(restored)
                done = "the run goes on in the studio"
        edited = " with edited arguments" if arguments is not None else ""
        return f"{did} {shown(call_id)}{edited}: {done}"  # a model chose the id

    def _first_decision(self, run_id: str, call_id: str, data: dict[str, Any]) -> str | None:
        """How ``call_id`` was decided, and by whom when the studio decided it; None if not."""
        for event in self.journal.events(run_id):
            fields = event["fields"]
            if event["name"] in _DECISIONS and fields.get("request_id") == call_id:
                return f"{event['name'].removeprefix('studio.')} by {fields.get('by')}"
        return _decided(data, call_id)

    def fork(self, run_id: str, point: int, state: dict[str, Any] | None, by: str) -> str:
        """Start a new run from ``point`` of ``run_id`` (with ``state`` instead of the point's,
        if given) and run it here; returns its id. The original run is not touched.

        Raises:
            CheckpointError: no such point, a state that does not fit the tree, a tree the
                studio cannot rebuild (nothing is left behind), or a run going on elsewhere
                that saved no checkpoint yet.
            RunNotFoundError: no such run.
        """
        self._follow()
        saved = self._load(run_id)
        if saved is None:
            if self.store.history.last_point(run_id) is None:
                raise RunNotFoundError(f"no run {run_id!r} in {self.path}")
            # its points are there (the page shows them), its first checkpoint is not yet
            raise CheckpointError(f"run {run_id!r} is still going in another process and has "
                                  "saved no checkpoint yet: fork it once it waits for a person "
                                  "or has ended")
        other = _other_version(run_id, saved)
        if other is not None:
            raise CheckpointError(other)
        if self.restorer is None:
            raise CheckpointError("the studio cannot rebuild this run's tree; fork it in Python "
                                  "with jianmu.runtime.fork.fork_run and ReactiveRunner.restore")
        fork_id = fork_run(self.store, run_id, point, state=state,
                           owner=default_owner("jianmu studio"))
        try:
            restored = self.restorer(fork_id)
        except Exception as exc:  # a state that does not fit the schema, a script that fails
            self.store.delete(fork_id)
            reason = str(exc) if isinstance(exc, JianmuError) else f"{type(exc).__name__}: {exc}"
            # the reason names the fork's own run, made and removed here: said so
            raise CheckpointError(f"the fork did not start (its new run {fork_id!r} was "
                                  f"removed): {reason}") from None
        if restored is None:
            self.store.delete(fork_id)
            raise CheckpointError("the studio cannot rebuild this run's tree ('jianmu run' did "
                                  "not start it)")
        try:  # an edited state may fit the schema and still not be writable (nested past what
            # the state's serializer writes): refused now, not as a run dead at its first save
            restored.runner.state.snapshot()
        except Exception as exc:
            _close_quietly(restored)
            self.store.delete(fork_id)
            raise CheckpointError(f"the fork did not start (its new run {fork_id!r} was "
                                  f"removed): its state cannot be saved: "
                                  f"{type(exc).__name__}: {exc}") from None
        try:  # written before the fork goes on: its page tells who started it from the first
            self.journal.add(fork_id, "studio.forked", run=run_id, point=point, by=by)
        except BaseException:
            _close_quietly(restored)
            self.store.delete(fork_id)
            raise
        with self._lock:
            self._live[fork_id] = restored.runner
            self._continue(restored)
        return fork_id

    def _load(self, run_id: str) -> dict[str, Any] | None:
        """The run's newest checkpoint, or None. Raises `CheckpointError` for one of this
        version whose parts have not the shapes a restore reads (``"pending": 5``): said as a
        damaged run, not a bare server error."""
        data = self.store.load(run_id)
        if data is not None and _other_version(run_id, data) is None:
            checked(data, run_id)
        return data

    def _record(self, run_id: str, call_id: str, approved: bool, message: str, *,
                arguments: dict[str, Any] | None = None, answer: str | None = None) -> None:
        """Write the decision into a new checkpoint, under the run's lease: read after the
        claim, so a decision made meanwhile elsewhere is seen and this one refused."""
        owner = default_owner("jianmu studio")
        self.store.claim(run_id, owner)
        try:
            data = self.store.load(run_id) or {}
            interaction = Interaction()
            interaction.restore(data.get("interaction", {}))
            apply_decision(interaction, call_id, approved, message, arguments, answer)
            self.store.save(run_id, {**data, "interaction": interaction.snapshot()}, owner=owner)
        finally:
            self.store.release(run_id, owner)

    def _continue(self, restored: Restored) -> None:
        runner = restored.runner

        async def drive() -> None:
            try:
                await runner.run()
            finally:
                await restored.close()

        def main() -> None:
            try:
                asyncio.run(drive())
            except Exception as exc:  # the run's failure is in its checkpoint; keep the reason
                self.journal.add(runner.run_id, "studio.error",
                                 error=f"{type(exc).__name__}: {exc}")
                try:
                    runner.save_checkpoint("failure")
                except JianmuError:
                    pass
            finally:
                with self._lock:
                    self._live.pop(runner.run_id, None)

        thread = threading.Thread(target=main, name=f"studio-run-{runner.run_id}", daemon=True)
        self._threads.append(thread)
        thread.start()


def point_view(frame: Frame, events: list[dict[str, Any]]) -> dict[str, Any]:
    """What the page shows of a run at one point."""
    nodes = {k: {"name": frame.tree.get(k, {}).get("name", "?"), "status": s}
             for k, s in frame.statuses.items()}
    return {
        "point": frame.number, "tick": frame.tick, "time": frame.time, "kind": frame.kind,
        "state": frame.state, "changed": list(frame.changed),
        "changed_nodes": list(frame.changed_nodes),
        "nodes": node_rows(nodes, frame.tree, asking=asking_at(events, frame.number),
                           errors=frame.errors, written=frame.written,
                           agents=agent_statuses(e for e in events
                                                 if (e.get("point") or 0) <= frame.number)),
    }


def _other_version(run_id: str, data: dict[str, Any] | None) -> str | None:
    """What to say of a checkpoint saved by another version of Jianmu (a restore refuses it:
    "unsupported checkpoint version"), or None for one of this version or none."""
    if not isinstance(data, dict) or data.get("version") == CHECKPOINT_VERSION:
        return None
    return (f"run {run_id!r} was saved by another version of Jianmu (its checkpoint is of "
            f"version {data.get('version')!r}; this one reads version {CHECKPOINT_VERSION}): "
            "it is shown as it was recorded, but cannot be approved, rejected, answered or "
            "forked here; continue it with the Jianmu that saved it")


def _end_recorded(events: list[dict[str, Any]], status: str) -> bool:
    """Whether all of a finished run is recorded: its checkpoint says it ended a moment before
    its last event (``run.finished``) and point are written, and a page that stopped following
    it there would miss them. A run that records no events has only its checkpoint."""
    if status not in FINISHED or not events:
        return True
    ends = [e for e in events if e["name"] == "run.finished"]
    return bool(ends) and (ends[-1]["fields"] or {}).get("status") in FINISHED


def _origin(meta: dict[str, Any]) -> dict[str, Any] | None:
    parent = meta.get("parent")
    return None if not parent else {"run": parent, "point": meta.get("parent_point")}


def _json(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        raise CheckpointError("a checkpoint is not JSON") from None
    return value if isinstance(value, dict) else {}


def file_identity(path: str) -> tuple[int, int] | None:
    """The file now at ``path`` (its device and inode), None if there is none: a file removed
    and made again at the same path is another file."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


# -- the studio's journal ----------------------------------------------------------------------


class Journal:
    """Appends and lists a run's studio events (``jianmu_studio_events``)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._db = self._open()
        self._opened = file_identity(path)

    def _open(self) -> sqlite3.Connection:
        try:
            db = sqlite3.connect(self.path, check_same_thread=False)
            with db:
                db.execute(
                    "CREATE TABLE IF NOT EXISTS jianmu_studio_events (run_id TEXT NOT NULL,"
                    " time REAL NOT NULL, name TEXT NOT NULL, node TEXT, fields TEXT NOT NULL)"
                )
        except sqlite3.Error as exc:
            raise CheckpointError(f"cannot open the studio's journal {self.path!r}: "
                                  f"{exc}") from exc
        return db

    def follow(self) -> None:
        """Open the file again when it was removed or replaced (`CheckpointRuns._follow`)."""
        if file_identity(self.path) == self._opened:
            return
        with self._lock:
            if file_identity(self.path) != self._opened:
                self._db.close()
                self._db = self._open()
                self._opened = file_identity(self.path)

    def add(self, run_id: str, name: str, node: str | None = None, **fields: Any) -> None:
        """Record one event of ``run_id``."""
        data = json_text(short(fields))
        self.follow()
        with self._lock, self._db:
            self._db.execute("INSERT INTO jianmu_studio_events VALUES (?, ?, ?, ?, ?)",
                             (run_id, time.time(), name, node, data))

    def events(self, run_id: str) -> list[dict[str, Any]]:
        """``run_id``'s events, oldest first."""
        self.follow()
        with self._lock:
            rows = self._db.execute(
                "SELECT time, name, node, fields FROM jianmu_studio_events WHERE run_id = ?"
                " ORDER BY rowid", (run_id,)).fetchall()
        return [{"time": r[0], "name": r[1], "node": r[2], "fields": json.loads(r[3])}
                for r in rows]

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()
