"""The runtime: async nodes, the reactive runner, events, interaction and checkpoints."""

from jianmu.runtime.async_node import AsyncNode, RuntimeNode
from jianmu.runtime.checkpoint import Checkpointer, SQLiteCheckpointer
from jianmu.runtime.context import ApprovalDecision, ApprovalRequest, Interaction, RunContext
from jianmu.runtime.events import Event, EventBus
from jianmu.runtime.runner import ReactiveRunner, RunResult, RunStatus

__all__ = (
    "ApprovalDecision",
    "ApprovalRequest",
    "AsyncNode",
    "Checkpointer",
    "Event",
    "EventBus",
    "Interaction",
    "ReactiveRunner",
    "RunContext",
    "RunResult",
    "RunStatus",
    "RuntimeNode",
    "SQLiteCheckpointer",
)
