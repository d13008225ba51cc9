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
    reset_driver,
    script_errors,
    serve,
    shared_driver,
    skip_or_fail,
    start_suspended,
    studio_sources,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]
TOKEN = "browser-token"
WAIT_S = 60


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    """The process's browser for this module, left as new for the next one at its end."""
    problem = chromium_problem()
    if problem is not None:
        skip_or_fail(problem)
    made = shared_driver()
    try:
        yield made
    finally:
        reset_driver(made)


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
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    # the page redraws parts of itself as the run goes: an element found a moment ago may
    # be replaced before it is read; the condition is asked again
    return WebDriverWait(driver, WAIT_S, poll_frequency=0.1,
                         ignored_exceptions=(StaleElementReferenceException,)
                         ).until(condition, what)


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


def open_suspended_page(driver: Any, url: str, run_id: str) -> None:
    """Open the page of the suspended run ``run_id`` by its address (the token taken first)."""
    driver.get(f"{url}/?token={TOKEN}")
    driver.get(f"{url}/run/cp/{run_id}")
    _until(driver, lambda d: _text(d, "#status") == "suspended", "the run")


def _no_alert(driver: Any) -> None:
    """No script from the run's data ran, and the page's own scripts threw nothing."""
    from selenium.common.exceptions import NoAlertPresentException

    try:
        alert = driver.switch_to.alert
    except NoAlertPresentException:
        errors = script_errors(driver)
        assert not errors, errors
        return
    raise AssertionError(f"a script from the run's data ran: {alert.text}")


ROOT = '<script>alert("node")</script> flow'


def _statuses(driver: Any) -> dict[str, str]:
    """Each graph node's ``data-status``, by its ``data-node`` path."""
    pairs = driver.execute_script(  # read in one go: the graph may be redrawn between reads
        "return Array.from(document.querySelectorAll('#tree [data-node]'))"
        ".map(e => [e.getAttribute('data-node'), e.getAttribute('data-status')])")
    return {node: status for node, status in pairs}


def _click(driver: Any, by: str, where: str) -> str:
    """Click a timeline point's heading (again if it was redrawn meanwhile); its number."""
    def clicked(d: Any) -> str:
        group = d.find_element(by, where)
        number = str(group.get_attribute("data-point"))
        group.find_element("css selector", ".point-head").click()
        return number

    return str(_until(driver, clicked, f"a click on {where}"))


def _api(driver: Any, path: str) -> Any:
    """GET a studio API path from the page (with its cookie)."""
    return driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch(arguments[0], {credentials: 'same-origin'}).then(r => r.json()).then(done);",
        path)


def test_the_graph_draws_each_node_with_its_status(driver: Any,
                                                   studio: tuple[str, Path]) -> None:
    from selenium.webdriver.common.by import By

    url, checkpoints = studio
    run_id = start_suspended(checkpoints, "prod")
    _open_suspended(driver, url, run_id, '"target": "prod"')
    expected = {ROOT: "running", f"{ROOT}/plan": "success", f"{ROOT}/execute": "suspended",
                f"{ROOT}/report": "invalid"}
    _until(driver, lambda d: _statuses(d) == expected, "the graph's statuses")
    view = _api(driver, f"/api/run/cp/{run_id}")
    assert len(_statuses(driver)) == len(view["nodes"])  # one [data-node] per tree node
    root = driver.find_element(By.CSS_SELECTOR, "#tree g[data-key='0']")
    assert ROOT in root.get_attribute("textContent")  # the name, as text (in full in its title)
    # fold the root's subtree and unfold it; zoom in
    driver.find_element(By.CSS_SELECTOR, "#tree g[data-key='0'] > g.fold").click()
    _until(driver, lambda d: list(_statuses(d)) == [ROOT], "the folded subtree")
    driver.find_element(By.CSS_SELECTOR, "#tree g[data-key='0'] > g.fold").click()
    _until(driver, lambda d: len(_statuses(d)) == 4, "the unfolded subtree")

    def scale(d: Any) -> float:
        shown = d.find_element(By.CSS_SELECTOR, "#tree g.viewport").get_attribute("transform")
        return float(shown.rsplit("scale(", 1)[1].rstrip(")"))

    before = scale(driver)
    driver.find_element(By.CSS_SELECTOR, "[data-role=zoom-in]").click()
    _until(driver, lambda d: scale(d) > before, "the graph to zoom in")
    # a click on a node shows its details
    driver.find_element(By.CSS_SELECTOR, "#tree g[data-key='0/1']").click()  # execute
    _until(driver, lambda d: "ToolExecutor" in _text(d, "[data-role=details]"), "the details")
    details = _text(driver, "[data-role=details]")
    assert "suspended" in details and "asked: deploy" in details
    _no_alert(driver)


