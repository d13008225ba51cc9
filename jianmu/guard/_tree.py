"""The grammar's tree of a command line, read in work linear in the line and without Python's
stack, for `_shell`: how deep it nests, and a node's last named child found once."""

from __future__ import annotations

from typing import Any

__all__ = ("Place", "last_named", "nests_deeper", "place")

Place = tuple[int, int, str]
"""Where a node is in the line it was parsed from: its first and past-last byte, its type."""


def place(node: Any) -> Place:
    """``node``'s `Place`."""
    return node.start_byte, node.end_byte, node.type


def nests_deeper(root: Any, limit: int) -> bool:
    """Whether the tree under ``root`` is more than ``limit`` levels deep (a cursor's walk,
    without Python's stack)."""
    cursor, depth = root.walk(), 0
    while True:
        if cursor.goto_first_child():
            depth += 1
            if depth > limit:
                return True
            continue
        while not cursor.goto_next_sibling():
            if not cursor.goto_parent():
                return False
            depth -= 1


def last_named(parent: Any, known: dict[Place, Place | None]) -> Place | None:
    """The place of ``parent``'s last named child, found once per parent (kept in ``known``):
    each command of a pipeline asks, and finding it walks the children (``named_children[-1]``
    made them all: n² nodes for n commands, a minute of the event loop for an 80 kB line)."""
    key = place(parent)
    if key not in known:
        count = parent.named_child_count
        known[key] = place(parent.named_child(count - 1)) if count else None
    return known[key]
