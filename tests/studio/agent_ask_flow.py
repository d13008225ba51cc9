"""A tree for the studio tests: a lead whose researcher sub-agent asks for an approval, then
asks the user a question (with markup in it)."""

from __future__ import annotations

from typing import Any

from jianmu import AgentState, ScriptedLLM, StateManager
from jianmu.nodes import agent_tool, create_react_node
from jianmu.tools import tool
from jianmu.tools.builtin.ask import ask_user


@tool(read_only=False, confirm=True)
def flag_account(account: str) -> str:
    """Flag an account.

    Args:
        account: its id.
    """
    return f"flagged {account}"


def build_tree(inputs: dict[str, Any] | None = None) -> Any:
    """lead → researcher (flag_account, asks first; then ask_user)."""
    researcher = create_react_node(ScriptedLLM([
        [{"name": "flag_account", "arguments": {"account": "A-7"}}],
        [{"name": "ask_user", "arguments": {"question": "Which <img src=x onerror=alert(1)>?"}}],
        "ok",
    ]), [flag_account, ask_user], name="researcher")
    return create_react_node(ScriptedLLM([
        [{"name": "researcher", "arguments": {"input": "go"}}], "Done.",
    ]), [agent_tool(researcher, name="researcher", description="R.")], name="lead")


def build_state() -> StateManager:
    return StateManager(AgentState, {"messages": [{"role": "user", "content": "q"}]})