def test_approve_in_the_browser_finishes_the_run(driver: Any, studio: tuple[str, Path]) -> None:
    from selenium.webdriver.common.by import By

    url, checkpoints = studio
    run_id = start_suspended(checkpoints, "staging <script>alert('args')</script>")
    _open_suspended(driver, url, run_id, "<script>alert('args')</script>")
    _until(driver, lambda d: _statuses(d).get(f"{ROOT}/execute") == "suspended", "the graph")
    driver.find_element(By.CSS_SELECTOR, ".request button.approve").click()
    _until(driver, lambda d: _text(d, "#status") == "success", "the run to finish")
    _until(driver, lambda d: "deployed" in _text(d, "#result"), "the tool's result")
    assert "<b>deployed</b> staging" in _text(driver, "#result")  # text, not markup
    # the statuses changed live, in the same page
    _until(driver, lambda d: set(_statuses(d).values()) == {"success"}, "every node to succeed")
    assert driver.execute_script("return window.sameDocument") is True  # no reload
    assert driver.find_elements(By.CSS_SELECTOR, "#pending .request") == []
    assert "approved by browser: deploy" in _text(driver, "#timeline")
    _no_alert(driver)


def _finish(driver: Any, url: str, checkpoints: Path, target: str = "prod") -> str:
    from selenium.webdriver.common.by import By

    run_id = start_suspended(checkpoints, target)
    _open_suspended(driver, url, run_id, f'"target": "{target}"')
    driver.find_element(By.CSS_SELECTOR, ".request button.approve").click()
    _until(driver, lambda d: _text(d, "#status") == "success", "the run to finish")
    return run_id


def test_the_time_slider_goes_back_to_the_first_point(driver: Any,
                                                      studio: tuple[str, Path]) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    url, checkpoints = studio
    _finish(driver, url, checkpoints)
    slider = driver.find_element(By.CSS_SELECTOR, "input[type=range][data-role=time]")
    _until(driver, lambda d: '"added' not in _text(d, "[data-role=state]") and
           "deployed" in _text(d, "[data-role=state]"), "the final state")
    last = int(slider.get_attribute("max"))
    assert last > 3 and slider.get_attribute("value") == str(last)
    slider.send_keys(Keys.HOME)
    _until(driver, lambda d: set(_statuses(d).values()) == {"invalid"}, "the first statuses")
    _until(driver, lambda d: "final_answer: null" in _text(d, "[data-role=state]"),
           "the first state")
    assert "deployed" not in _text(driver, "[data-role=state]")
    assert _text(driver, "[data-role=time-label]").startswith(f"point 0 of {last}")
    # a click on the timeline travels to that point
    point = _click(driver, By.XPATH, "//li[contains(@class, 'point-group')]"
                                     "[.//span[text()='asked: deploy']]")
    _until(driver, lambda d: _statuses(d).get(f"{ROOT}/execute") == "suspended",
           "the statuses at the question")
    assert slider.get_attribute("value") == point
    slider.send_keys(Keys.END)
    _until(driver, lambda d: set(_statuses(d).values()) == {"success"}, "the last point")
    _no_alert(driver)


