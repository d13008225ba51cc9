"""A YAML loader for files an attacker may write: no anchors or aliases, bounded size and depth.

Aliases are what make a "billion laughs" document: ten short lines that expand to gigabytes.
Refusing them at the first anchor, before anything is built, keeps memory flat; the size and
nesting bounds keep a huge or very deep document from exhausting memory or the stack.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from jianmu.errors import YAMLRefused

if TYPE_CHECKING:
    import yaml

__all__ = ("MAX_DEPTH", "YAMLRefused", "compose_and_load")

MAX_DEPTH = 64
"""Deepest nesting of mappings and sequences accepted (real configs and skills use < 10)."""


@functools.cache
def _strict_loader() -> Any:
    """The loader class, built on first use so that importing Jianmu does not import yaml."""
    import yaml
    from yaml.events import AliasEvent

    class _StrictLoader(yaml.SafeLoader):
        """`yaml.SafeLoader` whose composer refuses anchors, aliases and deep nesting."""

        def __init__(self, stream: str, max_depth: int) -> None:
            super().__init__(stream)
            self._depth = 0
            self._max_depth = max_depth

        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()
            mark: Any = event.start_mark  # the pure-Python loader's Mark (stubs also list C's)
            # checked on the event, before the composer records or expands anything
            if isinstance(event, AliasEvent):
                raise YAMLRefused(
                    f"YAML aliases (*{event.anchor}) are not allowed; write the value out",
                    problem_mark=mark,
                )
            anchor = getattr(event, "anchor", None)
            if anchor is not None:
                raise YAMLRefused(
                    f"YAML anchors (&{anchor}) are not allowed; write the value out",
                    problem_mark=mark,
                )
            self._depth += 1
            try:
                if self._depth > self._max_depth:
                    raise YAMLRefused(
                        f"the YAML is nested more than {self._max_depth} levels deep",
                        problem_mark=mark,
                    )
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

    return _StrictLoader


def compose_and_load(
    text: str, *, max_chars: int, max_depth: int = MAX_DEPTH
) -> tuple[yaml.Node | None, Any]:
    """Compose ``text`` once and build its data: (the node tree for line numbers, the data).

    Raises:
        YAMLRefused: the text is longer than ``max_chars``, nests deeper than ``max_depth``,
            or uses an anchor or an alias.
        yaml.YAMLError: the text is not valid YAML.
    """
    if len(text) > max_chars:
        raise YAMLRefused(
            f"the YAML is {len(text)} characters long; at most {max_chars} are allowed"
        )
    loader = _strict_loader()(text, max_depth)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    return node, data
