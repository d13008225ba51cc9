"""Small helpers shared by the benchmarks: timing and a table printer."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_of(fn: Callable[[], object], *, repeat: int = 5, number: int = 1) -> float:
    """Best wall time of ``number`` calls, over ``repeat`` rounds, per call (seconds)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best


def table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> None:
    """Print rows as an aligned table."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, tuple("-" * w for w in widths), *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))


def verdict(ok: bool) -> str:
    """PASS or MISS for a target."""
    return "PASS" if ok else "MISS"
