"""What a page shows of a run, as JSON-ready dicts: the same data feeds the HTML and the
live updates, so the server and the browser draw one thing."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from jianmu.runtime.context import ApprovalRequest
from jianmu.runtime.points import PointInfo
from jianmu.studio.timeline import pretty_json, shown

__all__ = ("agent_statuses", "asking_at", "final_answer", "node_rows", "pending_rows",
           "point_rows", "usage_text", "usage_words")

_SHOWN = frozenset({"tool", "arguments", "reason", "rule", "fingerprint", "asked_by",
                    "parameters", "call_id", "question"})


def _order(key: str) -> list[int]:
    return [int(part) for part in key.split("/") if part.isdigit()]


def node_rows(nodes: dict[str, dict[str, Any]], tree: dict[str, dict[str, Any]] | None = None,
              *, asking: Iterable[str] = (), errors: dict[str, str] | None = None,
              written: dict[str, list[str]] | None = None,
              agents: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """One row per node, depth-first: its key (``0/1/2``), parent, name, path from the root,
    kind, type, namespace, status, the state keys it reads and writes where known, its last
    error. ``nodes`` maps keys to name and status (a checkpoint's), ``tree`` to what the run's
    history knows of each node; a running node in ``asking`` (paths of nodes waiting for an
    answer) is ``suspended``. A node's sub-agents (``agent_tool``) follow it as rows of kind
    ``agent``, their status from ``agents`` (`agent_statuses`)."""
    tree = tree or {}
    errors = errors or {}
    written = written or {}
    waiting = set(asking)
    keys = sorted(set(nodes) | set(tree), key=_order)
    children: dict[str, list[str]] = {}
    for key in keys:
        if "/" in key:
            children.setdefault(key.rpartition("/")[0], []).append(key)

    def name_of(key: str) -> str:
        return str((tree.get(key) or {}).get("name") or nodes.get(key, {}).get("name", "?"))

    siblings = {parent: Counter(name_of(k) for k in kids) for parent, kids in children.items()}
    paths: dict[str, str] = {}
    for key in keys:  # parents come first: paths as the runner names them
        recorded = tree.get(key, {}).get("path")
        name = name_of(key)
        parent = key.rpartition("/")[0]
        if recorded:
            paths[key] = str(recorded)
        elif not parent:
            paths[key] = name
        else:
            label = name if siblings[parent][name] == 1 else f"{name}[{key.rpartition('/')[2]}]"
            paths[key] = f"{paths.get(parent, parent)}/{label}"
    rows = []
    for key in keys:
        info, node = tree.get(key, {}), nodes.get(key, {})
        status = str(node.get("status", "INVALID")).lower()
        path = paths[key]
        if status == "running" and path in waiting:
            status = "suspended"
        kind = str(info.get("kind") or ("composite" if key in children else "custom"))
        rows.append({
            "key": key, "parent": key.rpartition("/")[0], "name": name_of(key),
            "path": path, "kind": kind, "type": str(info.get("type") or ""),
            "namespace": str(info.get("ns") or ""), "status": status,
            "reads": list(info.get("reads") or []),
            "writes": sorted({*(info.get("writes") or []), *written.get(path, [])}),
            "error": shown(errors.get(key, "")),  # a tool's or a model's text, as it failed
        })
        rows.extend(_agent_rows(key, path, info, waiting, agents or {}))
    return rows


def agent_statuses(events: Iterable[dict[str, Any]]) -> dict[str, str]:
    """Each sub-agent's last status by name, from a run's ``agent.*`` events."""
    statuses: dict[str, str] = {}
    for event in events:
        name, fields = event.get("name"), event.get("fields") or {}
        agent = fields.get("agent")
        if not isinstance(agent, str):
            continue
        if name == "agent.finished":
            statuses[agent] = str(fields.get("status") or "running")
        elif name in ("agent.ticked", "agent.started"):
            statuses[agent] = "running"
    return statuses


def _agent_rows(key: str, path: str, info: dict[str, Any], waiting: set[str],
                agents: dict[str, str]) -> list[dict[str, Any]]:
    """The sub-agents a node calls as tools (``agent_tool``), each drawn as a child of kind
    ``agent``: suspended while one of its requests waits (its nodes' paths start
    ``<path>/<name>[``), else as its last ``agent.*`` event says (not run before any)."""
    rows = []
    for name in info.get("agents") or ():
        inside = f"{path}/{name}["
        status = agents.get(str(name), "invalid")
        if any(p.startswith(inside) for p in waiting):
            status = "suspended"
        # each call runs in a namespace of its own, under the caller's: "" read "(the root
        # state)" on the page, where none of the sub-agent's state is
        caller = str(info.get("ns") or "")
        rows.append({
            "key": f"{key}/agent:{name}", "parent": key, "name": str(name),
            "path": f"{path}/{name}", "kind": "agent", "type": "AgentTool",
            "namespace": f"{caller + '.' if caller else ''}{name}/<call id> (one per call)",
            "status": status, "reads": [], "writes": [], "error": "",
        })
    return rows


def pending_rows(requests: list[ApprovalRequest]) -> list[dict[str, Any]]:
    """Each pending request with its tool, FULL arguments and why it asks (as the CLI shows)."""
    rows = []
    for request in requests:
        payload = request.payload
        rest = {k: v for k, v in payload.items() if k not in _SHOWN}
        rows.append({  # what a person reads before deciding: hidden characters shown
            "id": request.id, "summary": shown(request.summary), "node": request.node or "",
            "tool": shown(str(payload.get("tool") or request.kind)),
            "arguments": pretty_json(payload.get("arguments", {})),
            "reason": shown(str(payload.get("reason") or "")),
            "rule": shown(str(payload.get("rule") or "")),
            "details": pretty_json(rest) if rest else "",
            "kind": request.kind, "question": shown(request.question or ""),
            # which sub-agent asks (the CLI says it too): a question shows no call to tell it
            "asker": shown(" > ".join(map(str, payload.get("agent_path") or []))),
        })
    return rows


def final_answer(snapshot: dict[str, Any] | None) -> Any:
    """The final answer in a run's state snapshot, if any (a text with its hidden characters
    shown: `shown`)."""
    if not isinstance(snapshot, dict):
        return None
    root = snapshot.get("root", snapshot)
    answer = root.get("final_answer") if isinstance(root, dict) else None
    return shown(answer) if isinstance(answer, str) else answer


def usage_text(snapshot: dict[str, Any] | None) -> str:
    """What a run has spent, from its state snapshot's ``usage`` (`usage_words`); ``""`` when
    the state keeps none."""
    if not isinstance(snapshot, dict):
        return ""
    root = snapshot.get("root", snapshot)
    usage = root.get("usage") if isinstance(root, dict) else None
    return usage_words(usage) if isinstance(usage, dict) else ""


def usage_words(usage: dict[str, Any]) -> str:
    """A run's `Usage` (as a dict) in words: model requests, tool calls executed, tokens, those
    read from the prompt cache, and how many requests' tokens are estimates (their server said
    no usage), so nobody reads an estimate as the provider's bill."""

    def count(key: str) -> int:
        value = usage.get(key)
        return value if isinstance(value, int) else 0

    requests, calls = count("requests"), count("tool_calls")
    cached, estimated = count("cache_read_tokens"), count("estimated_requests")
    said = (f"{requests} model request{'s' * (requests != 1)} · {calls} tool "
            f"call{'s' * (calls != 1)} · {count('input_tokens')} in "
            + (f"({cached} read from the prompt cache) " if cached else "")
            + f"/ {count('output_tokens')} out tokens")
    if estimated:
        said += (f" · estimated for {estimated} of the requests (their server said no usage: "
                 "a token per four characters), not the provider's count")
    return said


