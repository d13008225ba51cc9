"""A seeded fuzz of whole agent runs: random scenarios, random drivers, README's invariants.

Each seed draws a scenario (`tests/support/scenario.py`: a lead agent with read and write
tools, sync and async, asking first, failing, slow; sometimes a helper agent called as a tool,
in parallel, and an expert it hands the conversation to, typed answers, malformed arguments,
call ids reused across turns) and drives it (`tests/support/scenario_driver.py`: run, stream
read to its end or left, cancel, the run's timeout, decisions in a random order, send, restore
in this process or a fresh one), then checks what the tools and the model wrote down:

- no call that asks first runs without an approval, a rejected one never runs, an edit runs
  with the person's arguments; no call runs more than once unless a stop halted it (a read; a
  write that began never runs again), and in a run that succeeds each call runs exactly once;
- nothing starts after `run()` returned, nor ends then unless a stop left it in a thread;
- every call in a conversation gets one result right after it, and the model is never sent
  one without; ``usage`` counts the model calls and the executions;
- each ``tool.call.started`` has one end event, a stream ends with one ``run.finished``, a
  restored run has the messages it had; no warning, loop error or task is left behind.

``JIANMU_FUZZ_SEEDS=500`` runs more seeds (``JIANMU_FUZZ_FIRST`` moves the first one); a
failure names its seed, the steps taken and every broken invariant.
"""

from __future__ import annotations

import asyncio
import gc
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.scenario_driver import run_scenario

pytestmark = pytest.mark.timeout(300)

FIRST = int(os.environ.get("JIANMU_FUZZ_FIRST", "0"))
SEEDS = int(os.environ.get("JIANMU_FUZZ_SEEDS", "40"))
FRESH_PROCESS_SEEDS = [2, 6]  # restored in a fresh interpreter: about a second each


@pytest.fixture(scope="module", autouse=True)
def _heap_before_frozen() -> Iterator[None]:
    """What this worker's earlier tests left is collected, and what lives on frozen, for this
    module: each scenario's collections (its first clears what the scenario before it left)
    then look at what this module made, not over the worker's whole heap each time (they were
    some 40% of the fuzz's CPU)."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


def _check(seed: int, folder: Path, *, subprocesses: bool) -> None:
    trace = asyncio.run(run_scenario(seed, folder, subprocesses=subprocesses))
    assert not trace.problems, (
        f"seed {seed} (final: {trace.final}), steps: {trace.steps}\n"
        + "\n".join(f"- {problem}" for problem in trace.problems)
    )


@pytest.mark.parametrize("seed", range(FIRST, FIRST + SEEDS))
def test_a_random_scenario_keeps_every_invariant(seed: int, tmp_path: Path) -> None:
    _check(seed, tmp_path, subprocesses=False)


@pytest.mark.parametrize("seed", FRESH_PROCESS_SEEDS)
def test_a_random_scenario_restored_in_a_fresh_process_keeps_every_invariant(
    seed: int, tmp_path: Path,
) -> None:
    _check(seed, tmp_path, subprocesses=True)
