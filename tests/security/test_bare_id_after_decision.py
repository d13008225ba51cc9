"""A request named by its call id alone (``call_0`` for ``left/call_0``) once another request of
that id was decided: a person who approved ``call_0`` while it named left's payment, and runs
the same command again once right's agent asks under that id too, must not approve right's
payment, which nobody looked at. The id names every request that had it, pending or decided,
and with several it decides nothing."""

from __future__ import annotations

import pytest

from jianmu.errors import InteractionError
from jianmu.runtime.context import ApprovalRequest, Interaction
from jianmu.runtime.scopes import ScopedInteraction


def ask(run: Interaction, namespace: str) -> None:
    scoped = ScopedInteraction(run, f"{namespace}/", qualifies=True)
    scoped.suspend(ApprovalRequest(id="call_0", summary=f"pay ({namespace})"))


def test_a_repeated_call_id_does_not_approve_the_next_namespaces_request() -> None:
    run = Interaction()
    ask(run, "left")
    assert run.approve("call_0") == "left/call_0"  # the only request of that id: left's
    ask(run, "right")  # right's agent asks later, under the same call id
    for decide in (run.approve, run.reject, run.resolve):
        with pytest.raises(InteractionError, match="left/call_0, right/call_0"):
            decide("call_0")
    assert run.decision("right/call_0") is None  # nothing was decided for it
    assert [r.id for r in run.pending] == ["right/call_0"]


def test_the_same_holds_after_a_restore() -> None:
    run = Interaction()
    ask(run, "left")
    run.approve("call_0")
    ask(run, "right")
    restored = Interaction()
    restored.restore(run.snapshot())
    with pytest.raises(InteractionError, match="left/call_0, right/call_0"):
        restored.approve("call_0")
    assert restored.decision("right/call_0") is None
