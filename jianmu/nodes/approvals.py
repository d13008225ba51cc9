"""The approvals a call's node asks a person for and uses: a fresh id where the approval under
the last one was used, the call as a person edited it, and the approval marked used once the
call it allowed has run.

The ``ctx`` each takes is the run as the node sees it: for a model's calls, the run with the
calls keyed under the node's namespace (`ToolExecutor.own_run`, `jianmu.runtime.scopes`), so
two namespaces' calls of one id never share a request, a decision or an approval used.
"""

from __future__ import annotations

import dataclasses

from jianmu.guard.checkers import call_fingerprint
from jianmu.runtime.context import RunContext
from jianmu.tools.calls import ToolCall

__all__ = ("consume_approval", "edited_call", "fresh_request_id")


def fresh_request_id(base: str, ctx: RunContext) -> str:
    """``base``, or ``base.N`` when the approvals under the earlier ids were already used."""
    interaction = ctx.interaction
    candidate, n = base, 0
    while interaction is not None and interaction.consumed(candidate):
        n += 1
        candidate = f"{base}.{n}"
    return candidate


def consume_approval(ctx: RunContext, request_id: str) -> None:
    """Mark a person's approval as used once the call it allowed has run."""
    interaction = ctx.interaction
    if interaction is not None and interaction.decision(request_id) is not None:
        interaction.consume(request_id)


def edited_call(call: ToolCall, ctx: RunContext) -> ToolCall:
    """``call`` with the arguments a person gave when approving it, if they edited it.

    Only an edit of this very call counts: the request must have been asked about this tool
    and these arguments (its fingerprint), so an edit never carries over to another call that
    reuses the id. The guard then checks the edited call like any other.
    """
    interaction = ctx.interaction
    decision = interaction.decision(call.id) if interaction is not None else None
    if decision is None or decision.arguments is None or not decision.approved:
        return call
    request = interaction.request(call.id) if interaction is not None else None
    if request is None or request.payload.get("fingerprint") != call_fingerprint(call):
        return call
    return dataclasses.replace(call, arguments=dict(decision.arguments))

