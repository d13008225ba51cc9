"""A tree with a ToolExecutor over side-effecting tools, driven from a subprocess.

``python -m tests.support.executor_app start|resume|crash DB WORKDIR RUN_ID [approve|reject]``
prints one JSON line with the outcome. Side effects are lines appended to WORKDIR/effects.txt;
while WORKDIR/block exists, the tool ``slow_write`` waits (before its side effect) so a test
can kill the process in the middle of a batch.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from jianmu import ReactiveRunner, SQLiteCheckpointer, StateManager
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.tools.base import tool


def build(workdir: Path) -> ToolExecutor:
    effects = workdir / "effects.txt"

    @tool(category="write", effect_tags=["file_write"])
    def write_line(text: str) -> str:
        """Append a line to the effects file.

        Args:
            text: the line.
        """
        with effects.open("a") as f:
            f.write(text + "\n")
        return f"wrote {text}"

    @tool(category="write", effect_tags=["file_write"], timeout_seconds=120)
    async def slow_write(text: str) -> str:
        """Append a line, waiting first while the block file exists.

        Args:
            text: the line.
        """
        while (workdir / "block").exists():
            await asyncio.sleep(0.05)
        with effects.open("a") as f:
            f.write(text + "\n")
        return f"wrote {text}"

    @tool(category="dangerous", permission="user_confirm", effect_tags=["deploy"])
    def deploy(target: str) -> str:
        """Deploy somewhere (needs a person's approval).

        Args:
            target: where to deploy.
        """
        with effects.open("a") as f:
            f.write(f"deploy {target}\n")
        return f"deployed to {target}"

    return ToolExecutor(tools=[write_line, slow_write, deploy])


def batch(kind: str) -> list[dict[str, object]]:
    if kind == "crash":
        calls = [("write_line", "one"), ("write_line", "two"), ("slow_write", "three"),
                 ("write_line", "four"), ("write_line", "five")]
        return [{"id": f"c{i}", "name": n, "arguments": {"text": t}}
                for i, (n, t) in enumerate(calls)]
    return [
        {"id": "c0", "name": "write_line", "arguments": {"text": "before"}},
        {"id": "c1", "name": "deploy", "arguments": {"target": "prod"}},
    ]


async def main(argv: list[str]) -> dict[str, object]:
    command, db, workdir, run_id = argv[:4]
    work = Path(workdir)
    store = SQLiteCheckpointer(db)
    if command in ("start", "crash"):
        state = StateManager(AgentState, {"actions": batch(command)})
        runner = ReactiveRunner(build(work), state, checkpointer=store, run_id=run_id)
    else:
        runner = ReactiveRunner.restore(
            build(work), store, run_id, state_manager=StateManager(AgentState)
        )
        decision = argv[4] if len(argv) > 4 else ""
        for request in runner.pending:
            if decision == "approve":
                runner.approve(request.id)
            elif decision == "reject":
                runner.reject(request.id, "not today")
    result = await runner.run(timeout=60)
    messages = [m.model_dump(mode="json") for m in runner.state.get("messages")]
    return {
        "status": result.status.value,
        "pending": [r.id for r in result.pending],
        "messages": messages,
        "effects": runner.state.get("tool_effects"),
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1:]))), flush=True)
