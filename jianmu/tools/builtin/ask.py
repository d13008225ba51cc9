"""`ask_user`: the model asks the person running the agent a question and reads the answer.

The call suspends the run with a request of kind ``question`` (`ApprovalRequest.question`
holds the text) on the run's interaction channel, the one that approvals use: the run
returns SUSPENDED, is checkpointed, and `ReactiveRunner.answer` (``jianmu resume RUN --answer
ID TEXT``, the studio, a durable run's ``answer``) resumes it. The call then runs again and
returns the answer, which is the observation the model reads.

The request id is ``ask:<call id>``, distinct from the call's own id, which an approval of
the call (a ``confirm`` policy on ``ask_user``) uses.
"""

from __future__ import annotations

from jianmu.errors import ToolExecutionError, ToolSuspended
from jianmu.runtime.context import QUESTION, ApprovalRequest, RunContext
from jianmu.tools.base import Tool

__all__ = ("MAX_QUESTION_LENGTH", "AskUserTool", "ask_user", "question_id")

MAX_QUESTION_LENGTH = 4000
"""Longest question accepted, in characters (a person reads it)."""


def question_id(call_id: str) -> str:
    """The id of the question request that the call ``call_id`` asks."""
    return f"ask:{call_id}"


class AskUserTool(Tool):
    """The ``ask_user`` tool: the run waits for a person's answer to the model's question."""

    name = "ask_user"
    description = (
        "Ask the user a question and wait for their answer. Use it when you need information "
        "only the user has (a preference, a missing detail, a choice between options), not "
        "for what you can find out yourself; ask one clear, self-contained question at a time. "
        "Args: question, the text the user reads. Returns the user's answer as text."
    )
    category = "communicate"
    permission = "auto"
    parallel_safe = False
    idempotent = True
    max_retries = 0
    timeout_seconds = None  # it returns at once: the run suspends, it never waits in the call
    records_own_steps = True
    """In a durable run the answer lives in the run's decisions: a step would record the
    suspension, not the answer."""
    person_answers = True
    """Its result is what a person wrote: the agent's input guardrails read it too, as they
    read the user's messages (`ToolExecutor`), and a trip withholds it from the model."""
    input_schema = {
        "type": "object",
        "properties": {
            "question": {
                "type": "string", "minLength": 1, "maxLength": MAX_QUESTION_LENGTH,
                "description": "The question for the user, complete enough to answer alone.",
            },
        },
        "required": ["question"],
        "additionalProperties": False,
    }
    output_schema = {
        "type": "string", "description": "The user's answer.",
    }
    injected_params = ("ctx", "call_id", "node_path")

    async def run(
        self, question: str, *, ctx: RunContext, call_id: str = "", node_path: str = ""
    ) -> str:
        """The answer to ``question``, once a person gave it.

        Raises:
            ToolSuspended: nobody has answered yet; the call runs again after the answer.
            ToolExecutionError: the run has no person to ask (not interactive).
        """
        interaction = ctx.interaction
        if interaction is None:
            raise ToolExecutionError(
                "nobody can answer questions in this run (it is not interactive); go on with "
                "what you know, or say what you would need"
            )
        request_id = question_id(call_id or "call")
        decision = interaction.decision(request_id)
        if decision is not None and decision.answer is not None:
            interaction.consume(request_id)
            return decision.answer
        summary = question if len(question) <= 200 else question[:200] + "…"
        interaction.suspend(ApprovalRequest(
            id=request_id, kind=QUESTION, summary=summary,
            payload={"question": question, "tool": self.name, "call_id": call_id},
            node=node_path or None,
        ))
        raise ToolSuspended(f"waiting for the user's answer to {summary!r} ({request_id})")


ask_user = AskUserTool()
"""The built-in ``ask_user`` tool (``AskUserTool()`` makes one of your own)."""
