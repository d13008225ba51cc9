"""Jianmu: a behaviour-tree workflow engine for LLM agents.

The public names load on first use (module ``__getattr__``), so ``import jianmu`` stays light:
``from jianmu import X`` imports only the sub-package that holds ``X``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jianmu.config import AppConfig, load_config
    from jianmu.constraints import Constraints, ExecutionConstraints, GuardConstraints
    from jianmu.errors import (
        CheckpointError,
        ConfigError,
        GuardError,
        HandoffError,
        HistoryProcessorError,
        InteractionError,
        JianmuError,
        LLMError,
        MCPError,
        MissingExtraError,
        OutputValidationError,
        SandboxError,
        SandboxUnavailableError,
        SkillLoadError,
        StateValidationError,
        ToolError,
        ToolExecutionError,
        ToolInputError,
        ToolNotFoundError,
        ToolTimeoutError,
        ToolValidationError,
    )
    from jianmu.execution import DockerSandbox, LocalSandbox, Sandbox, ToolRunner
    from jianmu.guard import Decision, GuardEnforcer
    from jianmu.llm import (
        AnthropicProvider,
        LLMProvider,
        LLMResponse,
        Message,
        OpenAIProvider,
        ScriptedLLM,
        Usage,
    )
    from jianmu.mcp import MCPClient, MCPToolProvider
    from jianmu.nodes import (
        AgentLLMNode,
        AgentState,
        ToolExecutor,
        ToolExecutorConfig,
        ToolNode,
        agent_tool,
        create_react_node,
        handoff,
        summarize_history,
        trim_history,
    )
    from jianmu.runtime import (
        ApprovalRequest,
        AsyncNode,
        Checkpointer,
        ReactiveRunner,
        RunContext,
        RunResult,
        RunStatus,
        SQLiteCheckpointer,
    )
    from jianmu.skills import (
        BTSkillContext,
        FlattenedAgentNode,
        RunBTSkillTool,
        Skill,
        SkillCatalog,
        SkillNode,
        SkillNodeConfig,
        SkillTreeLoader,
        run_bt_skill,
    )
    from jianmu.state import StateManager, StateView, merge_counts
    from jianmu.tools import (
        BaseToolProvider,
        BuiltinToolProvider,
        FunctionTool,
        Injected,
        Tool,
        ToolCall,
        ToolProvider,
        ToolRegistry,
        ToolResult,
        ToolSet,
        tool,
    )

# Each sub-package and the public names it holds; a name's module is imported on first access.
_HOLDERS: dict[str, tuple[str, ...]] = {
    "jianmu.errors": (
        "CheckpointError",
        "ConfigError",
        "GuardError",
        "HandoffError",
        "HistoryProcessorError",
        "InteractionError",
        "JianmuError",
        "LLMError",
        "MCPError",
        "MissingExtraError",
        "OutputValidationError",
        "SandboxError",
        "SandboxUnavailableError",
        "SkillLoadError",
        "StateValidationError",
        "ToolError",
        "ToolExecutionError",
        "ToolInputError",
        "ToolNotFoundError",
        "ToolTimeoutError",
        "ToolValidationError",
    ),
    "jianmu.constraints": ("Constraints", "ExecutionConstraints", "GuardConstraints"),
    "jianmu.config": ("AppConfig", "load_config"),
    "jianmu.state": ("StateManager", "StateView", "merge_counts"),
    "jianmu.runtime": (
        "ApprovalRequest",
        "AsyncNode",
        "Checkpointer",
        "ReactiveRunner",
        "RunContext",
        "RunResult",
        "RunStatus",
        "SQLiteCheckpointer",
    ),
    "jianmu.execution": ("DockerSandbox", "LocalSandbox", "Sandbox", "ToolRunner"),
    "jianmu.tools": (
        "BaseToolProvider",
        "BuiltinToolProvider",
        "FunctionTool",
        "Injected",
        "Tool",
        "ToolCall",
        "ToolProvider",
        "ToolRegistry",
        "ToolResult",
        "ToolSet",
        "tool",
    ),
    "jianmu.llm": (
        "AnthropicProvider",
        "LLMProvider",
        "LLMResponse",
        "Message",
        "OpenAIProvider",
        "ScriptedLLM",
        "Usage",
    ),
    "jianmu.guard": ("Decision", "GuardEnforcer"),
    "jianmu.nodes": (
        "AgentLLMNode",
        "AgentState",
        "ToolExecutor",
        "ToolExecutorConfig",
        "ToolNode",
        "agent_tool",
        "create_react_node",
        "handoff",
        "summarize_history",
        "trim_history",
    ),
    "jianmu.mcp": ("MCPClient", "MCPToolProvider"),
    "jianmu.skills": (
        "BTSkillContext",
        "FlattenedAgentNode",
        "RunBTSkillTool",
        "Skill",
        "SkillCatalog",
        "SkillNode",
        "SkillNodeConfig",
        "SkillTreeLoader",
        "run_bt_skill",
    ),
}
_WHERE = {name: module for module, names in _HOLDERS.items() for name in names}


def __getattr__(name: str) -> object:
    """Load a public name, or a sub-module (``jianmu.config``), on first access."""
    module = _WHERE.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # the next access skips this hook
        return value
    if not name.startswith("__"):
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's names, with the lazy public ones."""
    return sorted({*globals(), *__all__})


__all__ = (
    "AgentLLMNode",
    "AgentState",
    "AnthropicProvider",
    "AppConfig",
    "ApprovalRequest",
    "AsyncNode",
    "BTSkillContext",
    "BaseToolProvider",
    "BuiltinToolProvider",
    "CheckpointError",
    "Checkpointer",
    "ConfigError",
    "Constraints",
    "Decision",
    "DockerSandbox",
    "ExecutionConstraints",
    "FlattenedAgentNode",
    "FunctionTool",
    "GuardConstraints",
    "GuardEnforcer",
    "GuardError",
    "HandoffError",
    "HistoryProcessorError",
    "Injected",
    "InteractionError",
    "JianmuError",
    "LLMError",
    "LLMProvider",
    "LLMResponse",
    "LocalSandbox",
    "MCPClient",
    "MCPError",
    "MCPToolProvider",
    "Message",
    "MissingExtraError",
    "OpenAIProvider",
    "OutputValidationError",
    "ReactiveRunner",
    "RunBTSkillTool",
    "RunContext",
    "RunResult",
    "RunStatus",
    "SQLiteCheckpointer",
    "Sandbox",
    "SandboxError",
    "SandboxUnavailableError",
    "ScriptedLLM",
    "Skill",
    "SkillCatalog",
    "SkillLoadError",
    "SkillNode",
    "SkillNodeConfig",
    "SkillTreeLoader",
    "StateManager",
    "StateValidationError",
    "StateView",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolExecutionError",
    "ToolExecutor",
    "ToolExecutorConfig",
    "ToolInputError",
    "ToolNode",
    "ToolNotFoundError",
    "ToolProvider",
    "ToolRegistry",
    "ToolResult",
    "ToolRunner",
    "ToolSet",
    "ToolTimeoutError",
    "ToolValidationError",
    "Usage",
    "agent_tool",
    "create_react_node",
    "handoff",
    "load_config",
    "merge_counts",
    "run_bt_skill",
    "summarize_history",
    "tool",
    "trim_history",
)
