"""A person's answer reaches the agent whose question they were shown, and no other.

Fixed here: two agents in two namespaces of one run whose models gave their ``ask_user`` calls
one id (``call_0``) asked under one request id (``ask:call_0``). The second question took the
first's place, so the person saw one question, and both agents read the one answer: "yes" to
"May I send the weekly report?" was read by the other agent as "yes" to "May I delete every
file in prod?", which nobody was shown. Now each question is asked under its namespace
(``left/ask:call_0``, ``right/ask:call_0``), and an answer goes to the one that was asked.
"""

from __future__ import annotations

import py_trees
from py_trees.common import ParallelPolicy

from jianmu import ReactiveRunner, RunStatus, StateManager
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState, create_react_node
from jianmu.tools import ToolSet

QUESTIONS = {"left": "May I send the weekly report?", "right": "May I delete every file in prod?"}


def asker(namespace: str) -> py_trees.behaviour.Behaviour:
    llm = ScriptedLLM([
        [{"id": "call_0", "name": "ask_user", "arguments": {"question": QUESTIONS[namespace]}}],
        lambda messages: f"read: {messages[-1].content}",
    ])
    node = create_react_node(llm, ToolSet.resolve(["ask_user"]), name=namespace)
    for part in node.iterate():
        part.namespace = namespace  # type: ignore[attr-defined]
    return node


def test_an_answer_is_read_only_by_the_agent_whose_question_was_shown() -> None:
    root = py_trees.composites.Parallel("team", policy=ParallelPolicy.SuccessOnAll(),
                                        children=[asker("left"), asker("right")])
    state = StateManager(AgentState)
    for namespace in QUESTIONS:
        state.scope(namespace).update({"messages": [{"role": "user", "content": "go"}]})
    runner = ReactiveRunner(root, state)

    first = runner.run_sync(timeout=30)
    assert first.status is RunStatus.SUSPENDED
    # both questions are shown, each under its own id
    assert sorted((r.id, r.question) for r in first.pending) == [
        ("left/ask:call_0", QUESTIONS["left"]), ("right/ask:call_0", QUESTIONS["right"]),
    ]
    runner.answer("left/ask:call_0", "yes")

    second = runner.run_sync(timeout=30)
    # the agent that asked about prod still waits: it read no answer it was not given
    assert second.status is RunStatus.SUSPENDED
    assert [r.id for r in second.pending] == ["right/ask:call_0"]
    assert state.scope("right").get("final_answer") is None
    runner.answer("right/ask:call_0", "no")
    assert runner.run_sync(timeout=30).ok
    assert state.scope("left").get("final_answer") == "read: yes"
    assert state.scope("right").get("final_answer") == "read: no"
