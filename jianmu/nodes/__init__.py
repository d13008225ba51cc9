"""Behaviour-tree nodes: tools, the model and the ReAct loop (skills' nodes: `jianmu.skills`)."""

from jianmu.nodes.agent_llm import AgentLLMNode
from jianmu.nodes.react import ReActLoop, create_react_node
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor, ToolExecutorConfig
from jianmu.nodes.tool_node import ToolNode

__all__ = (
    "AgentLLMNode",
    "AgentState",
    "ReActLoop",
    "ToolExecutor",
    "ToolExecutorConfig",
    "ToolNode",
    "create_react_node",
)

