"""The studio in a real browser, on what a run's text may hold: control and format characters,
long unbroken text. Skips like `test_browser` when Chromium is missing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.studio.test_browser import (  # noqa: F401 - the fixtures
    TOKEN,
    WAIT_S,
    _api,
    _no_alert,
    _text,
    _until,
    driver,
    studio,
)
from tests.studio.test_hidden_characters import HIDDEN, TARGET
from tests.support.studio import start_suspended

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


def _page_text(page: Any) -> str:
    return str(page.execute_script("return document.body.innerText"))


def test_hidden_characters_show_as_escapes_and_the_call_is_unchanged(
        driver: Any, studio: tuple[str, Path]) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    url, checkpoints = studio
    run_id = start_suspended(checkpoints, TARGET)
    driver.get(f"{url}/?token={TOKEN}")
    driver.get(f"{url}/run/cp/{run_id}")
    _until(driver, lambda d: _text(d, "#status") == "suspended", "the run to show suspended")
    _until(driver, lambda d: "\\u202e" in _text(d, ".request .arguments"), "the arguments")
    assert not [c for c in HIDDEN if c in _page_text(driver)]
    driver.find_element(By.CSS_SELECTOR, ".request button.approve").click()  # not edited
    _until(driver, lambda d: _text(d, "#status") == "success", "the run to finish")
    _until(driver, lambda d: "final_answer" in _text(d, "[data-role=state]"), "the state")
    shown = _page_text(driver)
    assert not [c for c in HIDDEN if c in shown], "a hidden character reached the page"
    assert "prod\\u202egnp.exe" in _text(driver, "#result")
    assert "prod\\u202egnp.exe" in _text(driver, "[data-role=state]")  # drawn by the script
    view = _api(driver, f"/api/run/cp/{run_id}")  # the call ran with the target as it was
    assert f"<b>deployed</b> {TARGET}" in view["state"]["root"]["final_answer"]
    _no_alert(driver)


def _overflow(page: Any) -> int:
    """How many pixels the page is wider than the window (0: no sideways scrolling)."""
    return int(page.execute_script(
        "const e = document.documentElement; return e.scrollWidth - e.clientWidth"))


def test_long_unbroken_text_wraps_instead_of_widening_the_page(
        driver: Any, studio: tuple[str, Path]) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    url, checkpoints = studio
    target = "b" * 600 + "@example.com"
    run_id = start_suspended(checkpoints, target)
    driver.get(f"{url}/?token={TOKEN}")
    driver.get(f"{url}/run/cp/{run_id}")
    _until(driver, lambda d: _text(d, "#status") == "suspended", "the run to show suspended")
    _until(driver, lambda d: "@example.com" in _text(d, ".request .arguments"), "the call")
    assert _overflow(driver) == 0
    # the whole call can be read in its box: no line of it runs past the box's edge
    assert driver.execute_script(
        "const box = document.querySelector('.request');"
        "return Array.from(box.querySelectorAll('*')).every(e => e.scrollWidth <= "
        "box.clientWidth)")
    driver.find_element(By.CSS_SELECTOR, ".request button.approve").click()
    _until(driver, lambda d: _text(d, "#status") == "success", "the run to finish")
    assert _overflow(driver) == 0
    _no_alert(driver)


def test_the_time_label_follows_a_run_that_grows_while_travelling(
        driver: Any, studio: tuple[str, Path]) -> None:  # noqa: F811
    """Back at point 0 of a live run, new points keep coming: the label's "of N" says the
    run's newest point, as the slider's end does."""
    import asyncio
    import threading

    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    from jianmu import ReactiveRunner, ScriptedLLM, SQLiteCheckpointer, StateManager, tool
    from jianmu.nodes import AgentState, create_react_node

    url, checkpoints = studio
    gate = threading.Event()

    @tool(timeout_seconds=None)  # no end but the gate: only the gate makes a tick
    async def wait_gate(step: int) -> str:
        """Wait until the test opens the gate.

        Args:
            step: which step.
        """
        await asyncio.to_thread(gate.wait, 3 * WAIT_S)
        return f"step {step} done"

    llm = ScriptedLLM([[{"name": "wait_gate", "arguments": {"step": 1}}],
                       [{"name": "wait_gate", "arguments": {"step": 2}}], "done"])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    runner = ReactiveRunner(create_react_node(llm, [wait_gate], name="gated"), state,
                            checkpointer=SQLiteCheckpointer(str(checkpoints)), run_id="gated")
    thread = threading.Thread(target=lambda: runner.run_sync(timeout=3 * WAIT_S), daemon=True)
    thread.start()
    try:
        driver.get(f"{url}/?token={TOKEN}")
        _until(driver, lambda d: _api(d, "/api/run/cp/gated").get("points"), "a point")
        driver.get(f"{url}/run/cp/gated")
        slider = driver.find_element(By.CSS_SELECTOR, "input[type=range][data-role=time]")
        # the call shows while it runs (its point is made when it ends)
        _until(driver, lambda d: "started: wait_gate" in _text(d, "#timeline"), "the call")
        assert "failed" not in _text(driver, "#timeline")
        slider.send_keys(Keys.HOME)
        _until(driver, lambda d: _text(d, "#state-at") == "at point 0", "point 0")
        before = int(slider.get_attribute("max"))
        gate.set()
        _until(driver, lambda d: _text(d, "#status") == "success", "the run to finish")
        last = int(slider.get_attribute("max"))
        assert last > before
        _until(driver, lambda d: _text(d, "[data-role=time-label]").startswith(
            f"point 0 of {last} "), "the label to count the new points")
        assert _text(driver, "#state-at") == "at point 0"  # still where the person went
    finally:
        gate.set()
        thread.join(WAIT_S)
    _no_alert(driver)


def test_deciding_one_approval_keeps_what_was_typed_in_another(
        driver: Any, studio: tuple[str, Path]) -> None:  # noqa: F811
    import re
    from contextlib import redirect_stdout
    from io import StringIO

    from selenium.webdriver.common.by import By

    from jianmu.cli import main

    url, checkpoints = studio
    out = StringIO()
    with redirect_stdout(out):
        code = main(["run", str(Path(__file__).parent / "two_calls_flow.py"), "--config",
                     str(checkpoints.parent / "jianmu.yaml"), "--non-interactive"])
    assert code == 3, out.getvalue()
    found = re.search(r"run (\w+)", out.getvalue())
    assert found is not None
    driver.get(f"{url}/?token={TOKEN}")
    driver.get(f"{url}/run/cp/{found.group(1)}")
    _until(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#pending .request")) == 2,
           "both requests")
    second = driver.find_element(By.CSS_SELECTOR, '#pending .request[data-id="deploy_2"]')
    second.find_element(By.CSS_SELECTOR, "input.reason").send_keys("not prod on Friday")
    second.find_element(By.CSS_SELECTOR, "details.edit summary").click()
    first = driver.find_element(By.CSS_SELECTOR, '#pending .request[data-id="deploy_1"]')
    first.find_element(By.CSS_SELECTOR, "button.approve").click()
    _until(driver, lambda d: [b.get_attribute("data-id") for b in d.find_elements(
        By.CSS_SELECTOR, "#pending .request")] == ["deploy_2"], "the first to be decided")
    box = driver.find_element(By.CSS_SELECTOR, '#pending .request[data-id="deploy_2"]')
    assert box.find_element(By.CSS_SELECTOR, "input.reason").get_attribute(
        "value") == "not prod on Friday"
    assert box.find_element(By.CSS_SELECTOR, "details.edit").get_attribute("open") is not None
    box.find_element(By.CSS_SELECTOR, "button.reject").click()
    _until(driver, lambda d: _text(d, "#status") == "success", "the run to finish")
    _until(driver, lambda d: "not prod on Friday" in _text(d, "#timeline"), "the reason")
    _no_alert(driver)


def test_a_refused_decision_stays_readable_when_the_request_is_gone(
        driver: Any, studio: tuple[str, Path]) -> None:  # noqa: F811
    """Two tabs decide one request: the second one's "refused: ..." must be seen, though the
    request's box (and the approvals section) is gone by the time the answer comes."""
    from selenium.webdriver.common.by import By

    url, checkpoints = studio
    run_id = start_suspended(checkpoints, "prod")
    driver.get(f"{url}/?token={TOKEN}")
    driver.get(f"{url}/run/cp/{run_id}")
    _until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#pending .request"), "the box")
    # this tab's POST is held until the other tab's approval has gone through
    driver.execute_script(
        "window.sent = fetch; window.fetch = (url, options) => options && options.method === "
        "'POST' ? new Promise((ok) => { window.release = () => ok(window.sent(url, options)); "
        "}) : window.sent(url, options);")
    driver.find_element(By.CSS_SELECTOR, ".request input.reason").send_keys("no")
    driver.find_element(By.CSS_SELECTOR, ".request button.reject").click()
    _until(driver, lambda d: d.execute_script("return typeof window.release") == "function",
           "the held rejection")
    csrf = driver.find_element(By.CSS_SELECTOR, 'meta[name="csrf"]').get_attribute("content")
    other = driver.execute_async_script(  # the other tab
        "const done = arguments[arguments.length - 1];"
        "window.sent(arguments[0], {method: 'POST', credentials: 'same-origin', headers: "
        "{'Content-Type': 'application/json', 'X-CSRF-Token': arguments[1]}, body: "
        "JSON.stringify({call_id: 'deploy_1'})}).then(r => r.json()).then(done);",
        f"/run/cp/{run_id}/approve", csrf)
    assert other["ok"], other
    _until(driver, lambda d: _text(d, "#status") == "success", "the run to finish")
    driver.execute_script("window.release()")
    message = driver.find_element(By.ID, "decision-msg")
    _until(driver, lambda d: message.get_attribute("textContent").startswith("refused"),
           "the refusal")
    assert message.is_displayed(), "the refusal is written where no one can see it"
    assert "already approved" in message.text or "finished" in message.text
    _no_alert(driver)
