"""Red team, `run_sync` on a threaded web server: a run begun on one worker thread is resumed on
another (the person's approval is another request), while the first thread serves a third.

Fixed here: a runner keeps the loop it first ran on, the loop of the thread that began it, so the
resuming thread ran that thread's loop; the first thread's next request, a new run of its own,
was handed its thread's loop while the other thread ran it, and failed with "this runner's event
loop is running in another thread". A thread whose loop another thread runs now gets a loop of
its own for its new runs (the lent one is kept, and shut down as the thread ends).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from jianmu import Agent, RunStatus, ScriptedLLM, tool

WAIT = 60  # seconds: a bound for a loaded machine, never reached when the code is right


def test_a_thread_serves_new_runs_while_another_resumes_a_run_it_began() -> None:
    paid: list[str] = []
    paying = threading.Event()
    release = threading.Event()

    @tool(confirm=True, category="write")
    def pay(to: str) -> str:
        """Pay someone (a person approves first).

        Args:
            to: who gets the money.
        """
        paying.set()
        release.wait(WAIT)
        paid.append(to)
        return "paid"

    def model(messages: list[Any]) -> Any:
        last = messages[-1]
        if last.role == "user" and last.content == "pay bob":
            return [{"name": "pay", "arguments": {"to": "bob"}}]
        return f"answered {last.content}"

    agent = Agent(ScriptedLLM([model] * 10), tools=[pay])
    with ThreadPoolExecutor(1) as first, ThreadPoolExecutor(1) as second:
        asked = first.submit(agent.run_sync, "pay bob").result(WAIT)
        assert asked.status is RunStatus.SUSPENDED
        asked.approve()
        resumed = second.submit(agent.run_sync, resume=asked)
        try:
            assert paying.wait(WAIT)  # the first thread's loop now runs in the second
            served = first.submit(agent.run_sync, "hello").result(WAIT)
        finally:
            release.set()
        assert resumed.result(WAIT).status is RunStatus.SUCCESS
    assert served.status is RunStatus.SUCCESS and served.output == "answered hello"
    assert paid == ["bob"]
