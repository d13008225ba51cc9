"""The runs of a durable app, through its `DurableEngine` as a client (the studio executes
none of them): answered with `DurableEngine.approve`, told from the steps they recorded."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from jianmu.errors import CheckpointError, RunNotFoundError
from jianmu.nodes.sealed import RefusedTurn
from jianmu.runtime.points import describe_node, walk_tree
from jianmu.studio.runs import Journal, decision_message, verb
from jianmu.studio.timeline import durable_timeline, event_timeline, shown
from jianmu.studio.views import final_answer, node_rows, pending_rows, usage_text, usage_words

if TYPE_CHECKING:
    from jianmu.durable import DurableEngine

__all__ = ("DurableRuns",)


def steps_usage(steps: list[dict[str, Any]]) -> str:
    """What a durable run spent, in `usage_words`' words, from the steps it recorded: each
    model turn's usage (one request when it counts none), each tool call that ran (not one
    settled as maybe done at a takeover, which was not run again)."""
    spent = {"requests": 0, "tool_calls": 0, "input_tokens": 0, "output_tokens": 0,
             "cache_read_tokens": 0, "estimated_requests": 0}
    for step in steps:
        name, output = str(step.get("name", "")), step.get("output")
        if name.startswith("jianmu:model:") and not isinstance(output, RefusedTurn):
            usage = getattr(output, "usage", None)
            spent["requests"] += getattr(usage, "requests", 0) or 1
            for key in ("input_tokens", "output_tokens", "cache_read_tokens",
                        "estimated_requests"):
                value = getattr(usage, key, 0)
                spent[key] += value if isinstance(value, int) else 0
        elif name.startswith("jianmu:tool:") and hasattr(output, "ok") and not getattr(
                output, "maybe_done", False):  # it ran (one that failed too), as a run counts
            spent["tool_calls"] += 1
    return usage_words(spent) if spent["requests"] or spent["tool_calls"] else ""


class DurableRuns:
    """Runs of a durable app, through its `DurableEngine` as a client (it executes none)."""

    kind = "durable"

    def __init__(self, engine: DurableEngine, journal: Journal) -> None:
        self.engine = engine
        self.journal = journal
        self._trees: dict[str, dict[str, dict[str, Any]]] = {}

    def close(self) -> None:
        """Close the engine's client."""
        self.engine.shutdown()

    def runs(self, status: str | None = None) -> list[dict[str, Any]]:
        """Each run, newest first."""
        infos = self.engine.runs(status)
        return [{"source": self.kind, "run_id": i.run_id, "tree": i.tree, "status": i.status,
                 "started": i.created, "updated": i.updated, "pending": len(i.pending),
                 "cwd": None, "forked_from": None}
                for i in reversed(infos)]

    def view(self, run_id: str) -> dict[str, Any]:
        """What the run page shows. The timeline comes from the steps the run recorded (its
        model turns, tool calls and answers); a node's status from its own step, where it
        has one, and the root shows the run's."""
        info = self.engine.run_info(run_id)
        state = None
        if info.status not in ("queued", "running", "suspended"):
            state = asyncio.run(self.engine.state(run_id))
        steps = self.engine.steps(run_id)
        tree = self._tree(run_id, info.tree, info.inputs)
        finished = {s["name"][len("jianmu:node:"):]: s["output"] for s in steps
                    if s["name"].startswith("jianmu:node:")}
        for step in steps:  # a model node's recorded turn: it answered (or was refused)
            if step["name"].startswith("jianmu:model:") and step["error"] is None:
                said = "FAILURE" if isinstance(step["output"], RefusedTurn) else "SUCCESS"
                finished.setdefault(step["name"][len("jianmu:model:"):], (said, {}))
        rows = node_rows({}, tree)
        for row in rows:
            done = finished.get(row["path"])
            if isinstance(done, (list, tuple)) and done:
                row["status"] = str(done[0]).lower()
        if rows:
            rows[0]["status"] = {"suspended": "running"}.get(info.status, info.status)
        asking = {r.node for r in info.pending if r.node}
        for row in rows:
            if row["path"] in asking:
                row["status"] = "suspended"
        by_key = {row["key"]: row for row in rows}
        for row in rows:  # a composite with no step of its own runs while a node in it does
            if row["status"] in ("running", "suspended"):
                above = by_key.get(row["parent"])
                while above is not None and above["status"] == "invalid":
                    above["status"] = "running"
                    above = by_key.get(above["parent"])
        entries = durable_timeline(steps)
        answered = {e.get("call") for e in entries if e["kind"] == "decision"}
        entries += [e for e in event_timeline(self.journal.events(run_id))
                    if not (e["kind"] == "decision" and e.get("call") in answered)]
        entries.sort(key=lambda e: e.get("time") or 0.0)
        return {
            "source": self.kind, "run_id": run_id, "tree": info.tree, "status": info.status,
            "nodes": rows, "pending": pending_rows(list(info.pending)), "state": state,
            "timeline": entries, "result": final_answer(state),
            "error": shown(info.error or ""),
            # until it ends its state is the worker's: what it spent so far is in its steps
            "usage": usage_text(state) or steps_usage(steps),
            "note": f"worker: {info.worker or '-'}", "points": [],
            "changed": [],
            "forked_from": None,
            "can_fork": False,
        }

    def version(self, run_id: str) -> None:
        """No cheap mark of a durable run's changes: its view is looked at each time."""
        return None

    def point(self, run_id: str, number: int) -> dict[str, Any]:
        """Durable runs keep no points (their steps replay them instead).

        Raises:
            RunNotFoundError: always.
        """
        raise RunNotFoundError(f"durable run {run_id!r} has no recorded points")

    def fork(self, run_id: str, point: int, state: dict[str, Any] | None, by: str) -> str:
        """Durable runs are not forked from the studio.

        Raises:
            CheckpointError: always.
        """
        raise CheckpointError("durable runs cannot be forked from the studio")

    def _tree(self, run_id: str, tree: str, inputs: dict[str, Any]
              ) -> dict[str, dict[str, Any]]:
        """The run's tree as its factory builds it (built once per run)."""
        if run_id not in self._trees:
            try:
                runner = self.engine.build_runner(tree, inputs, run_id=run_id)
                self._trees[run_id] = {key: describe_node(node, path) for key, node, path, _
                                       in walk_tree(runner.root)}
            except Exception:  # a factory that fails here still fails in the worker: say so there
                self._trees[run_id] = {}
        return self._trees[run_id]

    def decide(self, run_id: str, call_id: str, approved: bool, text: str | None,
               by: str, *, arguments: dict[str, Any] | None = None,
               answer: str | None = None) -> str:
        """Answer a pending request with `DurableEngine.approve` (``arguments``: the call
        edited), ``reject`` or ``answer`` (a question).

        Raises:
            InteractionError: a question approved, an approval answered, or edited arguments
                that do not fit (`ApprovalEditError`).
            RunNotFoundError: no such run, or it waits for no request ``call_id``.
        """
        message = decision_message(approved, text, by)
        did = "answered" if answer is not None else verb(approved)
        extra: dict[str, Any] = {}
        if answer is not None:
            asyncio.run(self.engine.answer(run_id, call_id, answer))
            extra["answer"] = answer
        elif approved:
            asyncio.run(self.engine.approve(run_id, call_id, message, arguments=arguments))
            if arguments is not None:
                extra.update(edited=True, arguments=arguments)
        else:
            asyncio.run(self.engine.reject(run_id, call_id, message))
        self.journal.add(run_id, f"studio.{did}", request_id=call_id, by=by,
                         message=message, **extra)
        return f"{did} {shown(call_id)}: a worker goes on with the run"  # a model chose the id
