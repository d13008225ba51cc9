"""The studio in a real browser, on the run of README's team example (examples/lead_researcher.py:
a lead agent calls a researcher agent as a tool), as a new user meets it: a keyboard goes down the
graph from its root, and the sub-agent's node tells the turns and calls its tree made. Skips like
`test_browser` when Chromium is missing."""

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
    _text,
    _until,
    driver,
    studio,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "lead_researcher.py"


def _team_run(checkpoints: Path) -> str:
    """``jianmu run examples/lead_researcher.py --non-interactive``: it suspends on the
    researcher's ``save_note``; its run id."""
    from jianmu.cli import main

    out = StringIO()
    with redirect_stdout(out):
        code = main(["run", str(EXAMPLE), "--config", str(checkpoints.parent / "jianmu.yaml"),
                     "--non-interactive"])
    assert code == 3, out.getvalue()
    found = re.search(r"run (\w+)", out.getvalue())
    assert found is not None, out.getvalue()
    return found.group(1)


def _open(driver: Any, url: str, run_id: str) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    driver.get(f"{url}/?token={TOKEN}")
    driver.get(f"{url}/run/cp/{run_id}")
    _until(driver, lambda d: _text(d, "#status") == "suspended", "the run")
    _until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, '#tree [data-kind="agent"]'),
           "the sub-agent's node")


def test_the_sub_agents_node_lists_the_turns_and_calls_of_its_tree(
        driver: Any, studio: tuple[str, Path]) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    url, checkpoints = studio
    _open(driver, url, _team_run(checkpoints))
    driver.find_element(By.CSS_SELECTOR, '#tree [data-kind="agent"]').click()
    _until(driver, lambda d: _text(d, "#details .node-name") == "researcher", "its details")
    calls = _text(driver, "#details")
    assert "no tool calls recorded" not in calls
    # its state is in a namespace of each call's, not the root state
    assert "researcher/<call id> (one per call)" in calls and "root state" not in calls
    for said in ("model turn", "started: search_notes", "result of search_notes",
                 "asked: save_note"):
        assert said in _text(driver, "#details .node-calls"), said
    # the lead's own node keeps its own: the researcher as one call, not the researcher's
    driver.find_element(By.CSS_SELECTOR, '#tree [data-node$="/lead.tools"]').click()
    _until(driver, lambda d: _text(d, "#details .node-name") == "lead.tools", "the lead's tools")
    assert "started: researcher" in _text(driver, "#details .node-calls")
    assert "search_notes" not in _text(driver, "#details .node-calls")
    _no_alert(driver)


def test_tab_goes_down_the_graph_from_its_root_and_enter_opens_a_node(
        driver: Any, studio: tuple[str, Path]) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    url, checkpoints = studio
    _open(driver, url, _team_run(checkpoints))
    fit = driver.find_element(By.CSS_SELECTOR, "[data-role=fit]")
    fit.send_keys(Keys.TAB)  # the graph's tools come just before it
    focused = []  # the nodes in the order Tab reaches them (a composite's fold after it)
    while driver.execute_script("return document.activeElement.closest('#tree') !== null"):
        here = driver.switch_to.active_element
        if here.get_attribute("class") == "node":
            focused.append(here.get_attribute("data-node"))
        here.send_keys(Keys.TAB)
    assert focused == ["lead", "lead/lead.round", "lead/lead.round/lead.llm",
                       "lead/lead.round/lead.tools", "lead/lead.round/lead.tools/researcher"]
    fit.send_keys(Keys.TAB)
    driver.switch_to.active_element.send_keys(Keys.ENTER)
    _until(driver, lambda d: _text(d, "#details .node-name") == "lead", "the root's details")
    _no_alert(driver)


def test_a_subtree_folds_and_unfolds_from_the_keyboard(
        driver: Any, studio: tuple[str, Path]) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    url, checkpoints = studio
    _open(driver, url, _team_run(checkpoints))
    nodes = 'return document.querySelectorAll("#tree g.node").length'
    assert driver.execute_script(nodes) == 5
    driver.find_element(By.CSS_SELECTOR, "[data-role=fit]").send_keys(Keys.TAB)  # the root
    driver.switch_to.active_element.send_keys(Keys.TAB)  # its fold, before its children
    fold = driver.switch_to.active_element
    assert fold.get_attribute("class") == "fold" and fold.get_attribute("role") == "button"
    fold.send_keys(Keys.ENTER)
    _until(driver, lambda d: d.execute_script(nodes) == 1, "the tree folded at its root")
    again = driver.switch_to.active_element  # the redrawn fold, still where the keys are
    assert again.get_attribute("class") == "fold" and again.text == "▸1"
    again.send_keys(Keys.SPACE)
    _until(driver, lambda d: d.execute_script(nodes) == 5, "the tree unfolded")
    assert driver.switch_to.active_element.get_attribute("class") == "fold"
    assert _text(driver, "#details .hint").startswith("Click a node")  # Enter was the fold's
    _no_alert(driver)
