"""Two processes decide one suspended payment at the same moment (released together from a
gate), through the CLI and the Python API, approving or rejecting: exactly one decision is
taken, the payment is made at most once (once exactly when the approval won), the loser is
told why in words (no traceback), and the run ends as the winner decided."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from jianmu import AgentState, SQLiteCheckpointer, StateManager
from jianmu.runtime import ReactiveRunner
from tests.support.forked import ForkedProcess, ForkServer
from tests.support.payments import REPO, Payments, payments

pytestmark = pytest.mark.timeout(300)
RACER = REPO / "tests" / "support" / "resume_racer.py"

# what a loser may be told: the winner holds the run, or has since decided or ended it
REFUSALS = ("is claimed by", "went on elsewhere", "was already approved",
            "was already rejected", "already finished (success)")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Payments:
    made = payments(tmp_path / "shop")
    monkeypatch.chdir(made.root)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return made


@pytest.fixture(scope="module")
def forks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ForkServer]:
    """Each racer is a process forked from one that imported its modules (0.5 s of CPU each,
    paid once); its environment and folder are given at its start."""
    where = tmp_path_factory.mktemp("forks")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with ForkServer(("tests.support.resume_racer", "jianmu._cli.run"), env=env,
                    cwd=where) as server:
        yield server


@pytest.fixture
def started() -> Iterator[list[ForkedProcess]]:
    """The racers started; each is killed in teardown if it is still running."""
    racers: list[ForkedProcess] = []
    yield racers
    for racer in racers:
        racer.kill()  # if it still runs
        racer.wait()


def side(project: Payments, run_id: str, how: str, decision: str) -> list[str]:
    """A racer's arguments after its gate: ``cli`` or ``api``, ``approve`` or ``reject``."""
    if how == "cli":
        return ["cli", "resume", run_id, f"--{decision}", "pay_1",
                "--config", str(project.config)]
    return ["api", run_id, decision, str(project.checkpoints), str(project.script)]


def race(project: Payments, forks: ForkServer, started: list[ForkedProcess],
         sides: list[list[str]]) -> list[tuple[int, str]]:
    """Start every side, wait until each is ready at its gate, open all the gates at once;
    each side's exit code and output (stdout and stderr, as they came)."""
    gates, outputs = [], []
    for n, arguments in enumerate(sides):
        gate = project.root / f"gate{n}"
        os.mkfifo(gate)
        gates.append(gate)
        racer = forks.spawn([str(RACER), str(gate), *arguments],
                            env=project.env(gated=False), cwd=project.root)
        started.append(racer)
        assert racer.stdout is not None
        outputs.append(racer.stdout)  # a pipe: its stdout and stderr, as they come
    for output in outputs:
        assert output.readline() == "ready\n"
    opened = [gate.open("w", encoding="utf-8") for gate in gates]  # each racer waits in read
    for fifo in opened:
        fifo.close()  # end of file: every racer goes on now
    ends = []
    for racer, output in zip(started, outputs, strict=True):
        with output:
            said = output.read()  # to its end: the racer has ended
        ends.append((racer.wait(), said))
    return ends


@pytest.mark.parametrize(("first", "second"), [
    (("cli", "approve"), ("cli", "approve")),
    (("cli", "approve"), ("cli", "reject")),
    (("cli", "approve"), ("api", "approve")),
    (("api", "approve"), ("api", "reject")),
    (("cli", "reject"), ("api", "approve")),
])
def test_two_deciders_released_together_take_one_decision(
    project: Payments, forks: ForkServer, started: list[ForkedProcess],
    first: tuple[str, str], second: tuple[str, str],
) -> None:
    run_id = project.suspended()
    ends = race(project, forks, started,
                [side(project, run_id, *first), side(project, run_id, *second)])
    for _code, out in ends:
        assert "Traceback" not in out, out
    won = [n for n, (code, _out) in enumerate(ends) if code == 0]
    assert len(won) == 1, ends
    (code, refused), = [end for n, end in enumerate(ends) if n != won[0]]
    assert code in (1, 2) and any(r in refused for r in REFUSALS), refused
    winner = (first, second)[won[0]][1]
    assert f"success run {run_id}" in ends[won[0]][1], ends
    assert project.paid() == (["paid 40"] if winner == "approve" else [])
    with SQLiteCheckpointer(project.checkpoints) as store:
        restored = ReactiveRunner.restore(_tree(project), store, run_id,
                                          state_manager=StateManager(AgentState))
        (told,) = [m.content for m in restored.state.get("messages") if m.role == "tool"]
        assert restored.run_sync(timeout=60).ok  # ended: returned as it ended, nothing run
    assert (told == "paid 40") is (winner == "approve"), told
    assert project.paid() == (["paid 40"] if winner == "approve" else [])


def _tree(project: Payments) -> object:
    import runpy

    return runpy.run_path(str(project.script))["build_tree"]()
