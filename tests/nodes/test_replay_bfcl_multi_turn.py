"""BFCL's multi-turn tasks replayed through `create_react_node` end in BFCL's own states.

The sample in ``tests/fixtures/bfcl_multi_turn`` (bfcl-eval 2026.3.23, see its README) holds ten
tasks of each multi-turn category (base, long context, missing function, missing parameter)
over BFCL's eight stateful API classes, each user turn with its ground-truth calls (Python call
strings). A scripted model makes each turn's calls against live instances of the classes; the
next user message comes with `ReactiveRunner.send`, a held-back function is registered at the
turn BFCL gives it, and the model is offered exactly BFCL's functions of the turn. After every
turn the instances' public state equals that of instances BFCL's way drives (each call
evaluated directly, in order), and each tool message is what the direct call returned. The
tools are made the two ways a user would: ``@tool`` on the bound methods (one call per model
turn: such a tool is a ``read`` by default, and reads of one batch run at once), and
`ToolSet.from_openai` with BFCL's own function documents and the bound methods as executors
(each user turn's calls in one batch: a tool from a schema is a ``write``, run in order).
"""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import json
from pathlib import Path
from typing import Any

import pytest

from jianmu import ReactiveRunner, ScriptedLLM, StateManager
from jianmu.nodes import AgentState, create_react_node
from jianmu.tools import Tool, ToolSet, tool
from jianmu.tools.calls import truncate_text
from tests.nodes.test_bfcl_replay import _cast

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "bfcl_multi_turn"
TASKS = json.loads((SAMPLE / "tasks.json").read_text(encoding="utf-8"))
DOCS = json.loads((SAMPLE / "func_doc.json").read_text(encoding="utf-8"))
MODULES = {"GorillaFileSystem": "gorilla_file_system", "MathAPI": "math_api",
           "MessageAPI": "message_api", "TwitterAPI": "posting_api", "TicketAPI": "ticket_api",
           "TradingBot": "trading_bot", "TravelAPI": "travel_booking",
           "VehicleControlAPI": "vehicle_control"}
STATELESS = {"MathAPI"}  # bfcl_eval.constants.executable_backend_config.STATELESS_CLASSES
MORE_FUNCTIONS = "I have updated some more functions you can choose from. What about now?"
"""What BFCL says at a turn that gives held-back functions (DEFAULT_USER_PROMPT_FOR_ADDITIONAL_
FUNCTION_FC in bfcl_eval.constants.default_prompts)."""


def instances(task: dict[str, Any]) -> dict[str, Any]:
    """The task's API objects as BFCL's `execute_multi_turn_func_call` makes them."""
    made = {}
    for name in task["involved_classes"]:
        module = importlib.import_module(f"tests.fixtures.bfcl_multi_turn.{MODULES[name]}")
        instance = getattr(module, name)()
        if name not in STATELESS:
            instance._load_scenario(copy.deepcopy(task["initial_config"].get(name, {})),
                                    long_context="long_context" in task["id"])
        made[name] = instance
    return made


def methods(objects: dict[str, Any]) -> dict[str, Any]:
    """Every public method by name, as BFCL maps a call's name to its instance."""
    return {name: method for instance in objects.values()
            for name, method in inspect.getmembers(instance, inspect.ismethod)
            if not name.startswith("_")}


def public_state(objects: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What BFCL's `state_checker` compares: each instance's attributes not starting with _."""
    return {name: {k: v for k, v in vars(o).items() if not k.startswith("_")}
            for name, o in objects.items()}


def parsed(call: str) -> tuple[str, list[Any], dict[str, Any]]:
    """A ground-truth call string's name, positional and keyword arguments."""
    node = ast.parse(call, mode="eval").body
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name), call
    return (node.func.id, [ast.literal_eval(a) for a in node.args],
            {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg})


def as_observed(result: Any) -> str:
    """A direct call's result as a tool message carries it (JSON; text as it is)."""
    if result is None:
        return ""
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False, default=str)


