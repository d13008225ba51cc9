"""The runtime: async nodes, the reactive runner, events, interaction and checkpoints.

Its names load on first use (module ``__getattr__``): importing one imports only the module
that holds it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jianmu._lazy import lazy_names

if TYPE_CHECKING:
    from jianmu.runtime.async_node import AsyncNode, RuntimeNode
    from jianmu.runtime.checkpoint import Checkpointer, SQLiteCheckpointer
    from jianmu.runtime.context import ApprovalDecision, ApprovalRequest, Interaction, RunContext
    from jianmu.runtime.events import Event, EventBus
    from jianmu.runtime.lease import Lease, LeasingCheckpointer
    from jianmu.runtime.runner import ReactiveRunner, RunResult, RunStatus
    from jianmu.runtime.stream import EventStream

__all__ = (
    "ApprovalDecision",
    "ApprovalRequest",
    "AsyncNode",
    "Checkpointer",
    "Event",
    "EventBus",
    "EventStream",
    "Interaction",
    "Lease",
    "LeasingCheckpointer",
    "ReactiveRunner",
    "RunContext",
    "RunResult",
    "RunStatus",
    "RuntimeNode",
    "SQLiteCheckpointer",
)

_HOLDERS = {
    "jianmu.runtime.async_node": ("AsyncNode", "RuntimeNode"),
    "jianmu.runtime.checkpoint": ("Checkpointer", "SQLiteCheckpointer"),
    "jianmu.runtime.context": ("ApprovalDecision", "ApprovalRequest", "Interaction", "RunContext"),
    "jianmu.runtime.events": ("Event", "EventBus"),
    "jianmu.runtime.lease": ("Lease", "LeasingCheckpointer"),
    "jianmu.runtime.runner": ("ReactiveRunner", "RunResult", "RunStatus"),
    "jianmu.runtime.stream": ("EventStream",),
}
__getattr__, __dir__ = lazy_names(__name__, _HOLDERS, __all__)
