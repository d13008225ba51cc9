"""What a page shows of a run, as JSON-ready dicts: the same data feeds the HTML and the
live updates, so the server and the browser draw one thing."""

from __future__ import annotations

import json
from typing import Any

from jianmu.runtime.interaction import ApprovalRequest

__all__ = ("PREVIEW", "final_answer", "node_rows", "pending_rows", "pretty_json", "timeline")

PREVIEW = 400
"""Characters of a tool result or model text shown before the rest is folded away."""

_SHOWN = frozenset({"tool", "arguments", "reason", "rule", "fingerprint", "asked_by"})


def pretty_json(value: Any) -> str:
    """``value`` as indented JSON (non-ASCII kept, as the CLI shows it); repr if it is not JSON."""
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError):  # a circular structure
        return repr(value)


def node_rows(nodes: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """A checkpoint's ``nodes`` (``0/1/2`` -> name, status) in depth-first order."""

    def order(key: str) -> list[int]:
        return [int(part) for part in key.split("/") if part.isdigit()]

    return [
        {"key": key, "name": str(node.get("name", "?")),
         "status": str(node.get("status", "INVALID")).lower()}
        for key, node in sorted(nodes.items(), key=lambda item: order(item[0]))
    ]


def pending_rows(requests: list[ApprovalRequest]) -> list[dict[str, Any]]:
    """Each pending request with its tool, FULL arguments and why it asks (as the CLI shows)."""
    rows = []
    for request in requests:
        payload = request.payload
        rest = {k: v for k, v in payload.items() if k not in _SHOWN}
        rows.append({
            "id": request.id, "summary": request.summary, "node": request.node or "",
            "tool": str(payload.get("tool") or request.kind),
            "arguments": pretty_json(payload.get("arguments", {})),
            "reason": str(payload.get("reason") or ""), "rule": str(payload.get("rule") or ""),
            "details": pretty_json(rest) if rest else "",
        })
    return rows


def final_answer(snapshot: dict[str, Any] | None) -> Any:
    """The final answer in a run's state snapshot, if any."""
    if not isinstance(snapshot, dict):
        return None
    root = snapshot.get("root", snapshot)
    return root.get("final_answer") if isinstance(root, dict) else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else pretty_json(value)


def timeline(snapshot: dict[str, Any] | None, interaction: dict[str, Any] | None,
             events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The run's story: model turns and their tool calls (with the guard's question and the
    person's answer), tool results, then the events the studio recorded (approvals, runs it
    continued)."""
    interaction = interaction or {}
    asked = {r["id"]: r for r in interaction.get("asked", []) if isinstance(r, dict)}
    decided = {d["request_id"]: d for d in interaction.get("decisions", [])
               if isinstance(d, dict)}
    root = snapshot.get("root", {}) if isinstance(snapshot, dict) else {}
    messages = root.get("messages", []) if isinstance(root, dict) else []
    out: list[dict[str, Any]] = []
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "assistant":
            out.append({"kind": "model", "title": "model turn",
                        "text": _text(message.get("content") or "")})
            for call in message.get("tool_calls") or []:
                call_id = str(call.get("id", ""))
                item = {"kind": "call", "title": f"tool call {call.get('name', '?')} ({call_id})",
                        "text": pretty_json(call.get("arguments", {}))}
                if call_id in asked:
                    reason = asked[call_id].get("payload", {}).get("reason") or "asks a person"
                    item["guard"] = f"guard: confirm — {reason}"
                if call_id in decided:
                    decision = decided[call_id]
                    verb = "approved" if decision.get("approved") else "rejected"
                    note = f": {decision['message']}" if decision.get("message") else ""
                    item["decision"] = f"{verb}{note}"
                out.append(item)
        elif role == "tool":
            out.append({"kind": "result",
                        "title": f"result of {message.get('name') or '?'} "
                                 f"({message.get('tool_call_id') or ''})",
                        "text": _text(message.get("content") or "")})
        elif role == "user":
            out.append({"kind": "user", "title": "user", "text": _text(message.get("content"))})
    for event in events:
        fields = {k: v for k, v in event.get("fields", {}).items() if v is not None}
        out.append({"kind": "event", "title": str(event.get("name", "")),
                    "text": pretty_json(fields) if fields else "",
                    "time": event.get("time"), "node": event.get("node") or ""})
    return out
