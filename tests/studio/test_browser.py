"""The studio in a real browser: headless Chromium (Debian's) driven by Selenium.

Skips when Chromium or Selenium is missing, unless JIANMU_REQUIRE_BROWSER=1 (CI), which makes
a missing browser a failure.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jianmu.studio import create_app
from tests.support.studio import (
    chromium_problem,
    make_driver,
    serve,
    skip_or_fail,
    start_suspended,
    studio_sources,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]
TOKEN = "browser-token"
WAIT_S = 60


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    problem = chromium_problem()
    if problem is not None:
        skip_or_fail(problem)
    made = make_driver()
    try:
        yield made
    finally:
        made.quit()


@pytest.fixture
def studio(driver: Any, tmp_path: Path,
           monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    checkpoints = tmp_path / "runs" / "checkpoints.sqlite"
    start_suspended(checkpoints)  # the file exists before the studio opens it
    with serve(create_app(studio_sources(checkpoints), TOKEN, by="browser")) as url:
        try:
            yield url, checkpoints
        finally:
            driver.get("about:blank")  # close the page's event stream before the server stops


def _text(driver: Any, css: str) -> str:
    from selenium.webdriver.common.by import By

    return str(driver.find_element(By.CSS_SELECTOR, css).text)


def _until(driver: Any, condition: Any, what: str) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT_S, poll_frequency=0.1).until(condition, what)


def _open_suspended(driver: Any, url: str, run_id: str, arguments: str) -> None:
    from selenium.webdriver.common.by import By

    driver.get(f"{url}/?token={TOKEN}")
    assert "token" not in driver.current_url  # swapped for the cookie
    driver.find_element(By.LINK_TEXT, run_id).click()
    _until(driver, lambda d: _text(d, "#status") == "suspended", "the run to show suspended")
    assert _text(driver, ".request .tool") == "deploy"
    assert _text(driver, ".request .call-id") == "deploy_1"
    assert arguments in _text(driver, ".request .arguments")
    driver.execute_script("window.sameDocument = true")  # gone if the page reloads


def _no_alert(driver: Any) -> None:
    from selenium.common.exceptions import NoAlertPresentException

    try:
        alert = driver.switch_to.alert
    except NoAlertPresentException:
        return
    raise AssertionError(f"a script from the run's data ran: {alert.text}")


def test_approve_in_the_browser_finishes_the_run(driver: Any, studio: tuple[str, Path]) -> None:
    from selenium.webdriver.common.by import By

    url, checkpoints = studio
    run_id = start_suspended(checkpoints, "staging <script>alert('args')</script>")
    _open_suspended(driver, url, run_id, "<script>alert('args')</script>")
    assert '<script>alert("node")</script> flow' in _text(driver, "#tree")
    driver.find_element(By.CSS_SELECTOR, ".request button.approve").click()
    _until(driver, lambda d: _text(d, "#status") == "success", "the run to finish")
    _until(driver, lambda d: "deployed" in _text(d, "#result"), "the tool's result")
    assert "<b>deployed</b> staging" in _text(driver, "#result")  # text, not markup
    assert driver.execute_script("return window.sameDocument") is True  # no reload
    assert driver.find_elements(By.CSS_SELECTOR, "#pending .request") == []
    root = driver.find_element(By.CSS_SELECTOR, '#tree li[data-key="0"]')
    assert "node-success" in root.get_attribute("class")
    assert "by browser" in _text(driver, "#timeline")
    _no_alert(driver)


def test_reject_in_the_browser(driver: Any, studio: tuple[str, Path]) -> None:
    from selenium.webdriver.common.by import By

    url, checkpoints = studio
    run_id = start_suspended(checkpoints, "prod")
    _open_suspended(driver, url, run_id, '"target": "prod"')
    driver.find_element(By.CSS_SELECTOR, ".request input.reason").send_keys("not on Friday")
    driver.find_element(By.CSS_SELECTOR, ".request button.reject").click()
    _until(driver, lambda d: _text(d, "#status") in ("success", "failure"), "the run to end")
    assert driver.execute_script("return window.sameDocument") is True
    _until(driver, lambda d: "not on Friday" in _text(d, "#timeline"), "the reason recorded")
    assert "deployed" not in _text(driver, "#result")
    _no_alert(driver)


def test_without_the_token_the_browser_is_refused(driver: Any,
                                                  studio: tuple[str, Path]) -> None:
    url, _ = studio
    driver.get(f"{url}/")
    driver.delete_all_cookies()  # those of 127.0.0.1, whatever the port
    driver.get(f"{url}/")
    assert "403" in driver.page_source and "runs" not in driver.title.lower()
    driver.get(f"{url}/?token=wrong")
    assert "403" in driver.page_source
