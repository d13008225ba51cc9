"""Serves a small Jianmu `ToolSet` over MCP stdio, as ``jianmu mcp serve`` would.

Tools: a read tool (``add``), a dangerous tool that needs approval (``wipe_disk``), a
dangerous tool the config explicitly allows (``rotate_logs``), a tool the config denies
(``read_secrets``) and a tool that raises (``explode``).
"""

from __future__ import annotations

import functools
import os
import sys

import anyio

from jianmu.constraints import GuardConstraints
from jianmu.mcp import serve
from jianmu.tools.base import tool
from jianmu.tools.registry import ToolSet


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


@tool(category="dangerous", permission="user_confirm")
def wipe_disk(device: str) -> str:
    """Erase a device (it only pretends).

    Args:
        device: The device path.
    """
    return f"wiped {device}"


@tool(category="dangerous", permission="user_confirm")
def rotate_logs(keep: int) -> str:
    """Rotate the logs, keeping some.

    Args:
        keep: How many to keep.
    """
    return f"rotated, kept {keep}"


@tool(category="read")
def read_secrets() -> str:
    """Read the secrets."""
    return "s3cr3t"


@tool(category="communicate", effect_tags=["http"])
def explode(reason: str) -> str:
    """Fail on purpose.

    Args:
        reason: What to say.
    """
    raise RuntimeError(reason)


def main() -> None:
    """Serve the tools with a guard that denies one and allows one.

    ``python serve_app.py`` serves over stdio; ``python serve_app.py http PORT`` over HTTP,
    with the bearer token in ``$SERVE_APP_TOKEN``.
    """
    toolset = ToolSet.from_tools([add, wipe_disk, rotate_logs, read_secrets, explode])
    guard = GuardConstraints(tool_policy={"read_secrets": "deny", "rotate_logs": "allow"})
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        run = functools.partial(
            serve, toolset, transport="http", port=int(sys.argv[2]), guard=guard,
            token=os.environ["SERVE_APP_TOKEN"],
        )
    else:
        run = functools.partial(serve, toolset, transport="stdio", guard=guard)
    anyio.run(run)


if __name__ == "__main__":
    main()
