"""A run's story for a person: its events in the order they happened, each said in words.

Model turns (tokens, time taken), tool calls with their arguments and results, the guard's
decisions, the questions asked and who answered them, skills and sub-agents (nested under
the node that runs them), errors. Each entry carries the point it led to, so a click on it
shows the run there. Every value is text: the page never renders it as markup.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from jianmu._text import json_visible, visible
from jianmu.errors import CheckpointError
from jianmu.nodes.sealed import RefusedTurn
from jianmu.runtime.context import owner_prefix
from jianmu.runtime.scopes import agent_scope

__all__ = ("call_details", "durable_timeline", "ended_agent_calls", "event_timeline",
           "message_timeline", "pretty_json", "shown", "turn_words")

_NESTING = ("skill", "agent")
"""Kinds of node whose descendants' entries are indented under them."""


def shown(text: str) -> str:
    """``text`` with each control or format character written as an escape (``\\u202e``,
    ``\\u001b``), lines and tabs kept: a bidi override in a tool's argument would otherwise
    show a person deciding on the call other text than the call holds (as the CLI shows it)."""
    return visible(text, keep="\n\t")


def pretty_json(value: Any) -> str:
    """``value`` as indented JSON (non-ASCII kept, as the CLI shows it, control and format
    characters as escapes: `json_visible`); repr if it is not JSON."""
    try:
        return json_visible(json.dumps(value, indent=2, ensure_ascii=False, default=str))
    except (TypeError, ValueError):  # a circular structure
        return shown(repr(value))


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else pretty_json(value)


def call_scope(node: str | None) -> str:
    """The state namespace whose conversation holds the calls of the node at ``node``: ``""``
    for the run's own, ``researcher/call_1`` inside the sub-agent ``researcher[call_1]``
    (`jianmu.runtime.scopes.agent_scope`)."""
    return agent_scope(node)


def branch_scopes(tree: dict[str, dict[str, Any]] | None) -> dict[str, str]:
    """The namespace of each node that has one (``tree``: a run's node infos by key, each
    with its ``path`` and ``ns``), by path, relative to the run's own as its request ids are
    (``left`` for ``left/call_0``): agents in namespaced branches number their calls alike."""
    tree = tree or {}
    root = (tree.get("0") or {}).get("ns")
    out = {}
    for info in tree.values():
        scope = owner_prefix(root, info.get("ns")).rstrip("/")
        if scope and info.get("path"):
            out[str(info["path"])] = scope
    return out


def call_details(snapshot: dict[str, Any] | None) -> dict[tuple[str, str], dict[str, Any]]:
    """Each tool call in the state's conversations by (namespace, id), the run's own under
    ``""``: its full arguments and result. Call ids repeat across conversations (each agent
    numbers its own), so an id alone names no call."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    if not isinstance(snapshot, dict):
        return out
    stores = [("", snapshot.get("root")),
              *((str(ns), store) for ns, store in (snapshot.get("namespaces") or {}).items())]
    for scope, store in stores:
        messages = store.get("messages") if isinstance(store, dict) else None
        for message in messages if isinstance(messages, list) else []:
            if not isinstance(message, dict):
                continue
            for call in message.get("tool_calls") or []:
                if isinstance(call, dict) and call.get("id"):
                    out.setdefault((scope, str(call["id"])), {})["arguments"] = call.get(
                        "arguments")
            if message.get("role") == "tool" and message.get("tool_call_id"):
                out.setdefault((scope, str(message["tool_call_id"])), {})["result"] = (
                    message.get("content"))
    return out


EndedCalls = list[tuple[int, dict[tuple[str, str], dict[str, Any]]]]
"""`ended_agent_calls`: the calls held just before each sub-agent's end, by that end's point."""


def ended_agent_calls(history: Any, run_id: str, events: Iterable[dict[str, Any]],
                      kept: dict[tuple[str, Any, int], dict[tuple[str, str], dict[str, Any]]]
                      | None = None) -> EndedCalls:
    """The calls in the namespaces at the point before each sub-agent call's end, oldest end
    first (``kept``: those read before, by (run, its start, point); a point does not change)."""
    # a finished sub-agent's conversation leaves the state (its answer stays): without this,
    # its calls' entries fall back to the events' previews, cut at 200 characters
    kept = {} if kept is None else kept
    # a run deleted and made again under its id has other points: its start tells them apart
    started = (history.run(run_id) or {}).get("created")
    ends = sorted({int(e["point"]) for e in events
                   if e.get("name") == "agent.finished" and isinstance(e.get("point"), int)
                   and e["point"] > 0 and (e.get("fields") or {}).get("status") != "suspended"})
    out: EndedCalls = []
    for end in ends:
        key = (run_id, started, end - 1)
        if key not in kept:
            try:
                held = call_details(history.frame(run_id, end - 1).state)
            except CheckpointError:  # a point not readable: its previews are shown
                held = {}
            # the run's own conversation stays in the state: each point would repeat it
            kept[key] = {k: v for k, v in held.items() if k[0]}
        out.append((end, kept[key]))
    return out


_SIGNATURE = re.compile(r"^(?:(?P<note>.*) \()?(?:approved|rejected) by (?P<who>.+?) in Jianmu "
                        r"Studio\)?$", re.S)


def _signed(message: str) -> tuple[str, str]:
    """Who answered and their note, from a decision's message (the studio signs its own)."""
    found = _SIGNATURE.match(message)
    if found is None:
        return "", message
    return found.group("who"), found.group("note") or ""


