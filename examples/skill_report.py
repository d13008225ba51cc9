"""Run the shipped ``workspace-report`` BT skill from a script, with its confirmation step.

The skill surveys a folder (glob, file_info, grep) and writes a Markdown report with
``write_file``, which asks a person first. In a terminal you are asked; otherwise (``make
demo`` in CI) the script approves on your behalf and says so.

Run it with ``python examples/skill_report.py [FOLDER [WORKSPACE]]``: FOLDER (default
``jianmu``) is surveyed inside WORKSPACE (default this repository), where the report is
written as ``.reports/workspace-report.md``.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import py_trees

from jianmu import (
    AgentState,
    BTSkillContext,
    Constraints,
    ReactiveRunner,
    RunStatus,
    SkillCatalog,
    SkillTreeLoader,
    StateManager,
)

REPO = Path(__file__).resolve().parents[1]


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


def ask(summary: str) -> bool:
    """Ask in the terminal; approve automatically when nobody is there to ask."""
    if not sys.stdin.isatty():
        print(f"  approval needed: {summary}\n  (no terminal: approving as the demo user)")
        return True
    return read_answer(f"  approval needed: {summary}\n  approve? [y/N] ").strip().lower() == "y"


async def main(folder: str = "jianmu", workspace: str = str(REPO)) -> None:
    skill = SkillCatalog([REPO / "skills"]).get("workspace-report")
    print(f"skill: {skill.name} ({skill.execution}) — {skill.description.split('.')[0]}.")
    state = StateManager(AgentState)
    inputs = {"folder": folder, "include": "*.py", "report": ".reports/workspace-report.md"}
    bt = BTSkillContext.create(skill, state_manager=state, inputs=inputs)
    tree = SkillTreeLoader().build(skill, bt)
    constraints = Constraints.model_validate({"execution": {"workdir": workspace}})
    runner = ReactiveRunner(tree, state, constraints=constraints)
    bt.run = runner.ctx
    calls: dict[str, int] = {}
    runner.ctx.events.subscribe(
        "bt.skill.node.io",
        lambda e: calls.__setitem__(e.fields["tool_name"], calls.get(e.fields["tool_name"], 0) + 1),
    )
    result = await runner.run(timeout=120)
    while result.status is RunStatus.SUSPENDED:
        for request in result.pending:
            if ask(request.summary):
                runner.approve(request.id)
            else:
                runner.reject(request.id, "declined in the demo")
        result = await runner.run(timeout=120)
    print("tool calls: " + ", ".join(f"{name} ×{n}" for name, n in calls.items()))
    print(py_trees.display.unicode_tree(tree, show_status=True))
    if result.status is RunStatus.SUCCESS:
        summary = bt.result()
        print(f"report: {summary['report']} — {summary['files']} files, "
              f"{summary['total_lines']} lines, {summary['matches']} TODO/FIXME lines")
    print(f"result: {result.status.value}" + (f" ({result.error})" if result.error else ""))


if __name__ == "__main__":
    try:
        asyncio.run(main(*sys.argv[1:]))
    except KeyboardInterrupt:  # at the prompt: the report was neither approved nor written
        print("\nstopped: no report was written")
        sys.exit(130)
