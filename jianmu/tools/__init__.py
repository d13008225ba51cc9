"""The tool system: `Tool`, `@tool`, `ToolCall`/`ToolResult`, `ToolSet`, registry, providers.

Its names load on first use (module ``__getattr__``): importing one imports only the module
that holds it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jianmu._lazy import lazy_names

if TYPE_CHECKING:
    from jianmu.tools.base import (
        CATEGORIES,
        PERMISSIONS,
        Category,
        FunctionTool,
        Permission,
        Tool,
        tool,
    )
    from jianmu.tools.calls import MediaPart, ToolCall, ToolOutput, ToolResult
    from jianmu.tools.providers import BaseToolProvider, BuiltinToolProvider, ToolProvider
    from jianmu.tools.registry import ToolRegistry, ToolSet
    from jianmu.tools.schema import Injected

__all__ = (
    "CATEGORIES",
    "PERMISSIONS",
    "BaseToolProvider",
    "BuiltinToolProvider",
    "Category",
    "FunctionTool",
    "Injected",
    "MediaPart",
    "Permission",
    "Tool",
    "ToolCall",
    "ToolOutput",
    "ToolProvider",
    "ToolRegistry",
    "ToolResult",
    "ToolSet",
    "tool",
)

_HOLDERS = {
    "jianmu.tools.base": (
        "CATEGORIES",
        "PERMISSIONS",
        "Category",
        "FunctionTool",
        "Permission",
        "Tool",
        "tool",
    ),
    "jianmu.tools.calls": ("MediaPart", "ToolCall", "ToolOutput", "ToolResult"),
    "jianmu.tools.providers": ("BaseToolProvider", "BuiltinToolProvider", "ToolProvider"),
    "jianmu.tools.registry": ("ToolRegistry", "ToolSet"),
    "jianmu.tools.schema": ("Injected",),
}
__getattr__, __dir__ = lazy_names(__name__, _HOLDERS, __all__)