def _seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.1f} s"


def _fields_text(fields: dict[str, Any]) -> str:
    """Fields as ``key: value`` lines, for events the studio has no words of its own for."""
    lines = []
    for key, value in fields.items():
        if value is None or value == "" or value == []:
            continue
        said = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                              default=str)
        lines.append(f"{key.replace('_', ' ')}: {said}")
    return "\n".join(lines)


def turn_words(fields: dict[str, Any]) -> str:
    """What a model turn (an ``llm.call.completed`` event's fields) did: the calls it asked
    for, or its answer; an answer the event leaves out (``answer_preview`` None) is one a
    guardrail judges, and is said so (it read as an empty answer)."""
    calls = fields.get("tool_calls") or []
    if calls:
        return f"asks for: {', '.join(map(str, calls))}"
    if fields.get("answer_preview") is None:
        return "answers (not shown here: a guardrail judges the answer)"
    return f"answers: {fields['answer_preview']}"


def _waits(pending: list[Any]) -> str:
    """What a suspension waits for, by its requests' ids: approvals, answers to questions
    (``ask:call_1``, ``researcher/call_1/ask:call_1``, an `AskUser`'s ``ask:flow/ask``), or
    both."""
    asked = sum(1 for r in pending if any(p.startswith("ask:") for p in str(r).split("/")))
    parts = ([f"{len(pending) - asked} approval(s)"] if len(pending) > asked else []) + (
        [f"{asked} answer(s)"] if asked else [])
    return " and ".join(parts) or "0 approval(s)"


