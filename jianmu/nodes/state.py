"""`AgentState`: the schema the agent nodes read and write; subclass it to add fields."""

from __future__ import annotations

import json
import operator
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from jianmu.guard.checkers import GuardLedger
from jianmu.llm.messages import Message, Usage
from jianmu.nodes._under_way import merge_under_way
from jianmu.nodes.history import HistorySummary
from jianmu.state import StateView, merge_counts
from jianmu.tools.calls import ToolCall

if TYPE_CHECKING:
    from jianmu.runtime.async_node import RuntimeNode

__all__ = ("AgentState", "inputs_message", "ledger_view", "tokens_spent", "usage_view")


def _calls(value: Any) -> Any:
    return ToolCall.from_list(value) if isinstance(value, (list, tuple, dict)) else value


def _replace_observations(old: Any, new: Any) -> dict[str, Any]:
    """Merge observations by call id; an empty dict clears them."""
    if not new:
        return {}
    return {**(old or {}), **new}


class AgentState(BaseModel):
    """What an agent loop keeps: the conversation, pending tool calls, the answer, the costs.

    ``messages`` appends (dicts in the OpenAI shape validate into `Message`); ``tool_effects``
    and ``usage`` add up; the rest are replaced on write. Extra keys are allowed, so a host can
    put its own inputs in the same state.
    """

    model_config = ConfigDict(defer_build=True, extra="allow", arbitrary_types_allowed=True)

    messages: Annotated[list[Message], operator.add] = Field(default_factory=list)
    """The conversation, oldest first."""
    actions: Annotated[list[ToolCall], BeforeValidator(_calls)] = Field(default_factory=list)
    """Tool calls the model asked for and the executor has not finished."""
    final_answer: str | None = None
    """The model's answer once it stops calling tools (with an ``output_type``: the raw text or
    JSON of the answer that validated)."""
    final_output: Any = None
    """The validated answer, an object of the agent's ``output_type``; checkpointed as its JSON
    and an object of the type again once the agent's node is bound after a restore."""
    failed_outputs: int = 0
    """Answers in a row that did not fit the ``output_type`` (each one a retry)."""
    active_agent: str | None = None
    """In a team of agents joined by hand-offs, the agent that answers now (and the next user
    turn); ``None`` for the first."""
    done: bool = False
    """Whether the agent loop has finished."""
    rounds: int = 0
    """Model turns taken."""
    agent_rounds: int = 0
    """In a team of agents joined by hand-offs, the model turns the agent answering now has
    taken since the conversation was handed to it (its own ``max_iterations`` holds)."""
    tool_effects: Annotated[dict[str, int], merge_counts] = Field(default_factory=dict)
    """Successful tool calls counted per effect tag (``file_write``, ``http``)."""
    usage: Annotated[Usage, operator.add] = Field(default_factory=Usage)
    """Tokens spent so far; at the root, the whole run's (skills' namespaces included), which
    the budget reads."""
    completed_call_ids: Annotated[list[str], operator.add] = Field(default_factory=list)
    """Ids of tool calls that finished, so a restored run never runs one twice."""
    suspended_call_ids: Annotated[list[str], operator.add] = Field(default_factory=list)
    """Ids of tool calls that waited for a person (`ToolSuspended`): run again, each goes on
    where it stopped, and its ``tool.call.started`` says ``resumed``, also after a restore."""
    calls_under_way: Annotated[dict[str, str | None], merge_under_way] = Field(
        default_factory=dict
    )
    """In a checkpointed run, the calls that may not run twice and have started but are not
    recorded yet (id: tool): one still here after a restore was under way when its process
    stopped, and is recorded as maybe done instead of run again (`jianmu.nodes._under_way`)."""
    observations: Annotated[dict[str, Message], _replace_observations] = Field(
        default_factory=dict
    )
    """Tool messages of the current batch by call id, until the batch is appended in order."""
    guard_ledger: GuardLedger = Field(default_factory=GuardLedger)
    """The guard's counts (calls made, recent call times), kept here so a restore counts right."""
    history_summaries: dict[str, HistorySummary] = Field(default_factory=dict)
    """Summaries that `summarize_history` made, by key, each with the messages it covers."""
    agent_run: dict[str, Any] | None = None
    """In a sub-agent's namespace (`agent_tool`): its run's node statuses and outcome, so a
    parent restored while the sub-agent waits for a person resumes it where it stopped."""
    skill_result: Any = None
    """Structured result of a BT skill."""
    loaded_skills: list[str] = Field(default_factory=list)
    """Skills the model has loaded with ``load_skill`` in a SkillNode's namespace (in order), so
    a run restored in a new process has them active again."""


def inputs_message(inputs: Mapping[str, Any]) -> str:
    """A run's inputs as the user's first message: the ``task`` or ``message`` input when
    given, else one ``name: value`` line per input."""
    task = inputs.get("task", inputs.get("message"))
    if isinstance(task, str):
        return task
    return "\n".join(
        f"{k}: {v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)}"
        for k, v in inputs.items()
    )


def ledger_view(node: RuntimeNode) -> StateView:
    """Where the guard's counts live: the root state, so a run's limits hold across skills
    (each in its own namespace); the node's own view if the root schema has no place."""
    manager = node.state_manager
    return manager.root if manager.accepts("guard_ledger") else node.state


def usage_view(node: RuntimeNode) -> StateView:
    """Where the run's token usage adds up: the root state, so a budget holds across skills
    (each in its own namespace); the node's own view if the root schema has no place."""
    manager = node.state_manager
    return manager.root if manager.accepts("usage") else node.state


def tokens_spent(node: RuntimeNode) -> int:
    """Tokens the whole run has spent so far (the run-wide ``usage``)."""
    return getattr(usage_view(node).get("usage"), "total_tokens", 0) or 0
