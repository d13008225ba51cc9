"""`AskUser`: a tree node that asks a person a question and writes the answer to the state.

The node's counterpart of the ``ask_user`` tool, on the same channel: it suspends the run
with a request of kind ``question`` (`ApprovalRequest.question`), and `ReactiveRunner.answer`
(the CLI's ``--answer``, the studio, a durable run's ``answer``) resumes it, also after a
restore in another process. Run again (in a loop), it asks anew under a fresh id; so does an
answer the state refuses for ``output_key`` (text where a number is due), the question then
saying why.
"""

from __future__ import annotations

from py_trees.common import Status

from jianmu.errors import StateValidationError
from jianmu.runtime.async_node import AsyncNode
from jianmu.runtime.context import QUESTION, ApprovalRequest, fresh_request_id

__all__ = ("AskUser",)


class AskUser(AsyncNode):
    """Ask a person ``question`` (or the text under ``question_key``); write the answer to
    ``output_key``.

    RUNNING (the run suspends) until answered, then SUCCESS; FAILURE when the run has nobody
    to ask (not interactive) or no question to ask.

    Args:
        name: the node's name.
        question: the question's text.
        question_key: a state key holding the question (read when the node asks), instead.
        output_key: the state key the answer is written to.
    """

    eager_start = False  # it waits on a model, a thread or a person (`AsyncNode.eager_start`)

    node_kind = "ask"

    def __init__(
        self,
        name: str = "AskUser",
        *,
        question: str | None = None,
        question_key: str | None = None,
        output_key: str = "answer",
    ) -> None:
        super().__init__(name)
        if (question is None) == (question_key is None):
            raise ValueError("give AskUser either question= or question_key=, not both")
        self.question = question
        self.question_key = question_key
        self.output_key = output_key

    async def update_async(self) -> Status:
        """SUCCESS once answered (the answer written); RUNNING while the question waits."""
        interaction = self.ctx.interaction
        if interaction is None:
            self.feedback_message = "nobody can answer questions in this run (not interactive)"
            return Status.FAILURE
        request_id = fresh_request_id(f"ask:{self.path}", self.ctx)
        decision = interaction.decision(request_id)
        why = ""
        if decision is not None and decision.answer is not None:
            interaction.consume(request_id)  # a later run of this node asks anew
            try:
                self.state.write_port(self.output_key, decision.answer)
                return Status.SUCCESS
            except StateValidationError as exc:  # the state cannot hold it: ask again, say why
                # quoted clipped: a pasted page must not swell the question a person reads
                said = decision.answer if len(decision.answer) <= 200 \
                    else decision.answer[:200] + "…"
                why = f"\n\n(The answer {said!r} could not be used: {exc})"
                request_id = fresh_request_id(f"ask:{self.path}", self.ctx)
        asked = interaction.request(request_id)
        if asked is not None:  # asked before (in the run this one was restored from): as it was
            interaction.suspend(asked)
            self.feedback_message = f"waiting for the answer to {asked.summary!r} ({request_id})"
            return Status.RUNNING
        text = self.question if self.question_key is None else self.state.get(self.question_key)
        if not isinstance(text, str) or not text.strip():
            self.feedback_message = f"no question to ask under {self.question_key!r}"
            return Status.FAILURE
        text += why
        summary = text if len(text) <= 200 else text[:200] + "…"
        interaction.suspend(ApprovalRequest(
            id=request_id, kind=QUESTION, summary=summary, payload={"question": text},
            node=self.path,
        ))
        self.feedback_message = f"waiting for the answer to {summary!r} ({request_id})"
        return Status.RUNNING
