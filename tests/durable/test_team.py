"""A durable run of two agents in two namespaces whose models give their calls one id: each
call is asked under its namespace (``left/call_0``), decided from another process by that id
(or by the call id alone while it names one request), and recorded as a step of its
own (``left/tool:call_0``), so one is never replayed as the other's."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.support.durable import Workers, wait_for

pytestmark = pytest.mark.timeout(400)


def test_two_namespaces_calls_of_one_id_are_asked_and_decided_apart(
    workers: Workers, client: Any, tmp_path: Path
) -> None:
    out = tmp_path / "deployed.txt"
    workers.start("w1")
    run_id = asyncio.run(client.start("team", {"path": str(out)}))

    decided: list[str] = []

    def waiting() -> Any:
        info = client.run_info(run_id)
        fresh = [r for r in info.pending if r.id not in decided]
        return info if info.status == "suspended" and fresh else None

    while len(decided) < 2:  # the two may ask at once, or one after the other is decided
        info = wait_for(waiting, what="a call to ask for approval")
        for request in info.pending:
            if request.id in decided:
                continue
            assert request.id in ("left/call_0", "right/call_0"), request.id
            if request.id == "left/call_0":
                # alone, the call id names it; beside right's, pending or decided, only its
                # own id does
                alone = len(info.pending) == 1 and "right/call_0" not in decided
                given = "call_0" if alone else request.id
                asyncio.run(client.approve(run_id, given, "go"))
            else:
                asyncio.run(client.reject(run_id, request.id, "not us"))
            decided.append(request.id)

    result = asyncio.run(client.result(run_id, timeout=120))
    assert result.ok, result.error
    assert out.read_text().splitlines() == ["deployed eu"]  # the left call, once
    names = [step["name"] for step in client.steps(run_id)]
    # the left call's step is its namespace's; the rejected right call recorded none
    assert "jianmu:left/tool:call_0" in names, names
    assert not [n for n in names if n.endswith("tool:call_0") and "left/" not in n], names
    state = asyncio.run(client.state(run_id))
    assert state is not None
    assert state["namespaces"]["left"]["final_answer"] == "left: deployed"
    assert "not us" in state["namespaces"]["right"]["final_answer"]
    from jianmu.errors import InteractionError

    # both decided under one call id: the id alone names neither (never a guess)
    with pytest.raises(InteractionError, match="left/call_0, right/call_0"):
        asyncio.run(client.approve(run_id, "call_0"))
    with pytest.raises(InteractionError, match="left/call_0, right/call_0"):
        client.decision(run_id, "call_0")
    left, right = client.decision(run_id, "left/call_0"), client.decision(run_id, "right/call_0")
    assert left.approved and not right.approved


def test_a_call_id_alone_names_its_request_again_once_decided(
    workers: Workers, client: Any, tmp_path: Path
) -> None:
    """Deciding a namespaced request a second time by its call id alone raised
    RunNotFoundError ("waits for no approval 'call_0'") once it was no longer pending; it is
    refused as a second decision, as one by the whole id (or of a lone agent's request) is."""
    from jianmu.errors import AlreadyDecidedError, RunNotFoundError

    workers.start("w1")
    run_id = asyncio.run(client.start("team", {"path": str(tmp_path / "d.txt"),
                                               "right_id": "call_1"}))
    decided: list[str] = []

    def waiting() -> Any:
        info = client.run_info(run_id)
        fresh = [r for r in info.pending if r.id not in decided]
        return fresh if info.status == "suspended" and fresh else None

    while len(decided) < 2:  # each named by its call id alone: the one pending that had it
        for request in wait_for(waiting, what="a call to ask for approval"):
            assert request.id in ("left/call_0", "right/call_1"), request.id
            if request.id == "left/call_0":
                asyncio.run(client.approve(run_id, "call_0", "go"))
            else:
                asyncio.run(client.reject(run_id, "call_1", "not us"))
            decided.append(request.id)
    assert asyncio.run(client.result(run_id, timeout=120)).ok
    assert not asyncio.run(client.pending(run_id))  # neither waits any more
    for given in ("call_0", "left/call_0"):
        with pytest.raises(AlreadyDecidedError, match=r"'left/call_0' .* already approved") as e:
            asyncio.run(client.reject(run_id, given, "again"))
        assert e.value.call_id == "left/call_0" and e.value.approved
    with pytest.raises(AlreadyDecidedError, match=r"'right/call_1' .* already rejected"):
        asyncio.run(client.approve(run_id, "call_1"))
    with pytest.raises(RunNotFoundError, match="waits for no approval 'call_2'"):
        asyncio.run(client.approve(run_id, "call_2"))
    # how each was decided, asked as it was decided: by the call id alone, or the whole id
    assert client.decision(run_id, "call_0") == client.decision(run_id, "left/call_0")
    assert client.decision(run_id, "call_0").approved
    assert client.decision(run_id, "call_0").message == "go"
    assert client.decision(run_id, "call_1") == client.decision(run_id, "right/call_1")
    assert not client.decision(run_id, "call_1").approved
    assert client.decision(run_id, "call_2") is None
