"""The studio in a real browser on how runs end badly (issue 36's promises: guardrails, fallback,
budgets, typed answers): the page says what happened and where (status, error, timeline entry,
node), with no script error. Skips like `test_browser` when Chromium is missing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from jianmu import (
    AgentState,
    FallbackLLM,
    ReactiveRunner,
    ScriptedLLM,
    SQLiteCheckpointer,
    StateManager,
    Tripwire,
    create_react_node,
    tool,
)
from jianmu.config import parse_config
from jianmu.errors import LLMTransientError
from tests.studio.test_browser import (  # noqa: F401 - the fixtures
    TOKEN,
    _no_alert,
    _text,
    _until,
    driver,
    studio,
)
from tests.support.studio import script_errors

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


@tool
def crash(n: int) -> str:
    """Fail.

    Args:
        n: a number.
    """
    raise RuntimeError("disk <b>on fire</b> </script>")


class _Invoice(BaseModel):
    total: float


class _Overloaded(ScriptedLLM):
    async def send(self, request: Any) -> Any:
        raise LLMTransientError("HTTP 503 from primary: overloaded")


def _no_keys(ctx: Any, text: str) -> Tripwire | None:
    return Tripwire("asks for a key") if "key" in text else None


def _no_sun(ctx: Any, text: Any) -> Tripwire:
    return Tripwire("no sunny answers")


def _run(checkpoints: Path, run_id: str, node: Any, config: Any = None) -> None:
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "the key?"}]})
    ReactiveRunner(node, state, config=config, checkpointer=SQLiteCheckpointer(str(checkpoints)),
                   run_id=run_id).run_sync(timeout=30)


def _open(page: Any, url: str, run_id: str, status: str) -> str:
    """The run's page once it shows ``status``: its timeline's text."""
    page.get(f"{url}/run/cp/{run_id}")
    _until(page, lambda d: _text(d, "#status") == status, f"{run_id} to show {status}")
    _until(page, lambda d: "run " + status in _text(d, "#timeline"), "the timeline")
    return _text(page, "#timeline")


def test_runs_that_end_badly_say_what_happened(driver: Any, studio: tuple[str, Path]) -> None:  # noqa: F811
    url, checkpoints = studio
    _run(checkpoints, "tripped", create_react_node(ScriptedLLM(["-"]), [],
                                                   input_guardrails=[_no_keys]))
    _run(checkpoints, "refused", create_react_node(ScriptedLLM(["Sunny."]), [],
                                                   output_guardrails=[_no_sun]))
    _run(checkpoints, "fell_back", create_react_node(FallbackLLM(
        [_Overloaded([], model="primary"), ScriptedLLM(["Hello."], model="backup")]), []))
    _run(checkpoints, "crashed", create_react_node(ScriptedLLM(
        [[{"name": "crash", "arguments": {"n": 1}}], "it crashed"]), [crash]))
    _run(checkpoints, "spent", create_react_node(ScriptedLLM(
        [[{"name": "crash", "arguments": {"n": 1}}], "done"]), [crash]),
        parse_config("guard:\n  budget: {total_tokens: 10}\n"))
    _run(checkpoints, "invalid", create_react_node(ScriptedLLM(
        [[{"name": "final_result", "arguments": {"total": "twelve"}}]] * 2), [],
        output_type=_Invoice, output_retries=1))
    driver.get(f"{url}/?token={TOKEN}")
    script_errors(driver)  # what came before is not these pages'

    timeline = _open(driver, url, "tripped", "failure")
    assert "input guardrail _no_keys tripped\nasks for a key (the run fails)" in timeline
    assert "GuardrailTripped: input guardrail '_no_keys' tripped" in _text(driver, "#error")
    # an ended run without an answer says so: the box was empty
    assert _text(driver, "#result") == ("no final answer: the run ended in failure (its error "
                                        "is above)")
    timeline = _open(driver, url, "refused", "failure")
    assert "output guardrail _no_sun tripped\nno sunny answers (the run fails)" in timeline
    assert "answers (not shown here: a guardrail judges the answer)" in timeline
    assert "Sunny." not in timeline
    timeline = _open(driver, url, "fell_back", "success")
    assert "model primary failed: asking backup\nHTTP 503 from primary: overloaded" in timeline
    assert _text(driver, "#result") == "Hello."
    timeline = _open(driver, url, "crashed", "success")
    assert "failed: crash\nRuntimeError: disk <b>on fire</b> </script>" in timeline
    timeline = _open(driver, url, "spent", "failure")
    assert "token budget exhausted" in timeline and "token budget exhausted" in _text(
        driver, "#error")
    timeline = _open(driver, url, "invalid", "failure")
    assert "output invalid" in timeline
    assert "OutputValidationError: the model's answer did not fit _Invoice" in _text(driver,
                                                                                    "#error")
    assert script_errors(driver) == []
    _no_alert(driver)
