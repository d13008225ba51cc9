"""A tree for the studio tests: a call that asks first, whose argument is one word of 200,000
characters (a base64 blob, a JSON string of many lines), and whose result is the answer."""

from __future__ import annotations

from typing import Any

from jianmu import AgentState, ScriptedLLM, tool
from jianmu.nodes import create_react_node

BLOB = "QUJD" * 50_000


@tool(read_only=False, confirm=True)
def upload(blob: str) -> str:
    """Upload a blob (asks first).

    Args:
        blob: the data, base64.
    """
    return blob


def build_tree(inputs: dict[str, Any] | None = None) -> Any:
    """One call of upload, then its result as the answer."""
    return create_react_node(ScriptedLLM([
        [{"name": "upload", "arguments": {"blob": BLOB}}],
        lambda messages: messages[-1].content,
    ]), [upload], name="uploader")


STATE_SCHEMA = AgentState
