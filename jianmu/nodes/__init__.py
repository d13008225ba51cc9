"""Behaviour-tree nodes: tools, the model, the ReAct loop and skills."""

from jianmu.nodes.agent_llm import AgentLLMNode
from jianmu.nodes.react import ReActLoop, create_react_node
from jianmu.nodes.skill_node import (
    FlattenedAgentNode,
    SkillNode,
    SkillNodeConfig,
    merge_skill_constraints,
)
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor, ToolExecutorConfig
from jianmu.nodes.tool_node import ToolNode

__all__ = (
    "AgentLLMNode",
    "AgentState",
    "FlattenedAgentNode",
    "ReActLoop",
    "SkillNode",
    "SkillNodeConfig",
    "ToolExecutor",
    "ToolExecutorConfig",
    "ToolNode",
    "create_react_node",
    "merge_skill_constraints",
)
