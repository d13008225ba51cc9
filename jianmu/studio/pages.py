"""The studio's pages as HTML, every value from a run escaped here (`html.escape`): a node
name, an argument or a result that holds ``<script>`` shows as text."""

from __future__ import annotations

import json
import re
import time
from html import escape
from typing import Any
from urllib.parse import quote, urlencode

from jianmu._text import json_visible
from jianmu.studio.timeline import shown

__all__ = ("error_page", "json_tree", "run_href", "run_page", "runs_page")

STATUSES = ("running", "suspended", "decided", "queued", "success", "failure", "timeout",
            "cancelled", "stopped", "damaged")


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def _name(value: Any) -> str:
    """A name from a run (its id, its tree's) as escaped text, hidden characters as escapes
    (``\\u202e``): a bidi override would make one run's id read as another's."""
    return _e(shown("" if value is None else str(value)))


_LONG_WORD = re.compile(r"(\S{65,})")


def _wrapped_name(value: Any) -> str:
    """`_name`, with a ``<wbr>`` every 64 characters of a word longer than that: Chromium
    wraps such a word at any point in time that grows with its square (a tree named with
    50,000 characters held the runs list for seconds); the text read or copied is the same."""
    return _breakable(shown("" if value is None else str(value)))


def _breakable(text: str) -> str:
    """``text`` escaped, with a ``<wbr>`` every 64 characters of a word longer than that: a
    tool's arguments, a result, an answer may be one word of 200,000 characters (base64, a
    JSON string of many lines), which Chromium laid out in seconds, each time it was drawn."""
    parts = _LONG_WORD.split(text)
    return "".join("<wbr>".join(_e(part[i:i + 64]) for i in range(0, len(part), 64))
                   if n % 2 else _e(part) for n, part in enumerate(parts))


def _when(stamp: float | None) -> str:
    if not stamp:
        return "-"
    # the studio's clock until the page's script writes it in the browser's, as the run
    # page's times are (a studio reached through a tunnel may run in another time zone)
    utc = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp))
    return (f'<time datetime="{utc}" data-stamp="{_e(stamp)}">'
            f'{time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))}</time>')


def _layout(title: str, csrf: str, body: str, main_attrs: str = "") -> str:
    return (
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta name=\"csrf\" content=\"{_e(csrf)}\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        "<link rel=\"icon\" href=\"data:,\">"
        f"<title>{_name(title)} · Jianmu Studio</title>"
        "<link rel=\"stylesheet\" href=\"/static/studio.css\">"
        "<script type=\"module\" src=\"/static/studio.js\"></script></head><body>"
        "<header><a class=\"brand\" href=\"/\">Jianmu Studio</a></header>"
        f"<main{main_attrs}>{body}</main></body></html>"
    )


def run_href(source: str, run_id: Any) -> str:
    """The path of a run's page: its id is any text (``nightly #7?``), so it is URL-encoded."""
    return f"/run/{quote(str(source), safe='')}/{quote(str(run_id), safe='')}"


def _query(**params: str | None) -> str:
    shown = urlencode({k: v for k, v in params.items() if v})
    return f"/?{shown}" if shown else "/"


SOURCES = {
    "cp": ("checkpoints", "saved by 'jianmu run' (or a ReactiveRunner with a "
           "SQLiteCheckpointer) in the checkpoint file; the studio answers its requests, and "
           "forks and continues the runs 'jianmu run' started"),
    "durable": ("durable", "a durable run of the app's workers (DBOS): answered through the "
                "app's database"),
}
"""What each kind of run source is called on the page, and what it means (its tooltip)."""


def _source(kind: str) -> str:
    """A run's source in words, with what it means on hover (``cp`` is only the URL's)."""
    label, meaning = SOURCES.get(kind, (kind, ""))
    return f'<abbr title="{_e(meaning)}" data-role="source">{_e(label)}</abbr>'


def _origin(forked: dict[str, Any] | None, source: str) -> str:
    if not forked:
        return ""
    point = forked["point"]
    # opens the run at that point (`#point=N`, the page's own address of it), not at now
    at = f"#point={point}" if type(point) is int else ""
    return (f'forked from <a href="{_e(run_href(source, forked["run"]) + at)}">'
            f'{_name(forked["run"])}</a> at point {_e(point)}')


