"""A ``BaseException`` a tool raises of its own is the call's failure, not the run's end.

Before the fix, a tool raising a ``BaseException`` that is not an ``Exception`` (pytest's
``Failed``/``Skipped``, gevent's ``Timeout``, trio's ``Cancelled``) escaped the run raw: no
`RunResult`, the assistant's calls left unanswered, and the next run started the write call
(an e-mail already sent) again. Now the model reads it as the call's failure and the
conversation stays whole; ``KeyboardInterrupt`` and a cancel of the call keep their meaning.
"""

from __future__ import annotations

import asyncio
from typing import Any

import py_trees
import pytest

from jianmu import AgentState, ReactiveRunner, RunStatus, StateManager, tool
from jianmu.llm.scripted import ScriptedLLM
from jianmu.nodes import ToolNode, create_react_node

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


class Failed(BaseException):
    """As pytest's ``Failed`` and gevent's ``Timeout`` are."""


class Mailer:
    """An e-mail tool, sync or async, whose library raises ``Failed`` after sending once."""

    def __init__(self, error: BaseException) -> None:
        self.sent: list[str] = []
        self.error = error

    def _send(self, to: str) -> str:
        self.sent.append(to)  # the e-mail left
        if len(self.sent) == 1:
            raise self.error
        return f"sent to {to}"

    def tool(self, kind: str) -> Any:
        if kind == "sync":
            @tool(category="write")
            def send_email(to: str) -> str:
                """Send an e-mail.

                Args:
                    to: The recipient.
                """
                return self._send(to)
            return send_email

        @tool(category="write")
        async def send_email_async(to: str) -> str:
            """Send an e-mail.

            Args:
                to: The recipient.
            """
            await asyncio.sleep(0)
            return self._send(to)
        return send_email_async


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("error", [
    Failed("the library gave up after sending"),
    BaseExceptionGroup("the library's tasks", [Failed("gave up"), ValueError("bad")]),
], ids=["base", "group"])
async def test_a_base_exception_from_a_tool_is_the_calls_failure(
    kind: str, error: BaseException,
) -> None:
    mailer = Mailer(error)
    name = "send_email" if kind == "sync" else "send_email_async"
    llm = ScriptedLLM([[{"id": "c1", "name": name, "arguments": {"to": "bob"}}], "done"])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "Mail Bob."}]})
    runner = ReactiveRunner(create_react_node(llm, [mailer.tool(kind)]), state)
    result = await runner.run(timeout=60)
    assert result.status is RunStatus.SUCCESS, result.error
    messages = state.get("messages")
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    told = str(messages[2].content)
    assert type(error).__name__ in told  # the model read what the tool raised
    assert type(error).__name__ in str(llm.requests[-1].messages[-1].content)
    assert (await runner.run(timeout=60)).ok  # a finished run stays finished
    assert mailer.sent == ["bob"]  # never sent again


async def test_a_tool_node_step_fails_with_the_base_exception_its_tool_raised() -> None:
    mailer = Mailer(Failed("the library gave up after sending"))
    tree = py_trees.composites.Sequence("steps", memory=True, children=[
        ToolNode("mail", mailer.tool("sync"), input_key="mail", output_key="receipt")])
    runner = ReactiveRunner(tree, StateManager(AgentState, {"mail": {"to": "bob"}}))
    result = await runner.run(timeout=60)
    assert result.status is RunStatus.FAILURE
    assert "Failed: the library gave up after sending" in (result.error or ""), result.error
    assert mailer.sent == ["bob"]


def test_a_keyboard_interrupt_a_sync_tool_raises_stops_the_run_and_is_not_run_again() -> None:
    """Still the person's: it leaves ``run_sync``, and the call that began is maybe done."""
    mailer = Mailer(KeyboardInterrupt())
    llm = ScriptedLLM([[{"id": "c1", "name": "send_email", "arguments": {"to": "bob"}}], "done"])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "Mail Bob."}]})
    runner = ReactiveRunner(create_react_node(llm, [mailer.tool("sync")]), state)
    with pytest.raises(KeyboardInterrupt):
        runner.run_sync()
    assert runner.run_sync().ok
    assert mailer.sent == ["bob"]
    (told,) = [m.content for m in state.get("messages") if m.role == "tool"]
    assert "may or may not have taken effect" in str(told)
