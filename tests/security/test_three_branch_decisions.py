"""A run suspended in three parallel branches (two sub-agents and a plain step), decided over
several processes in different orders, one call rejected and one edited: each approved call
runs exactly once, with the arguments it was approved with, the rejected one never, and the
run finishes; a process restoring the finished run runs nothing and returns its end."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.forked import ForkServer
from tests.support.payments import REPO

pytestmark = pytest.mark.timeout(300)
STEP = REPO / "tests" / "support" / "three_branches.py"
A, B = "a/call_a/p_a", "b/call_b/p_b"


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "LEDGER": str(tmp_path / "ledger.txt")}


@pytest.fixture(scope="module")
def forks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ForkServer]:
    """Each turn's process is forked from one that imported the script's modules (0.6 s of
    CPU each, paid once); the turn's own environment and folder are given at its start."""
    where = tmp_path_factory.mktemp("forks")
    with ForkServer(("tests.support.three_branches",
                     "jianmu:ReactiveRunner,SQLiteCheckpointer,StateManager"),
                    env=_env(where), cwd=where) as server:
        yield server


def turn(forks: ForkServer, tmp_path: Path, run_id: str,
         decisions: list[list[Any]]) -> dict[str, Any]:
    """One process's turn at the run (`tests.support.three_branches`)."""
    done = forks.run(
        [str(STEP), str(tmp_path / "runs.sqlite"), run_id, json.dumps(decisions)],
        env=_env(tmp_path), cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(json.loads(done.stdout.splitlines()[-1]))


def ledger(tmp_path: Path) -> list[str]:
    path = tmp_path / "ledger.txt"
    return sorted(path.read_text().splitlines()) if path.exists() else []


@pytest.mark.parametrize("order", ["b, a, c", "c, a+b"])
def test_each_branch_decided_in_its_own_process_pays_once(
    forks: ForkServer, tmp_path: Path, order: str
) -> None:
    first = turn(forks, tmp_path, "new", [])
    run_id = first["run"]
    assert first["status"] == "suspended"
    (step,) = [r for r in first["pending"] if r not in (A, B)]
    assert sorted(first["pending"]) == sorted([A, B, step])
    reject_b, edit_a, approve_c = ["reject", B], ["approve", A, {"amount": 7}], ["approve", step]
    turns = ([[reject_b], [edit_a], [approve_c]] if order == "b, a, c"
             else [[approve_c], [edit_a, reject_b]])
    for decisions in turns[:-1]:
        waiting = turn(forks, tmp_path, run_id, decisions)
        assert waiting["status"] == "suspended", waiting
        assert ledger(tmp_path) == []  # nothing goes on until every branch is decided
    done = turn(forks, tmp_path, run_id, turns[-1])
    assert done["status"] == "success", done
    assert ledger(tmp_path) == ["a 7", "c 30"]
    assert "a paid 7" in done["answer"] and "rejected by a person" in done["answer"]
    assert done["c"] == "c paid 30"
    again = turn(forks, tmp_path, run_id, [])
    assert (again["status"], again["answer"]) == ("success", done["answer"])
    assert ledger(tmp_path) == ["a 7", "c 30"]
