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
from tests.support.studio import (
    free_port,
    serve,
    start_gated_run,
    start_suspended,
    studio_sources,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


def _page_whose_studio_stopped(
        driver: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, int]:  # noqa: F811
    """A suspended run's page, live, whose studio then stopped (the page has seen it go):
    the run's checkpoints and the port a studio may start on again."""
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
    except BaseException:
        driver.get("about:blank")
        raise
    return checkpoints, port


def test_a_page_whose_studio_restarted_says_to_reload(
        driver: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    checkpoints, port = _page_whose_studio_stopped(driver, tmp_path, monkeypatch)
    try:
        again = create_app(studio_sources(checkpoints), "a-new-token", by="browser")
        with serve(again, port):
            _until(driver, lambda d: _text(d, "#live").startswith("disconnected"),
                   "the page to say its studio is gone")
            assert _text(driver, "#status") == "suspended"  # what it showed is kept
    finally:
        driver.get("about:blank")


def test_a_live_page_loses_and_repeats_nothing_across_a_reconnect(
        driver: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """A run goes on while its page's studio stops and starts again (same token): the page
    reconnects, and its timeline is the run's, each entry once."""
    from tests.studio.test_browser import WAIT_S, _api

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    checkpoints = tmp_path / "runs" / "checkpoints.sqlite"
    start_suspended(checkpoints)  # the file and its config, as the CLI leaves them
    gates, thread = start_gated_run(checkpoints, 3 * WAIT_S)
    port = free_port()

    def calls(d: Any) -> int:
        return _text(d, "#timeline").count("started: wait_gate")

    try:
        with serve(create_app(studio_sources(checkpoints), TOKEN, by="browser"), port) as url:
            driver.get(f"{url}/?token={TOKEN}")
            _until(driver, lambda d: _api(d, "/api/run/cp/gated").get("points"), "a point")
            driver.get(f"{url}/run/cp/gated")
            _until(driver, lambda d: calls(d) == 1, "the first call")
            gates[0].set()
            _until(driver, lambda d: calls(d) == 2, "the second call")
        _until(driver, lambda d: _text(d, "#live") != "live", "the page to see the studio go")
        gates[1].set()  # the run goes on while no studio serves the page
        with serve(create_app(studio_sources(checkpoints), TOKEN, by="browser"), port):
            _until(driver, lambda d: calls(d) == 3, "the third call, after the reconnect")
            gates[2].set()
            _until(driver, lambda d: _text(d, "#status") == "success", "the run to finish")
            shown = driver.execute_script(
                "return Array.from(document.querySelectorAll('#timeline .entry .title'))"
                ".map(e => e.textContent)")
            told = driver.execute_async_script(
                "const done = arguments[arguments.length - 1];"
                "fetch('/api/run/cp/gated', {credentials: 'same-origin'}).then(r => r.json())"
                ".then(v => done(v.timeline.map(t => t.title)));")
            assert shown == told
            assert sum(t == "started: wait_gate" for t in shown) == 3
    finally:
        for gate in gates:
            gate.set()
        thread.join(WAIT_S)
        driver.get("about:blank")


def test_a_decision_the_studio_never_answers_can_be_made_again(
        driver: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """Approve clicked while the studio is down: the page says nothing was done and the buttons
    work again (they stayed disabled, "approving…" for ever)."""
    from selenium.webdriver.common.by import By

    from tests.studio.test_browser import _no_alert

    checkpoints, port = _page_whose_studio_stopped(driver, tmp_path, monkeypatch)
    try:
        driver.find_element(By.CSS_SELECTOR, ".request button.approve").click()
        _until(driver, lambda d: "did not answer" in _text(d, "#decision-msg"),
               "the page to say the studio did not answer")
        assert driver.find_element(By.CSS_SELECTOR, ".request button.approve").is_enabled()
        with serve(create_app(studio_sources(checkpoints), TOKEN, by="browser"), port):
            _until(driver, lambda d: _text(d, "#live") == "live", "the page to reconnect")
            driver.find_element(By.CSS_SELECTOR, ".request button.approve").click()
            _until(driver, lambda d: _text(d, "#status") == "success", "the run to finish")
            _no_alert(driver)
    finally:
        driver.get("about:blank")


def test_a_decision_refused_by_a_restarted_studio_says_why(
        driver: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """Approve clicked on a page whose studio started again with a new token: the studio's
    refusal is plain text, which the page read as JSON and showed as "refused: HTTP 403"; it
    says what the studio said (open the URL it printed), and nothing was decided."""
    from selenium.webdriver.common.by import By

    checkpoints, port = _page_whose_studio_stopped(driver, tmp_path, monkeypatch)
    try:
        again = create_app(studio_sources(checkpoints), "a-new-token", by="browser")
        with serve(again, port):
            driver.find_element(By.CSS_SELECTOR, ".request button.approve").click()
            _until(driver, lambda d: _text(d, "#decision-msg").startswith("refused: "),
                   "the refusal")
            said = _text(driver, "#decision-msg")
            assert "403" in said and "open the studio with the URL it printed" in said, said
            assert driver.find_element(By.CSS_SELECTOR, ".request button.approve").is_enabled()
            assert _text(driver, "#status") == "suspended"
    finally:
        driver.get("about:blank")


def test_a_point_the_stopped_studio_cannot_send_is_said_not_shown_as_another(
        driver: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """Travelling on a page whose studio stopped: the slider and its label move to the point,
    but its state cannot come; the page says so, instead of the state of another point
    under a label naming this one."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    _page_whose_studio_stopped(driver, tmp_path, monkeypatch)
    try:
        assert _text(driver, "#state-at").endswith("(now)")
        driver.find_element(By.CSS_SELECTOR, "input[data-role=time]").send_keys(Keys.HOME)
        _until(driver, lambda d: _text(d, "#state-at").startswith("cannot show point 0: "),
               "the page to say point 0 cannot be shown")
        assert "the studio did not answer" in _text(driver, "#state-at")
        assert _text(driver, "[data-role=time-label]").startswith("point 0 of ")
    finally:
        driver.get("about:blank")


def test_a_page_is_told_when_its_studio_stops(
        driver: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """`jianmu studio` sets ``app.state.closing`` on Ctrl-C: the page says the studio stopped
    (not a bare "reconnecting…"), and goes on once it is back."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    checkpoints = tmp_path / "runs" / "checkpoints.sqlite"
    run_id = start_suspended(checkpoints)
    port = free_port()
    try:
        app = create_app(studio_sources(checkpoints), TOKEN, by="browser")
        with serve(app, port) as url:
            driver.get(f"{url}/?token={TOKEN}")
            driver.get(f"{url}/run/cp/{run_id}")
            _until(driver, lambda d: _text(d, "#live") == "live", "the stream")
            app.state.closing.set()
            _until(driver, lambda d: _text(d, "#live").startswith("the studio stopped"),
                   "the page to say its studio stopped")
        with serve(create_app(studio_sources(checkpoints), TOKEN, by="browser"), port):
            _until(driver, lambda d: _text(d, "#live") == "live", "the page to go on")
    finally:
        driver.get("about:blank")
