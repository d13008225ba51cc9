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


def test_a_long_right_to_left_name_wraps_in_the_timeline_and_the_details(
        driver: Any, studio: tuple[str, Path]) -> None:  # noqa: F811
    """A node named with 300 letters of Arabic and no space: the timeline's "what changed"
    ran past the list's left edge (cut off, no scroll bar to reach it) and the details
    panel's heading pushed the panel sideways."""
    import py_trees
    from selenium.webdriver.common.by import By

    from jianmu import ReactiveRunner, SQLiteCheckpointer, StateManager
    from jianmu.nodes import AgentState

    url, checkpoints = studio
    name = "وكيل_" + "بحث" * 100

    class Slow(py_trees.behaviour.Behaviour):  # running for a tick: a point names it
        def update(self) -> py_trees.common.Status:
            self.feedback_message = ""
            ticks = getattr(self, "ticks", 0) + 1
            self.ticks = ticks
            return py_trees.common.Status.SUCCESS if ticks > 1 else \
                py_trees.common.Status.RUNNING

    tree = py_trees.composites.Sequence(name, memory=True, children=[Slow("step")])
    store = SQLiteCheckpointer(str(checkpoints))
    assert ReactiveRunner(tree, StateManager(AgentState, {}), checkpointer=store,
                          run_id="rtl").run_sync(timeout=60).ok
    store.close()
    driver.get(f"{url}/?token={TOKEN}")
    driver.get(f"{url}/run/cp/rtl")
    _until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#timeline .changes"),
           "the timeline")
    assert any(name in e.text for e in driver.find_elements(By.CSS_SELECTOR,
                                                             "#timeline .changes"))
    past = ("const box = document.getElementById('timeline').getBoundingClientRect();"
            "return Array.from(document.querySelectorAll('#timeline .changes')).filter((c) => {"
            "  const b = c.getBoundingClientRect();"
            "  return b.left < box.left - 1 || b.right > box.right + 1; }).length;")
    assert driver.execute_script(past) == 0
    driver.find_element(By.CSS_SELECTOR, '#tree [data-key="0"]').click()
    _until(driver, lambda d: _text(d, "#details .node-name") == name, "the root's name")
    sideways = driver.execute_script(
        "const e = document.getElementById('details'); return e.scrollWidth - e.clientWidth")
    assert sideways <= 0
    _no_alert(driver)
