"""The studio in a real browser, on a question a sub-agent asks (``ask_user`` in its tree): the
box says which agent asks, as the CLI does, and its markup stays text. Skips like
`test_browser` when Chromium is missing."""

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
FLOW = Path(__file__).resolve().parent / "agent_ask_flow.py"


def asking_team_run(path: Path) -> str:
    """A lead whose researcher asks the user a question, suspended on it: the run's id."""
    from jianmu import ReactiveRunner, ScriptedLLM, SQLiteCheckpointer, StateManager
    from jianmu.nodes import AgentState, agent_tool, create_react_node
    from jianmu.tools.builtin.ask import ask_user

    researcher = create_react_node(ScriptedLLM([
        [{"name": "ask_user", "arguments": {"question": "Which <img src=x onerror=alert(1)>?"}}],
        "ok",
    ]), [ask_user], name="researcher")
    lead = create_react_node(ScriptedLLM([
        [{"name": "researcher", "arguments": {"input": "go"}}], "Done.",
    ]), [agent_tool(researcher, name="researcher", description="R.")], name="lead")
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "q"}]})
    with SQLiteCheckpointer(path) as store:
        runner = ReactiveRunner(lead, state, checkpointer=store, run_id="asking")
        assert runner.run_sync(timeout=30).status.value == "suspended"
    return "asking"


def test_a_sub_agents_question_says_which_agent_asks(
        driver: Any, studio: tuple[str, Path]) -> None:  # noqa: F811
    """Drawn by the server (the page opened on it) and by the page (asked while it is open)."""
    from selenium.webdriver.common.by import By

    url, checkpoints = studio
    run_id = asking_team_run(checkpoints)
    driver.get(f"{url}/?token={TOKEN}")
    driver.get(f"{url}/run/cp/{run_id}")
    _until(driver, lambda d: _text(d, "#status") == "suspended", "the run")
    assert _text(driver, ".request.question .asker") == "asked by the sub-agent researcher"
    live = start_suspended(checkpoints, flow=FLOW)  # waits for flag_account first
    driver.get(f"{url}/run/cp/{live}")
    _until(driver, lambda d: _text(d, "#status") == "suspended", "the live run")
    driver.find_element(By.CSS_SELECTOR, ".request button.approve").click()
    _until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".request.question .asker"),
           "the question, asked while the page is open")
    assert _text(driver, ".request.question .asker") == "asked by the sub-agent researcher"
    assert _text(driver, ".request.question .question-text") == \
        "Which <img src=x onerror=alert(1)>?"
    _no_alert(driver)


def test_the_view_names_the_asking_agent_and_none_for_the_runs_own(tmp_path: Path) -> None:
    """The view's row: the sub-agent's path for its question, nothing for the run's own."""
    from jianmu import ReactiveRunner, ScriptedLLM, SQLiteCheckpointer, StateManager
    from jianmu.nodes import AgentState, create_react_node
    from jianmu.studio import CheckpointRuns
    from jianmu.studio.runs import Journal
    from jianmu.tools.builtin.ask import ask_user

    path = tmp_path / "runs.sqlite"
    run_id = asking_team_run(path)
    runs = CheckpointRuns(str(path), Journal(str(path)))
    (row,) = runs.view(run_id)["pending"]
    assert row["kind"] == "question" and row["asker"] == "researcher"
    lead = create_react_node(ScriptedLLM([
        [{"name": "ask_user", "arguments": {"question": "Which?"}}], "ok"]), [ask_user],
        name="lead")
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "q"}]})
    with SQLiteCheckpointer(path) as store:
        runner = ReactiveRunner(lead, state, checkpointer=store, run_id="own")
        assert runner.run_sync(timeout=30).status.value == "suspended"
    (own,) = runs.view("own")["pending"]
    assert own["kind"] == "question" and own["asker"] == ""
