"""Jianmu: a behaviour-tree workflow engine for LLM agents."""

# errors
from jianmu.errors import (
    CheckpointError,
    ConfigError,
    InteractionError,
    JianmuError,
    MissingExtraError,
    StateValidationError,
    ToolError,
    ToolInputError,
    ToolValidationError,
)

# state, config, constraints
from jianmu.state import StateManager, StateView, merge_counts
from jianmu.config import AppConfig, load_config
from jianmu.constraints import Constraints, ExecutionConstraints, GuardConstraints

# runtime
from jianmu.runtime import (
    ApprovalRequest,
    AsyncNode,
    ReactiveRunner,
    RunContext,
    RunResult,
    RunStatus,
    SQLiteCheckpointer,
)

# tools
from jianmu.tools.calls import ToolCall, ToolResult

__all__ = (
    "AppConfig",
    "ApprovalRequest",
    "AsyncNode",
    "CheckpointError",
    "ConfigError",
    "Constraints",
    "ExecutionConstraints",
    "GuardConstraints",
    "InteractionError",
    "JianmuError",
    "MissingExtraError",
    "ReactiveRunner",
    "RunContext",
    "RunResult",
    "RunStatus",
    "SQLiteCheckpointer",
    "StateManager",
    "StateValidationError",
    "StateView",
    "ToolCall",
    "ToolError",
    "ToolInputError",
    "ToolResult",
    "ToolValidationError",
    "load_config",
    "merge_counts",
)
