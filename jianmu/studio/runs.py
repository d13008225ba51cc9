"""Where the studio finds runs and answers them: the CLI's SQLite checkpoints, and a durable
app's engine. Both answer through the same path as the CLI (`ReactiveRunner.approve` on a
restored run; `DurableEngine.approve`), so an approval is used once."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jianmu.errors import CheckpointError, InteractionError, JianmuError, RunNotFoundError
from jianmu.runtime.checkpoint import SQLiteCheckpointer
from jianmu.runtime.interaction import ApprovalRequest, Interaction
from jianmu.runtime.runner import ReactiveRunner
from jianmu.studio.journal import Journal
from jianmu.studio.views import final_answer, node_rows, pending_rows, timeline

if TYPE_CHECKING:
    from jianmu.durable import DurableEngine

__all__ = ("FINISHED", "CheckpointRuns", "DurableRuns", "Restored", "Restorer")

FINISHED = frozenset({"success", "failure", "timeout", "cancelled"})


@dataclass
class Restored:
    """A checkpointed run rebuilt in this process, ready to be answered and continued."""

    runner: ReactiveRunner
    close: Callable[[], Awaitable[None]]
    """Releases what the target holds (its model provider) once the run stops."""


Restorer = Callable[[str], "Restored | None"]
"""Rebuilds a checkpointed run's tree (as ``jianmu resume`` does); None when it cannot."""


def _decided(data: dict[str, Any], call_id: str) -> str | None:
    """How ``call_id`` was decided in a checkpoint ("approved ('msg')"), if it was."""
    for decision in data.get("interaction", {}).get("decisions", []):
        if decision.get("request_id") == call_id:
            said = f" ({decision['message']!r})" if decision.get("message") else ""
            return f"{_verb(bool(decision.get('approved')))}{said}"
    return None


def _verb(approved: bool) -> str:
    return "approved" if approved else "rejected"


def _message(approved: bool, text: str | None, by: str) -> str:
    """The decision's message: the person's note, and who answered."""
    signed = f"{_verb(approved)} by {by} in Jianmu Studio"
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
        self._lock = threading.Lock()
        self._live: dict[str, ReactiveRunner] = {}
        self._threads: list[threading.Thread] = []

    def close(self) -> None:
        """Wait for the runs this studio continues, then close the files."""
        for thread in self._threads:
            thread.join(timeout=30)
        self._db.close()
        self.store.close()

    def runs(self, status: str | None = None) -> list[dict[str, Any]]:
        """Each run, newest first: id, tree, status, start time, pending approvals."""
        with self._lock:
            rows = self._db.execute(
                "SELECT c.run_id, c.data, (SELECT MIN(created) FROM checkpoints WHERE run_id ="
                " c.run_id), c.created FROM checkpoints c WHERE c.seq = (SELECT MAX(seq) FROM"
                " checkpoints WHERE run_id = c.run_id) ORDER BY c.created DESC").fetchall()
        out = []
        for run_id, data, started, updated in rows:
            summary = self._summary(run_id, _json(data), started, updated)
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
        return status

    def view(self, run_id: str) -> dict[str, Any]:
        """What the run page shows: status, tree, state, timeline, pending requests."""
        runner = self._live.get(run_id)
        if runner is not None:  # running here: its live statuses, not the last checkpoint
            data: dict[str, Any] = {
                "tree": runner.root.name, "state": runner.state.snapshot(),
                "interaction": runner.interaction.snapshot(),
                "nodes": {runner.node_key(n): {"name": n.name, "status": n.status.name}
                          for n in runner.root.iterate()},
            }
        else:
            loaded = self.store.load(run_id)
            if loaded is None:
                raise RunNotFoundError(f"no run {run_id!r} in {self.path}")
            data = loaded
        interaction = data.get("interaction", {})
        asked = {r["id"]: r for r in interaction.get("asked", [])}
        pending = [ApprovalRequest.from_dict(asked[i]) for i in interaction.get("pending", [])
                   if i in asked]
        status = self._status(run_id, data)
        note = ""
        if status == "decided":
            note = ("answered; the studio cannot rebuild this run's tree (it was not started by "
                    "'jianmu run'): continue it with ReactiveRunner.restore(tree, "
                    f"SQLiteCheckpointer({self.path!r}), {run_id!r})")
        state = data.get("state")
        return {
            "source": self.kind, "run_id": run_id, "tree": str(data.get("tree", "?")),
            "status": status, "nodes": node_rows(data.get("nodes", {})),
            "pending": pending_rows(pending), "state": state,
            "timeline": timeline(state, interaction, self.journal.events(run_id)),
            "result": final_answer(state), "error": data.get("error") or "", "note": note,
        }

    def decide(self, run_id: str, call_id: str, approved: bool, text: str | None,
               by: str) -> str:
        """Approve or reject a pending request, then continue the run here if its tree can be
        rebuilt; else record the decision in a new checkpoint. Returns what was done.

        Raises:
            InteractionError: no such pending request, or the run is not waiting.
            RunNotFoundError: no such run.
        """
        message = _message(approved, text, by)
        with self._lock:
            if run_id in self._live:
                raise InteractionError(f"run {run_id!r} is running; it waits for nothing")
            data = self.store.load(run_id)
            if data is None:
                raise RunNotFoundError(f"no run {run_id!r} in {self.path}")
            if data.get("status") in FINISHED:
                raise InteractionError(f"run {run_id!r} already finished ({data['status']})")
            if call_id not in data.get("interaction", {}).get("pending", []):
                first = _decided(data, call_id)
                if first is not None:  # answered before: name the decision that stands
                    raise InteractionError(
                        f"request {call_id!r} of run {run_id!r} was already {first}; the "
                        "first decision stands and this one was not recorded")
                raise InteractionError(f"run {run_id!r} waits for no request {call_id!r}")
            restored = self.restorer(run_id) if self.restorer is not None else None
            if restored is None:
                self._record(run_id, data, call_id, approved, message)
                done = "recorded in the checkpoint (the studio cannot rebuild this run's tree)"
            else:
                runner = restored.runner
                (runner.approve if approved else runner.reject)(call_id, message)
                self._live[run_id] = runner
                self._continue(restored)
                done = "the run goes on in the studio"
        self.journal.add(run_id, f"studio.{_verb(approved)}", request_id=call_id, by=by,
                         message=message)
        return f"{_verb(approved)} {call_id}: {done}"

    def _record(self, run_id: str, data: dict[str, Any], call_id: str, approved: bool,
                message: str) -> None:
        interaction = Interaction()
        interaction.restore(data.get("interaction", {}))
        (interaction.approve if approved else interaction.reject)(call_id, message)
        self.store.save(run_id, {**data, "interaction": interaction.snapshot()})

    def _continue(self, restored: Restored) -> None:
        runner = restored.runner
        unsubscribe = runner.ctx.events.subscribe("*", self.journal.record)

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
                unsubscribe()
                with self._lock:
                    self._live.pop(runner.run_id, None)

        thread = threading.Thread(target=main, name=f"studio-run-{runner.run_id}", daemon=True)
        self._threads.append(thread)
        thread.start()


