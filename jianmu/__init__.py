"""Jianmu: a behaviour-tree workflow engine for LLM agents."""

# errors
from jianmu.config import AppConfig, load_config
from jianmu.constraints import Constraints, ExecutionConstraints, GuardConstraints
from jianmu.errors import (
    CheckpointError,
    ConfigError,
    GuardError,
    InteractionError,
    JianmuError,
    LLMError,
    MCPError,
    MissingExtraError,
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

# guard and execution
from jianmu.guard import Decision, GuardEnforcer

# models
from jianmu.llm import LLMProvider, LLMResponse, Message, OpenAIProvider, ScriptedLLM, Usage

# mcp
from jianmu.mcp import MCPClient, MCPToolProvider

# nodes
from jianmu.nodes import (
    AgentLLMNode,
    AgentState,
    ToolExecutor,
    ToolExecutorConfig,
    ToolNode,
    create_react_node,
)

# runtime
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

# skills
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

# state, config, constraints
from jianmu.state import StateManager, StateView, merge_counts

# tools
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

__all__ = (
    "AgentLLMNode",
    "AgentState",
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
    "create_react_node",
    "load_config",
    "merge_counts",
    "run_bt_skill",
    "tool",
)
