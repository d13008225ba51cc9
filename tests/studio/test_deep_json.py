"""JSON nested past what Python's reader takes (a thousand levels on 3.11, some thousands on
3.13) in what the studio is sent: a decision's or a fork's body, the edited arguments, the fork
box's state. Each is refused with a 400 or 409 that says why, and the run is left as it was.

Fixed here: `json.loads` raised a RecursionError, not a ValueError, and the studio answered a
bare "500 Internal Server Error"; the fork box, which sends its text as typed, said only
"refused: HTTP 500". Skips its browser half like `test_browser` when Chromium is missing.
"""

# ruff: noqa: F811 - the studio's fixtures are imported by name, and the tests take them
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from jianmu.runtime import SQLiteCheckpointer
from jianmu.studio import create_app
from tests.studio.conftest import TOKEN as APP_TOKEN
from tests.studio.test_app import _csrf
from tests.studio.test_browser import (  # noqa: F401 - the fixtures
    TOKEN,
    _no_alert,
    _text,
    _until,
    driver,
    open_suspended_page,
    studio,
)
from tests.support.studio import start_suspended, studio_sources

DEEP = "[" * 50_000 + "]" * 50_000  # past the reader of 3.11 and 3.13 alike


@pytest.fixture
def client(checkpoints: Path, run_id: str) -> Any:
    """A client that holds the cookie, whose server errors are answers (as a browser gets)."""
    with TestClient(create_app(studio_sources(checkpoints), APP_TOKEN, by="tester"),
                    base_url="http://127.0.0.1", follow_redirects=False,
                    raise_server_exceptions=False) as http:
        http.get(f"/?token={APP_TOKEN}")
        yield http


def test_deeply_nested_json_is_refused_with_a_reason(client: TestClient, run_id: str,
                                                     checkpoints: Path) -> None:
    csrf = {"X-CSRF-Token": _csrf(client, run_id), "Content-Type": "application/json"}
    with SQLiteCheckpointer(str(checkpoints)) as store:
        runs = len(store.list_runs())
    sent = [
        (f"/run/cp/{run_id}/approve", DEEP),
        (f"/run/cp/{run_id}/approve", '{"call_id": "deploy_1", "arguments": ' + DEEP + "}"),
        (f"/run/cp/{run_id}/fork", '{"point": 0, "state": {"root": ' + DEEP + "}}"),
    ]
    for path, body in sent:
        answer = client.post(path, content=body, headers=csrf)
        assert answer.status_code == 400, (path, answer.text)
        assert "JSON" in answer.json()["error"]
    for path, body in [
        (f"/run/cp/{run_id}/approve", {"call_id": "deploy_1", "arguments_text":
                                       '{"target": ' + DEEP + "}"}),
        (f"/run/cp/{run_id}/fork", {"point": 0, "state_text": '{"root": ' + DEEP + "}"}),
    ]:
        answer = client.post(path, json=body, headers=csrf)
        assert answer.status_code == 400, (path, answer.text)
        assert "nested too deep" in answer.json()["error"]
    assert client.get(f"/api/run/cp/{run_id}").json()["status"] == "suspended"
    with SQLiteCheckpointer(str(checkpoints)) as store:
        assert len(store.list_runs()) == runs


@pytest.mark.browser
@pytest.mark.timeout(300)
def test_the_fork_box_says_why_a_deeply_nested_state_is_refused(
        driver: Any, studio: tuple[str, Path]) -> None:
    from selenium.webdriver.common.by import By

    url, checkpoints = studio
    run_id = start_suspended(checkpoints, "prod")
    open_suspended_page(driver, url, run_id)
    driver.find_element(By.CSS_SELECTOR, "[data-role=fork]").click()
    box = driver.find_element(By.CSS_SELECTOR, "[data-role=fork-state]")
    _until(driver, lambda d: '"root"' in box.get_attribute("value"), "the state to edit")
    driver.execute_script("arguments[0].value = arguments[1]", box,
                          box.get_attribute("value").replace(
                              '"tool_effects": {}', f'"tool_effects": {{"x": {DEEP}}}', 1))
    driver.find_element(By.CSS_SELECTOR, "[data-role=fork-start]").click()
    _until(driver, lambda d: _text(d, "#fork-msg").startswith("refused: "), "the refusal")
    assert "nested too deep" in _text(driver, "#fork-msg")
    assert f"/run/cp/{run_id}" in driver.current_url  # no fork was started
    _no_alert(driver)


def test_a_fork_whose_state_the_run_could_not_save_is_refused(client: TestClient, run_id: str,
                                                              checkpoints: Path) -> None:
    """A state that reads as JSON, fits the schema, but nests past what the run's state writes
    (pydantic's serializer stops a few hundred levels down): the fork started, and its run
    died at its first checkpoint in the studio's thread, shown as "stopped" for a resume that
    would die the same way."""
    csrf = {"X-CSRF-Token": _csrf(client, run_id)}
    with SQLiteCheckpointer(str(checkpoints)) as store:
        runs = len(store.list_runs())
    state = client.get(f"/api/run/cp/{run_id}/point/1/state").text
    deep = "[" * 600 + "]" * 600
    edited = state.replace('"final_output": null', f'"final_output": {deep}', 1)
    assert edited != state
    answer = client.post(f"/run/cp/{run_id}/fork", json={"point": 1, "state_text": edited},
                         headers=csrf)
    assert answer.status_code == 400, answer.text
    assert "cannot be saved" in answer.json()["error"]
    with SQLiteCheckpointer(str(checkpoints)) as store:
        assert len(store.list_runs()) == runs
