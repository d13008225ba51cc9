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

