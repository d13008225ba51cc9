"""Live progress of a run: the tree with each node's status, tool and model calls, tokens."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import py_trees
from py_trees.behaviour import Behaviour
from py_trees.common import Status
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.text import Text
from rich.tree import Tree

from jianmu.runtime.events import Event

__all__ = ("Progress", "render_tree")

_STATUS_STYLE = {
    Status.SUCCESS: ("✓", "green"),
    Status.FAILURE: ("✗", "red"),
    Status.RUNNING: ("…", "yellow"),
    Status.INVALID: ("-", "dim"),
}


def node_kind(node: Behaviour) -> str:
    """``sequence``, ``selector``, ``parallel``, ``decorator`` or ``leaf``."""
    if isinstance(node, py_trees.composites.Sequence):
        return "sequence"
    if isinstance(node, py_trees.composites.Selector):
        return "selector"
    if isinstance(node, py_trees.composites.Parallel):
        return "parallel"
    if isinstance(node, py_trees.decorators.Decorator):
        return "decorator"
    return "leaf"


_KIND_MARK = {"sequence": "→", "selector": "?", "parallel": "⇉", "decorator": "◇", "leaf": "•"}


def _label(node: Behaviour) -> Text:
    mark, style = _STATUS_STYLE.get(node.status, ("-", "dim"))
    text = Text(f"{_KIND_MARK[node_kind(node)]} {node.name} ")
    text.append(f"[{mark} {node.status.name.lower()}]", style=style)
    if node.status is Status.FAILURE and node.feedback_message:
        text.append(f"  {node.feedback_message}", style="red")
    return text


def render_tree(root: Behaviour) -> Tree:
    """The tree as a rich `Tree`, each node with its kind and status."""
    top = Tree(_label(root))

    def add(parent: Tree, node: Behaviour) -> None:
        for child in node.children:
            add(parent.add(_label(child)), child)

    add(top, root)
    return top


def _short(value: Any, limit: int = 160) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


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
        for pattern in ("tool.call.*", "llm.call.*", "interaction.*", "skill.compiled"):
            events.subscribe(pattern, self.on_event)

    def on_event(self, event: Event) -> None:
        """Print one event as a line."""
        f = event.fields
        name = event.name
        if name == "tool.call.started":
            self.tool_calls += 1
            self.console.print(Text.assemble(
                ("  → ", "cyan"), (f"{f.get('tool')}", "bold"), f"({_short(f.get('args_preview'))})"
            ))
        elif name == "tool.call.completed":
            ms = f.get("duration_ms")
            took = f" ({ms:.0f} ms)" if isinstance(ms, (int, float)) else ""
            self.console.print(Text.assemble(
                ("  ← ", "green"), (f"{f.get('tool')}", "bold"),
                f": {_short(f.get('result_preview'))}{took}",
            ))
        elif name == "tool.call.failed":
            self.console.print(Text.assemble(
                ("  ✗ ", "red"), (f"{f.get('tool')}", "bold"), f": {_short(f.get('error'))}"
            ))
        elif name == "tool.call.retry":
            self.console.print(f"  ↻ {f.get('tool')}: retry {f.get('attempt')} ({f.get('error')})")
        elif name == "llm.call.completed":
            self.llm_calls += 1
            self.input_tokens += int(f.get("input_tokens") or 0)
            self.output_tokens += int(f.get("output_tokens") or 0)
            calls = f.get("tool_calls") or []
            said = f"asks for {', '.join(calls)}" if calls else \
                f"answers: {_short(f.get('answer_preview'))}"
            self.console.print(Text.assemble(
                ("  ◆ ", "magenta"), (f"{f.get('model')}", "bold"), f" {said} ",
                (f"[{f.get('input_tokens')} in / {f.get('output_tokens')} out tokens]", "dim"),
            ))
        elif name == "llm.call.failed":
            self.console.print(Text.assemble(
                ("  ✗ ", "red"), (f"{f.get('model')}", "bold"), f": {_short(f.get('error'))}"
            ))
        elif name == "interaction.approved":
            self.console.print(f"  ✓ approved {f.get('request_id')}")
        elif name == "interaction.rejected":
            message = f" ({f.get('message')})" if f.get("message") else ""
            self.console.print(f"  ✗ rejected {f.get('request_id')}{message}")

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

    def show_final(self) -> None:
        """Print the tree with the final statuses and the counts."""
        self.console.print(render_tree(self.root))
        self.console.print(self.footer())