def offered(task: dict[str, Any], names: list[str], turn: int) -> list[str]:
    """The functions the model has at ``turn``: all but the excluded and the held back."""
    held = {n for t, ns in task.get("missed_function", {}).items() if int(t) > turn for n in ns}
    return [n for n in names if n not in task.get("excluded_function", []) and n not in held]


def tools_for(
    way: str, task: dict[str, Any], bound: dict[str, Any], names: list[str]
) -> list[Tool]:
    """Tools for the functions ``names``: ``@tool`` on the bound methods, or BFCL's documents."""
    if way == "methods":
        return [tool(bound[n]) for n in names]
    definitions = []
    for cls in task["involved_classes"]:
        for doc in copy.deepcopy(DOCS[MODULES[cls]]):
            if doc["name"] in names:  # as bfcl's convert_to_tool gives them to an OpenAI model
                doc["parameters"]["type"] = "object"
                doc["parameters"]["properties"] = _cast(doc["parameters"]["properties"])
                definitions.append({"type": "function", "function": doc})
    return list(ToolSet.from_openai(definitions, {n: bound[n] for n in names}))


def scripted(task: dict[str, Any], way: str, bound: dict[str, Any]) -> list[Any]:
    """The model's side: each turn's ground-truth calls (one per model turn, or all in one
    parallel batch), then a text answer."""
    script: list[Any] = []
    for turn, calls in enumerate(task["ground_truth"]):
        made = []
        for i, call in enumerate(calls):
            name, args, kwargs = parsed(call)
            params = list(inspect.signature(bound[name]).parameters)  # positional by name
            made.append({"id": f"t{turn}c{i}", "name": name,
                         "arguments": {**dict(zip(params, args, strict=False)), **kwargs}})
        if made:
            script += [made] if way == "openai_definitions" else [[c] for c in made]
        script.append(f"Turn {turn} done.")
    return script


def replay(task: dict[str, Any], way: str) -> None:
    reference, ours = instances(task), instances(task)
    direct, bound = methods(reference), methods(ours)
    names = list(bound)
    state = StateManager(AgentState, {"messages": task["question"][0]})
    llm = ScriptedLLM(scripted(task, way, bound))
    agent = create_react_node(llm, tools_for(way, task, bound, offered(task, names, 0)),
                              max_iterations=1000)
    runner = ReactiveRunner(agent, state)
    for turn, calls in enumerate(task["ground_truth"]):
        if turn:
            new = [n for n in offered(task, names, turn) if n not in offered(task, names, turn - 1)]
            for made in tools_for(way, task, bound, new):
                agent.executor.register_tool(made)  # the function BFCL gives at this turn
            (message,) = task["question"][turn] or [MORE_FUNCTIONS]  # one a turn in BFCL
            runner.send(message)
        before = len(state.get("messages"))
        result = runner.run_sync(timeout=120)
        assert result.ok and state.get("final_answer") == f"Turn {turn} done.", (
            task["id"], turn, result.error)
        assert sorted(llm.requests[-1].tool_names) == sorted(offered(task, names, turn))
        expected = []
        for call in calls:  # BFCL's way: evaluated on the instance, the result read at once
            name, args, kwargs = parsed(call)
            limit = agent.executor.toolset[name].max_result_length
            expected.append(truncate_text(as_observed(direct[name](*args, **kwargs)), limit)[0])
        observed = [m.content for m in state.get("messages")[before:] if m.role == "tool"]
        assert observed == expected, (task["id"], turn)
        assert public_state(ours) == public_state(reference), (task["id"], turn)


@pytest.mark.parametrize("way", ["methods", "openai_definitions"])
def test_bfcl_multi_turn_tasks_end_in_bfcls_own_states(way: str) -> None:
    assert len(TASKS) == 40 and sum(len(t["ground_truth"]) for t in TASKS) == 168
    for task in TASKS:
        replay(task, way)
