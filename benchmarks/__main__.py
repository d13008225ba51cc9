"""Run every ``benchmarks/bench_*.py`` module's ``main()``, each in a fresh interpreter."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path


def main() -> int:
    """Run the benchmarks named on the command line, or all of them.

    Arguments starting with ``-`` are flags for the benchmarks, which read ``sys.argv`` (e.g.
    ``python -m benchmarks bench_many_runs --profile``). With no name, each benchmark runs in
    an interpreter of its own, so none inherits another's heap, threads or child processes.
    """
    here = Path(__file__).parent
    flags = [a for a in sys.argv[1:] if a.startswith("-")]
    names = [a for a in sys.argv[1:] if not a.startswith("-")]
    if not names:
        failed = 0
        for name in sorted(
            m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_")
        ):
            done = subprocess.run([sys.executable, "-m", "benchmarks", name, *flags])
            failed += done.returncode != 0
        return 1 if failed else 0
    for name in names:
        print(f"\n=== {name} ===", flush=True)
        module = importlib.import_module(f"benchmarks.{name}")
        module.main()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
