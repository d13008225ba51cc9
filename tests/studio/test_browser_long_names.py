"""The studio in a real browser, on a run whose node names are very long (a name is whatever the
tree, a skill or an agent chose): the graph cuts them to fit its boxes without freezing the page,
and a node's details still give the whole name. Skips like `test_browser` when Chromium is
missing."""

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
LONG = 50_000


def test_very_long_node_names_are_cut_in_the_graph_not_the_details(
        driver: Any, studio: tuple[str, Path]) -> None:  # noqa: F811
    import py_trees
    from selenium.webdriver.common.by import By

    from jianmu import ReactiveRunner, SQLiteCheckpointer, StateManager
    from jianmu.nodes import AgentState

    url, checkpoints = studio
    root = "مرحبا 🎉 " + "r" * LONG
    tree = py_trees.composites.Sequence(root, memory=True, children=[
        py_trees.behaviours.Success("s" * LONG), py_trees.behaviours.Success("ok")])
    store = SQLiteCheckpointer(str(checkpoints))
    runner = ReactiveRunner(tree, StateManager(AgentState, {}), checkpointer=store,
                            run_id="long-names")
    assert runner.run_sync(timeout=60).ok
    store.close()
    driver.get(f"{url}/?token={TOKEN}")
    driver.get(f"{url}/run/cp/long-names")
    _until(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#tree [data-node]")) == 3,
           "the graph's three nodes")
    names = driver.execute_script(
        "return Array.from(document.querySelectorAll('#tree text.name')).map(t => t.textContent)")
    long_ones = [n for n in names if len(n) > 10]
    assert len(long_ones) == 2 and all(n.endswith("…") and len(n) < 200 for n in long_ones)
    driver.find_element(By.CSS_SELECTOR, '#tree [data-key="0"]').click()
    _until(driver, lambda d: _text(d, "#details .node-name") == root, "the root's whole name")
    _no_alert(driver)
