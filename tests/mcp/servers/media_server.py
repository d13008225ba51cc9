"""An MCP server (official SDK) whose tools answer with images and audio, for the rich-content
tests. Run: ``python media_server.py stdio``."""

from __future__ import annotations

import base64

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.utilities.types import Audio, Image
from mcp.types import (
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    ToolAnnotations,
)

# a 1x1 transparent PNG; big enough that the old 20k-character cut would have mattered below
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
BIG = PIXEL + bytes(30_000)  # 40k characters of base64: whole, not cut

server = MCPServer("media", log_level="WARNING")
READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)


@server.tool(annotations=READ, structured_output=False)
def chart(title: str) -> list[object]:
    """A chart of the title, as a PNG."""
    return [f"chart of {title}", Image(data=BIG, format="png")]


@server.tool(annotations=READ)
def snapshot() -> CallToolResult:
    """Structured facts and a picture: the structured content must not hide the image."""
    return CallToolResult(
        content=[
            TextContent(type="text", text='{"width": 1, "height": 1}'),
            ImageContent(type="image", data=base64.b64encode(PIXEL).decode(),
                         mime_type="image/png"),
        ],
        structured_content={"width": 1, "height": 1},
    )


@server.tool(annotations=READ, structured_output=False)
def chime() -> list[object]:
    """A short sound."""
    return ["a chime", Audio(data=b"RIFF0000WAVE", format="wav")]


@server.tool(annotations=READ)
def screenshot() -> CallToolResult:
    """A screenshot embedded as a resource (image bytes in a blob), as file servers send one."""
    blob = BlobResourceContents(uri="file:///shots/one.png", mime_type="image/png",
                                blob=base64.b64encode(PIXEL).decode())
    return CallToolResult(content=[
        TextContent(type="text", text="the screen"),
        EmbeddedResource(type="resource", resource=blob),
    ])


@server.tool(annotations=READ)
def find_report() -> CallToolResult:
    """A link to a resource, with its name and description."""
    return CallToolResult(content=[
        ResourceLink(type="resource_link", uri="file:///reports/q3.pdf", name="q3.pdf",
                     title="Q3 report", description="Sales of the third quarter",
                     mime_type="application/pdf"),
    ])


if __name__ == "__main__":
    server.run("stdio")
