"""The studio's runs list in a real browser: a run with a very long id and tree name (one
unbroken word each) wraps in its own cells, and every other row's status, start time and
source still read whole. Skips like `test_browser` when Chromium is missing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.studio.test_browser import (  # noqa: F401 - the fixtures
    TOKEN,
    _no_alert,
    _until,
    driver,
    studio,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


def test_a_long_named_run_breaks_no_other_cell_of_the_list(
        driver: Any, studio: tuple[str, Path]) -> None:  # noqa: F811
    import py_trees
    from selenium.webdriver.common.by import By

    from jianmu import ReactiveRunner, SQLiteCheckpointer, StateManager, ToolExecutor
    from jianmu.nodes import AgentState
    from tests.studio.studio_flow import Plan, Report, deploy

    url, checkpoints = studio
    tree = py_trees.composites.Sequence("n" * 700, memory=True, children=[
        Plan("prod"), ToolExecutor("execute", [deploy]), Report("report")])
    with SQLiteCheckpointer(str(checkpoints)) as store:
        runner = ReactiveRunner(tree, StateManager(AgentState, {}), checkpointer=store,
                                run_id="long-" + "z" * 300)
        assert runner.run_sync(timeout=60).status.value == "suspended"
    driver.get(f"{url}/?token={TOKEN}")
    _until(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "tr.run")) == 2, "both runs")
    assert driver.execute_script(
        "const e = document.documentElement; return e.scrollWidth - e.clientWidth") == 0
    # the lines each one's text is laid on (a word broken in two: two lines)
    broken = driver.execute_script(
        "return Array.from(document.querySelectorAll('tr.run .status, tr.run abbr, "
        "tr.run td.when')).filter(e => { const r = document.createRange(); "
        "r.selectNodeContents(e); return new Set(Array.from(r.getClientRects()).map("
        "x => Math.round(x.top))).size !== 1; }).map(e => e.textContent)")
    assert broken == [], broken
    _no_alert(driver)


def test_a_long_tree_name_leaves_each_run_id_on_one_line(
        driver: Any, studio: tuple[str, Path]) -> None:  # noqa: F811
    """A run id is what `jianmu resume` takes: squeezed by another row's long tree name,
    "9f3c1e2a4b5d" broke into three lines and "tripped2" into two."""
    import py_trees
    from selenium.webdriver.common.by import By

    from jianmu import ReactiveRunner, SQLiteCheckpointer, StateManager
    from jianmu.nodes import AgentState

    url, checkpoints = studio
    tree = py_trees.composites.Sequence("n" * 700, memory=True,
                                        children=[py_trees.behaviours.Success("ok")])
    with SQLiteCheckpointer(str(checkpoints)) as store:
        runner = ReactiveRunner(tree, StateManager(AgentState, {}), checkpointer=store,
                                run_id="tripped2")
        assert runner.run_sync(timeout=60).ok
    driver.get(f"{url}/?token={TOKEN}")
    _until(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "tr.run")) == 2, "both runs")
    lines = driver.execute_script(
        "return Array.from(document.querySelectorAll('tr.run td:first-child a')).map(a => {"
        "  const r = document.createRange(); r.selectNodeContents(a);"
        "  return new Set(Array.from(r.getClientRects()).map(x => Math.round(x.top))).size; })")
    assert lines == [1, 1], lines
    _no_alert(driver)


def test_start_times_are_in_the_browsers_time_zone_as_on_the_run_page(
        driver: Any, studio: tuple[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """A studio in another time zone than its browser (reached through a tunnel): the list
    says a run's start in the browser's zone, as the run page's times are, not the studio's."""
    import time

    from selenium.webdriver.common.by import By

    url, _ = studio
    monkeypatch.setenv("TZ", "Asia/Kathmandu")  # +05:45: no browser's zone by chance
    time.tzset()
    try:
        driver.get(f"{url}/?token={TOKEN}")
        _until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "tr.run time"), "the run")
        cell = driver.find_element(By.CSS_SELECTOR, "tr.run time")
        stamp = float(str(cell.get_attribute("data-stamp")))
        offset = driver.execute_script(  # minutes behind UTC, as the browser reckons them
            "return new Date(arguments[0] * 1000).getTimezoneOffset()", stamp)
        browser = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(stamp - offset * 60))
        studio_zone = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))
        assert offset != -345 and browser != studio_zone
        _until(driver, lambda d: d.find_element(By.CSS_SELECTOR, "tr.run time").text == browser,
               "the start in the browser's zone")
        _no_alert(driver)
    finally:
        monkeypatch.undo()
        time.tzset()
