"""Three parallel branches that each wait for a person: two sub-agents that a lead agent calls
in one round, and a plain `ToolNode`; every payment appends a line to ``$LEDGER``. Run as a
script, it is one process's turn at a run (``three_branches.py CHECKPOINTS RUN|new
DECISIONS_JSON``): restore it, give the decisions, run it, print the result as JSON."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import py_trees

from jianmu import AgentState, tool
from jianmu.llm import ScriptedLLM
from jianmu.nodes import ToolNode, agent_tool, create_react_node
from jianmu.tools import Tool


def payment(who: str) -> Tool:
    """``pay_WHO``: asks a person first, then writes ``WHO AMOUNT`` to the ledger."""

    @tool(category="write", permission="user_confirm", name=f"pay_{who}")
    def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: how much.
        """
        with open(os.environ["LEDGER"], "a", encoding="utf-8") as ledger:
            ledger.write(f"{who} {amount}\n")
        return f"{who} paid {amount}"

    return pay


def _results(messages: list[Any]) -> list[str]:
    return [m.content for m in messages if m.role == "tool"]


def _sub_agent(who: str) -> Any:
    def reply(messages: list[Any]) -> Any:
        done = _results(messages)
        if not done:
            return [{"id": f"p_{who}", "name": f"pay_{who}", "arguments": {"amount": 10}}]
        return f"{who}: {done[-1]}"

    return lambda: create_react_node(ScriptedLLM([reply] * 4), [payment(who)],
                                     name=f"agent_{who}")


def _lead(messages: list[Any]) -> Any:
    done = _results(messages)
    if not done:
        return [{"id": "call_a", "name": "a", "arguments": {"input": "pay"}},
                {"id": "call_b", "name": "b", "arguments": {"input": "pay"}}]
    return " | ".join(done)


def build_tree() -> py_trees.behaviour.Behaviour:
    """The lead (sub-agents ``a`` and ``b``) beside the step ``pay_c`` (amount 30)."""
    agents = [agent_tool(_sub_agent(who), name=who, description=f"pays {who}")
              for who in ("a", "b")]
    return py_trees.composites.Parallel(
        "three", policy=py_trees.common.ParallelPolicy.SuccessOnAll(), children=[
            create_react_node(ScriptedLLM([_lead] * 4), agents, name="lead"),
            ToolNode("pay_c", payment("c"), input_key="c_input", output_key="c_output"),
        ])


def main(checkpoints: str, run_id: str, decisions: list[list[Any]]) -> None:
    """One process's turn: start (``new``) or restore the run, decide, run, print JSON."""
    from jianmu import ReactiveRunner, SQLiteCheckpointer, StateManager

    with SQLiteCheckpointer(checkpoints) as store:
        if run_id == "new":
            state = StateManager(AgentState, {
                "messages": [{"role": "user", "content": "Pay."}], "c_input": {"amount": 30}})
            runner = ReactiveRunner(build_tree(), state, checkpointer=store)
        else:
            runner = ReactiveRunner.restore(build_tree(), store, run_id,
                                            state_manager=StateManager(AgentState))
        for decision, request, *edit in decisions:
            if decision == "approve":
                runner.approve(request, arguments=edit[0] if edit else None)
            else:
                runner.reject(request, "no")
        result = runner.run_sync(timeout=60)
    print(json.dumps({"run": runner.run_id, "status": result.status.value,
                      "error": result.error, "pending": [r.id for r in result.pending],
                      "answer": runner.state.get("final_answer"),
                      "c": runner.state.get("c_output")}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]))
