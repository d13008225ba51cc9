"""``jianmu run``: Jianmu's own warnings are lines of the command, not Python's warning format.

A skill naming an MCP server with a tool Jianmu leaves out (one that runs only as a task)
connects the server in a task of the run; the `ToolUnavailableWarning` saying so was printed
by Python naming a line of asyncio's ``events.py`` and quoting its source, which told the
user nothing (and looked like a crash). It reads ``jianmu: warning: ...``.
"""

from __future__ import annotations

import sys

import pytest

from tests.cli._helpers import REPO, Project
from tests.support.forked_cli import MCP

TASKS = REPO / "tests" / "mcp" / "servers" / "tasks_server.py"


def test_a_skipped_mcp_tool_is_a_warning_line_of_the_command(project: Project) -> None:
    pytest.importorskip("mcp")
    project.config.write_text(project.config.read_text() + (
        "llm:\n  provider: scripted\n  params:\n    responses: [\"all done\"]\n"
        f"mcp:\n  servers:\n    jobs:\n      command: {sys.executable}\n"
        f"      args: [{TASKS}]\n"
    ), encoding="utf-8")
    project.write("skills/jobs/SKILL.md", "---\nname: jobs\ndescription: Runs jobs.\n"
                  "tools: [jobs]\n---\nRun the jobs.\n")
    done = project.jianmu("run", "jobs", "-i", "question=go", preload=MCP)
    assert done.code == 0, done.text
    assert "result: all done" in done.out, done.text
    assert "jianmu: warning: MCP tool 'job' of server 'jobs' requires task-augmented" \
        in done.err, done.err
    assert "Warning:" not in done.err and "events.py" not in done.err, done.err
