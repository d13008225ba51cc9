"""Jianmu Studio: watch runs, travel back through them, fork them and answer approvals in a
browser (``jianmu studio``).

A Starlette app over the CLI's SQLite checkpoints (with each run's recorded points) and, when
given, a durable app's engine. It serves on 127.0.0.1 by default behind a random token, and
renders nothing from a run as HTML. Its names are imported on first use, so the CLI can tell
a run's story (`jianmu.studio.timeline`) without Starlette installed; the app itself needs the
``studio`` extra (Starlette and uvicorn).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from jianmu.errors import MissingExtraError

if TYPE_CHECKING:
    from jianmu.studio.app import create_app
    from jianmu.studio.durable_runs import DurableRuns
    from jianmu.studio.runs import CheckpointRuns, Restored, Restorer

__all__ = ("CheckpointRuns", "DurableRuns", "Restored", "Restorer", "create_app")

_WHERE = {"create_app": "app", "DurableRuns": "durable_runs", "CheckpointRuns": "runs",
          "Restored": "runs", "Restorer": "runs"}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'jianmu.studio' has no attribute {name!r}")
    try:
        module = importlib.import_module(f"jianmu.studio.{_WHERE[name]}")
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] in ("starlette", "uvicorn"):
            raise MissingExtraError(exc.name or "starlette", "studio") from exc
        raise
    return getattr(module, name)
