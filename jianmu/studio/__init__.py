"""Jianmu Studio: watch runs and answer approvals in a browser (``jianmu studio``).

A Starlette app over the CLI's SQLite checkpoints and, when given, a durable app's engine. It
serves on 127.0.0.1 by default behind a random token, and renders nothing from a run as HTML.
"""

from __future__ import annotations

from jianmu.studio.app import create_app
from jianmu.studio.runs import CheckpointRuns, DurableRuns, Restored, Restorer

__all__ = ("CheckpointRuns", "DurableRuns", "Restored", "Restorer", "create_app")
