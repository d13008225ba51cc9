"""py_trees' semantics with async leaves, checked by a harness written apart from the others
(`tests/runtime/_outsider_diff.py`): leaves that run N ticks, stock py_trees leaves, blackboard
writes in ``initialise``/``terminate``, every decorator around composites, up to six deep."""

from __future__ import annotations

import os
from typing import Any

import py_trees
import pytest

from jianmu.runtime.runner import ReactiveRunner, RunStatus
from tests.runtime._outsider_diff import first_difference

SEEDS = range(int(os.environ.get("JIANMU_OUTSIDER_SEEDS", "200")))


def test_random_trees_run_as_pytrees_loop_runs_them() -> None:
    """Every lifecycle call in order, every node's status and feedback, the tip, the ticks and
    the blackboard, as py_trees' ``tick_once`` loop leaves them."""
    problems = [problem for seed in SEEDS if (problem := first_difference(seed)) is not None]
    assert not problems, f"{len(problems)} trees differ, first: {problems[:2]}"


def test_the_harness_sees_a_leaf_ticked_once_too_often(monkeypatch: pytest.MonkeyPatch) -> None:
    """An async leaf that needs one poll more than its sync twin is caught."""
    from tests.runtime import _outsider_diff

    original = _outsider_diff.AsyncAct.__init__

    def slower(self, name, n, *rest):  # type: ignore[no-untyped-def]
        original(self, name, n + 1, *rest)

    monkeypatch.setattr(_outsider_diff.AsyncAct, "__init__", slower)
    assert any(first_difference(seed) is not None for seed in range(20))


def test_trees_run_again_after_their_end_by_a_new_runner_run_as_pytrees_loop_runs_them() -> None:
    """A second and third run of the same tree (each by a new runner) goes on from where the
    last left it, as py_trees' loop ticking the ended tree again does: nothing set up again."""
    problems = [problem for seed in range(50)
                if (problem := first_difference(seed, runs=3)) is not None]
    assert not problems, f"{len(problems)} trees differ, first: {problems[:2]}"


class _SetsUp(py_trees.behaviours.Success):
    """Counts its ``setup`` calls (py_trees calls it once, before the first tick)."""

    def __init__(self) -> None:
        super().__init__("sets_up")
        self.setups = 0

    def setup(self, **kwargs: Any) -> None:
        self.setups += 1


@pytest.mark.anyio
async def test_a_tree_is_set_up_once_whichever_runners_run_it() -> None:
    """A new runner of a tree another ran does not set it up again (a device opened twice, a
    Count's tallies zeroed), nor does a runner restored on it."""
    leaf = _SetsUp()
    count = py_trees.decorators.Count("count", leaf)
    for _ in range(3):
        result = await ReactiveRunner(count).run()
        assert result.status is RunStatus.SUCCESS
    assert (leaf.setups, count.success_count, count.total_tick_count) == (1, 3, 3)
