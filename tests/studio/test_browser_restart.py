"""The studio in a real browser when the studio behind an open page stops and starts again
with a new token (Ctrl-C, then ``jianmu studio``): the page's stream is refused for good, and
the page says so rather than "reconnecting…" for ever. Skips like `test_browser` when Chromium
is missing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jianmu.studio import create_app
from tests.studio.test_browser import (  # noqa: F401 - the fixtures
    TOKEN,
    _text,
    _until,
    driver,
)
from tests.support.studio import free_port, serve, start_suspended, studio_sources

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


def test_a_page_whose_studio_restarted_says_to_reload(
        driver: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    checkpoints = tmp_path / "runs" / "checkpoints.sqlite"
    run_id = start_suspended(checkpoints)
    port = free_port()
    try:
        with serve(create_app(studio_sources(checkpoints), TOKEN, by="browser"), port) as url:
            driver.get(f"{url}/?token={TOKEN}")
            driver.get(f"{url}/run/cp/{run_id}")
            _until(driver, lambda d: _text(d, "#status") == "suspended", "the run")
            _until(driver, lambda d: _text(d, "#live") == "live", "the stream")
        _until(driver, lambda d: _text(d, "#live") != "live", "the page to see the studio go")
        again = create_app(studio_sources(checkpoints), "a-new-token", by="browser")
        with serve(again, port):
            _until(driver, lambda d: _text(d, "#live").startswith("disconnected"),
                   "the page to say its studio is gone")
            assert _text(driver, "#status") == "suspended"  # what it showed is kept
    finally:
        driver.get("about:blank")
