"""The studio in a real browser (issue 36): arguments edited in the approval box, and a
question answered in its text box. Skips like `test_browser` when Chromium is missing."""

from __future__ import annotations

import re
from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path
from typing import Any

import pytest

from tests.studio.test_browser import (  # noqa: F401 - the fixtures
    TOKEN,
    _no_alert,
    _open_suspended,
    _text,
    _until,
    driver,
    studio,
)
from tests.support.studio import start_suspended

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


def test_arguments_edited_in_the_box_run(driver: Any, studio: tuple[str, Path]) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    url, checkpoints = studio
    run_id = start_suspended(checkpoints, "prod")
    _open_suspended(driver, url, run_id, '"target": "prod"')
    driver.find_element(By.CSS_SELECTOR, ".request details.edit summary").click()
    area = driver.find_element(By.CSS_SELECTOR, ".request textarea.edit-arguments")
    area.clear()
    area.send_keys('{"target": ')
    driver.find_element(By.CSS_SELECTOR, ".request button.approve").click()
    _until(driver, lambda d: "not JSON" in _text(d, "#decision-msg"), "the JSON refusal")
    area.send_keys('"staging"}')
    driver.find_element(By.CSS_SELECTOR, ".request button.approve").click()
    _until(driver, lambda d: _text(d, "#status") == "success", "the run to finish")
    result = _text(driver, "#result")
    assert "a person edited" in result and "<b>deployed</b> staging" in result
    _no_alert(driver)


def _ask(checkpoints: Path, *inputs: str) -> str:
    """A run of ask_flow.py (with ``--input`` ``inputs``) waiting for its answer; its id."""
    from jianmu.cli import main

    out = StringIO()
    with redirect_stdout(out):
        code = main(["run", str(Path(__file__).parent / "ask_flow.py"), "--config",
                     str(checkpoints.parent / "jianmu.yaml"), "--non-interactive",
                     *(arg for given in inputs for arg in ("--input", given))])
    assert code == 3, out.getvalue()
    found = re.search(r"run (\w+)", out.getvalue())
    assert found is not None
    return found.group(1)


def test_a_question_is_answered_in_the_text_box(driver: Any, studio: tuple[str, Path]) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    url, checkpoints = studio
    run_id = _ask(checkpoints)
    driver.get(f"{url}/?token={TOKEN}")
    driver.find_element(By.LINK_TEXT, run_id).click()
    _until(driver, lambda d: _text(d, "#status") == "suspended", "the run to show suspended")
    assert _text(driver, ".request .question-text") == "Which <b>city</b>?"
    area = driver.find_element(By.CSS_SELECTOR, ".request textarea.answer-text")
    area.send_keys("  \n ")  # Answer before writing one: not sent, said, the box waits
    driver.find_element(By.CSS_SELECTOR, ".request button.answer").click()
    _until(driver, lambda d: "write the answer in the box first" in _text(d, "#decision-msg"),
           "the word that the box is empty")
    assert driver.switch_to.active_element == area
    assert _text(driver, "#status") == "suspended"
    assert driver.execute_script("return fetch('/api/run/cp/' + arguments[0]).then(r => r.json())"
                                 ".then(v => v.pending.length)", run_id) == 1
    area.clear()
    area.send_keys("Lisbon")
    driver.find_element(By.CSS_SELECTOR, ".request button.answer").click()
    _until(driver, lambda d: _text(d, "#status") == "success", "the run to finish")
    assert _text(driver, "#result") == "going to Lisbon"
    _no_alert(driver)


def test_a_question_keeps_its_lines(driver: Any, studio: tuple[str, Path]) -> None:  # noqa: F811
    """A question of several lines (a list of choices) reads as it was asked: its lines ran
    together into one paragraph."""
    from selenium.webdriver.common.by import By

    url, checkpoints = studio
    question = "Which year?\n1. 2024\n2. 2025\n\n  indented: **not markup** <i>x</i>"
    run_id = _ask(checkpoints, f"question={question}")
    driver.get(f"{url}/?token={TOKEN}")
    driver.get(f"{url}/run/cp/{run_id}")
    _until(driver, lambda d: _text(d, "#status") == "suspended", "the run to show suspended")
    assert _text(driver, ".request .question-text") == question
    driver.find_element(By.CSS_SELECTOR, ".request textarea.answer-text").send_keys("2025")
    driver.find_element(By.CSS_SELECTOR, ".request button.answer").click()
    _until(driver, lambda d: _text(d, "#status") == "success", "the run to finish")
    assert _text(driver, "#result") == "going to 2025"
    _no_alert(driver)
