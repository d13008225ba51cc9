"""The studio's pages as HTML, every value from a run escaped here (`html.escape`): a node
name, an argument or a result that holds ``<script>`` shows as text."""

from __future__ import annotations

import time
from html import escape
from typing import Any

__all__ = ("json_tree", "run_page", "runs_page")

STATUSES = ("running", "suspended", "decided", "queued", "success", "failure", "timeout",
            "cancelled")


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def _when(stamp: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp)) if stamp else "-"


def _layout(title: str, csrf: str, body: str, main_attrs: str = "") -> str:
    return (
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta name=\"csrf\" content=\"{_e(csrf)}\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{_e(title)} · Jianmu Studio</title>"
        "<link rel=\"stylesheet\" href=\"/static/studio.css\">"
        "<script src=\"/static/studio.js\" defer></script></head><body>"
        "<header><a class=\"brand\" href=\"/\">Jianmu Studio</a></header>"
        f"<main{main_attrs}>{body}</main></body></html>"
    )


def runs_page(runs: list[dict[str, Any]], status: str | None, csrf: str,
              sources: list[str]) -> str:
    """The list of runs, with a status filter."""
    links = ['<a href="/"' + (' class="on"' if status is None else "") + ">all</a>"]
    links += [f'<a href="/?status={s}"' + (' class="on"' if s == status else "") + f">{s}</a>"
              for s in STATUSES]
    rows = "".join(
        f'<tr class="run status-{_e(r["status"])}"><td><a href="/run/{_e(r["source"])}/'
        f'{_e(r["run_id"])}">{_e(r["run_id"])}</a></td><td>{_e(r["tree"])}</td>'
        f'<td><span class="status status-{_e(r["status"])}">{_e(r["status"])}</span></td>'
        f'<td>{_when(r["started"])}</td><td>{_e(r["pending"] or "")}</td>'
        f'<td>{_e(r["source"])}</td></tr>'
        for r in runs
    )
    empty = "" if runs else f'<p class="empty">no runs{" " + _e(status) if status else ""}</p>'
    body = (
        f"<h1>Runs</h1><p class=\"sources\">from {_e(', '.join(sources))}</p>"
        f"<nav class=\"filter\">{' '.join(links)}</nav>"
        "<table class=\"runs\"><thead><tr><th>run</th><th>tree</th><th>status</th>"
        f"<th>started</th><th>pending</th><th>source</th></tr></thead><tbody>{rows}</tbody>"
        f"</table>{empty}"
    )
    return _layout("Runs", csrf, body)


def json_tree(value: Any, key: str | None = None, depth: int = 0) -> str:
    """``value`` as nested, collapsible ``<details>`` (open near the top)."""
    label = f'<span class="key">{_e(key)}</span>: ' if key is not None else ""
    if isinstance(value, dict) or isinstance(value, list):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        inner = "".join(f"<li>{json_tree(v, str(k), depth + 1)}</li>" for k, v in items)
        kind = f"{{{len(value)}}}" if isinstance(value, dict) else f"[{len(value)}]"
        opened = " open" if depth < 2 else ""
        return (f"<details{opened}><summary>{label}<span class=\"kind\">{kind}</span>"
                f"</summary><ul>{inner}</ul></details>")
    import json

    shown = json.dumps(value, ensure_ascii=False, default=str)
    return f'{label}<span class="value">{_e(shown)}</span>'


def _tree(nodes: list[dict[str, Any]]) -> str:
    children: dict[str, list[dict[str, Any]]] = {}
    for node in nodes:
        children.setdefault(node["key"].rpartition("/")[0], []).append(node)

    def draw(parent: str) -> str:
        items = "".join(
            f'<li class="node node-{_e(n["status"])}" data-key="{_e(n["key"])}">'
            f'<span class="dot"></span><span class="name">{_e(n["name"])}</span> '
            f'<span class="node-status">{_e(n["status"])}</span>{draw(n["key"])}</li>'
            for n in children.get(parent, []))
        return f"<ul>{items}</ul>" if items else ""

    return draw("") or '<p class="empty">no nodes recorded</p>'


def _request(r: dict[str, Any]) -> str:
    why = _e(r["reason"]) + (f' <span class="rule">(rule {_e(r["rule"])})</span>'
                             if r["rule"] else "")
    details = (f'<h4>details</h4><pre class="details">{_e(r["details"])}</pre>'
               if r["details"] else "")
    return (
        f'<div class="request" data-id="{_e(r["id"])}"><h3><span class="tool">{_e(r["tool"])}'
        f'</span> <code class="call-id">{_e(r["id"])}</code></h3>'
        f'<p class="summary">{_e(r["summary"])}</p><p class="why">why: {why}</p>'
        f'<h4>arguments</h4><pre class="arguments">{_e(r["arguments"])}</pre>{details}'
        '<div class="actions"><button type="button" class="approve">Approve</button>'
        '<input class="reason" type="text" placeholder="reason (the model sees it)">'
        '<button type="button" class="reject">Reject</button></div></div>'
    )


def _timeline(items: list[dict[str, Any]]) -> str:
    out = []
    for item in items:
        text = item.get("text") or ""
        extra = "".join(f'<p class="{k}">{_e(item[k])}</p>' for k in ("guard", "decision")
                        if item.get(k))
        out.append(f'<li class="entry entry-{_e(item["kind"])}"><span class="title">'
                   f'{_e(item["title"])}</span>{extra}'
                   + (f'<pre class="text">{_e(text)}</pre>' if text else "") + "</li>")
    return "".join(out)


def run_page(view: dict[str, Any], csrf: str) -> str:
    """One run: status, approvals, tree, result, timeline, state; live through SSE."""
    source, run_id = view["source"], view["run_id"]
    pending = "".join(_request(r) for r in view["pending"])
    result = "" if view["result"] is None else str(view["result"])
    body = (
        f'<h1>run <span id="run-id">{_e(run_id)}</span></h1>'
        f'<p class="meta">tree <span id="tree-name">{_e(view["tree"])}</span> · status '
        f'<span id="status" class="status status-{_e(view["status"])}">{_e(view["status"])}'
        f'</span> · <span id="live">live</span></p>'
        f'<p id="note" class="note">{_e(view["note"])}</p>'
        f'<p id="error" class="error">{_e(view["error"])}</p>'
        '<section class="approvals"><h2>Approvals</h2>'
        f'<div id="pending">{pending}</div><p id="decision-msg" role="status"></p></section>'
        f'<section><h2>Result</h2><pre id="result">{_e(result)}</pre></section>'
        f'<section><h2>Tree</h2><div id="tree">{_tree(view["nodes"])}</div></section>'
        f'<section><h2>Timeline</h2><ol id="timeline">{_timeline(view["timeline"])}</ol>'
        '</section>'
        f'<section><h2>State</h2><div id="state" class="json">{json_tree(view["state"])}'
        '</div></section>'
    )
    attrs = (f' id="run" data-source="{_e(source)}" data-run="{_e(run_id)}"'
             f' data-status="{_e(view["status"])}"')
    return _layout(f"run {run_id}", csrf, body, attrs)
