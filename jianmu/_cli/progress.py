"""Live progress of a run: the tree with each node's status, tool and model calls, tokens."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from py_trees.behaviour import Behaviour
from py_trees.common import Status
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.text import Text
from rich.tree import Tree

from jianmu._cli.common import say, visible
from jianmu.runtime.events import Event
from jianmu.runtime.points import composite_kind

__all__ = ("Progress", "render_tree", "shorten")

_STATUS_STYLE = {
    Status.SUCCESS: ("✓", "green"),
    Status.FAILURE: ("✗", "red"),
    Status.RUNNING: ("…", "yellow"),
    Status.INVALID: ("-", "dim"),
}


def node_kind(node: Behaviour) -> str:
    """``sequence``, ``selector``, ``parallel``, ``decorator`` or ``leaf``."""
    return composite_kind(node) or "leaf"


_KIND_MARK = {"sequence": "→", "selector": "?", "parallel": "⇉", "decorator": "◇", "leaf": "•"}


_TREE_REASON = 60
"""How much of a failed node's reason the tree shows; the run's last line has it in full."""
_EVENT_ERROR = 120
"""How much of a failed call's error its event line shows (the run may go on after it)."""


def shorten(value: Any, limit: int = 160) -> str:
    """``value`` on one line, at most ``limit`` characters, cut between words and ending in "…".

    Whitespace runs become one space and non-printable characters (ANSI escapes) are escaped
    (`visible`), so a tool's output cannot move the cursor or restyle the terminal. A single
    word longer than the limit (a path, a URL) is cut inside it: there is no better place.
    """
    text = visible(" ".join(str(value).split()))
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    head, space, _ = cut.rpartition(" ")
    if space and len(head) >= limit // 2:  # a boundary near the end; else keep the hard cut
        cut = head
    return cut.rstrip(" ,;:.-") + "…"


def _label(node: Behaviour) -> Text:
    mark, style = _STATUS_STYLE.get(node.status, ("-", "dim"))
    text = Text(f"{_KIND_MARK[node_kind(node)]} {visible(node.name)} ")
    text.append(f"[{mark} {node.status.name.lower()}]", style=style)
    if node.status is Status.FAILURE and node.feedback_message:
        text.append(f"  {shorten(node.feedback_message, _TREE_REASON)}", style="red")
    return text


def render_tree(root: Behaviour) -> Tree:
    """The tree as a rich `Tree`, each node with its kind and status."""
    top = Tree(_label(root))

    def add(parent: Tree, node: Behaviour) -> None:
        for child in node.children:
            add(parent.add(_label(child)), child)

    add(top, root)
    return top


_CUT_OFF = {"continued": "asked to go on", "failed": "the run fails",
            "accepted": "kept as it is"}
"""What became of an answer cut off at the token limit (``llm.call.cut_off``'s outcome)."""


