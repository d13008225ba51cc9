"""BFCL's sample tasks replayed through `create_react_node`: tools from the definitions as BFCL
converts them for OpenAI-style models, a scripted model making the ground-truth calls; every
call runs once with exactly the scripted arguments, and nothing else runs."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from jianmu import AgentState, ReactiveRunner, ScriptedLLM, StateManager, ToolSet, create_react_node

FIXTURES = Path(__file__).parents[1] / "fixtures" / "bfcl"
TASKS = [json.loads(line) for line in
         (FIXTURES / "questions.jsonl").read_text(encoding="utf-8").splitlines()]
ANSWERS = {a["id"]: a for a in (json.loads(line) for line in (
    FIXTURES / "possible_answer.jsonl").read_text(encoding="utf-8").splitlines())}

# bfcl_eval.constants.type_mappings.GORILLA_TO_OPENAPI
OPENAPI = {"integer": "integer", "number": "number", "float": "number", "string": "string",
           "boolean": "boolean", "bool": "boolean", "array": "array", "list": "array",
           "dict": "object", "object": "object", "tuple": "array", "any": "string",
           "byte": "integer", "short": "integer", "long": "integer", "double": "number",
           "char": "string", "ArrayList": "array", "Array": "array", "HashMap": "object",
           "Hashtable": "object", "Queue": "array", "Stack": "array", "Any": "string",
           "String": "string", "Bigint": "integer"}


def _cast(properties: dict[str, Any]) -> dict[str, Any]:
    """bfcl_eval.model_handler.utils._cast_to_openai_type, for GORILLA_TO_OPENAPI."""
    for value in properties.values():
        value["type"] = OPENAPI.get(value.get("type", "string"), "string")
        if value["type"] in ("array", "object"):
            if "properties" in value:
                value["properties"] = _cast(value["properties"])
            elif "items" in value:
                items = value["items"]
                items["type"] = OPENAPI[items["type"]]
                if items["type"] == "array" and "items" in items:
                    items["items"]["type"] = OPENAPI[items["items"]["type"]]
                elif items["type"] == "object" and "properties" in items:
                    items["properties"] = _cast(items["properties"])
    return properties


def converted(task: dict[str, Any]) -> list[dict[str, Any]]:
    """The task's tools as BFCL sends them to an OpenAI-style model (`convert_to_tool`, after
    `_func_doc_language_specific_pre_processing`: Java and JavaScript values are strings)."""
    tools = []
    for item in copy.deepcopy(task["function"]):
        if task["id"].startswith(("simple_java", "simple_javascript")):
            for value in item["parameters"]["properties"].values():
                value.pop("items", None)
                value.pop("properties", None)
                value["type"] = "string"
        item["name"] = item["name"].replace(".", "_")
        item["parameters"]["type"] = "object"
        item["parameters"]["properties"] = _cast(item["parameters"]["properties"])
        tools.append({"type": "function", "function": item})
    return tools


def first_acceptable(value: Any, required: Any = ()) -> Any:
    """A possible answer's first acceptable value; a parameter that may be left out ("") is."""
    if isinstance(value, dict):
        return {k: first_acceptable(next(x for x in vs if x != "")) for k, vs in value.items()
                if "" not in vs or k in required}
    if isinstance(value, list):
        return [first_acceptable(x) for x in value]
    return value


def scripted_calls(task: dict[str, Any]) -> list[dict[str, Any]]:
    required = {f["name"]: f["parameters"].get("required", []) for f in task["function"]}
    calls = []
    for truth in ANSWERS[task["id"]]["ground_truth"]:
        ((name, params),) = truth.items()
        arguments = first_acceptable(params, required[name])
        if task["id"].startswith(("simple_java", "simple_javascript")):  # strings, as sent
            arguments = {k: v if isinstance(v, str) else json.dumps(v)
                         for k, v in arguments.items()}
        calls.append({"name": name.replace(".", "_"), "arguments": arguments})
    return calls


@pytest.mark.parametrize("task", TASKS, ids=[t["id"] for t in TASKS])
def test_a_bfcl_task_runs_exactly_its_ground_truth_calls(task: dict[str, Any]) -> None:
    received: list[tuple[str, dict[str, Any]]] = []
    definitions = converted(task)

    def recorder(name: str) -> Any:
        def record(**kwargs: Any) -> str:
            received.append((name, kwargs))
            return "ok"
        return record

    tools = ToolSet.from_openai(
        definitions, {d["function"]["name"]: recorder(d["function"]["name"])
                      for d in definitions})
    relevant = task["id"] in ANSWERS
    calls = scripted_calls(task) if relevant else []
    script: list[Any] = [calls, "Done."] if relevant else ["None of these tools can help."]
    state = StateManager(AgentState, {"messages": task["question"][0]})
    assert ReactiveRunner(create_react_node(ScriptedLLM(script), tools), state).run_sync().ok
    key = lambda call: (call[0], json.dumps(call[1], sort_keys=True))  # noqa: E731
    assert sorted(map(key, received)) == sorted(
        key((c["name"], c["arguments"])) for c in calls)
