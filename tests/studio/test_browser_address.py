"""The studio in a real browser: the point a person travelled to is in the page's address, so a
reload (or coming back to the page) shows that point again, not the run as it is now. Skips like
`test_browser` when Chromium is missing."""

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


def _at(driver: Any) -> tuple[str, str]:  # noqa: F811 - a page, not the fixture
    from selenium.webdriver.common.by import By

    slider = driver.find_element(By.CSS_SELECTOR, "input[type=range][data-role=time]")
    return _text(driver, "#state-at"), str(slider.get_attribute("value"))


def test_a_reload_shows_the_point_travelled_to(
        driver: Any, studio: tuple[str, Path]) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    url, _ = studio  # which started one suspended run
    driver.get(f"{url}/?token={TOKEN}")
    run_id = driver.find_element(By.CSS_SELECTOR, "tr.run").get_attribute("data-run")
    page = f"{url}/run/cp/{run_id}"
    driver.get(page)
    _until(driver, lambda d: _text(d, "#status") == "suspended", "the run")
    last = _at(driver)[1]
    assert int(last) >= 2
    slider = driver.find_element(By.CSS_SELECTOR, "input[type=range][data-role=time]")
    slider.send_keys(Keys.HOME)
    slider.send_keys(Keys.ARROW_RIGHT)
    _until(driver, lambda d: _at(d) == ("at point 1", "1"), "point 1")
    assert driver.current_url == f"{page}#point=1"
    driver.refresh()
    _until(driver, lambda d: _text(d, "#status") == "suspended", "the run again")
    _until(driver, lambda d: _at(d) == ("at point 1", "1"), "point 1 after the reload")
    assert _text(driver, "[data-role=time-label]").startswith(f"point 1 of {last} ")
    driver.get("about:blank")  # away and back: the same point
    driver.back()
    _until(driver, lambda d: _at(d) == ("at point 1", "1"), "point 1 coming back")
    driver.find_element(By.CSS_SELECTOR, "[data-role=live]").click()  # back to now
    _until(driver, lambda d: _at(d) == (f"at point {last} (now)", last), "now")
    assert driver.current_url == page
    driver.refresh()
    _until(driver, lambda d: _at(d) == (f"at point {last} (now)", last), "now after a reload")
    driver.get(f"{page}#point=0")  # an address with a point opens at it
    _until(driver, lambda d: _at(d) == ("at point 0", "0"), "point 0 from the address")
    _no_alert(driver)