def asking_at(events: Iterable[dict[str, Any]], point: int | None = None) -> set[str]:
    """Paths of the nodes waiting for an answer at ``point`` (at the end: None)."""
    asked: dict[str, str] = {}
    for event in events:
        if point is not None and (event.get("point") is None or event["point"] > point):
            continue
        fields = event.get("fields") or {}
        request = str(fields.get("request_id") or "")
        if event.get("name") == "interaction.asked":
            asked[request] = str(event.get("node") or "")
        elif event.get("name") in ("interaction.approved", "interaction.rejected",
                                   "interaction.answered", "interaction.withdrawn"):
            asked.pop(request, None)
    return set(asked.values())


def point_rows(points: list[PointInfo], entries: list[dict[str, Any]],
               names: dict[str, str]) -> list[dict[str, Any]]:
    """Each point for the time slider and ``jianmu runs show``: number, tick, time, and a
    label saying what happened there (its timeline entries, else what changed)."""
    said: dict[int, list[str]] = {}
    for entry in entries:
        if entry.get("point") is not None:
            said.setdefault(int(entry["point"]), []).append(str(entry["title"]))
    rows = []
    for info in points:
        titles = said.get(info.number, [])
        if titles:
            label = "; ".join(titles[:2]) + (f" (+{len(titles) - 2})" if len(titles) > 2 else "")
        elif info.number == 0 and info.kind == "tick":
            label = "start"
        elif info.nodes:
            nodes = [f"{names.get(k, k)} {s.lower()}" for k, s in list(info.nodes.items())[:3]]
            more = f" (+{len(info.nodes) - 3})" if len(info.nodes) > 3 else ""
            label = ", ".join(nodes) + more
        elif info.keys:
            label = "state: " + ", ".join(info.keys[:4]) + ("…" if len(info.keys) > 4 else "")
        else:
            label = "checkpoint" if info.kind == "checkpoint" else "tick"
        rows.append({"n": info.number, "tick": info.tick, "time": info.time, "kind": info.kind,
                     "label": shown(label)})  # node names and state keys: escapes shown
    return rows