def test_fork_from_the_page_starts_a_new_run(driver: Any, studio: tuple[str, Path]) -> None:
    from selenium.webdriver.common.by import By

    url, checkpoints = studio
    run_id = _finish(driver, url, checkpoints)
    before = _api(driver, f"/api/run/cp/{run_id}")
    done = next(t["point"] for t in before["timeline"] if t["title"].startswith("result of"))
    _click(driver, By.CSS_SELECTOR, f'#timeline [data-point="{done}"]')
    _until(driver, lambda d: d.find_element(By.CSS_SELECTOR, "input[data-role=time]")
           .get_attribute("value") == str(done), "the slider at the result")
    _until(driver, lambda d: f"at point {done}" in _text(d, "#state-at"), "the state there")
    driver.find_element(By.CSS_SELECTOR, "[data-role=fork]").click()
    box = driver.find_element(By.CSS_SELECTOR, "[data-role=fork-state]")
    _until(driver, lambda d: '"root"' in box.get_attribute("value"), "the state to edit")
    driver.find_element(By.CSS_SELECTOR, "[data-role=fork-start]").click()
    _until(driver, lambda d: f"/run/cp/{run_id}" not in d.current_url, "the fork's page")
    fork_id = driver.current_url.rstrip("/").rsplit("/", 1)[1]
    _until(driver, lambda d: _text(d, "#status") == "success", "the fork to finish")
    assert f"forked from {run_id} at point {done}" in _text(driver, "#origin")
    assert "deployed" in _text(driver, "#result")
    after = _api(driver, f"/api/run/cp/{run_id}")
    assert after["status"] == "success" and after["points"] == before["points"]
    forked = _api(driver, f"/api/run/cp/{fork_id}")
    assert forked["forked_from"] == {"run": run_id, "point": done}
    # the call finished before the point: the fork did not run it again
    assert not any(t["title"].startswith("started: deploy") for t in forked["timeline"])
    _no_alert(driver)


def test_a_long_run_on_a_big_tree_stays_responsive(driver: Any, studio: tuple[str, Path],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """1,000 ticks on a 200-node tree: the page's script time is reported, not asserted."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    from tests.support.studio import long_run

    url, checkpoints = studio
    run_id = long_run(checkpoints, ticks=1000, nodes=200)
    driver.get(f"{url}/?token={TOKEN}")
    driver.execute_cdp_cmd("Performance.enable", {})

    def busy() -> float:  # the main thread's busy time: script, style, layout (seconds)
        metrics = driver.execute_cdp_cmd("Performance.getMetrics", {})["metrics"]
        return float(next(m["value"] for m in metrics if m["name"] == "TaskDuration"))

    def measured(name: str) -> float:  # the page's own measures of its script (ms)
        return float(driver.execute_script(
            "return performance.getEntriesByName(arguments[0]).reduce((t, m) => t + m.duration,"
            " 0)", name))

    start = busy()
    driver.get(f"{url}/run/cp/{run_id}")
    _until(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#tree [data-node]")) == 200,
           "the 200 nodes")
    _until(driver, lambda d: _text(d, "#status") == "success", "the run's status")
    loaded, drawing = busy() - start, measured("jianmu:show")
    slider = driver.find_element(By.CSS_SELECTOR, "input[type=range][data-role=time]")
    assert int(slider.get_attribute("max")) >= 1000
    before = busy()
    slider.send_keys(Keys.HOME)
    _until(driver, lambda d: set(_statuses(d).values()) == {"invalid"}, "the first point")
    travelled, point = busy() - before, measured("jianmu:point")
    with capsys.disabled():
        print(f"\nstudio run page, 1,000 ticks on a 200-node tree: its script drew it in "
              f"{drawing:.0f} ms (main thread busy {loaded * 1000:.0f} ms loading the page); "
              f"travelling to point 0: script {point:.0f} ms, main thread {travelled * 1000:.0f} "
              "ms")


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