class _Story:
    """Turns events into entries, remembering what earlier events said."""

    def __init__(self, calls: dict[tuple[str, str], dict[str, Any]], nesting: list[str],
                 answerers: dict[str, str] | None = None,
                 scopes: dict[str, str] | None = None, ended: EndedCalls | None = None) -> None:
        self.calls = calls
        # the calls of sub-agents that have ended (`ended_agent_calls`), by call: each with
        # the point of the end that held it, oldest first
        self.ended: dict[tuple[str, str], list[tuple[int, dict[str, Any]]]] = {}
        for end, held in ended or []:
            for key, details in held.items():
                self.ended.setdefault(key, []).append((end, details))
        self.at: int | None = None  # the point of the event being told
        self.nesting = nesting
        self.scopes = scopes or {}  # the namespaced branches' nodes (`branch_scopes`)
        self.answerers = answerers or {}  # who answered each question in the studio, by id
        self.edited: dict[str, Any] = {}  # the arguments a person gave a call, by request id
        self.model_started: dict[str, float] = {}
        self.answered: set[str] = set()
        # requests asked and not decided yet: a run resumed with one of several decided
        # records the others' questions again (its new process had not seen them asked),
        # though no one was asked anything new
        self.waiting: set[str] = set()
        self.open_skills = 0
        self.call_depths: dict[str, int] = {}  # each call's entries' depth, by request id

    def depth(self, node: str | None) -> int:
        if not node:
            return self.open_skills
        inside = sum(1 for path in self.nesting if node.startswith(path + "/"))
        agents = call_scope(node).count("/") // 2 + (1 if call_scope(node) else 0)
        return inside + agents + self.open_skills

    def scope(self, node: str) -> str:
        """Where the node's calls are kept and named: a sub-agent's call, a namespaced branch,
        else the run's own conversation (``""``)."""
        return call_scope(node) or self.scopes.get(node, "")

    def call(self, key: tuple[str, str]) -> dict[str, Any]:
        """The call's arguments and result, each from the first that holds it: the sub-agents'
        states just before they ended (the first end after the event: a namespace may be used
        again), then the state now (a call's result comes after an end that held its
        arguments: the caller's call of a sub-agent ends after the sub-agent does)."""
        found: dict[str, Any] = {}
        held = [d for end, d in self.ended.get(key, ()) if self.at is not None and end >= self.at]
        for details in [*held, self.calls.get(key, {})]:
            for part, value in details.items():
                if value is not None:
                    found.setdefault(part, value)
        return found

    def entry(self, event: dict[str, Any]) -> dict[str, Any] | None:
        name = str(event.get("name", ""))
        f = event.get("fields") or {}
        node = event.get("node") or ""
        point = event.get("point")
        self.at = point if isinstance(point, int) else None
        said = self.words(name, f, event.get("time") or 0.0, node)
        if said is None:
            return None
        kind, title, text = said
        out = {"kind": kind, "title": shown(title), "text": shown(text),
               "time": event.get("time"),
               "point": event.get("point"), "node": node, "depth": self.depth(node),
               "event": name}
        call = ""
        if f.get("call_id"):  # by its full path, as a request id names it: ids repeat
            scope = self.scope(node)
            call = out["call"] = f"{scope}/{f['call_id']}" if scope else str(f["call_id"])
        elif f.get("request_id"):
            call = out["call"] = str(f["request_id"])
        if call and node:
            self.call_depths[call] = self.depth(node)
        elif call in self.call_depths:  # a decision, made outside the tree: where it was asked
            out["depth"] = self.call_depths[call]
        if name in ("bt.skill.started",):
            self.open_skills += 1
        elif name == "bt.skill.finished":
            self.open_skills = max(0, self.open_skills - 1)
            out["depth"] = self.depth(node)
        return out

    def words(self, name: str, f: dict[str, Any], at: float, node: str
              ) -> tuple[str, str, str] | None:
        tool = str(f.get("tool") or "?")
        call = self.call((self.scope(node), str(f.get("call_id") or "")))
        if name == "llm.call.started":
            self.model_started[node] = at
            return None
        if name == "llm.call.completed":
            took = at - self.model_started.pop(node, at)
            bits = [f"model turn · {f.get('model') or 'model'}",
                    f"{f.get('input_tokens', 0)} in / {f.get('output_tokens', 0)} out tokens"]
            if took > 0:
                bits.append(_seconds(took))
            return "model", " · ".join(bits), turn_words(f)
        if name == "llm.fallback":
            return "model", f"model {f.get('from')} failed: asking {f.get('to')}", \
                _text(f.get("error"))
        if name == "llm.call.failed":
            self.model_started.pop(node, None)
            return "error", f"model failed · {f.get('model') or 'model'}", _text(f.get("error"))
        if name == "guardrail.tripped":
            kind = str(f.get("kind") or "").replace("_", " ")
            what = f": {tool}" if f.get("tool") else ""
            # an input guardrail on a person's answer (ask_user's, named by its tool)
            # withholds it as a tool-output one does: the run goes on without it
            verdict = ("result withheld from the model" if f.get("kind") == "tool_output"
                       else "answer withheld from the model" if f.get("tool")
                       else "the run fails")
            return "guard", f"{kind} guardrail {f.get('guardrail')} tripped{what}", \
                f"{_text(f.get('reason'))} ({verdict})"
        if name == "guard.decision":
            decision = str(f.get("decision"))
            verb = {"allow": "allowed", "deny": "denied", "confirm": "asks a person about",
                    "pending": "asks a person about"}.get(decision, decision)
            rule = f" (rule {f['rule']})" if f.get("rule") else ""
            return "guard", f"guard {verb}: {tool}", f"{f.get('reason') or ''}{rule}"
        if name == "interaction.asked":
            request = str(f.get("request_id") or "")
            if request and request in self.waiting:
                return None
            self.waiting.add(request)
            why = f"why: {f.get('reason')}" if f.get("reason") else ""
            args = pretty_json(f.get("arguments")) if f.get("arguments") is not None else ""
            return "ask", f"asked: {tool}", "\n".join(p for p in (args, why) if p)
        if name in ("interaction.answered", "studio.answered"):  # a question (ask_user)
            request = str(f.get("request_id") or "")
            self.waiting.discard(request)
            if name.startswith("studio.") and request in self.answered:
                return None
            self.answered.add(request)
            # the run's own record comes first and names no one: the studio's journal does
            who = str(f.get("by") or self.answerers.get(request) or "")
            return "decision", f"answered{f' by {who}' if who else ''}: {request}", _text(
                f.get("answer"))
        if name in ("interaction.approved", "interaction.rejected", "studio.approved",
                    "studio.rejected"):
            approved = name.endswith("approved")
            request = str(f.get("request_id") or "")
            self.waiting.discard(request)
            if name.startswith("studio.") and request in self.answered:
                return None  # the run's own record of the answer says it already
            self.answered.add(request)
            verb = "approved" if approved else "rejected"
            message = str(f.get("message") or "")
            who, note = _signed(message)
            who = who or str(f.get("by") or "")
            by = f" by {who}" if who else ""
            what = tool if f.get("tool") else request
            if f.get("edited"):  # a person changed the call's arguments as they approved it
                self.edited[request] = f.get("arguments")
                edit = "edited arguments:\n" + pretty_json(f.get("arguments"))
                return "decision", f"{verb}{by} (edited): {what}", "\n".join(
                    p for p in (edit, note) if p)
            return "decision", f"{verb}{by}: {what}", note
        if name == "tool.call.started" and f.get("resumed"):
            return "call", f"goes on: {tool}", "after waiting for a person"  # no second start
        if name == "tool.call.started":
            # the call as it runs: the person's edit, else the model's (the conversation's)
            scope = self.scope(node)
            asked = f"{scope}/{f.get('call_id')}" if scope else str(f.get("call_id") or "")
            given = self.edited.get(asked, call.get("arguments"))
            text = pretty_json(given) if given is not None else str(f.get("args_preview") or "")
            return "call", f"started: {tool}", text
        if name == "tool.call.completed":
            result = call.get("result")
            text = _text(result) if result is not None else str(f.get("result_preview") or "")
            ms = f.get("duration_ms")
            spent = f" · {_seconds(float(ms) / 1000)}" if isinstance(ms, (int, float)) else ""
            return "result", f"result of {tool}{spent}", text
        if name == "tool.call.failed" and f.get("in_doubt"):  # stopped after it began
            return "error", f"stopped, maybe done (not run again): {tool}", _text(f.get("error"))
        if name == "tool.call.failed":
            return "error", f"failed: {tool}", _text(f.get("error"))
        if name == "tool.call.stopped":
            return "call", f"stopped: {tool}", "the run stopped before this call ended"
        if name == "tool.call.retry":
            return "call", f"retry {f.get('attempt')}: {tool}", _text(f.get("error"))
        if name == "tool.call.repeated":
            return "call", f"ran again after a worker died: {tool}", ""
        if name in ("node.failed", "run.cleanup_failed", "studio.error"):
            where = f" in {node}" if node else ""
            return "error", f"error{where}", _text(f.get("error"))
        if name == "skill.loaded":
            return "skill", f"skill loaded: {f.get('skill')}", ""
        if name == "skill.compiled":
            return "skill", f"skill subtree compiled: {node}", str(f.get("namespace") or "")
        if name == "skill.completed":
            return "skill", f"skill finished: {node}", _fields_text(
                {k: v for k, v in f.items() if k != "node"})
        if name == "bt.skill.started":
            return "skill", f"sub-agent started: skill {f.get('skill')}", _fields_text(
                {k: v for k, v in f.items() if k != "skill"})
        if name == "bt.skill.finished":
            return "skill", f"sub-agent finished: skill {f.get('skill')} · {f.get('status')}", \
                _fields_text({k: v for k, v in f.items() if k not in ("skill", "status")})
        if name == "agent.ticked":
            return None  # one per tick of a sub-agent's tree: its points say it
        if name == "agent.suspended":
            pending = f.get("pending") or []
            return "run", f"sub-agent {f.get('agent')} waits for {_waits(pending)}", \
                ", ".join(map(str, pending))
        if name == "agent.finished":
            if f.get("status") == "suspended":
                return None  # "waits for approval" said it
            return "run", f"sub-agent {f.get('agent')} {f.get('status')}", _text(f.get("error"))
        if name == "react.stopped":
            return "error", "agent loop stopped", _text(f.get("reason"))
        if name == "run.message":
            return "user", "the user's next message", _text(f.get("content"))
        if name == "studio.forked":
            return "run", f"started in the studio by {f.get('by') or '?'}", ""
        if name == "run.forked":
            return "run", f"forked from run {f.get('run')} at point {f.get('point')}", (
                "with an edited state" if f.get("edited") else "")
        if name == "run.suspended":
            pending = f.get("pending") or []
            return "run", f"waits for {_waits(pending)}", ", ".join(map(str, pending))
        if name == "run.finished":
            if f.get("status") == "suspended":
                return None  # "waits for approval" said it
            return "run", f"run {f.get('status')}", _text(f.get("error"))
        if name in ("bt.skill.node.io", "skill.debug_snapshot"):
            return "detail", name.replace(".", " ").replace("_", " "), _fields_text(f)
        return "event", name.replace(".", " ").replace("_", " "), _fields_text(f)


