"""A run whose state holds a long list (thousands of messages, a big tool result kept as data):
its page's markup stays small, and the page still shows every item when asked.

Fixed here: the server wrote the whole state as nested markup, folded parts too, which the
page's script then replaced with its own (lazy) drawing: a state of 50,000 small items was 32 MB
of markup (2.4 MB of JSON), and Chromium took some 11 s parsing what it threw away. Skips its
browser half like `test_browser` when Chromium is missing.
"""

# ruff: noqa: F811 - the studio's fixtures are imported by name, and the tests take them
from __future__ import annotations

from pathlib import Path
from typing import Any

import py_trees
import pytest
from py_trees.common import Status
from pydantic import BaseModel
from starlette.testclient import TestClient

from jianmu import AsyncNode, ReactiveRunner, SQLiteCheckpointer, StateManager
from jianmu.studio import CheckpointRuns, create_app
from jianmu.studio.runs import Journal
from tests.studio.test_browser import (  # noqa: F401 - the fixtures
    TOKEN,
    _no_alert,
    _text,
    _until,
    driver,
    studio,
)

ITEMS = 5000


class _Kept(BaseModel):
    items: list[Any] = []


class _Keeps(AsyncNode):
    """Keeps many small records, as a long agent session keeps its messages."""

    async def update_async(self) -> Status:
        self.state.update({"items": [{"n": i, "tags": ["a", "b"], "seen": {"at": i}}
                                     for i in range(ITEMS)]})
        return Status.SUCCESS


def _run(path: Path) -> None:
    tree = py_trees.composites.Sequence("keeper", memory=True, children=[_Keeps("keep")])
    with SQLiteCheckpointer(str(path)) as store:
        assert ReactiveRunner(tree, StateManager(_Kept), checkpointer=store,
                              run_id="big").run_sync(timeout=60).ok


def test_the_page_of_a_big_state_is_smaller_than_its_data(tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.sqlite"
    _run(path)
    app = create_app([CheckpointRuns(str(path), Journal(str(path)))], TOKEN, by="tester",
                     project=str(tmp_path))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        client.get(f"/?token={TOKEN}")
        data = client.get("/api/run/cp/big")
        assert len(data.json()["state"]["root"]["items"]) == ITEMS  # the data holds it all
        page = client.get("/run/cp/big")
    assert page.status_code == 200
    assert len(page.content) < len(data.content), (len(page.content), len(data.content))
    assert f"[{ITEMS}]" in page.text  # the markup says how many there are


@pytest.mark.browser
@pytest.mark.timeout(300)
def test_a_long_list_opens_a_part_at_a_time_and_shows_its_last_item(
        driver: Any, studio: tuple[str, Path]) -> None:
    """Opening a list draws its first items and a button for more (the whole list at once, a
    list of 50,000 froze the page some 8 s); its last item is a few clicks away."""
    from selenium.webdriver.common.by import By

    url, checkpoints = studio
    _run(checkpoints)
    driver.get(f"{url}/?token={TOKEN}")
    driver.get(f"{url}/run/cp/big")
    _until(driver, lambda d: _text(d, "#status") == "success", "the run")
    _until(driver, lambda d: "(now)" in _text(d, "#state-at"), "the state drawn by the page")
    items = driver.find_element(By.XPATH, "//*[@id='state']//summary[span[@class='key' and "
                                          "text()='items']]")
    assert f"[{ITEMS}]" in items.text
    items.click()
    listed = "//*[@id='state']//details[summary/span[@class='key' and text()='items']]/ul/li"

    def drawn(d: Any) -> int:
        # counted in the page: the elements themselves, thousands of them, each sent over
        # WebDriver on every look, were most of the test's time
        return int(d.execute_script(
            "return document.evaluate(arguments[0], document, null, XPathResult.NUMBER_TYPE,"
            " null).numberValue", f"count({listed}[not(button)])"))

    _until(driver, lambda d: drawn(d) > 0, "the first items")
    first = drawn(driver)
    assert first < ITEMS // 4, first
    last = str(ITEMS - 1)
    for _ in range(ITEMS):  # each click draws some more, until none is left
        if driver.find_elements(By.XPATH, f"{listed}/span/details/summary/span[text()='{last}']"):
            break
        before = drawn(driver)
        driver.find_element(By.XPATH, f"{listed}/button[@class='more']").click()
        _until(driver, lambda d, seen=before: drawn(d) > seen, "more items")
    assert drawn(driver) == ITEMS
    assert not driver.find_elements(By.XPATH, f"{listed}/button")
    _no_alert(driver)


def test_an_open_part_holds_its_first_items_and_says_how_many_more() -> None:
    from jianmu.studio.pages import SHOWN_ITEMS, json_tree

    wide = {"root": {f"key{i}": i for i in range(SHOWN_ITEMS + 50)}}
    markup = json_tree(wide)
    assert "key0</span>" in markup and f"key{SHOWN_ITEMS - 1}</span>" in markup
    assert f"key{SHOWN_ITEMS}</span>" not in markup
    assert "… 50 more" in markup and f"{{{SHOWN_ITEMS + 50}}}" in markup
