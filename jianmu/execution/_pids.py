"""This host's processes: whether a pid lives, and how many tasks a user has."""

from __future__ import annotations

import contextlib
import os

__all__ = ("pid_alive", "user_tasks")


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (one we may not signal counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def user_tasks() -> int:
    """Count the tasks (threads included) of this real user, as RLIMIT_NPROC does."""
    uid, count = os.getuid(), 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if entry.stat().st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry.name}/task"))
    return count
