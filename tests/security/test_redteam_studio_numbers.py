"""Red team, the studio's approval box: a call whose arguments hold a whole number past 2**53
(an account number, an amount in cents). The box shows it exactly (the server writes it); the
page read the edited arguments as JavaScript numbers, so approving with one other field edited
ran the call with a different account than the one the person read and approved.

Fixed here: the edited arguments go to the server as the text in the box, read there. Skips like
`tests/studio/test_browser` when Chromium is missing.
"""

# ruff: noqa: F811 - the studio's fixtures are imported by name, and the tests take them
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.studio.pay_flow import ACCOUNT
from tests.studio.test_browser import TOKEN, _no_alert, _text, _until, driver, studio  # noqa: F401
from tests.support.studio import start_suspended

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]
PAY_FLOW = Path(__file__).resolve().parent.parent / "studio" / "pay_flow.py"


def test_an_edited_approval_runs_the_number_the_person_read(
        driver: Any, studio: tuple[str, Path]) -> None:
    from selenium.webdriver.common.by import By

    url, checkpoints = studio
    run_id = start_suspended(checkpoints, flow=PAY_FLOW)
    driver.get(f"{url}/?token={TOKEN}")
    driver.get(f"{url}/run/cp/{run_id}")
    _until(driver, lambda d: _text(d, "#status") == "suspended", "the run")
    assert str(ACCOUNT) in _text(driver, ".request .arguments")  # what the person reads
    driver.find_element(By.CSS_SELECTOR, ".request details.edit summary").click()
    area = driver.find_element(By.CSS_SELECTOR, ".request textarea.edit-arguments")
    driver.execute_script("arguments[0].value = arguments[0].value.replace('rent', 'rent, "
                          "March')", area)
    driver.find_element(By.CSS_SELECTOR, ".request button.approve").click()
    _until(driver, lambda d: _text(d, "#status") == "success", "the run to finish")
    view = json.loads(driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch(arguments[0], {credentials: 'same-origin'}).then(r => r.text()).then(done);",
        f"/api/run/cp/{run_id}"))
    assert view["result"].endswith(f"paid {ACCOUNT}: rent, March"), view["result"]
    assert f'"account": {ACCOUNT},' in view["result"]  # the edit the model is told of, too
    _no_alert(driver)


def _opened_state(driver: Any) -> str:
    """The state panel's text with every part of it opened (parts are drawn when opened)."""
    return str(driver.execute_script(
        "const closed = Array.from(document.querySelectorAll('#state details:not([open])'));"
        "closed.forEach(d => { d.open = true; });"
        "return closed.length ? '' : document.getElementById('state').innerText;"))


def test_the_state_panel_shows_the_number_the_run_holds(
        driver: Any, studio: tuple[str, Path]) -> None:
    url, checkpoints = studio
    run_id = start_suspended(checkpoints, flow=PAY_FLOW)
    driver.get(f"{url}/?token={TOKEN}")
    driver.get(f"{url}/run/cp/{run_id}")
    _until(driver, lambda d: _text(d, "#status") == "suspended", "the run")
    # the page has drawn the run from its data (not only the server's first page)
    _until(driver, lambda d: d.execute_script(
        "return performance.getEntriesByName('jianmu:show').length") > 0, "the page's draw")
    shown = _until(driver, _opened_state, "the whole state, opened")
    assert str(ACCOUNT) in shown and str(float(ACCOUNT)) not in shown
    assert "18446744073709552000" not in shown
    _no_alert(driver)
