"""Fixtures for the built-in tool tests: a workspace with an outside folder next to it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jianmu.execution.runner import use_workspace

SECRET = "TOP-SECRET-OUTSIDE"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the workspace holding a secret; no tool may read or write it."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text(SECRET + "\n")
    return folder


@pytest.fixture
def ws(tmp_path: Path, outside: Path) -> Iterator[Path]:
    """The workspace root, made current for the test."""
    root = tmp_path / "ws"
    root.mkdir()
    with use_workspace(root):
        yield root