class Progress:
    """Prints each tool and model call as it happens and, in a terminal, shows the tree live."""

    def __init__(self, console: Console, root: Behaviour) -> None:
        self.console = console
        self.root = root
        self.input_tokens = 0
        self.output_tokens = 0
        self.tool_calls = 0
        self.llm_calls = 0

    def subscribe(self, events: Any) -> None:
        """Listen to the run's event bus."""
        for pattern in ("tool.call.*", "llm.call.*", "llm.fallback", "interaction.*",
                        "skill.compiled"):
            events.subscribe(pattern, self.on_event)

    def on_event(self, event: Event) -> None:
        """Print one event as a line.

        Every value is printed as a `Text` through `shorten`: names, arguments and outputs come
        from models and tools, so neither rich markup nor ANSI escapes in them take effect.
        """
        f = event.fields
        name = event.name
        tool = (shorten(f.get("tool"), 80), "bold")
        if name == "tool.call.started" and f.get("resumed"):  # a call that waited goes on
            self._line(("  ↻ ", "cyan"), tool, " goes on")
        elif name == "tool.call.started":
            self.tool_calls += 1
            self._line(("  → ", "cyan"), tool, f"({shorten(f.get('args_preview'))})")
        elif name == "tool.call.completed":
            ms = f.get("duration_ms")
            took = f" ({ms:.0f} ms)" if isinstance(ms, (int, float)) else ""
            self._line(("  ← ", "green"), tool, f": {shorten(f.get('result_preview'))}{took}")
        elif name == "tool.call.failed":  # one stopped after it began: never run again
            doubt = " (maybe done, not run again)" if f.get("in_doubt") else ""
            self._line(("  ✗ ", "red"), tool,
                       f"{doubt}: {shorten(f.get('error'), _EVENT_ERROR)}")
        elif name == "tool.call.retry":
            self._line("  ↻ ", tool, f": retry {f.get('attempt')} "
                       f"({shorten(f.get('error'), _EVENT_ERROR)})")
        elif name == "llm.call.completed":
            self.llm_calls += 1
            self.input_tokens += int(f.get("input_tokens") or 0)
            self.output_tokens += int(f.get("output_tokens") or 0)
            calls = f.get("tool_calls") or []
            said = f"asks for {shorten(', '.join(map(str, calls)))}" if calls else \
                f"answers: {shorten(f.get('answer_preview'))}"
            if not calls and f.get("answer_preview") is None:  # it said "answers: None"
                from jianmu.studio.timeline import turn_words  # the studio's words for it

                said = turn_words(f)
            self._line(
                ("  ◆ ", "magenta"), (shorten(f.get("model"), 80), "bold"), f" {said} ",
                (f"[{f.get('input_tokens')} in / {f.get('output_tokens')} out tokens]", "dim"),
            )
        elif name == "llm.call.cut_off":  # never silent: a partial answer, a call not run
            calls = f.get("tool_calls") or []
            said = (f"a call to {shorten(', '.join(map(str, calls)))} cut off at the token "
                    "limit, not run" if calls else "answer cut off at the token limit, "
                    + _CUT_OFF.get(str(f.get("outcome")), "kept"))
            self._line(("  ✂ ", "yellow"), (shorten(f.get("model"), 80), "bold"), f": {said}")
        elif name == "llm.fallback":
            self._line(("  ⇣ ", "yellow"), (shorten(f.get("from"), 80), "bold"),
                       f" failed ({shorten(f.get('error'), _EVENT_ERROR)}); asking ",
                       (shorten(f.get("to"), 80), "bold"))
        elif name == "llm.call.failed":
            self._line(("  ✗ ", "red"), (shorten(f.get("model"), 80), "bold"),
                       f": {shorten(f.get('error'), _EVENT_ERROR)}")
        elif name == "interaction.approved":
            edited = " with edited arguments" if f.get("edited") else ""
            self._line(f"  ✓ approved {shorten(f.get('request_id'), 80)}{edited}")
        elif name == "interaction.answered":
            self._line(f"  ✓ answered {shorten(f.get('request_id'), 80)}")
        elif name == "interaction.rejected":
            message = f" ({shorten(f.get('message'))})" if f.get("message") else ""
            self._line(f"  ✗ rejected {shorten(f.get('request_id'), 80)}{message}")

    def _line(self, *parts: str | tuple[str, str]) -> None:
        self.console.print(say(*parts))  # every part shown as written

    def footer(self) -> Text:
        """Counts so far."""
        parts = [f"tool calls: {self.tool_calls}"]
        if self.llm_calls:
            parts.append(f"model calls: {self.llm_calls}")
            parts.append(f"tokens: {self.input_tokens} in / {self.output_tokens} out")
        return Text(" · ".join(parts), style="dim")

    def _renderable(self) -> RenderableType:
        return Group(render_tree(self.root), self.footer())

    @contextlib.contextmanager
    def live(self) -> Iterator[None]:
        """Show the tree live while the block runs (only in a terminal)."""
        if not self.console.is_terminal:
            yield
            return
        with Live(get_renderable=self._renderable, console=self.console, transient=True,
                  refresh_per_second=8, redirect_stdout=False, redirect_stderr=False):
            yield

    def show_final(self, usage: Any = None) -> None:
        """Print the tree with the final statuses and the counts; with ``usage`` (the run's
        `Usage`, every process's turns and calls of a resumed run included), what it spent."""
        self.console.print(render_tree(self.root))
        self.console.print(self.footer())
        if isinstance(getattr(usage, "requests", None), int):
            from jianmu.studio.views import usage_words  # the studio's words for the same run

            self.console.print(Text(f"run's usage: {usage_words(vars(usage))}", style="dim"))
