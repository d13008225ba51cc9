"""A lead agent with a researcher as a tool, built the same in a test and in the process that
restores its run; each tool call is logged to a file, so a call that ran twice shows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jianmu.llm import ScriptedLLM
from jianmu.nodes import ReActLoop, agent_tool, create_react_node
from jianmu.tools import Tool, tool


def logged_tools(log: Path) -> list[Tool]:
    """``search`` (read) and ``write_note`` (asks a person first), both logging their calls."""

    def record(line: str) -> None:
        with log.open("a", encoding="utf-8") as out:
            out.write(line + "\n")

    @tool
    def search(query: str) -> str:
        """Search the notes.

        Args:
            query: what to look for.
        """
        record(f"search {query}")
        return f"3 notes about {query}"

    @tool(read_only=False, confirm=True)
    def write_note(text: str) -> str:
        """Write a note (a person approves first).

        Args:
            text: the note.
        """
        record(f"write_note {text}")
        return "note written"

    return [search, write_note]


def build(log: Path, researcher_script: list[Any], lead_script: list[Any]) -> ReActLoop:
    """The lead agent, its researcher a tool; both on scripted models."""
    researcher = create_react_node(
        ScriptedLLM(researcher_script), logged_tools(log), name="researcher",
        system_prompt="You research with the notes.",
    )
    return create_react_node(
        ScriptedLLM(lead_script),
        [agent_tool(researcher, name="researcher", description="Researches a question.")],
        name="lead", system_prompt="You lead; delegate research.",
    )


RESEARCHER = [
    [{"name": "search", "arguments": {"query": "tides"}}],
    [{"name": "write_note", "arguments": {"text": "tides: twice a day"}}],
    "Tides come twice a day.",
]
LEAD = [
    [{"name": "researcher", "arguments": {"input": "How often are tides?"}}],
    "The researcher says: tides come twice a day.",
]
