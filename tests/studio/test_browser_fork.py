"""The studio in a real browser: a fork from the page keeps the state exactly, whether the
person edited it or not. The page's script reads JSON as JavaScript numbers (a whole number past
2**53 is rounded): a fork that round-tripped the state through them changed such a number, in a
state no one had touched. Skips like `test_browser` when Chromium is missing."""

# ruff: noqa: F811 - the studio's fixtures are imported by name, and the helpers take them
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.studio.test_browser import (  # noqa: F401 - the fixtures
    TOKEN,
    _no_alert,
    _text,
    _until,
    driver,
    open_suspended_page,
    studio,
)
from tests.support.studio import start_suspended

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]
BIG = 2**64 + 1  # not a JavaScript number: JSON.parse reads it as 2**64


def _exact(driver: Any, path: str) -> Any:
    """GET a studio API path from the page, read by Python (whole numbers kept exactly)."""
    return json.loads(driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch(arguments[0], {credentials: 'same-origin'}).then(r => r.text()).then(done);",
        path))


def _post(driver: Any, path: str, body: str) -> Any:
    """POST a JSON text from the page, with its CSRF token (the text is sent as it is)."""
    return json.loads(driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch(arguments[0], {method: 'POST', credentials: 'same-origin', headers: {"
        "'Content-Type': 'application/json', 'X-CSRF-Token': "
        "document.querySelector('meta[name=csrf]').content}, body: arguments[1]})"
        ".then(r => r.text()).then(done);", path, body))


def _fork_on_page(driver: Any, run_id: str, edit: Any = None) -> str:
    """Open the fork box on ``run_id``'s page at its newest point, edit it, start it."""
    from selenium.webdriver.common.by import By

    driver.find_element(By.CSS_SELECTOR, "[data-role=fork]").click()
    box = driver.find_element(By.CSS_SELECTOR, "[data-role=fork-state]")
    _until(driver, lambda d: '"root"' in box.get_attribute("value"), "the state to edit")
    if edit is not None:
        driver.execute_script("arguments[0].value = arguments[1]", box,
                              edit(box.get_attribute("value")))
    driver.find_element(By.CSS_SELECTOR, "[data-role=fork-start]").click()
    _until(driver, lambda d: f"/run/cp/{run_id}" not in d.current_url, "the fork's page")
    return str(driver.current_url.rstrip("/").rsplit("/", 1)[1])


def test_a_fork_from_the_page_keeps_whole_numbers_exactly(
        driver: Any, studio: tuple[str, Path]) -> None:
    url, checkpoints = studio
    run_id = start_suspended(checkpoints, "prod")
    open_suspended_page(driver, url, run_id)
    # a run whose state holds a number JavaScript cannot hold (a fork made through the API)
    state = _exact(driver, f"/api/run/cp/{run_id}/point/1")["state"]
    state["root"]["final_output"] = {"id": BIG}
    made = _post(driver, f"/run/cp/{run_id}/fork", json.dumps({"point": 1, "state": state}))
    assert made["ok"], made
    driver.get(f"{url}{made['url']}")
    _until(driver, lambda d: _text(d, "#status") == "suspended", "the first fork to wait")
    # forked again from the page, the state untouched
    untouched = _fork_on_page(driver, made["run_id"])
    _until(driver, lambda d: _text(d, "#status") == "suspended", "the second fork to wait")
    kept = _exact(driver, f"/api/run/cp/{untouched}")["state"]["root"]["final_output"]
    assert kept == {"id": BIG}
    # and edited on the page: the number typed in is kept too, as is the one not touched
    edited = _fork_on_page(driver, untouched, lambda text: text.replace(
        '"tool_effects": {}', f'"tool_effects": {{"typed": {BIG}}}', 1))
    _until(driver, lambda d: _text(d, "#status") == "suspended", "the third fork to wait")
    root = _exact(driver, f"/api/run/cp/{edited}")["state"]["root"]
    assert root["final_output"] == {"id": BIG} and root["tool_effects"]["typed"] == BIG
    _no_alert(driver)


def test_the_fork_box_opens_before_the_runs_view_has_come(
        driver: Any, studio: tuple[str, Path]) -> None:
    """Clicked at once (the page's first answer slow to come), Fork still opens its box at the
    page's newest point: it read that point from the run's view, which was not there yet, and
    nothing happened (found as a flaky browser test on a busy machine)."""
    from selenium.webdriver.common.by import By

    url, checkpoints = studio
    run_id = start_suspended(checkpoints, "prod")
    driver.get(f"{url}/?token={TOKEN}")
    # the run's view never comes: its first answer hangs, and its event stream says nothing
    held = driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": (
        "const fetched = window.fetch;"
        f"window.fetch = (what, how) => String(what) === '/api/run/cp/{run_id}'"
        " ? new Promise(() => {}) : fetched(what, how);"
        "window.EventSource = class { close() {} addEventListener() {} };")})
    try:
        driver.get(f"{url}/run/cp/{run_id}")
        assert _text(driver, "#status") == "suspended"  # as the page itself says
        last = driver.find_element(By.CSS_SELECTOR, "[data-role=time]").get_attribute("max")
        driver.find_element(By.CSS_SELECTOR, "[data-role=fork]").click()
        box = driver.find_element(By.CSS_SELECTOR, "[data-role=fork-state]")
        _until(driver, lambda d: '"root"' in box.get_attribute("value"), "the state to edit")
        point = driver.find_element(By.ID, "fork-panel").get_attribute("data-point")
        assert point == last
        assert json.loads(box.get_attribute("value")) == _exact(
            driver, f"/api/run/cp/{run_id}/point/{last}/state")
        _no_alert(driver)
    finally:
        driver.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument",
                               {"identifier": held["identifier"]})
