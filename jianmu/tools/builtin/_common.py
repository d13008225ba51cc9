"""What the built-in tools share: the workspace path parameter and their old class names."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Annotated

from jianmu.tools.base import FunctionTool

__all__ = ("WorkspacePath", "copies")

WorkspacePath = Annotated[
    str,
    "Path relative to the workspace root, e.g. 'src/app.py'. Paths outside the workspace "
    "(via '..', absolute paths or symlinks) are refused.",
]
"""A path argument of a file tool; `jianmu.tools.builtin._paths` confines it to the root."""


def copies(made: FunctionTool, old_name: str) -> Callable[[], FunctionTool]:
    """A factory of fresh copies of ``made``, under the class name the built-in once had.

    Calling the old name (``ReadFileTool()``) still gives a tool of one's own, so setting an
    attribute on it (``max_result_length``, ``permission``) never changes the shared one.
    """

    def factory() -> FunctionTool:
        fresh = copy.copy(made)
        fresh.metadata = dict(made.metadata)
        return fresh

    factory.__name__ = factory.__qualname__ = old_name
    factory.__doc__ = f"A fresh copy of the built-in `{made.name}` tool."
    return factory
