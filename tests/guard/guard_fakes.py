"""Duck-typed stand-ins for tools (the guard only reads attributes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class FakeTool:
    name: str
    permission: str = "auto"
    category: str = "read"
    input_schema: dict[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}, "required": []}
    )

    @property
    def parameters(self) -> dict[str, Any]:
        """As `Tool.parameters`: a non-object schema wrapped as ``input``."""
        if self.input_schema.get("type") == "object":
            return self.input_schema
        return {"type": "object", "properties": {"input": self.input_schema}, "required": ["input"]}


def bash() -> FakeTool:
    return FakeTool(
        name="bash",
        permission="user_confirm",
        category="execute",
        input_schema={
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "workdir": {"type": "string"},
                "timeout": {"type": "integer"},
            },
            "required": ["command"],
        },
    )


def write_file() -> FakeTool:
    return FakeTool(
        name="write_file",
        category="write",
        input_schema={
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    )