def _json(text: str) -> dict[str, Any]:
    import json

    try:
        value = json.loads(text)
    except ValueError:
        raise CheckpointError("a checkpoint is not JSON") from None
    return value if isinstance(value, dict) else {}


class DurableRuns:
    """Runs of a durable app, through its `DurableEngine` as a client (it executes none)."""

    kind = "durable"

    def __init__(self, engine: DurableEngine, journal: Journal) -> None:
        self.engine = engine
        self.journal = journal
        self._trees: dict[str, list[dict[str, Any]]] = {}

    def close(self) -> None:
        """Close the engine's client."""
        self.engine.shutdown()

    def runs(self, status: str | None = None) -> list[dict[str, Any]]:
        """Each run, newest first."""
        infos = self.engine.runs(status)
        return [{"source": self.kind, "run_id": i.run_id, "tree": i.tree, "status": i.status,
                 "started": i.created, "updated": i.updated, "pending": len(i.pending)}
                for i in reversed(infos)]

    def view(self, run_id: str) -> dict[str, Any]:
        """What the run page shows (node statuses are not recorded: the root shows the run's)."""
        info = self.engine.run_info(run_id)
        state = None
        if info.status not in ("queued", "running", "suspended"):
            state = asyncio.run(self.engine.state(run_id))
        nodes = [dict(n) for n in self._tree(run_id, info.tree, info.inputs)]
        if nodes:
            nodes[0]["status"] = {"suspended": "running"}.get(info.status, info.status)
        return {
            "source": self.kind, "run_id": run_id, "tree": info.tree, "status": info.status,
            "nodes": nodes, "pending": pending_rows(list(info.pending)), "state": state,
            "timeline": timeline(state, None, self.journal.events(run_id)),
            "result": final_answer(state), "error": info.error or "",
            "note": f"worker: {info.worker or '-'}",
        }

    def _tree(self, run_id: str, tree: str, inputs: dict[str, Any]) -> list[dict[str, Any]]:
        """The run's tree as its factory builds it (names only; built once per run)."""
        if run_id not in self._trees:
            try:
                runner = self.engine.build_runner(tree, inputs, run_id=run_id)
                self._trees[run_id] = node_rows({
                    runner.node_key(n): {"name": n.name, "status": "unknown"}
                    for n in runner.root.iterate()})
            except Exception:  # a factory that fails here still fails in the worker: say so there
                self._trees[run_id] = []
        return self._trees[run_id]

    def decide(self, run_id: str, call_id: str, approved: bool, text: str | None,
               by: str) -> str:
        """Answer a pending request with `DurableEngine.approve` / ``reject``.

        Raises:
            RunNotFoundError: no such run, or it waits for no request ``call_id``.
        """
        message = _message(approved, text, by)
        if approved:
            asyncio.run(self.engine.approve(run_id, call_id, message))
        else:
            asyncio.run(self.engine.reject(run_id, call_id, message))
        self.journal.add(run_id, f"studio.{_verb(approved)}", request_id=call_id, by=by,
                         message=message)
        return f"{_verb(approved)} {call_id}: a worker goes on with the run"
