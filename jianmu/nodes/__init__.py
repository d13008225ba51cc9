"""Behaviour-tree nodes: tools, the model, the ReAct loop, typed answers, history processors
and agents that call agents (skills' nodes: `jianmu.skills`).

Its names load on first use (module ``__getattr__``): importing one imports only the module
that holds it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jianmu._lazy import lazy_names

if TYPE_CHECKING:
    from jianmu.nodes.agent import Agent, AgentResult
    from jianmu.nodes.agent_llm import AgentLLMNode
    from jianmu.nodes.agents import AgentTool, agent_tool
    from jianmu.nodes.ask import AskUser
    from jianmu.nodes.handoffs import AgentSwitch, Handoff, handoff
    from jianmu.nodes.history import (
        HistoryContext,
        HistoryProcessor,
        HistorySummary,
        MessageHistory,
        SummarizeHistory,
        TrimHistory,
        estimate_message_tokens,
        summarize_history,
        token_counter,
        trim_history,
    )
    from jianmu.nodes.output import OutputMode, OutputSpec
    from jianmu.nodes.react import ReActLoop, create_react_node
    from jianmu.nodes.state import AgentState
    from jianmu.nodes.tool_executor import ToolExecutor, ToolExecutorConfig
    from jianmu.nodes.tool_node import ToolNode

__all__ = (
    "Agent",
    "AgentLLMNode",
    "AgentResult",
    "AgentState",
    "AgentSwitch",
    "AgentTool",
    "AskUser",
    "Handoff",
    "HistoryContext",
    "HistoryProcessor",
    "HistorySummary",
    "MessageHistory",
    "OutputMode",
    "OutputSpec",
    "ReActLoop",
    "SummarizeHistory",
    "ToolExecutor",
    "ToolExecutorConfig",
    "ToolNode",
    "TrimHistory",
    "agent_tool",
    "create_react_node",
    "estimate_message_tokens",
    "handoff",
    "summarize_history",
    "token_counter",
    "trim_history",
)

_HOLDERS = {
    "jianmu.nodes.agent": ("Agent", "AgentResult"),
    "jianmu.nodes.agent_llm": ("AgentLLMNode",),
    "jianmu.nodes.ask": ("AskUser",),
    "jianmu.nodes.agents": ("AgentTool", "agent_tool"),
    "jianmu.nodes.handoffs": ("AgentSwitch", "Handoff", "handoff"),
    "jianmu.nodes.history": (
        "HistoryContext",
        "HistoryProcessor",
        "HistorySummary",
        "MessageHistory",
        "SummarizeHistory",
        "TrimHistory",
        "estimate_message_tokens",
        "summarize_history",
        "token_counter",
        "trim_history",
    ),
    "jianmu.nodes.output": ("OutputMode", "OutputSpec"),
    "jianmu.nodes.react": ("ReActLoop", "create_react_node"),
    "jianmu.nodes.state": ("AgentState",),
    "jianmu.nodes.tool_executor": ("ToolExecutor", "ToolExecutorConfig"),
    "jianmu.nodes.tool_node": ("ToolNode",),
}
__getattr__, __dir__ = lazy_names(__name__, _HOLDERS, __all__)