def runs_page(runs: list[dict[str, Any]], status: str | None, csrf: str,
              sources: list[str], *, project: str | None, everywhere: bool) -> str:
    """The list of runs: those of this project (the folder the studio serves) unless
    ``everywhere``, with a status filter. Colour is kept to each run's status badge."""
    scope = "all" if everywhere else None
    links = [f'<a href="{_query(scope=scope)}"' + (' class="on"' if status is None else "")
             + ">any status</a>"]
    links += [f'<a href="{_query(status=s, scope=scope)}"'
              + (' class="on"' if s == status else "") + f">{s}</a>" for s in STATUSES]
    here = (f'<a href="{_query(status=status)}"' + ("" if everywhere else ' class="on"')
            + ' data-role="scope-project">this project</a>')
    there = (f'<a href="{_query(status=status, scope="all")}"'
             + (' class="on"' if everywhere else "") + ' data-role="scope-all">all projects</a>')
    rows = "".join(
        f'<tr class="run" data-run="{_e(r["run_id"])}"><td class="id"><a href="'
        f'{_e(run_href(r["source"], r["run_id"]))}">{_name(r["run_id"])}</a></td>'
        f'<td>{_wrapped_name(r["tree"])}</td>'
        f'<td><span class="status status-{_e(r["status"])}">{_e(r["status"])}</span></td>'
        f'<td class="when">{_when(r["started"])}</td><td>{_e(r["pending"] or "")}</td>'
        f'<td class="origin">{_origin(r.get("forked_from"), r["source"])}</td>'
        f'<td>{_source(r["source"])}</td></tr>'
        for r in runs
    )
    which = f" {_e(status)}" if status else ""
    where = "" if everywhere else " in this project"
    empty = "" if runs else (f'<p class="empty">no runs{which}{where}'
                             + ("" if everywhere else
                                f' (<a href="{_query(status=status, scope="all")}">all '
                                "projects</a>)") + "</p>")
    folder = f" · this project: {_e(project)}" if project else ""
    body = (
        f"<h1>Runs</h1><p class=\"sources\">from {_e(', '.join(sources))}{folder}</p>"
        f"<nav class=\"filter scope\">{here} {there}</nav>"
        f"<nav class=\"filter\">{' '.join(links)}</nav>"
        "<table class=\"runs\"><thead><tr><th>run</th><th>tree</th><th>status</th>"
        "<th>started</th><th>pending</th><th>origin</th>"
        "<th title=\"where the run is kept: checkpoints (jianmu run) or durable (DBOS)\">"
        "source</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>{empty}"
    )
    return _layout("Runs", csrf, body)


SHOWN_ITEMS = 100
"""How many items of an open object or list a page's markup holds: the page's script draws
the state again at once, lazily (a folded part when it is opened), so markup of all of it is
only parsed to be thrown away (a state of 50,000 items was 32 MB of it)."""


def json_tree(value: Any, key: str | None = None, depth: int = 0) -> str:
    """``value`` as nested, collapsible ``<details>`` (open near the top; what is folded, and
    the items of an open part past `SHOWN_ITEMS`, are left to the page's script)."""
    label = f'<span class="key">{_name(key)}</span>: ' if key is not None else ""
    if isinstance(value, dict) or isinstance(value, list):
        kind = f"{{{len(value)}}}" if isinstance(value, dict) else f"[{len(value)}]"
        if depth >= 2:
            return (f"<details><summary>{label}<span class=\"kind\">{kind}</span></summary>"
                    "</details>")
        items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
        inner = "".join(f"<li>{json_tree(v, str(k), depth + 1)}</li>"
                        for k, v in items[:SHOWN_ITEMS])
        if len(items) > SHOWN_ITEMS:
            inner += f'<li class="more">… {len(items) - SHOWN_ITEMS} more</li>'
        return (f"<details open><summary>{label}<span class=\"kind\">{kind}</span>"
                f"</summary><ul>{inner}</ul></details>")
    shown = json_visible(json.dumps(value, ensure_ascii=False, default=str))
    return f'{label}<span class="value">{_breakable(shown)}</span>'


def _question(r: dict[str, Any]) -> str:
    """A question a run asks (``ask_user``, `AskUser`): its text and a box for the answer."""
    call = _name(r["id"])  # each control names its question: a screen reader reads it alone
    return (
        f'<div class="request question" data-id="{_e(r["id"])}" data-kind="question" '
        f'role="group" aria-label="question {call}"><h3>'
        f'<span class="tool">question</span> <code class="call-id">{_name(r["id"])}</code></h3>'
        + (f'<p class="asker">asked by the sub-agent {_e(r["asker"])}</p>' if r.get("asker")
           else "")
        + f'<p class="question-text">{_breakable(r["question"])}</p>'
        '<div class="actions"><textarea class="answer-text" rows="3" '
        f'placeholder="your answer (the run reads it)" aria-label="your answer to {call}">'
        f'</textarea><button type="button" class="answer" aria-label="Answer {call}">Answer'
        '</button></div></div>'
    )


