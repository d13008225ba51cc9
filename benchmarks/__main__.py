"""Run every ``benchmarks/bench_*.py`` module's ``main()`` in turn."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main() -> int:
    """Run the benchmarks named on the command line, or all of them.

    Arguments starting with ``-`` are options the benchmarks read themselves (``--profile``).
    """
    here = Path(__file__).parent
    names = [a for a in sys.argv[1:] if not a.startswith("-")] or sorted(
        m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_")
    )
    for name in names:
        print(f"\n=== {name} ===", flush=True)
        module = importlib.import_module(f"benchmarks.{name}")
        module.main()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
