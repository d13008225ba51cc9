"""An MCP server that answers the handshake only once ``COUNT`` of its kind have started.

Run: ``python rendezvous_server.py FOLDER COUNT NAME`` (stdio). It writes ``FOLDER/NAME`` and
waits until ``FOLDER`` holds ``COUNT`` files: started one after another, waiting for each
handshake, none of them would ever answer. Its one tool, ``name``, answers ``NAME``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer

folder, count, name = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
(folder / name).write_text(name, encoding="utf-8")
while len(list(folder.iterdir())) < count:  # bounded by the client's connect_timeout
    time.sleep(0.02)
server = MCPServer(name)


@server.tool(structured_output=False)
def whoami() -> str:
    """This server's name."""
    return name


server.run("stdio")
