"""A sub-agent halted with its caller (a cancel, the run's timeout) goes on where it stood.

Found by the scenario fuzz (`tests/runtime/test_scenario_fuzz.py`): a sub-agent whose model had
answered with tool calls, stopped before its executor ran them, kept its node statuses with the
model's node still running. The call run again rebuilt the sub-agent from them and asked its
model again: the calls never ran, and the model was sent a call with no result (a 400 from
OpenAI's and Anthropic's APIs).
"""

from __future__ import annotations

import pytest

from jianmu import AgentState, ReactiveRunner, RunStatus, ScriptedLLM, StateManager, tool
from jianmu.nodes import agent_tool, create_react_node
from jianmu.runtime.events import Event

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.mark.parametrize("factory", [True, False], ids=["tree per call", "one tree"])
async def test_a_sub_agent_stopped_after_its_models_calls_runs_them_when_it_goes_on(
    factory: bool,
) -> None:
    noted: list[str] = []

    @tool
    async def note(text: str) -> str:
        """Write a note.

        Args:
            text: the note.
        """
        noted.append(text)
        return "noted"

    models: list[ScriptedLLM] = []

    def helper() -> object:
        models.append(ScriptedLLM([[{"name": "note", "arguments": {"text": "tides"}}], "Done."]))
        return create_react_node(models[-1], [note], name="helper")

    lead = create_react_node(
        ScriptedLLM([[{"name": "helper", "arguments": {"input": "Note tides."}}], "Noted."]),
        [agent_tool(helper if factory else helper(), name="helper", description="Notes.")],
        name="lead")
    runner = ReactiveRunner(lead, StateManager(AgentState, {
        "messages": [{"role": "user", "content": "Go."}]}))
    stopped: list[Event] = []

    def stop_once(event: Event) -> None:  # right after the helper's model asked for a call
        if not stopped and "helper[" in (event.node or ""):
            stopped.append(event)
            runner.cancel()

    runner.ctx.events.subscribe("llm.call.completed", stop_once)
    assert (await runner.run(timeout=30)).status is RunStatus.CANCELLED
    assert noted == []
    result = await runner.run(timeout=30)
    assert result.status is RunStatus.SUCCESS, result.error
    assert noted == ["tides"]  # the call the helper's model asked for ran, once
    sent = [[(m.role, [c.id for c in m.tool_calls], m.tool_call_id) for m in request.messages]
            for model in models for request in model.requests]
    # its model was asked once for the call, once for the answer, which it had the result for
    assert sent == [[("user", [], None)],
                    [("user", [], None), ("assistant", ["call_1"], None), ("tool", [], "call_1")]]
