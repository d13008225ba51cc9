"""The studio in a narrow window (half a laptop's screen): the runs list and a run's page fit
the window (nothing scrolls the page sideways), and the graph gets the page's width, not what
its details panel leaves. Skips like `test_browser` when Chromium is missing."""

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

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


def _overflow(page: Any) -> int:
    return int(page.execute_script(
        "const e = document.documentElement; return e.scrollWidth - e.clientWidth"))


def test_a_narrow_window_scrolls_no_page_sideways(
        driver: Any, studio: tuple[str, Path]) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    url, _ = studio  # which started one suspended run
    size = driver.get_window_size()
    driver.set_window_size(560, 900)
    try:
        driver.get(f"{url}/?token={TOKEN}")
        _until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "tr.run"), "the run")
        assert _overflow(driver) == 0
        driver.find_element(By.CSS_SELECTOR, "tr.run a").click()
        _until(driver, lambda d: _text(d, "#status") == "suspended", "the run's page")
        _until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#tree g.node"), "the graph")
        assert _overflow(driver) == 0
        widths = driver.execute_script(
            "return [document.getElementById('tree').clientWidth, "
            "document.querySelector('main').clientWidth]")
        assert widths[0] >= 0.9 * widths[1], widths
        for role in ("fork", "live"):  # the time bar's buttons are in the window
            right = driver.execute_script(
                f"return document.querySelector('[data-role={role}]').getBoundingClientRect()"
                ".right")
            assert right <= driver.execute_script(
                "return document.documentElement.clientWidth"), role
        driver.find_element(By.CSS_SELECTOR, ".request button.reject").click()  # reachable
        _until(driver, lambda d: _text(d, "#status") == "success", "the run to finish")
        _no_alert(driver)
    finally:
        driver.set_window_size(size["width"], size["height"])


def test_a_narrow_windows_graph_shows_the_whole_tree_it_fitted(
        driver: Any, studio: tuple[str, Path]) -> None:  # noqa: F811
    """One under the other, the graph box was squeezed to 150 px (the height the graph set
    itself was lost): fitted to 300 px, only the root showed, the suspended node out of view."""
    from selenium.webdriver.common.by import By

    url, _ = studio
    size = driver.get_window_size()
    driver.set_window_size(560, 900)
    try:
        driver.get(f"{url}/?token={TOKEN}")
        driver.find_element(By.CSS_SELECTOR, "tr.run a").click()
        _until(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#tree g.node")) == 4,
               "the graph")
        outside = driver.execute_script(
            "const box = document.getElementById('tree').getBoundingClientRect();"
            "return Array.from(document.querySelectorAll('#tree g.node')).filter((g) => {"
            "  const b = g.getBoundingClientRect();"
            "  return b.top < box.top || b.bottom > box.bottom || b.left < box.left ||"
            "         b.right > box.right; }).map((g) => g.dataset.node);")
        assert outside == []
        _no_alert(driver)
    finally:
        driver.set_window_size(size["width"], size["height"])
