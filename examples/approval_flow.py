"""Approvals: a tool that asks a person first, a run that waits, and a resume.

The tree plans one call of ``append_note`` (a tool whose permission is ``user_confirm``), runs
it through a ``ToolExecutor`` — which suspends the run until someone decides — and reports
what happened. Run it with the CLI to be asked in the terminal::

    jianmu run examples/approval_flow.py --input note="buy milk"

or stop at the question and decide later, from another process::

    jianmu run examples/approval_flow.py --input note="buy milk" --non-interactive   # exit 3
    jianmu resume RUN_ID --approve REQUEST_ID                                         # exit 0

``python examples/approval_flow.py [NOTE]`` runs the same tree from Python and approves
(asking first when there is a terminal).
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path
from typing import Any

import py_trees
from py_trees.common import Status

from jianmu import (
    AgentState,
    AsyncNode,
    ReactiveRunner,
    RunStatus,
    StateManager,
    ToolExecutor,
    tool,
)

NOTES = ".jianmu/notes.txt"  # .jianmu/ is git-ignored: running the example leaves no trace


@tool(category="write", permission="user_confirm", effect_tags=["file_write"])
def append_note(text: str) -> str:
    """Append a line to .jianmu/notes.txt under the current folder.

    Args:
        text: The note to add.
    """
    Path(NOTES).parent.mkdir(parents=True, exist_ok=True)
    with Path(NOTES).open("a", encoding="utf-8") as out:
        out.write(text + "\n")
    return f"added {text!r} to {NOTES}"


class PlanNote(AsyncNode):
    """Asks for one ``append_note`` call, as a model would."""

    def __init__(self, note: str) -> None:
        super().__init__("plan_note")
        self.note = note

    async def update_async(self) -> Status:
        self.state.update({"actions": [{"name": "append_note", "arguments": {"text": self.note}}]})
        return Status.SUCCESS


class Report(AsyncNode):
    """Turns the tool's observation into the run's answer."""

    async def update_async(self) -> Status:
        observations = [m for m in self.state.get("messages") or [] if m.role == "tool"]
        text = observations[-1].content if observations else "nothing was run"
        self.state.update({"final_answer": text, "done": True})
        return Status.SUCCESS


def build_tree(inputs: dict[str, Any] | None = None) -> py_trees.behaviour.Behaviour:
    """plan_note → execute (asks first) → report."""
    note = (inputs or {}).get("note", "hello from Jianmu")
    return py_trees.composites.Sequence("approval-flow", memory=True, children=[
        PlanNote(str(note)),
        ToolExecutor("execute", [append_note]),
        Report("report"),
    ])


STATE_SCHEMA = AgentState


def read_answer(prompt: str) -> str:
    """``input(prompt)``, where Ctrl-C stops the script at the first press.

    Inside ``asyncio.run``, whose SIGINT handler only cancels the main task, a blocking
    ``input()`` never saw that Ctrl-C: a person had to press it twice.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return input(prompt)
    finally:
        signal.signal(signal.SIGINT, previous)


async def main(note: str = "hello from Jianmu") -> None:
    state = StateManager(AgentState)
    runner = ReactiveRunner(build_tree({"note": note}), state)
    result = await runner.run(timeout=30)
    while result.status is RunStatus.SUSPENDED:
        for request in result.pending:
            print(f"approval needed: {request.summary}")
            yes = not sys.stdin.isatty() or read_answer("approve? [y/N] ").strip().lower() == "y"
            if yes:
                runner.approve(request.id)
            else:
                runner.reject(request.id, "declined")
        result = await runner.run(timeout=30)
    print(f"answer: {state.get('final_answer')}")
    print(f"result: {result.status.value}")


if __name__ == "__main__":
    try:
        asyncio.run(main(*sys.argv[1:]))
    except KeyboardInterrupt:  # at the prompt: the call was neither approved nor run
        print("\nstopped: the note was not written")
        sys.exit(130)
