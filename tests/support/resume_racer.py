"""One side of a race to decide a suspended payment (`tests.support.payments`), in its own
process: it says ``ready`` once everything is imported, waits at its gate (a FIFO the test
opens and closes for every racer at once), then decides and runs.

``resume_racer.py GATE cli ARGS...``: ``jianmu ARGS`` (the CLI, in this process).
``resume_racer.py GATE api RUN_ID approve|reject CHECKPOINTS SCRIPT``: the Python API.
"""

from __future__ import annotations

import runpy
import sys

import jianmu.cli
from jianmu import AgentState, ReactiveRunner, SQLiteCheckpointer, StateManager
from jianmu.errors import JianmuError


def main(argv: list[str]) -> int:
    gate, mode, *rest = argv
    print("ready", flush=True)
    with open(gate, encoding="utf-8") as fifo:  # opened and closed by the test: go
        fifo.read()
    if mode == "cli":
        return jianmu.cli.main(rest)
    run_id, decision, checkpoints, script = rest
    tree = runpy.run_path(script)["build_tree"]()
    try:
        with SQLiteCheckpointer(checkpoints) as store:
            runner = ReactiveRunner.restore(tree, store, run_id,
                                            state_manager=StateManager(AgentState))
            getattr(runner, decision)("pay_1")
            result = runner.run_sync(timeout=60)
    except JianmuError as exc:
        print(f"refused: {type(exc).__name__}: {exc}", flush=True)
        return 1
    print(f"{result.status.value} run {run_id}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
