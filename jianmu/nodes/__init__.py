"""Behaviour-tree nodes: tools, the model, the ReAct loop, typed answers, history processors
and agents that call agents (skills' nodes: `jianmu.skills`)."""

from jianmu.nodes.agent_llm import AgentLLMNode
from jianmu.nodes.agents import AgentSwitch, AgentTool, Handoff, agent_tool, handoff
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
    "AgentLLMNode",
    "AgentState",
    "AgentSwitch",
    "AgentTool",
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

