"""A run deleted while its page is open (``SQLiteCheckpointer.delete``): the live stream says so
and ends, and the page says the run is gone. It raised out of the stream instead (a traceback in
the studio's log on every poll of it), and the page, whose browser asked again and was refused a
stream, could only guess why ("started again? the run gone?").

Skips its browser half like `test_browser` when Chromium is missing."""

# ruff: noqa: F811 - the studio's fixtures are imported by name, and the tests take them
from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from jianmu import SQLiteCheckpointer
from jianmu.studio import create_app
from tests.studio.conftest import TOKEN as APP_TOKEN
from tests.studio.test_browser import (  # noqa: F401 - the fixtures
    TOKEN,
    _text,
    _until,
    driver,
    open_suspended_page,
    studio,
)
from tests.studio.test_stream import _events, _stream
from tests.support.studio import start_suspended, studio_sources


def _delete(checkpoints: Path, run_id: str) -> None:
    with SQLiteCheckpointer(str(checkpoints)) as store:
        store.delete(run_id)


def test_the_stream_of_a_run_deleted_under_it_says_so_and_ends(
        checkpoints: Path, run_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("jianmu.studio.app.POLL_S", 0.01)
    app = create_app(studio_sources(checkpoints), APP_TOKEN, by="tester")

    def until(chunks: list[bytes]) -> bool:
        if len(chunks) == 1:  # the run as it was: then it is deleted
            _delete(checkpoints, run_id)
        return any(name == "gone" for name, _ in _events(chunks))

    chunks = asyncio.run(_stream(app, f"/stream/run/cp/{run_id}", until))
    names = [name for name, _ in _events(chunks)]
    assert names == ["message", "gone"]
    said = json.loads(_events(chunks)[-1][1])
    assert run_id in said["error"]


@pytest.mark.browser
@pytest.mark.timeout(300)
def test_a_page_whose_run_was_deleted_says_it_is_gone(
        driver: Any, studio: tuple[str, Path]) -> None:
    from selenium.webdriver.common.by import By

    url, checkpoints = studio
    run_id = start_suspended(checkpoints, "prod")
    open_suspended_page(driver, url, run_id)
    _until(driver, lambda d: _text(d, "#live") == "live", "the stream")
    _delete(checkpoints, run_id)
    _until(driver, lambda d: _text(d, "#live").startswith("gone: "), "the page to say so")
    assert f"no run '{run_id}'" in _text(driver, "#live")
    # a decision then is refused, and the page still says why it shows no more
    driver.find_element(By.CSS_SELECTOR, ".request button.approve").click()
    _until(driver, lambda d: _text(d, "#decision-msg").startswith("refused: "), "a refusal")
    assert _text(driver, "#live").startswith("gone: ")



def test_a_run_deleted_and_run_again_under_its_id_shows_the_new_run(
        client: Any, checkpoints: Path) -> None:
    """A run id a script chooses ("nightly"), deleted in a terminal and run again: the studio
    showed the old run's state, answer and points (a frame it had kept), and a fork from the
    page started from that state."""
    from jianmu import AgentState, ReactiveRunner, ScriptedLLM, StateManager
    from jianmu.nodes import create_react_node

    def nightly(answer: str) -> None:
        with SQLiteCheckpointer(str(checkpoints)) as store:
            state = StateManager(AgentState, {"messages": [{"role": "user", "content": "q"}]})
            runner = ReactiveRunner(create_react_node(ScriptedLLM([answer]), []), state,
                                    checkpointer=store, run_id="nightly")
            assert runner.run_sync(timeout=60).ok

    nightly("first")
    view = client.get("/api/run/cp/nightly").json()
    last = view["points"][-1]["n"]
    assert view["result"] == "first"
    _delete(checkpoints, "nightly")
    assert client.get(f"/api/run/cp/nightly/point/{last}").status_code == 404
    nightly("second")
    assert client.get("/api/run/cp/nightly").json()["result"] == "second"
    point = client.get(f"/api/run/cp/nightly/point/{last}").json()
    assert point["state"]["root"]["final_answer"] == "second"


@pytest.mark.browser
@pytest.mark.timeout(300)
def test_a_fork_of_a_run_deleted_under_its_page_says_why_it_cannot(
        driver: Any, studio: tuple[str, Path]) -> None:
    """The fork box opened on the deleted run's state (a frame the studio had kept), and once
    refused it said "HTTP 404", where the studio had said the run is gone."""
    from selenium.webdriver.common.by import By

    url, checkpoints = studio
    run_id = start_suspended(checkpoints, "prod")
    open_suspended_page(driver, url, run_id)
    _until(driver, lambda d: _text(d, "#live") == "live", "the stream")
    _delete(checkpoints, run_id)
    _until(driver, lambda d: _text(d, "#live").startswith("gone: "), "the page to say so")
    driver.find_element(By.CSS_SELECTOR, "[data-role=fork]").click()
    _until(driver, lambda d: _text(d, "#fork-msg").startswith("cannot read"), "the refusal")
    assert f"run '{run_id}'" in _text(driver, "#fork-msg"), _text(driver, "#fork-msg")
    assert driver.find_element(By.CSS_SELECTOR, "[data-role=fork-start]").get_attribute(
        "disabled") is not None
