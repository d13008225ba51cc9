"""AgentDojo's tasks replayed through `create_react_node` end with AgentDojo's own environment.

The sample in ``tests/fixtures/agentdojo`` (agentdojo 0.1.35, benchmark v1.2.2, see its README)
holds AgentDojo's real tool functions, each suite's default environment, and every task with
ground truth (all 97 user tasks, 26 injection tasks): its calls, what AgentDojo's own runtime
gave for each, and the hash of the environment after them. A scripted model makes each task's
calls, one a turn, then gives the task's expected answer. The tools take their environment as
AgentDojo's runtime gives it (``Annotated[Inbox, Depends("inbox")]``), bound here with
`functools.partial` as a user would, and reach Jianmu three ways: ``@tool`` on the bound
functions; ``@tool`` on a wrapper that takes the injected `RunContext` instead and finds the
environment in its ``extras``; and `ToolSet.from_openai` with the definitions AgentDojo
generates for its models (each function behind a small adapter that reads its arguments as
the types it annotates, as AgentDojo's runtime does: `ToolSet.from_openai` hands a function
exactly the JSON sent).
AgentDojo's own ``utility()`` and ``security()`` were checked on Jianmu's replay by
``make_sample.py`` with the real package; here the environment's hash stands for them, and
each observation is checked against what AgentDojo's function returned for the call.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import inspect
import json
import types
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from jianmu import AgentState, ReactiveRunner, ScriptedLLM, StateManager, ToolSet, create_react_node
from jianmu.runtime.context import RunContext
from jianmu.tools import tool
from tests.fixtures.agentdojo.runtime import Depends, TaskEnvironment
from tests.fixtures.agentdojo.tools import (
    banking_suite,
    cloud_drive_client,
    email_client,
    slack_suite,
    travel_suite,
    workspace_suite,
)

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "agentdojo"
ENVIRONMENTS = json.loads((SAMPLE / "environments.json").read_text(encoding="utf-8"))
DEFINITIONS = json.loads((SAMPLE / "tools.json").read_text(encoding="utf-8"))
TASKS = json.loads((SAMPLE / "tasks.json").read_text(encoding="utf-8"))
PROBES = json.loads((SAMPLE / "probes.json").read_text(encoding="utf-8"))
SUITES: dict[str, tuple[type[TaskEnvironment], list[Callable[..., Any]]]] = {
    "banking": (banking_suite.BankingEnvironment, banking_suite.TOOLS),
    "slack": (slack_suite.SlackEnvironment, slack_suite.TOOLS),
    "travel": (travel_suite.TravelEnvironment, travel_suite.TOOLS),
    "workspace": (workspace_suite.WorkspaceEnvironment, workspace_suite.TOOLS),
}
WAYS = ("tool_on_bound_functions", "tool_on_wrappers_given_the_context",
        "openai_definitions_annotated")
LONG = 100_000  # list_files returns ~26,000 characters: more than the default 20,000


@pytest.fixture(autouse=True)
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The tools stamp a sent email and a new file with ``datetime.datetime.now()``; the
    sample's hashes were taken at 2024-05-15 12:00."""

    class Frozen(datetime.datetime):
        @classmethod
        def now(cls, tz: datetime.tzinfo | None = None) -> datetime.datetime:
            return datetime.datetime(2024, 5, 15, 12, 0)

    shim = types.SimpleNamespace(**{k: getattr(datetime, k) for k in dir(datetime)
                                    if not k.startswith("__")})
    shim.datetime = Frozen
    for module in (email_client, cloud_drive_client):
        monkeypatch.setattr(module, "datetime", shim)
    yield


def environment(suite: str) -> TaskEnvironment:
    kind, _ = SUITES[suite]
    return kind.model_validate(ENVIRONMENTS[suite])


