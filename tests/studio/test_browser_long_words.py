"""The studio in a real browser, on a run whose text holds one word of 200,000 characters (a
base64 blob as a call's argument, then as its result): Chromium lays such a word out, wrapped
at any point, in time that grows with its square (seconds for this one, each time it is drawn),
so the page gives it a place to break every 64 characters, as it does a long name; the text
read or copied is the same. Skips like `test_browser` when Chromium is missing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.studio.long_word_flow import BLOB
from tests.studio.test_browser import (  # noqa: F401 - the fixtures
    TOKEN,
    _no_alert,
    _text,
    _until,
    driver,
    studio,
)
from tests.support.studio import start_suspended

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]
FLOW = Path(__file__).resolve().parent / "long_word_flow.py"
UNBROKEN = (  # the longest run of non-space characters laid out in one piece under each box
    "return arguments[0].map((css) => { let most = 0;"
    "  for (const box of document.querySelectorAll(css)) {"
    "    const walk = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);"
    "    for (let n = walk.nextNode(); n; n = walk.nextNode()) {"
    "      for (const word of n.data.split(/\\s+/)) most = Math.max(most, word.length); } }"
    "  return most; });")


def test_a_word_of_200000_characters_is_laid_out_in_pieces(
        driver: Any, studio: tuple[str, Path]) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    url, checkpoints = studio
    run_id = start_suspended(checkpoints, flow=FLOW)
    driver.get(f"{url}/?token={TOKEN}")
    driver.get(f"{url}/run/cp/{run_id}")
    _until(driver, lambda d: _text(d, "#status") == "suspended", "the run")
    # drawn by the server: the arguments in full, in pieces
    shown = driver.find_element(By.CSS_SELECTOR, ".request pre.arguments")
    assert BLOB in str(shown.get_attribute("textContent"))
    boxes = [".request pre.arguments", ".request .summary", "#timeline pre.text"]
    assert all(n <= 64 for n in driver.execute_script(UNBROKEN, boxes)), boxes
    # the edit box is filled as it is opened (from the keyboard too): holding 200 KB, folded,
    # it cost the page a second to load; opened, it holds the text as it is
    edit = driver.find_element(By.CSS_SELECTOR, ".request textarea.edit-arguments")
    assert edit.get_attribute("value") == ""
    driver.find_element(By.CSS_SELECTOR, ".request details.edit summary").send_keys(Keys.ENTER)
    assert BLOB in str(edit.get_attribute("value"))
    # drawn by the page: the run goes on, its result comes in the stream
    driver.find_element(By.CSS_SELECTOR, ".request button.approve").click()
    _until(driver, lambda d: _text(d, "#status") == "success", "the run to finish")
    result = str(driver.find_element(By.ID, "result").get_attribute("textContent"))
    assert result.startswith(BLOB[:10_000])
    boxes = ["#result", "#timeline pre.text"]
    assert all(n <= 64 for n in driver.execute_script(UNBROKEN, boxes)), boxes
    drawn = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "import('/static/panels.js').then((m) => {"
        "  const box = m.drawRequest({id: 'c9', tool: 'upload', summary: arguments[0],"
        "                            reason: 'r', rule: null, arguments: arguments[0],"
        "                            details: null});"
        "  box.id = 'drawn'; document.body.append(box); done(box.textContent.length); });",
        BLOB)
    assert drawn > 2 * len(BLOB)
    assert all(n <= 64 for n in driver.execute_script(UNBROKEN, ["#drawn pre", "#drawn p"]))
    _no_alert(driver)
