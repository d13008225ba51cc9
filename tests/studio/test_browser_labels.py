"""The studio in a real browser, as a screen reader and a keyboard meet its approvals: each
control names the call it decides (two waiting calls read "Approve", "Approve", "Reject", an
unnamed text box), whether the server drew the request or the page did, and a request is
approved and a question answered from the keyboard alone. Skips like `test_browser` when
Chromium is missing."""

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
from tests.support.studio import start_suspended

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]
HERE = Path(__file__).resolve().parent


def _names(box: Any) -> dict[str, str]:
    """What a screen reader names each control of a request's box, by its class."""
    from selenium.webdriver.common.by import By

    return {str(c.get_attribute("class")): str(c.accessible_name) for c in box.find_elements(
        By.CSS_SELECTOR, "button, input, textarea")}


def test_each_approval_control_names_the_call_it_decides(
        driver: Any, studio: tuple[str, Path]) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    url, checkpoints = studio
    run_id = start_suspended(checkpoints, flow=HERE / "two_calls_flow.py")
    driver.get(f"{url}/?token={TOKEN}")
    driver.get(f"{url}/run/cp/{run_id}")
    _until(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#pending .request")) == 2,
           "both requests")
    for call in ("deploy_1", "deploy_2"):
        box = driver.find_element(By.CSS_SELECTOR, f'#pending .request[data-id="{call}"]')
        box.find_element(By.CSS_SELECTOR, "details.edit summary").click()
        assert box.accessible_name == f"approval: deploy {call}"
        assert _names(box) == {
            "edit-arguments": f"arguments of deploy {call} (JSON: edit, then approve)",
            "approve": f"Approve deploy {call}",
            "reason": f"reason for deploy {call} (the model sees it)",
            "reject": f"Reject deploy {call}"}
    # as the page's script draws a request (one asked while the page is open)
    drawn = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "import('/static/panels.js').then((m) => {"
        "  const box = m.drawRequest({id: 'c\\u202e9', tool: 'pay', summary: 's', reason: 'r',"
        "                            rule: null, arguments: '{}', details: null});"
        "  box.id = 'drawn'; box.querySelector('details').open = true;"
        "  document.body.append(box); done(true); });")
    assert drawn is True
    box = driver.find_element(By.ID, "drawn")
    assert box.accessible_name == "approval: pay c\\u202e9"  # the override shown, not obeyed
    assert _names(box) == {"edit-arguments": "arguments of pay c\\u202e9 (JSON: edit, then "
                                             "approve)",
                           "approve": "Approve pay c\\u202e9",
                           "reason": "reason for pay c\\u202e9 (the model sees it)",
                           "reject": "Reject pay c\\u202e9"}
    _no_alert(driver)


def test_a_sub_agents_approval_and_question_from_the_keyboard(
        driver: Any, studio: tuple[str, Path]) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    url, checkpoints = studio
    run_id = start_suspended(checkpoints, flow=HERE / "agent_ask_flow.py")
    driver.get(f"{url}/?token={TOKEN}")
    driver.get(f"{url}/run/cp/{run_id}")
    _until(driver, lambda d: _text(d, "#status") == "suspended", "the run")
    box = driver.find_element(By.CSS_SELECTOR, "#pending .request")
    call = box.get_attribute("data-id")
    approve = box.find_element(By.CSS_SELECTOR, "button.approve")
    assert approve.accessible_name.startswith("Approve ") and str(call) in approve.accessible_name
    box.find_element(By.CSS_SELECTOR, "input.reason").send_keys("ok", Keys.SHIFT, Keys.TAB)
    assert driver.switch_to.active_element == approve  # the reason's neighbour
    approve.send_keys(Keys.ENTER)
    # the sub-agent's question, drawn by the page while it is open
    _until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#pending .request.question"),
           "the question")
    question = driver.find_element(By.CSS_SELECTOR, "#pending .request.question")
    asked = str(question.get_attribute("data-id"))
    names = _names(question)
    assert names == {"answer-text": f"your answer to {asked}", "answer": f"Answer {asked}"}
    question.find_element(By.CSS_SELECTOR, "textarea.answer-text").send_keys("the blue one",
                                                                               Keys.TAB)
    driver.switch_to.active_element.send_keys(Keys.ENTER)  # Tab went to Answer
    _until(driver, lambda d: _text(d, "#status") == "success", "the run to finish")
    assert "the blue one" in _text(driver, "#timeline")
    _no_alert(driver)


def test_the_graph_and_the_fork_box_are_named_controls(
        driver: Any, studio: tuple[str, Path]) -> None:  # noqa: F811
    """The graph was an image (whose children a screen reader does not read) holding the
    nodes Tab goes through; the fork box's text area had no name."""
    from selenium.webdriver.common.by import By

    url, checkpoints = studio
    run_id = start_suspended(checkpoints, "prod")
    driver.get(f"{url}/?token={TOKEN}")
    driver.get(f"{url}/run/cp/{run_id}")
    _until(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#tree g.node")) == 4,
           "the graph")
    graph = driver.find_element(By.CSS_SELECTOR, "#tree svg")
    assert graph.aria_role == "group" and graph.accessible_name == "the run's tree"
    node = driver.find_element(By.CSS_SELECTOR, '#tree g.node[data-key="0/1"]')
    assert node.aria_role == "button"
    assert node.accessible_name.endswith("execute ToolExecutor · suspended")
    driver.find_element(By.CSS_SELECTOR, "[data-role=fork]").click()
    box = driver.find_element(By.CSS_SELECTOR, "[data-role=fork-state]")
    _until(driver, lambda d: box.get_attribute("value"), "the state to fork")
    assert box.accessible_name == "the state the new run starts from (JSON)"
    _no_alert(driver)
