"""Red team, the studio in a real browser: hidden characters (a bidi override, a zero-width
space, an ANSI escape) in the two places of the run page that still showed them raw. Everywhere
else the page shows them as escapes (``\\u202e``), as the CLI does: raw, a bidi override makes
``prod\\u202egnp.exe`` read as ``prodexe.png``.

Fixed here: a failed node's "last error" in the details panel (a tool's or a model's text in
an exception), the state panel's "changed here:" line (a state key a node chose), and the fork
box, whose state (a tool's result, a model's text) was written raw for the person to read and
edit. The fork still starts from the very same state, edited or not.
Skips like `test_browser` when Chromium is missing.
"""

# ruff: noqa: F811 - the studio's fixtures are imported by name, and the tests take them
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import py_trees
import pytest
from py_trees.common import Status
from pydantic import BaseModel, ConfigDict

from jianmu import AsyncNode, ReactiveRunner, SQLiteCheckpointer, StateManager
from jianmu.nodes import AgentState
from tests.studio.test_browser import (  # noqa: F401 - the fixtures
    TOKEN,
    _no_alert,
    _text,
    _until,
    driver,
    studio,
)
from tests.studio.test_browser_fork import _exact, _fork_on_page
from tests.support.studio import start_suspended

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]
HIDDEN = "prod\u202egnp.exe \x1b[2J zero\u200bwidth"
RAW = ("\u202e", "\x1b", "\u200b")


def _raw(text: str) -> list[str]:
    return [c for c in RAW if c in text]


class _Fails(AsyncNode):
    """Fails with a text that came from a run (a tool's error, a model's words)."""

    async def update_async(self) -> Status:
        raise RuntimeError(f"cannot deploy {HIDDEN}")


def test_a_failed_nodes_last_error_shows_hidden_characters_as_escapes(
        driver: Any, studio: tuple[str, Path]) -> None:
    from selenium.webdriver.common.by import By

    url, checkpoints = studio
    tree = py_trees.composites.Sequence("flow", memory=True, children=[_Fails("deploy")])
    with SQLiteCheckpointer(str(checkpoints)) as store:
        runner = ReactiveRunner(tree, StateManager(AgentState), checkpointer=store,
                                run_id="failed")
        assert runner.run_sync(timeout=60).status.value == "failure"
    driver.get(f"{url}/?token={TOKEN}")
    driver.get(f"{url}/run/cp/failed")
    _until(driver, lambda d: _text(d, "#status") == "failure", "the run's status")
    node = '#tree [data-node="flow/deploy"]'
    _until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, node), "the failed node")
    driver.find_element(By.CSS_SELECTOR, node).click()
    _until(driver, lambda d: "cannot deploy" in _text(d, "#details pre.error"), "its error")
    error = str(driver.execute_script(
        "return document.querySelector('#details pre.error').textContent"))
    assert not _raw(error), error
    assert "prod\\u202egnp.exe" in error
    _no_alert(driver)


def test_the_fork_box_shows_hidden_characters_as_escapes_and_forks_the_same_state(
        driver: Any, studio: tuple[str, Path]) -> None:
    url, checkpoints = studio
    run_id = start_suspended(checkpoints, HIDDEN)
    driver.get(f"{url}/?token={TOKEN}")
    driver.get(f"{url}/run/cp/{run_id}")
    _until(driver, lambda d: _text(d, "#status") == "suspended", "the run")
    from selenium.webdriver.common.by import By

    driver.find_element(By.CSS_SELECTOR, "[data-role=fork]").click()
    box = driver.find_element(By.CSS_SELECTOR, "[data-role=fork-state]")
    _until(driver, lambda d: '"root"' in box.get_attribute("value"), "the state to edit")
    shown = str(box.get_attribute("value"))
    assert not _raw(shown), [c for c in RAW if c in shown]
    assert "prod\\u202egnp.exe" in shown
    driver.find_element(By.CSS_SELECTOR, "[data-role=fork-cancel]").click()

    def target(run: str) -> str:
        (action,) = _exact(driver, f"/api/run/cp/{run}")["state"]["root"]["actions"]
        return str(action["arguments"]["target"])

    # untouched, and edited elsewhere: the fork runs the text the run holds, not its escapes
    untouched = _fork_on_page(driver, run_id)
    _until(driver, lambda d: _text(d, "#status") == "suspended", "the fork to wait")
    assert target(untouched) == HIDDEN
    edited = _fork_on_page(driver, untouched, lambda text: text.replace(
        '"tool_effects": {}', '"tool_effects": {"typed": 1}', 1))
    _until(driver, lambda d: _text(d, "#status") == "suspended", "the second fork to wait")
    assert target(edited) == HIDDEN
    assert json.dumps(_exact(driver, f"/api/run/cp/{edited}")["state"]["root"][
        "tool_effects"]) == '{"typed": 1}'
    _no_alert(driver)


class _Open(BaseModel):
    """A state that takes keys its nodes choose."""

    model_config = ConfigDict(extra="allow")
    step: int = 0


class _Writes(AsyncNode):
    """Writes a key named by a run's text."""

    async def update_async(self) -> Status:
        self.state.update({f"key {HIDDEN}": 1, "step": 1})
        return Status.SUCCESS


def test_the_keys_changed_at_a_point_show_hidden_characters_as_escapes(
        driver: Any, studio: tuple[str, Path]) -> None:
    url, checkpoints = studio
    tree = py_trees.composites.Sequence("flow", memory=True, children=[_Writes("write")])
    with SQLiteCheckpointer(str(checkpoints)) as store:
        runner = ReactiveRunner(tree, StateManager(_Open), checkpointer=store, run_id="keys")
        assert runner.run_sync(timeout=60).ok
    driver.get(f"{url}/?token={TOKEN}")
    driver.get(f"{url}/run/cp/keys")
    _until(driver, lambda d: _text(d, "#status") == "success", "the run's status")
    _until(driver, lambda d: "changed here" in _text(d, "#state"), "the changed keys")
    said = str(driver.execute_script(
        "return document.querySelector('#state .changed-keys').textContent"))
    assert not _raw(said), said
    assert "key prod\\u202egnp.exe" in said
    _no_alert(driver)