def event_timeline(events: Iterable[dict[str, Any]], *,
                   snapshot: dict[str, Any] | None = None,
                   nesting: Iterable[str] = (),
                   tree: dict[str, dict[str, Any]] | None = None,
                   ended: EndedCalls | None = None) -> list[dict[str, Any]]:
    """The entries for recorded events (each with ``time``, ``name``, ``node``, ``fields`` and
    the ``point`` it led to), oldest first. ``snapshot`` supplies full arguments and results
    (events carry previews), ``ended`` those of sub-agents that have ended
    (`ended_agent_calls`); ``nesting`` lists the paths of skill and agent nodes; ``tree``
    (the run's node infos) the namespaces of its branches."""
    ordered = sorted(events, key=lambda e: e.get("time") or 0.0)
    answerers = {str((e.get("fields") or {}).get("request_id")): str(e["fields"]["by"])
                 for e in ordered if e.get("name") == "studio.answered"
                 and (e.get("fields") or {}).get("by")}
    story = _Story(call_details(snapshot), list(nesting), answerers, branch_scopes(tree), ended)
    return [e for e in (story.entry(event) for event in ordered) if e is not None]


def message_timeline(snapshot: dict[str, Any] | None,
                     interaction: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The story told from the conversation in the state, for a run that recorded no events:
    model turns and their calls (with the question asked and the answer), tool results."""
    interaction = interaction or {}
    asked = {r["id"]: r for r in interaction.get("asked", []) if isinstance(r, dict)}
    decided = {d["request_id"]: d for d in interaction.get("decisions", [])
               if isinstance(d, dict)}
    root = snapshot.get("root", {}) if isinstance(snapshot, dict) else {}
    messages = root.get("messages", []) if isinstance(root, dict) else []
    out: list[dict[str, Any]] = []

    def add(kind: str, title: str, text: str, call: str | None = None) -> None:
        out.append({"kind": kind, "title": shown(title), "text": shown(text), "time": None,
                    "point": None,
                    "node": "", "depth": 0, **({"call": call} if call else {})})

    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "assistant":
            add("model", "model turn", _text(message.get("content") or ""))
            for call in message.get("tool_calls") or []:
                call_id = str(call.get("id", ""))
                name = call.get("name", "?")
                if call_id in asked:
                    reason = asked[call_id].get("payload", {}).get("reason") or ""
                    add("ask", f"asked: {name}", reason, call_id)
                if call_id in decided:
                    decision = decided[call_id]
                    verb = "approved" if decision.get("approved") else "rejected"
                    add("decision", f"{verb}: {name}", str(decision.get("message") or ""),
                        call_id)
                add("call", f"started: {name}", pretty_json(call.get("arguments", {})), call_id)
        elif role == "tool":
            add("result", f"result of {message.get('name') or '?'}",
                _text(message.get("content") or ""), str(message.get("tool_call_id") or ""))
        elif role == "user":
            add("user", "user", _text(message.get("content")))
    return out


def durable_timeline(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The story of a durable run from its recorded steps (model turns, tool calls, node
    steps, answers), oldest first. Each step is a dict: ``name``, ``output``, ``error``,
    ``started`` and ``completed`` (seconds)."""
    out: list[dict[str, Any]] = []
    for step in steps:
        name = str(step.get("name", ""))
        output, error = step.get("output"), step.get("error")
        started, completed = step.get("started"), step.get("completed")
        took = (completed - started) if started and completed else 0.0
        at = started or completed
        entry: dict[str, Any] | None = None
        if isinstance(output, dict) and output.get("kind") == "jianmu.approval":
            verb = "approved" if output.get("approved") else "rejected"
            who, note = _signed(str(output.get("message") or ""))
            by = f" by {who}" if who else ""
            edit = ""
            if output.get("arguments") is not None:  # what ran is the person's, not the model's
                edit = "edited arguments:\n" + pretty_json(output.get("arguments"))
            entry = {"kind": "decision",
                     "title": f"{verb}{by}{' (edited)' if edit else ''}: {output.get('call_id')}",
                     "text": "\n".join(p for p in (edit, note) if p), "call": output.get("call_id")}
        elif name.startswith("jianmu:model:") and isinstance(output, RefusedTurn):
            entry = {"kind": "error", "title": f"model turn refused · {_seconds(took)}",
                     "text": str(output), "node": name[len("jianmu:model:"):]}
        elif name.startswith("jianmu:model:"):
            usage = getattr(output, "usage", None)
            message = getattr(output, "message", None)
            calls = [c.name for c in getattr(message, "tool_calls", None) or []]
            tokens = (f" · {usage.input_tokens} in / {usage.output_tokens} out tokens"
                      if usage is not None else "")
            text = (f"asks for: {', '.join(calls)}" if calls
                    else f"answers: {getattr(message, 'content', '') or ''}")
            entry = {"kind": "model", "title": f"model turn{tokens} · {_seconds(took)}",
                     "text": text, "node": name[len("jianmu:model:"):]}
        elif name.startswith("jianmu:tool:"):
            tool = getattr(output, "tool", None) or name[len("jianmu:tool:"):]
            ok = getattr(output, "ok", error is None)
            told = getattr(output, "output", None) if ok else getattr(output, "error", error)
            verdict = "result of" if ok else (  # one in flight at a takeover: not run again
                "stopped, maybe done (not run again):" if getattr(output, "maybe_done", False)
                else "failed:")
            entry = {"kind": "result" if ok else "error",
                     "title": f"{verdict} {tool} · {_seconds(took)}",
                     "text": _text(told), "call": getattr(output, "call_id", None)}
        elif name.startswith("jianmu:node:"):
            status = output[0] if isinstance(output, (list, tuple)) and output else output
            entry = {"kind": "node", "title": f"{name[len('jianmu:node:'):]}: "
                                              f"{str(status).lower()}",
                     "text": _fields_text(output[1]) if isinstance(output, (list, tuple))
                     and len(output) > 1 and isinstance(output[1], dict) else "",
                     "node": name[len("jianmu:node:"):]}
        elif error is not None:
            entry = {"kind": "error", "title": f"error in step {name}", "text": str(error)}
        if entry is not None:
            entry.update(title=shown(str(entry["title"])), text=shown(str(entry["text"])))
            out.append({"text": "", "node": "", "depth": 0, "point": None, "time": at,
                        "event": name, **entry})
    return out
