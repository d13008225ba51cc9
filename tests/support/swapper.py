"""A child process that swaps two names as fast as it can (``renameat2(RENAME_EXCHANGE)``), so
both always exist and each is, in turn, what the other was: what a hostile command racing the
guard or the engine does to a workspace."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import TracebackType
from typing import Self

__all__ = ("Swapper",)

# Swaps argv[1] and argv[2] until argv[3] exists (a bounded number of rounds at most), then
# leaves both as they began: an even number of swaps.
_SCRIPT = r"""
import ctypes, os, sys
a, b, stop = sys.argv[1].encode(), sys.argv[2].encode(), sys.argv[3]
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
def swap():
    if libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")
swap(); swap()
print("ready", flush=True)
rounds = 0
while rounds < 50_000_000 and not os.path.exists(stop):
    swap()
    rounds += 1
if rounds % 2:
    swap()
"""


class Swapper:
    """Swaps ``first`` and ``second`` within the block (it begins once the child is swapping);
    `stop` ends it early, leaving both as they began, and checks that the child ran cleanly."""

    def __init__(self, first: Path, second: Path, stop: Path) -> None:
        self.first, self.second, self._stop = first, second, stop
        self._proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> Self:
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _SCRIPT, str(self.first), str(self.second), str(self._stop)],
            stdout=subprocess.PIPE, text=True,
        )
        assert self._proc.stdout is not None and self._proc.stdout.readline() == "ready\n"
        return self

    def stop(self) -> None:
        """End the swapping and wait for it: both names are as they began."""
        assert self._proc is not None
        self._stop.touch()
        assert self._proc.wait() == 0

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
