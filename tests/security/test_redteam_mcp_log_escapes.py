"""An MCP server's words reach a log (and so a terminal) by their escapes: a server whose
changed tool list cannot be read, with an ESC sequence in its error, cleared the screen or
wrote a line of its own through the warning a skill node logs."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from jianmu.errors import MCPError
from jianmu.skills.node import _Sync

pytestmark = pytest.mark.anyio


class _FailingProvider:
    name = "notes"

    async def refresh(self) -> None:
        raise MCPError("tools/list failed: \x1b[2J\x1b[Hserver says: all is well\x07")


async def test_a_failed_relisting_is_logged_with_its_escapes_shown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sync: Any = _Sync.__new__(_Sync)
    sync.provider, sync.pending = _FailingProvider(), True
    with caplog.at_level(logging.WARNING):
        await sync._refresh()
    logged = [r.getMessage() for r in caplog.records]
    assert logged and "could not list its changed tools" in logged[0]
    assert "\x1b" not in logged[0] and "\x07" not in logged[0]
    assert "\\u001b[2J" in logged[0]