def with_environment(fn: Callable[..., Any], env: TaskEnvironment) -> functools.partial[Any]:
    """``fn`` with each ``Annotated[T, Depends(...)]`` parameter bound to its part of ``env``,
    as AgentDojo's runtime fills them."""
    hints = typing.get_type_hints(fn, include_extras=True)
    parts = {name: hint.__metadata__[0].extract_dep_from_env(env)
             for name, hint in hints.items()
             if typing.get_origin(hint) is typing.Annotated
             and isinstance(hint.__metadata__[0], Depends)}
    return functools.partial(fn, **parts)


def as_annotated(fn: functools.partial[Any]) -> Callable[..., Any]:
    """``fn`` taking each argument as the type it annotates: `ToolSet.from_openai` hands a
    function exactly the JSON the model sent (an enum as its string, a float written ``5`` as
    an int), where AgentDojo's runtime validates the arguments with pydantic first."""
    hints = typing.get_type_hints(fn.func)

    def call(**arguments: Any) -> Any:
        return fn(**{k: TypeAdapter(hints[k]).validate_python(v) for k, v in arguments.items()})

    call.__name__ = fn.func.__name__
    return call


def given_context(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` taking, in place of its ``Depends`` parameters, the injected `RunContext`, whose
    ``extras["env"]`` is the run's environment: a user's wrapper, described by the signature
    it sets (the model's parameters with their types, and ``ctx``)."""
    hints = typing.get_type_hints(fn, include_extras=True)
    parts = {name: hint.__metadata__[0] for name, hint in hints.items()
             if typing.get_origin(hint) is typing.Annotated
             and isinstance(hint.__metadata__[0], Depends)}
    signature = inspect.signature(fn)
    kept = [p.replace(annotation=hints.get(p.name, p.annotation))
            for p in signature.parameters.values() if p.name not in parts]
    context = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=RunContext)

    def call(*, ctx: RunContext, **arguments: Any) -> Any:
        env = ctx.extras["env"]
        return fn(**arguments, **{n: d.extract_dep_from_env(env) for n, d in parts.items()})

    call.__signature__ = signature.replace(parameters=[*kept, context])  # type: ignore[attr-defined]
    call.__name__, call.__doc__ = fn.__name__, fn.__doc__
    return call


def toolset(suite: str, env: TaskEnvironment, way: str) -> ToolSet:
    if way == "tool_on_wrappers_given_the_context":
        return ToolSet.from_tools([tool(given_context(fn), max_result_length=LONG)
                                   for fn in SUITES[suite][1]])
    bound = [with_environment(fn, env) for fn in SUITES[suite][1]]
    if way == "tool_on_bound_functions":
        return ToolSet.from_tools([tool(fn, max_result_length=LONG) for fn in bound])
    if way == "openai_definitions_annotated":
        bound = [as_annotated(fn) for fn in bound]  # type: ignore[misc]
    return ToolSet.from_openai(DEFINITIONS[suite], bound, metadata={
        d["function"]["name"]: {"max_result_length": LONG} for d in DEFINITIONS[suite]})


def replay(suite: str, calls: list[dict[str, Any]], answer: str, way: str
           ) -> tuple[TaskEnvironment, list[str]]:
    env = environment(suite)
    script: list[Any] = [[{"id": f"c{i}", **call}] for i, call in enumerate(calls)]
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "help"}]})
    agent = create_react_node(ScriptedLLM([*script, answer]), toolset(suite, env, way),
                              max_iterations=len(calls) + 2)
    result = ReactiveRunner(agent, state, extras={"env": env}).run_sync(timeout=60)
    assert result.ok and state.get("final_answer") == answer, result.error
    return env, [m.content or "" for m in state.get("messages") if m.role == "tool"]


def canonical(value: Any) -> Any:
    """``value`` with each list of strings sorted: AgentDojo orders an event's participants
    (and its invitation's recipients) by a ``set``, so by Python's string hashing, which
    changes from one process to the next."""
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [canonical(v) for v in value]
        return sorted(items) if all(isinstance(v, str) for v in items) else items
    return value


def env_hash(env: TaskEnvironment) -> str:
    """``make_sample.py``'s hash of an environment."""
    dumped = json.dumps(canonical(env.model_dump(mode="json")), sort_keys=True)
    return hashlib.sha256(dumped.encode()).hexdigest()


def seen_as(observation: str, expected: dict[str, Any]) -> bool:
    """Whether the model read what AgentDojo's function returned: text as it is, nothing as
    nothing, anything else as its JSON."""
    output = expected["output"]
    if output is None or isinstance(output, str):
        return observation == (output or "")
    return bool(canonical(json.loads(observation)) == canonical(output))


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("suite", sorted(SUITES))
def test_every_agentdojo_task_ends_with_agentdojos_environment(suite: str, way: str) -> None:
    tasks = [t for t in TASKS if t["suite"] == suite]
    users = sum(1 for t in tasks if t["id"].startswith("user_task_"))
    assert (users, len(tasks)) == {"banking": (16, 25), "slack": (21, 26), "travel": (20, 26),
                                   "workspace": (40, 46)}[suite]
    for task in tasks:
        env, observations = replay(suite, task["calls"], task["answer"], way)
        assert env_hash(env) == task["env_sha256"], task["id"]
        assert len(observations) == len(task["outputs"]), task["id"]
        for seen, expected in zip(observations, task["outputs"], strict=True):
            assert seen_as(seen, expected), (task["id"], seen[:200])


def test_every_task_made_in_one_turn_of_write_tools_runs_its_calls_in_order() -> None:
    # a model may ask for all its calls at once; tools that say they write (AgentDojo's tools
    # do not say: a plain @tool is a read, whose batch may run in parallel) run one by one
    for task in TASKS:
        env = environment(task["suite"])
        tools = ToolSet.from_tools([
            tool(with_environment(fn, env), max_result_length=LONG, category="write")
            for fn in SUITES[task["suite"]][1]])
        batch = [{"id": f"c{i}", **call} for i, call in enumerate(task["calls"])]
        state = StateManager(AgentState, {"messages": [{"role": "user", "content": "help"}]})
        agent = create_react_node(ScriptedLLM([batch, task["answer"]]), tools, max_iterations=3)
        assert ReactiveRunner(agent, state).run_sync(timeout=60).ok, task["id"]
        assert env_hash(env) == task["env_sha256"], task["id"]
        observations = [m.content or "" for m in state.get("messages") if m.role == "tool"]
        assert len(observations) == len(task["outputs"]), task["id"]
        assert all(map(seen_as, observations, task["outputs"])), task["id"]


@pytest.mark.parametrize("way", WAYS)
def test_a_call_agentdojo_refuses_is_an_observation_and_changes_nothing(way: str) -> None:
    for probe in PROBES:
        call = {"name": probe["name"], "arguments": probe["arguments"]}
        env, (seen,) = replay(probe["suite"], [call], "Sorry.", way)
        assert env_hash(env) == env_hash(environment(probe["suite"])), probe
        if probe["error"].startswith("ValidationError: "):  # refused before the call
            assert seen.startswith(f"Error: invalid arguments for tool '{probe['name']}'")
        else:  # the function's own error, as AgentDojo shows it
            assert seen == f"Error: {probe['error']}", probe


def _untitled(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _untitled(v) for k, v in schema.items() if k != "title"}
    return [_untitled(v) for v in schema] if isinstance(schema, list) else schema


@pytest.mark.parametrize("way", WAYS[:2])
@pytest.mark.parametrize("suite", sorted(SUITES))
def test_tool_gives_the_functions_the_definitions_agentdojo_gives_its_models(
        suite: str, way: str) -> None:
    made = {t.name: t for t in toolset(suite, environment(suite), way)}
    assert sorted(made) == sorted(d["function"]["name"] for d in DEFINITIONS[suite])
    for definition in DEFINITIONS[suite]:
        theirs, ours = definition["function"], made[definition["function"]["name"]]
        assert ours.description == theirs["description"]
        expected = _untitled(theirs["parameters"])
        assert ours.parameters.get("required", []) == expected.get("required", [])
        assert _untitled(ours.parameters["properties"]) == expected["properties"], ours.name
        assert _untitled(ours.parameters.get("$defs")) == expected.get("$defs")
