"""An MCP server (official SDK, low level) whose tools say how they take tasks (2025-11-25).

Run: ``python tasks_server.py`` (stdio). ``job`` requires task-augmented calls
(``execution.taskSupport: required``), so a client without the tasks capability cannot call
it; ``quick`` takes them optionally and ``plain`` says nothing: both answer a plain call.
"""

from __future__ import annotations

from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

SUPPORT: dict[str, types.ToolExecution | None] = {
    "job": types.ToolExecution(task_support="required"),
    "quick": types.ToolExecution(task_support="optional"),
    "plain": None,
}


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[
        types.Tool(name=name, description=f"the {name} tool", input_schema={"type": "object"},
                   execution=execution)
        for name, execution in SUPPORT.items()
    ])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name == "job":  # what a server answers a plain call of a task-only tool
        raise MCPError(code=-32601, message="job requires task augmentation")
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"{params.name} ran")])


async def main() -> None:
    server = Server("tasks", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
