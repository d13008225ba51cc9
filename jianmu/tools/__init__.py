"""The tool system: `Tool`, `@tool`, `ToolCall`/`ToolResult`, `ToolSet`, registry, providers."""

from __future__ import annotations

from jianmu.tools.base import (
    CATEGORIES,
    PERMISSIONS,
    Category,
    FunctionTool,
    Permission,
    Tool,
    tool,
)
from jianmu.tools.calls import ToolCall, ToolResult
from jianmu.tools.schema import Injected

__all__ = (
    "CATEGORIES",
    "PERMISSIONS",
    "Category",
    "FunctionTool",
    "Injected",
    "Permission",
    "Tool",
    "ToolCall",
    "ToolResult",
    "tool",
)
