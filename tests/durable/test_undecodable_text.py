"""Text that UTF-8 cannot encode (a lone surrogate: what Python makes of a byte of another
encoding in a command line, ``jianmu runs reject RUN ID --reason $'no\\xff'``) in a durable
decision. The reason was written to the decisions ledger as it was, which the database refused:
an internal error, nothing recorded. A run or request id of such text (no run has one) was the
same internal error where every other unknown id says there is no such run.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from jianmu.errors import RunNotFoundError
from tests.support.durable import Workers, wait_for

pytestmark = pytest.mark.timeout(400)

SAID = "no\udcff"  # argv's b"no\xff", as Python decodes it


def _suspended(client: Any, run_id: str) -> Any:
    info = client.run_info(run_id)
    return info if info.status == "suspended" else None


def test_a_reason_utf8_cannot_encode_is_recorded_and_reaches_the_model(
    workers: Workers, client: Any, tmp_path: Path
) -> None:
    out = tmp_path / "deployed.txt"
    workers.start("w1")
    run_id = asyncio.run(client.start("confirm", {"path": str(out)}))
    wait_for(lambda: _suspended(client, run_id), what="the run to ask for approval")
    for run, call in (("ab\udcff", "deploy_1"), (run_id, "deploy\udcff")):
        with pytest.raises(RunNotFoundError):
            asyncio.run(client.reject(run, call, SAID))
    with pytest.raises(RunNotFoundError):
        client.run_info("ab\udcff")
    assert client.decision(run_id, "deploy\udcff") is None

    asyncio.run(client.reject(run_id, "deploy_1", SAID))
    decision = client.decision(run_id, "deploy_1")
    assert decision is not None and not decision.approved
    assert decision.message == "no\\udcff"  # the ledger's record, shown where text is shown
    result = asyncio.run(client.result(run_id, timeout=120))
    assert result.ok, result.error
    assert not out.exists()  # rejected: nothing ran
    state = asyncio.run(client.state(run_id))
    assert state is not None and SAID in state["root"]["final_answer"]  # the person's words
