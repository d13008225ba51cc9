"""``jianmu tree show``: a script's (or BT skill's) tree as ASCII, DOT or Mermaid."""

from __future__ import annotations

import argparse
import itertools

import py_trees
from py_trees.behaviour import Behaviour

from jianmu._cli.common import TREE_FORMATS, ExitCode, load_cli_config, parse_inputs, printable
from jianmu._cli.progress import node_kind
from jianmu._cli.targets import load_target

__all__ = ("TREE_FORMATS", "cmd_tree_show", "to_dot", "to_mermaid")


# Mermaid shapes: composites are drawn apart from leaves, each kind in its own shape.
_MERMAID_SHAPE = {
    "sequence": ('{{"', '"}}'),   # hexagon
    "selector": ('{"', '"}'),     # rhombus
    "parallel": ('[["', '"]]'),   # subroutine
    "decorator": ('(["', '"])'),  # stadium
    "leaf": ('["', '"]'),         # rectangle
}
_MARK = {"sequence": "→ ", "selector": "? ", "parallel": "⇉ ", "decorator": "◇ ", "leaf": ""}
_DOT_SHAPE = {"sequence": "box", "selector": "octagon", "parallel": "parallelogram",
              "decorator": "ellipse", "leaf": "ellipse"}


def _numbered(root: Behaviour) -> list[tuple[str, Behaviour, str | None]]:
    """(id, node, parent id) for each node in depth-first order; ids are ``n0``, ``n1``..."""
    counter = itertools.count()
    out: list[tuple[str, Behaviour, str | None]] = []

    def walk(node: Behaviour, parent: str | None) -> None:
        node_id = f"n{next(counter)}"
        out.append((node_id, node, parent))
        for child in node.children:
            walk(child, node_id)

    walk(root, None)
    return out


def to_mermaid(root: Behaviour) -> str:
    """A Mermaid flowchart (``graph TD``) of the tree; composites are shaped by kind."""
    lines = ["graph TD"]
    nodes = _numbered(root)
    for node_id, node, _ in nodes:
        kind = node_kind(node)
        left, right = _MERMAID_SHAPE[kind]
        label = (_MARK[kind] + node.name).replace('"', "#quot;")
        lines.append(f"    {node_id}{left}{label}{right}")
    lines += [f"    {parent} --> {node_id}" for node_id, _, parent in nodes if parent]
    return "\n".join(lines) + "\n"


def to_dot(root: Behaviour) -> str:
    """A Graphviz DOT digraph of the tree, ids ``n0``..., one shape per kind of node."""
    lines = ["digraph tree {", "    ordering=out;", "    node [fontsize=10];"]
    nodes = _numbered(root)
    for node_id, node, _ in nodes:
        kind = node_kind(node)
        label = (_MARK[kind] + node.name).replace("\\", "\\\\").replace('"', '\\"')
        lines.append(f'    {node_id} [label="{label}", shape={_DOT_SHAPE[kind]}];')
    lines += [f"    {parent} -> {node_id};" for node_id, _, parent in nodes if parent]
    lines.append("}")
    return "\n".join(lines) + "\n"


def cmd_tree_show(args: argparse.Namespace) -> int:
    """``jianmu tree show TARGET --format FORMAT``."""
    config = load_cli_config(args.config)
    target = load_target(args.target, inputs=parse_inputs(args.input or []), config=config,
                         skills_dirs=args.skills_dir)
    root = target.tree
    if args.format == "ascii":
        text = py_trees.display.ascii_tree(root)
    elif args.format == "dot":
        text = to_dot(root)
    else:
        text = to_mermaid(root)
    print(printable(text.rstrip("\n")))
    return ExitCode.OK
