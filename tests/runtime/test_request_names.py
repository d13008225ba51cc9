"""Which request a person's id names (`Interaction.resolve`): an exact id always its own; a call
id alone the one pending request that had it before ids were qualified by their namespace;
never a sub-agent's request by its sub-call id alone, and never a guess among several."""

from __future__ import annotations

import pytest

from jianmu.errors import InteractionError
from jianmu.runtime.context import ApprovalRequest, Interaction
from jianmu.runtime.scopes import ScopedInteraction


def asked(interaction: Interaction, call_id: str = "call_0") -> None:
    interaction.suspend(ApprovalRequest(id=call_id, summary=f"pay ({call_id})"))


def test_an_exact_id_is_never_taken_for_another_request() -> None:
    run = Interaction()
    asked(run)  # the run's own namespace: the bare id
    asked(ScopedInteraction(run, "left/", qualifies=True))
    assert run.approve("call_0") == "call_0"
    # a second "call_0" (a double click) is the decided one, not left/call_0
    with pytest.raises(InteractionError, match="already approved"):
        run.approve("call_0")
    assert run.decision("left/call_0") is None
    assert run.reject("left/call_0") == "left/call_0"


def test_a_call_id_alone_names_one_namespaces_request_and_refuses_to_guess() -> None:
    run = Interaction()
    left = ScopedInteraction(run, "left/", qualifies=True)
    asked(left)
    asked(ScopedInteraction(run, "right/", qualifies=True))
    with pytest.raises(InteractionError, match="left/call_0, right/call_0"):
        run.approve("call_0")
    run.reject("right/call_0")
    # right/call_0 is decided, but "call_0" still names it too: a repeated "call_0" meant for
    # it must not approve left/call_0
    with pytest.raises(InteractionError, match="left/call_0, right/call_0"):
        run.approve("call_0")
    assert left.decision("call_0") is None
    assert run.approve("left/call_0") == "left/call_0"
    assert left.decision("call_0") is not None and left.decision("call_0").approved


def test_a_sub_agents_request_is_named_by_its_path_under_the_namespace() -> None:
    run = Interaction()
    lead = ScopedInteraction(run, "left/", qualifies=True)
    asked(ScopedInteraction(lead, "helper/call_1/"), "deploy_1")
    [request] = run.pending
    assert request.id == "left/helper/call_1/deploy_1"
    for wrong in ("deploy_1", "call_1", "helper/call_1"):
        with pytest.raises(InteractionError, match="no approval request"):
            run.approve(wrong)
    assert run.approve("helper/call_1/deploy_1") == "left/helper/call_1/deploy_1"


def test_a_call_id_alone_still_names_its_request_once_decided() -> None:
    """A second decision by the call id alone is told of the first, as one by the whole id is
    (it was told no such request was asked); once another namespace asks under that id, the id
    alone names neither."""
    run = Interaction()
    asked(ScopedInteraction(run, "left/", qualifies=True))
    asked(ScopedInteraction(run, "right/", qualifies=True), "call_1")
    assert run.approve("call_0") == "left/call_0"
    for given in ("call_0", "left/call_0"):
        with pytest.raises(InteractionError, match="'left/call_0' was already approved"):
            run.reject(given)
    assert run.resolve("call_0") == "left/call_0"
    asked(ScopedInteraction(run, "right/", qualifies=True))  # right asks under call_0 too
    for decide in (run.approve, run.reject):  # a repeated "call_0" meant for left's: refused
        with pytest.raises(InteractionError, match="names 2 requests"):
            decide("call_0")
    assert "right/call_0" in {r.id for r in run.pending}  # still waiting: nothing guessed
    run.reject("right/call_0")
    with pytest.raises(InteractionError, match="names 2 requests"):
        run.approve("call_0")  # both decided: which one is meant is not guessed
