"""`NodeTool`: a tool the model is offered whose calls its own node takes (an answer, a
hand-off); it is never run."""

from __future__ import annotations

from typing import Any

from jianmu.errors import ToolExecutionError
from jianmu.tools.base import Tool

__all__ = ("NodeTool",)


class NodeTool(Tool):
    """Offered to the model beside the real tools; `AgentLLMNode` reads its calls itself, so
    they never reach an executor."""

    category = "read"
    timeout_seconds = None
    purpose = "is read by the agent's model node"
    """What the tool is for, in the error of a run that should never happen."""

    def __init__(self, name: str, description: str, schema: dict[str, Any]) -> None:
        self.name = name
        self.description = description
        self.input_schema = schema

    def run(self, **kwargs: Any) -> Any:
        """Never called: the model's node takes the call."""
        raise ToolExecutionError(
            f"{self.name!r} {self.purpose} and is not run as a tool; give the agent's settings "
            "to create_react_node (or AgentLLMNode), not this tool to a ToolExecutor"
        )
