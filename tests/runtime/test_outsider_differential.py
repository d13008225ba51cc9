"""py_trees' semantics with async leaves, checked by a harness written apart from the others
(`tests/runtime/_outsider_diff.py`): leaves that run N ticks, stock py_trees leaves, blackboard
writes in ``initialise``/``terminate``, every decorator around composites, up to six deep."""

from __future__ import annotations

import os

import pytest

from tests.runtime._outsider_diff import first_difference

SEEDS = range(int(os.environ.get("JIANMU_OUTSIDER_SEEDS", "250")))


def test_random_trees_run_as_pytrees_loop_runs_them() -> None:
    """Every lifecycle call in order, every node's status and feedback, the tip, the ticks and
    the blackboard, as py_trees' ``tick_once`` loop leaves them."""
    problems = [problem for seed in SEEDS if (problem := first_difference(seed)) is not None]
    assert not problems, f"{len(problems)} trees differ, first: {problems[:2]}"


def test_the_harness_sees_a_leaf_ticked_once_too_often(monkeypatch: pytest.MonkeyPatch) -> None:
    """An async leaf that needs one poll more than its sync twin is caught."""
    from tests.runtime import _outsider_diff

    original = _outsider_diff.AsyncAct.__init__

    def slower(self, name, n, end, key, raises):  # type: ignore[no-untyped-def]
        original(self, name, n + 1, end, key, raises)

    monkeypatch.setattr(_outsider_diff.AsyncAct, "__init__", slower)
    assert any(first_difference(seed) is not None for seed in range(20))
