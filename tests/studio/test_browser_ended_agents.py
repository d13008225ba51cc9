"""The studio in a real browser, on a run whose sub-agent has ended: its calls' entries show
their whole arguments and results, as they did while it ran. Skips like `test_browser` when
Chromium is missing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.studio.test_browser import (  # noqa: F401 - the fixtures
    TOKEN,
    _no_alert,
    _text,
    _until,
    driver,
    studio,
)
from tests.studio.test_sub_agents import ended_team_run

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


def test_an_ended_sub_agents_result_is_shown_whole(
        driver: Any, studio: tuple[str, Path]) -> None:  # noqa: F811
    url, checkpoints = studio
    run_id = ended_team_run(checkpoints)
    driver.get(f"{url}/?token={TOKEN}")
    driver.get(f"{url}/run/cp/{run_id}")
    _until(driver, lambda d: _text(d, "#status") == "success", "the run")
    _until(driver, lambda d: "result of read_report" in _text(d, "#timeline"), "the timeline")
    timeline = _text(driver, "#timeline")
    assert "[end of report]" in timeline  # not cut at the event's preview
    assert "-final" in timeline
    _no_alert(driver)
