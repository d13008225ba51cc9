"""A ReAct agent over Jianmu's built-in tools.

It talks to a real model when ``llm:`` in ``configs/jianmu.yaml`` points to one (set
``JIANMU_LLM_BASE_URL`` and ``JIANMU_LLM_MODEL``, or ``OPENAI_API_KEY``); otherwise (and always
under ``make demo``) it runs against the scripted stand-in and says so on its first line.

Run it with ``python examples/react_agent.py``, or ``jianmu run examples/react_agent.py``
(which uses ``build_tree`` and ``build_state``).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import py_trees

from jianmu import ReactiveRunner, StateManager, load_config
from jianmu.llm import LLMProvider, Message, ScriptedLLM, from_config
from jianmu.nodes import AgentState, create_react_node
from jianmu.tools import ToolSet

QUESTION = "What is 17 * 23, and how many lines does README.md have?"


def scripted() -> ScriptedLLM:
    """Replies a model might give; the last one reads the tool results it was sent."""

    def answer(messages: list[Message]) -> str:
        product, info = [m.content or "" for m in messages if m.role == "tool"][:2]
        if not info.startswith("{"):  # file_info failed: run from a folder without README.md
            return f"17 * 23 = {product}; README.md could not be read here: {info}"
        return f"17 * 23 = {product}, and README.md has {json.loads(info).get('lines')} lines."

    return ScriptedLLM([
        [{"name": "calculator", "arguments": {"expression": "17 * 23"}},
         {"name": "file_info", "arguments": {"path": "README.md"}}],
        answer,
    ])


def pick_llm(offline: bool = False) -> tuple[LLMProvider, str]:
    """The configured model, or the scripted stand-in when none is configured."""
    if offline:  # `make demo`: offline whatever the environment says
        return scripted(), "the scripted stand-in (the demo runs offline)"
    config = load_config()
    if config.llm.endpoint_configured:
        return from_config(config), f"model {config.llm.model!r} at {config.llm.base_url}"
    return scripted(), "the scripted stand-in (no llm.base_url or API key is configured)"


def show(event: Any) -> None:
    fields = event.fields
    if event.name == "tool.call.started":
        print(f"  → {fields['tool']}({fields['args_preview']})")
    elif event.name == "tool.call.completed":
        print(f"  ← {fields['tool']}: {fields['result_preview']}")
    elif event.name == "tool.call.failed":
        print(f"  ✗ {fields['tool']}: {fields['error']}")


def build_tree(model: LLMProvider | None = None) -> py_trees.behaviour.Behaviour:
    """The agent: a ReAct loop over four read-only built-in tools."""
    tools = ToolSet.resolve(["calculator", "file_info", "read_file", "glob_search"])
    return create_react_node(
        model or pick_llm()[0], tools, system_prompt="Answer with the tools; be brief.",
        max_iterations=6,
    )


def build_state() -> StateManager:
    """The conversation so far: the user's question."""
    return StateManager(AgentState, {"messages": [{"role": "user", "content": QUESTION}]})


async def main(offline: bool = False) -> None:
    llm, label = pick_llm(offline)
    print(f"LLM: {label}")
    tree = build_tree(llm)
    state = build_state()
    runner = ReactiveRunner(tree, state)
    runner.ctx.events.subscribe("tool.call.*", show)
    print(f"user: {QUESTION}")
    result = await runner.run(timeout=120)
    print(py_trees.display.unicode_tree(tree, show_status=True))
    print(f"answer: {state.get('final_answer')}")
    usage = state.get("usage")
    print(f"result: {result.status.value}, {state.get('rounds')} model turns, "
          f"{usage.total_tokens} tokens")
    await llm.close()


if __name__ == "__main__":
    asyncio.run(main())
