"""py_trees' semantics with async leaves in virtual time, by a harness written apart from the
others (`tests/runtime/_probe_diff.py`): decorators over decorators, Parallels in memory
Sequences under Retry or Repeat, Timeouts around Parallels, guards, leaves that end at once or
after work that takes no time, halfway state writes, raising leaves, cancelled, timed-out and
repeated runs."""

from __future__ import annotations

import asyncio
import os

import pytest

from jianmu.runtime import eager
from tests.runtime._probe_diff import Options, Verdict, check

SEEDS = int(os.environ.get("JIANMU_PROBE_SEEDS", "400"))


def _problems(seeds: range, options: Options) -> tuple[list[str], list[Verdict]]:
    verdicts = [check(seed, options) for seed in seeds]
    return [p for verdict in verdicts for p in verdict.problems], verdicts


@pytest.mark.parametrize("options", [Options(), Options(gather=True), Options(bombs=True)],
                         ids=["sleep0", "gather", "raising"])
def test_random_trees_run_as_pytrees_loop_runs_them(options: Options) -> None:
    """The same starts, ends and cancels in the same order, the same run statuses; a stopped
    leaf's coroutine saw its cancel in the tick, no task or cleanup is left after a run, the
    runner never spins. Runs that went on later than py_trees' loop (a round of instant
    leaves rested a poll interval) are left out, and must stay few."""
    seeds = range(SEEDS if options == Options() else SEEDS // 3)
    problems, verdicts = _problems(seeds, options)
    assert not problems, f"{len(problems)} problems, first: {problems[:2]}"
    compared = [v for v in verdicts if not (v.skipped or v.shifted)]
    assert len(compared) > 0.75 * len(verdicts)


def test_the_harness_sees_work_that_takes_no_time_end_after_a_tick_taken_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A runner that lets one turn of the loop pass before a tick taken at once, whatever is
    ready (as it did), ticks before a gather of instant steps ends: caught."""

    async def one_turn(turn: bool) -> None:
        if turn:
            await asyncio.sleep(0)

    monkeypatch.setattr(eager, "ready_first", one_turn)
    problems, _ = _problems(range(100), Options(gather=True))
    assert problems
