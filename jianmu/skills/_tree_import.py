"""Running a bt skill's tree module on a thread of its own: shared by every caller waiting for
the same file as it is, awaited without blocking an event loop (`jianmu.skills.bt`)."""

from __future__ import annotations

import asyncio
import contextvars
import importlib.abc
import importlib.util
import os
import sys
import threading
import time
import traceback
import types
from collections.abc import Callable

Stamp = tuple[int, int, str]
"""A tree file's identity as imported: its mtime (ns), its size and a hash of its source."""


class SourceLoader(importlib.abc.InspectLoader):
    """Executes source already read (from the pinned folder) as the module at ``path``."""

    def __init__(self, source: bytes, path: str) -> None:
        self.source, self.path = source, path

    def get_source(self, fullname: str) -> str:
        return importlib.util.decode_source(self.source)

    def get_code(self, fullname: str) -> types.CodeType:
        return compile(self.source, self.path, "exec", dont_inherit=True)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__file__ = self.path
        exec(self.get_code(module.__name__), module.__dict__)


class TreeImport:
    """One run of a tree module's code on a thread of its own, shared by everyone who waits
    for that file as it is (a retry of one still running after its time is up starts none)."""

    def __init__(self, loader: importlib.abc.Loader, module: types.ModuleType,
                 key: tuple[str, Stamp]) -> None:
        self.module, self.key = module, key
        self.raised: BaseException | None = None
        """What the module's code raised, once it has finished."""
        self.done = threading.Event()
        self.started = time.monotonic()
        self._wakers: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        context = contextvars.copy_context()  # the module's code sees the caller's context
        self._thread = threading.Thread(
            target=context.run, args=(self._execute, loader), daemon=True,
            name=f"jianmu-tree-import-{module.__name__}")

    def start(self) -> None:
        """Start the module's code on its thread."""
        self._thread.start()

    def _execute(self, loader: importlib.abc.Loader) -> None:
        try:
            loader.exec_module(self.module)
        except BaseException as exc:  # all of it the module's own: no signal reaches this thread
            self.raised = exc
        finally:
            with _LOCK:  # a retry of the same file may start it afresh
                if _RUNNING.get(self.key) is self:
                    del _RUNNING[self.key]
            with self._lock:
                self.done.set()
                wakers, self._wakers = self._wakers, []
            for wake in wakers:
                wake()

    def remaining(self, limit: float) -> float:
        """Seconds left of ``limit`` since the import started."""
        return self.started + limit - time.monotonic()

    def wait(self, limit: float) -> bool:
        """Block until the import ends or ``limit`` seconds from its start; whether it ended."""
        return self.done.wait(max(self.remaining(limit), 0.0))

    async def wait_async(self, limit: float) -> bool:
        """`wait`, without blocking the event loop."""
        loop = asyncio.get_running_loop()
        finished = asyncio.Event()

        def wake() -> None:
            try:
                loop.call_soon_threadsafe(finished.set)
            except RuntimeError:  # the loop has closed: nobody waits any more
                pass

        with self._lock:
            if self.done.is_set():
                return True
            self._wakers.append(wake)
        try:
            remaining = self.remaining(limit)
            if remaining > 0:
                await asyncio.wait_for(finished.wait(), remaining)
        except TimeoutError:
            pass
        finally:
            with self._lock:
                if wake in self._wakers:
                    self._wakers.remove(wake)
        return self.done.is_set()


_RUNNING: dict[tuple[str, Stamp], TreeImport] = {}
"""Tree imports whose code is still running, by file and stamp (process-wide: a loader is made
per run, and the threads are the process's)."""
_LOCK = threading.Lock()


def start_import(name: str, source: bytes, path: str, stamp: Stamp) -> TreeImport:
    """The import of ``path`` as ``stamp`` says it is: the one still running, or one started
    here as module ``name`` (put in ``sys.modules``)."""
    key = (path, stamp)
    with _LOCK:
        running = _RUNNING.get(key)
        if running is not None:  # another run's, or one whose time is up: never twice
            return running
        spec = importlib.util.spec_from_loader(name, SourceLoader(source, path), origin=path)
        assert spec is not None and spec.loader is not None
        spec.has_location = True  # tracebacks and inspect name the file
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses and pickling look the module up by name
        started = _RUNNING[key] = TreeImport(spec.loader, module, key)
        started.start()
    return started


def forget(module: types.ModuleType) -> None:
    """Take ``module`` out of ``sys.modules`` (unless a newer import of its file is there)."""
    if sys.modules.get(module.__name__) is module:
        del sys.modules[module.__name__]


def line_in(exc: BaseException, path: str | os.PathLike[str]) -> int | None:
    """The line of ``path`` (compared as real paths: tracebacks name the file as it was
    imported) that ``exc`` was last raised through."""
    real = os.path.realpath(path)
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if os.path.realpath(f.filename) == real]
    return frames[-1].lineno if frames else None
