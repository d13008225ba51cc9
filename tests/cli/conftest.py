"""Fixtures for the CLI tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli._helpers import Project, make_config


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """A project folder with a small workspace: ws/src/app.py, ws/src/notes.txt, ws/README.md."""
    root = tmp_path / "proj"
    ws = root / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "app.py").write_text("x = 1  # TODO: rename\nprint(x)\n", encoding="utf-8")
    (ws / "src" / "notes.txt").write_text("ok\nFIXME soon\nbye\n", encoding="utf-8")
    (ws / "README.md").write_text("# demo\n", encoding="utf-8")
    return Project(root=root, config=make_config(root), workspace=ws)