def _request(r: dict[str, Any]) -> str:
    if r.get("kind") == "question":
        return _question(r)
    why = _e(r["reason"]) + (f' <span class="rule">(rule {_e(r["rule"])})</span>'
                             if r["rule"] else "")
    details = (f'<h4>details</h4><pre class="details">{_breakable(r["details"])}</pre>'
               if r["details"] else "")
    # each control names its call (several may wait): "Approve" alone, read by a screen
    # reader, does not say which call it lets run
    call = f'{_e(r["tool"])} {_name(r["id"])}'
    return (
        f'<div class="request" data-id="{_e(r["id"])}" role="group" aria-label="approval: '
        f'{call}"><h3><span class="tool">{_e(r["tool"])}'
        f'</span> <code class="call-id">{_name(r["id"])}</code></h3>'
        f'<p class="summary">{_breakable(r["summary"])}</p><p class="why">why: {why}</p>'
        # the arguments in full, a long word broken into pieces the page can wrap (a text
        # area holds text only: the edit box gets them as they are)
        f'<h4>arguments</h4><pre class="arguments">{_breakable(r["arguments"])}</pre>{details}'
        '<details class="edit"><summary>edit the arguments, then approve</summary>'
        # filled by the page's script when opened: a text area of 200 KB of arguments cost
        # the page a second to load, opened or not
        f'<textarea class="edit-arguments" rows="6" spellcheck="false" aria-label="arguments '
        f'of {call} (JSON: edit, then approve)"></textarea></details>'
        f'<div class="actions"><button type="button" class="approve" aria-label="Approve {call}">'
        'Approve</button><input class="reason" type="text" placeholder="reason (the model sees '
        f'it)" aria-label="reason for {call} (the model sees it)"><button type="button" '
        f'class="reject" aria-label="Reject {call}">Reject</button></div></div>'
    )


def _entry(item: dict[str, Any]) -> str:
    text = item.get("text") or ""
    depth = min(int(item.get("depth") or 0), 4)
    return (f'<li class="entry entry-{_e(item["kind"])} depth-{depth}"><span class="title">'
            f'{_e(item["title"])}</span>'
            + (f'<pre class="text">{_breakable(text)}</pre>' if text else "") + "</li>")


def _timeline(items: list[dict[str, Any]], points: list[dict[str, Any]]) -> str:
    """One group per point with the entries that led to it (as the page's script draws it)."""
    if not points:
        return "".join(_entry(item) for item in items)
    grouped: dict[int, list[dict[str, Any]]] = {}
    # entries of no point, or of the point a running call will lead to (not made yet)
    known = {point["n"] for point in points}
    loose = [item for item in items if item.get("point") not in known]
    for item in items:
        if item.get("point") in known:
            grouped.setdefault(int(item["point"]), []).append(item)
    out, next_loose = [], 0
    for point in points:
        while next_loose < len(loose) and (loose[next_loose].get("time") or 0) <= point["time"]:
            out.append(_entry(loose[next_loose]))
            next_loose += 1
        said = grouped.get(point["n"], [])
        changes = "" if said else f'<span class="changes">{_breakable(point["label"])}</span>'
        inner = f'<ol class="entries">{"".join(_entry(i) for i in said)}</ol>' if said else ""
        out.append(f'<li class="point-group" data-point="{_e(point["n"])}"><div class='
                   f'"point-head"><span class="point">{_e(point["n"])}</span>{changes}</div>'
                   f"{inner}</li>")
    out += [_entry(item) for item in loose[next_loose:]]
    return "".join(out)


