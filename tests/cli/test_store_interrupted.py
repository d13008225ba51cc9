"""``jianmu run`` when the checkpoint store fails mid-run: the run is interrupted, not lost,
and the CLI says how to go on."""

from __future__ import annotations

import argparse
import io

import py_trees
from rich.console import Console

from jianmu import StateManager
from jianmu._cli.progress import Progress
from jianmu._cli.run import _report
from jianmu.errors import CheckpointError, ExitCode
from jianmu.runtime import ReactiveRunner, RunResult, RunStatus


class _NoTarget:
    def result(self) -> None:
        return None


def _reported(exception: BaseException) -> tuple[int, str]:
    tree = py_trees.behaviours.Success("step")
    runner = ReactiveRunner(tree, StateManager(), run_id="r1")
    out = io.StringIO()
    console = Console(file=out, width=200, no_color=True)
    result = RunResult(status=RunStatus.FAILURE, run_id="r1", error=str(exception),
                       exception=exception)
    code = _report(runner, _NoTarget(), result, Progress(console, tree),  # type: ignore[arg-type]
                   argparse.Namespace(config=None), console)
    return code, out.getvalue()


def test_a_run_its_store_interrupted_is_told_how_to_go_on() -> None:
    code, text = _reported(CheckpointError("database is locked"))
    assert code == ExitCode.FAILURE
    assert "database is locked" in text
    assert "jianmu resume r1" in text and "checkpoint store failed" in text


def test_a_plain_failure_gets_no_resume_hint() -> None:
    _, text = _reported(RuntimeError("disk on fire"))
    assert "disk on fire" in text and "jianmu resume" not in text
