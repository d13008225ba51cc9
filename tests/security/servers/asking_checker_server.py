"""``jianmu.mcp.serve`` over stdio with a guard checker (a plug-in) that asks a person first.

Run: ``python asking_checker_server.py MARKER`` (stdio). The checker ``ask_for_wires`` answers
PENDING (a person is to be asked) for every call of ``wire_money``; an MCP server has nobody to
ask, so the call must be refused. ``wire_money`` writes MARKER when it runs; ``add`` is a plain
tool the checker lets through.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio

from jianmu import plugins
from jianmu.constraints import GuardConstraints
from jianmu.guard.checkers import BaseChecker, Decision
from jianmu.mcp import serve
from jianmu.tools.base import tool
from jianmu.tools.registry import ToolSet

MARKER = Path(sys.argv[1])


class AskForWires(BaseChecker):
    """Every wire waits for a person, whatever the policy said before."""

    def check(self, context: Any, previous: Decision) -> Decision:
        if context.call.name == "wire_money" and not previous.denied:
            return Decision.pending("wires wait for a person", checker=self.name)
        return previous


@tool(category="write")
def wire_money(amount: int) -> str:
    """Wire money.

    Args:
        amount: How much.
    """
    MARKER.write_text(f"wired {amount}\n", encoding="utf-8")
    return f"wired {amount}"


@tool(category="read")
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


def main() -> None:
    plugins.register("checker", "ask_for_wires", AskForWires)
    guard = GuardConstraints(checkers=["policy", "ask_for_wires", "confirm"])
    anyio.run(lambda: serve(ToolSet.from_tools([wire_money, add]), transport="stdio",
                            guard=guard))


if __name__ == "__main__":
    main()
