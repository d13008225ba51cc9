"""A seeded fuzz of agent teams under suspend, restore and cancellation.

Each seed draws a team (`tests/support/team_scenario.py`: a lead agent whose model asks for
batches of 2-4 calls, plain tools asking first, slow, failing, sync or async, parallel-safe or
not, ``ask_user``, and sub-agents as tools, `agent_tool` or `Agent.as_tool`, a sub-agent
sometimes called twice at once, up to three levels) and walks it by a seeded plan
(`tests/support/team_driver.py`): decide every request or some, `send()` while requests wait,
restore the run here or in another process, two owners resuming at once, a `cancel()` when a
slow tool starts, the run's timeout while slow tools wait, a new message after a stopped run.
What ran is counted by the tools and models in a ledger file, outside the engine:

- after every return of `run()` nothing of the run goes on (no line written, no task left;
  a sync call a stop left in its thread excepted, as README says);
- two owners resuming at once never both run; `send()` while requests wait is refused;
- every approved call runs exactly once (a call stopped in flight at most once), no rejected
  call runs, an edited one runs with the edit, each answer reaches the agent that asked;
- the root's ``usage`` counts every model call and every call that ran, of every agent;
- in the lead's conversation (and each agent's beside it) every call's result comes right
  after it, a message sent never between them;
- the final answer is the one a plain walk (decide all, never restore) ends with.

``JIANMU_TEAM_SEEDS=300`` runs more seeds (``JIANMU_TEAM_FIRST`` moves the first one);
``JIANMU_TEAM_PROCESSES=1`` makes every other owner another process (a second or so each).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from tests.support.team_driver import compare

pytestmark = pytest.mark.timeout(300)

FIRST = int(os.environ.get("JIANMU_TEAM_FIRST", "0"))
SEEDS = int(os.environ.get("JIANMU_TEAM_SEEDS", "24"))
PROCESSES = os.environ.get("JIANMU_TEAM_PROCESSES") == "1"
OTHER_PROCESS_SEEDS = [1, 3]  # another process goes on with the run; two race (3)


@pytest.mark.parametrize("seed", range(FIRST, FIRST + SEEDS))
def test_a_random_team_keeps_every_promise(seed: int, tmp_path: Path) -> None:
    violations = asyncio.run(compare(seed, tmp_path, 1, processes=PROCESSES))
    assert not violations, f"seed {seed}:\n" + "\n".join(f"- {v}" for v in violations)


@pytest.mark.parametrize("seed", OTHER_PROCESS_SEEDS)
def test_a_random_team_resumed_by_other_processes_keeps_every_promise(
    seed: int, tmp_path: Path,
) -> None:
    violations = asyncio.run(compare(seed, tmp_path, 0, processes=True))
    assert not violations, f"seed {seed}:\n" + "\n".join(f"- {v}" for v in violations)


@pytest.mark.parametrize("seed", [1317])
def test_a_team_that_found_a_bug_keeps_every_promise(seed: int, tmp_path: Path) -> None:
    """Seed 1317: a message sent once every request was decided stood between a call and its
    result, and approved calls never ran (`tests/runtime/test_send_after_decisions.py`)."""
    violations = asyncio.run(compare(seed, tmp_path, 1, processes=False))
    assert not violations, f"seed {seed}:\n" + "\n".join(f"- {v}" for v in violations)
