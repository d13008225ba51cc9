"""A lead agent that calls a researcher agent as a tool; the researcher's write asks first.

``agent_tool(researcher, ...)`` makes the researcher's whole ReAct loop one tool of the lead's.
Each call runs it in its own state namespace, under the lead's guard and budget: when the
researcher wants to save a note (a tool that needs a person's approval), the whole run
suspends with a request named by its path (``researcher > save_note(...)``); once approved,
the researcher goes on where it stopped and the lead gets its answer.

It talks to a real model when ``llm:`` in ``configs/jianmu.yaml`` points to one (set
``JIANMU_LLM_BASE_URL`` and ``JIANMU_LLM_MODEL``, or ``OPENAI_API_KEY``); otherwise (and always
under ``make demo``) both agents run against the scripted stand-in and it says so on its first
line.

Run it with ``python examples/lead_researcher.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from jianmu import ReactiveRunner, RunStatus, StateManager, load_config
from jianmu.llm import LLMProvider, ScriptedLLM, from_config
from jianmu.nodes import AgentState, ReActLoop, agent_tool, create_react_node
from jianmu.tools import tool

QUESTION = "How often do tides come in, and why? Keep a note of what you find."
NOTES = {
    "tides": "Most coasts have two high tides a day (semidiurnal), 12 h 25 min apart.",
    "moon": "The Moon's pull raises a bulge of water on each side of the Earth.",
}
SAVED: list[str] = []


@tool
def search_notes(query: str) -> str:
    """Search the library's notes.

    Args:
        query: one keyword, such as tides or moon.
    """
    found = [text for key, text in NOTES.items() if key in query.lower()]
    return "\n".join(found) or f"nothing about {query!r}"


@tool(read_only=False, confirm=True)
def save_note(text: str) -> str:
    """Save a note for later (a person approves it first).

    Args:
        text: the note.
    """
    SAVED.append(text)
    return "saved"


def scripted_researcher() -> ScriptedLLM:
    return ScriptedLLM([
        [{"name": "search_notes", "arguments": {"query": "tides"}},
         {"name": "search_notes", "arguments": {"query": "moon"}}],
        [{"name": "save_note", "arguments": {"text": "Tides: twice a day, from the Moon's pull."}}],
        "Two high tides a day, about 12 h 25 min apart: the Moon's pull raises a bulge of "
        "water on each side of the Earth.",
    ])


def scripted_lead() -> ScriptedLLM:
    return ScriptedLLM([
        [{"name": "researcher", "arguments": {"input": "How often do tides come, and why?"}}],
        "Tides come in twice a day, about 12 h 25 min apart, because the Moon pulls the oceans "
        "into two bulges. (A note was saved.)",
    ])


def pick_llm(offline: bool = False) -> tuple[LLMProvider | None, str]:
    """The configured model, or None (each agent gets its scripted stand-in)."""
    if offline:  # `make demo`: offline whatever the environment says
        return None, "the scripted stand-in (the demo runs offline)"
    config = load_config()
    if config.llm.endpoint_configured:
        return from_config(config), f"model {config.llm.model!r} at {config.llm.base_url}"
    return None, "the scripted stand-in (no llm.base_url or API key is configured)"


def build_tree(model: LLMProvider | None = None) -> ReActLoop:
    """The lead agent; the researcher is one of its tools."""
    researcher = create_react_node(
        model or scripted_researcher(), [search_notes, save_note], name="researcher",
        system_prompt="You research in the notes, save one note, then answer in two lines.",
        max_iterations=6,
    )
    return create_react_node(
        model or scripted_lead(),
        [agent_tool(researcher, name="researcher",
                    description="Researches a question in the library's notes.")],
        name="lead", max_iterations=4,
        system_prompt="You answer the user; delegate research to the researcher.",
    )


def build_state() -> StateManager:
    """The conversation so far: the first message (what `jianmu run` starts from)."""
    return StateManager(AgentState, {"messages": [{"role": "user", "content": QUESTION}]})


def show(event: Any) -> None:
    fields = event.fields
    depth = "    " if "researcher[" in (event.node or "") else "  "
    if event.name == "tool.call.started" and fields.get("resumed"):  # it waited: goes on
        print(f"{depth}↻ {fields['tool']} goes on")
    elif event.name == "tool.call.started":
        print(f"{depth}→ {fields['tool']}({fields['args_preview']})")
    elif event.name == "tool.call.completed":
        print(f"{depth}← {fields['tool']}: {fields['result_preview']}")


async def main(offline: bool = False) -> None:
    llm, label = pick_llm(offline)
    print(f"LLM: {label}")
    state = build_state()
    runner = ReactiveRunner(build_tree(llm), state)
    runner.ctx.events.subscribe("tool.call.*", show)
    print(f"user: {QUESTION}")
    result = await runner.run(timeout=120)
    while result.status is RunStatus.SUSPENDED:
        for request in result.pending:
            print(f"approval needed: {request.summary}  [id {request.id}]")
            print("approving as the demo user")
            runner.approve(request.id)
        result = await runner.run(timeout=120)
    print(f"answer: {state.get('final_answer')}")
    print(f"notes saved: {len(SAVED)}; tokens, lead and researcher: "
          f"{state.get('usage').total_tokens}")
    print(f"result: {result.status.value}")
    if llm is not None:
        await llm.close()


if __name__ == "__main__":
    asyncio.run(main())