def _time_bar(view: dict[str, Any]) -> str:
    points = view["points"]
    if not points:
        return ('<section class="time" id="time"><p class="empty">this run keeps no points to '
                "travel back to</p></section>")
    last = points[-1]["n"]
    fork = ('<button type="button" data-role="fork">Fork from this point…</button>'
            if view["can_fork"] else
            f'<span class="note" data-role="fork-note">{_e(view["fork_note"])}</span>'
            if view.get("fork_note") else "")
    return (
        '<section class="time" id="time"><div class="time-row">'
        f'<label for="time-slider">point</label><input type="range" id="time-slider" '
        f'data-role="time" min="0" max="{last}" value="{last}" step="1">'
        f'<span id="time-label" data-role="time-label">point {last} of {last}: '
        f'{_e(points[-1]["label"])}</span>'
        '<button type="button" data-role="live" disabled>back to now</button>'
        f"{fork}</div>"
        '<div id="fork-panel" class="fork-panel" hidden><p>The new run starts from this point '
        "with the state below (edit it as JSON); the original run is not changed. Tool calls "
        "that finished before this point do not run again; later ones go through the guard."
        '</p><textarea data-role="fork-state" spellcheck="false" rows="14" aria-label="the state '
        'the new run starts from (JSON)"></textarea>'
        '<div class="actions"><button type="button" data-role="fork-start">Start the fork'
        '</button><button type="button" data-role="fork-cancel">Cancel</button></div>'
        '<p id="fork-msg" role="status"></p></div></section>'
    )


def run_page(view: dict[str, Any], csrf: str) -> str:
    """One run: its tree as a graph, approvals, the time slider, timeline, state and result;
    live through server-sent events."""
    source, run_id = view["source"], view["run_id"]
    pending = "".join(_request(r) for r in view["pending"])
    result = "" if view["result"] is None else str(view["result"])
    origin = _origin(view.get("forked_from"), source)
    points = view["points"]
    at = f"at point {points[-1]['n']}" if points else ""
    body = (
        f'<h1>run <span id="run-id">{_name(run_id)}</span> <span id="status" class="status '
        f'status-{_e(view["status"])}">{_e(view["status"])}</span></h1>'
        f'<p class="meta">tree <span id="tree-name">{_wrapped_name(view["tree"])}</span> · '
        f'<span id="live">live</span> <span id="origin">{origin}</span></p>'
        f'<p id="note" class="note">{_e(view["note"])}</p>'
        f'<p id="usage" class="meta">{_e(view.get("usage") or "")}</p>'
        f'<p id="error" class="error">{_breakable(view["error"])}</p>'
        f'<section class="approvals" id="approvals"{"" if pending else " hidden"}>'
        '<h2>Approvals</h2>'
        f'<div id="pending">{pending}</div></section>'
        # outside the section, which hides when nothing waits: a refusal is still read there
        '<p id="decision-msg" role="status"></p>'
        '<section class="graph-box"><div class="panel-head"><h2>Tree</h2>'
        '<div class="graph-tools"><button type="button" data-role="zoom-in" title="zoom in">+'
        '</button><button type="button" data-role="zoom-out" title="zoom out">−</button>'
        '<button type="button" data-role="fit">fit</button></div>'
        '<p class="legend"><span class="badge s-success">success</span><span class="badge '
        's-running">running</span><span class="badge s-suspended">suspended</span><span '
        'class="badge s-failure">failure</span><span class="badge s-stopped" title="running when '
        'the run ended, and stopped by it">stopped</span><span class="badge s-invalid">not '
        'run</span>'
        '</p></div><div class="graph-row"><div id="tree" class="graph" data-role="graph">'
        '</div><aside class="details"><div id="details" class="inner" data-role="details">'
        '<p class="hint">Click a node for its details; click ▾ under a node to fold its '
        "subtree. Drag to move, wheel to zoom.</p></div></aside></div></section>"
        f"{_time_bar(view)}"
        '<div class="columns"><section class="story"><h2>Timeline</h2>'
        f'<ol id="timeline" data-role="timeline">{_timeline(view["timeline"], points)}</ol>'
        "</section>"
        f'<section class="state-box"><h2>State <span id="state-at" class="at">{_e(at)}</span>'
        '</h2><div id="state" class="json" data-role="state">'
        f'{json_tree(view["state"])}</div></section></div>'
        f'<section><h2>Result</h2><pre id="result">{_breakable(result)}</pre></section>'
    )
    attrs = (f' id="run" data-source="{_e(source)}" data-run="{_e(run_id)}"'
             f' data-status="{_e(view["status"])}"')
    return _layout(f"run {run_id}", csrf, body, attrs)


def error_page(title: str, message: str, csrf: str) -> str:
    """A page that says why a run cannot be shown (none by that id, a damaged checkpoint)."""
    return _layout(title, csrf, f"<h1>{_e(title)}</h1><p class=\"error\">{_e(message)}</p>"
                   "<p><a href=\"/\">All runs</a></p>")
