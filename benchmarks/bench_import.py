"""Import cost: ``import jianmu`` vs ``import py_trees, pydantic``, each in fresh interpreters."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys

from benchmarks._util import table, verdict

ROUNDS = 9
TARGET = 1.3

# Each subject runs in its own fresh interpreter; the clock covers the import statement only
# (not the interpreter's own start-up, which is the same for both). It is the process's CPU
# time: an import reads cached files and is CPU-bound, and CPU time does not count the time
# other processes take the core, so the figure holds on a busy machine.
SUBJECTS = {
    "py_trees, pydantic": "import py_trees, pydantic",
    "jianmu": "import jianmu",
    "jianmu, every name in __all__": "import jianmu; [getattr(jianmu, n) for n in jianmu.__all__]",
}
PROBE = "import time; t = time.process_time(); {stmt}; print(time.process_time() - t)"


# Installed packages ship compiled bytecode; let Jianmu's be cached too (a first, untimed run
# writes it), so that both sides pay for executing modules, not for compiling them.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def once(stmt: str) -> float:
    """Seconds one fresh interpreter spends on ``stmt``."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(stmt=stmt)],
        capture_output=True, text=True, check=True, env=ENV,
    )
    return float(out.stdout.strip())


def medians(rounds: int = ROUNDS) -> dict[str, float]:
    """Median import time per subject; the subjects interleave so load drifts hit all alike."""
    samples: dict[str, list[float]] = {name: [] for name in SUBJECTS}
    for stmt in SUBJECTS.values():
        once(stmt)  # warm-up: bytecode cache and file cache
    for _ in range(rounds):
        for name, stmt in SUBJECTS.items():
            samples[name].append(once(stmt))
    return {name: statistics.median(times) for name, times in samples.items()}


def main() -> None:
    """Print the import times and the ratio against the target."""
    got = medians()
    base = got["py_trees, pydantic"]
    rows = [(name, f"{t * 1e3:.1f} ms", f"{t / base:.2f}×") for name, t in got.items()]
    table(rows, ("import", f"median of {ROUNDS}", "vs py_trees, pydantic"))
    ratio = got["jianmu"] / base
    print(f"import jianmu: {ratio:.2f}× [target ≤ {TARGET}×] {verdict(ratio <= TARGET)}")


if __name__ == "__main__":
    main()
