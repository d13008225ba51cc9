"""A lock that tells when a thread other than the given one waits for it."""

from __future__ import annotations

import threading


class ToldLock:
    """A `threading.Lock` that sets ``waiting`` when a thread other than ``main`` has to wait
    for it: a race test's other thread reached the lock while this one holds it."""

    def __init__(self, main: threading.Thread, waiting: threading.Event) -> None:
        self.lock = threading.Lock()
        self.main = main
        self.waiting = waiting

    def __enter__(self) -> None:
        if not self.lock.acquire(blocking=False):
            if threading.current_thread() is not self.main:
                self.waiting.set()
            self.lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self.lock.release()
