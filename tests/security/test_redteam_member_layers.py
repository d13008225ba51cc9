"""Red team, a team member's own constraints: an agent run as another's tool (`agent_tool`,
``Agent.as_tool``) or handed the conversation (`handoff`) runs under its caller's constraints,
which it may only tighten. Its own layer (``create_react_node(constraints=...)``, its
``Agent`` config) was merged as one more operator layer, where an ``allow`` wins over a layer
that names nothing: a payment tool that asks a person first (``user_confirm``), which the
lead would have had approved, ran unasked once the lead delegated to (or handed off to) an
agent whose config said ``pay: allow``; its ``execution.network: true`` turned the sandbox's
network on where the lead's left it off; its limits rose past the lead's defaults.

Fixed here: a member's layer merges over its caller's effective constraints as a member's
(`CallerConstraints`, `MemberConstraints`): every call is also decided by the caller's guard
alone (`GuardConstraints.floors`), and its sandbox keeps the caller's network and limits (else
the defaults) as ceilings. Its own denials, confirmations and carve-outs still hold.
"""

from __future__ import annotations

from typing import Any

import pytest

from jianmu import Agent, Constraints
from jianmu.config import parse_config
from jianmu.constraints import SANDBOX_DEFAULTS
from jianmu.llm import ScriptedLLM
from jianmu.nodes import handoff
from jianmu.tools import tool

pytestmark = pytest.mark.anyio
RAN: list[str] = []


@tool(permission="user_confirm", read_only=False)
def pay(amount: int) -> str:
    """Pay (a person approves first).

    Args:
        amount: how much.
    """
    RAN.append(f"paid {amount}")
    return "paid"


@tool
def look(what: str) -> str:
    """Look something up.

    Args:
        what: the thing.
    """
    RAN.append(f"looked {what}")
    return "found"


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


def _member(config: str, call: dict[str, Any]) -> Agent:
    return Agent(ScriptedLLM([[call], "done"]), tools=[pay, look], name="payer",
                 config=parse_config(config))


PAYS = {"name": "pay", "arguments": {"amount": 5}}
ALLOW_PAY = "guard:\n  tool_policy:\n    pay: allow\n"


def _lead_of(member: Agent, how: str, config: str = "") -> Agent:
    if how == "tool":
        script: list[Any] = [[{"name": "payer", "arguments": {"input": "pay"}}], "ok"]
        tools: list[Any] = [member.as_tool()]
    else:
        script, tools = [[{"name": "transfer_to_payer", "arguments": {}}]], [handoff(member)]
    return Agent(ScriptedLLM(script), tools=tools, name="lead", config=parse_config(config))


@pytest.mark.parametrize("how", ["tool", "handoff"])
async def test_a_members_allow_never_skips_the_callers_confirmation(how: str) -> None:
    result = await _lead_of(_member(ALLOW_PAY, PAYS), how).run("go")
    assert result.status.value == "suspended", result
    assert [r.payload.get("tool") or r.summary for r in result.pending] and RAN == []


@pytest.mark.parametrize("how", ["tool", "handoff"])
async def test_what_the_caller_allows_a_member_still_runs(how: str) -> None:
    result = await _lead_of(_member("", PAYS), how, config=ALLOW_PAY).run("go")
    assert result.ok, result
    assert RAN == ["paid 5"]


@pytest.mark.parametrize("how", ["tool", "handoff"])
async def test_a_members_own_carve_out_under_its_deny_default_holds(how: str) -> None:
    own = "guard:\n  default_policy: deny\n  tool_policy:\n    look: allow\n"
    member = _member(own, {"name": "look", "arguments": {"what": "x"}})
    assert (await _lead_of(member, how).run("go")).ok
    assert RAN == ["looked x"]


def test_a_members_sandbox_stays_within_its_callers() -> None:
    from jianmu.constraints import CallerConstraints, MemberConstraints

    caller = CallerConstraints.of(Constraints())
    loose = Constraints.model_validate(
        {"execution": {"network": True, "memory_mb": 1 << 20, "timeout_s": 10_000}})
    for sealed in (Constraints.merge(caller, loose),
                   Constraints.merge(Constraints(), MemberConstraints.of(loose, None))):
        assert sealed.execution.network is None  # unset: off, as the caller's
        local = SANDBOX_DEFAULTS["local"]
        assert sealed.execution.memory_mb == local.memory_mb
        assert sealed.execution.timeout_s == local.timeout_s
    opened = Constraints.model_validate({"execution": {"network": True}})
    assert Constraints.merge(CallerConstraints.of(opened), loose).execution.network is True


async def test_a_team_run_as_a_tool_stays_within_its_callers() -> None:
    # the first agent of a team run as another's tool is a member too: its own allow, which
    # its hand-off target's layer sat under, ran the payment the lead would have asked about
    from jianmu import ReactiveRunner, StateManager
    from jianmu.nodes import AgentState, agent_tool, create_react_node

    allow = Constraints.model_validate({"guard": {"tool_policy": {"pay": "allow"}}})

    def team() -> Any:
        target = create_react_node(ScriptedLLM([[PAYS], "done"]), [pay], name="payer",
                                   constraints=Constraints.model_validate({"max_iterations": 5}))
        return create_react_node(ScriptedLLM([[{"name": "transfer_to_payer", "arguments": {}}]]),
                                 [handoff(target)], name="front", constraints=allow)

    lead = create_react_node(ScriptedLLM([[{"name": "desk", "arguments": {"input": "pay"}}], "ok"]),
                             [agent_tool(team, name="desk", description="A desk.")], name="lead")
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    result = await ReactiveRunner(lead, state).run()
    assert result.status.value == "suspended" and RAN == [], result


def _looker(**options: Any) -> Agent:
    script: list[Any] = [[{"name": "look", "arguments": {"what": str(i)}}] for i in range(25)]
    return Agent(ScriptedLLM([*script, "done"]), tools=[look], name="looker", **options)


@pytest.mark.parametrize("options", [
    {"max_iterations": 30},
    {"config": "runtime:\n  max_iterations: 30\n"},
    {"max_iterations": 30, "config": "runtime:\n  max_iterations: 30\n"},
])
async def test_a_members_loop_stays_within_its_callers_default(options: dict[str, Any]) -> None:
    # a lead that set no max_iterations runs DEFAULT_MAX_ITERATIONS rounds; a member run as
    # its tool with its own max_iterations=30 ran 25 rounds, past the lead's limit
    from jianmu.constraints import DEFAULT_MAX_ITERATIONS

    if "config" in options:
        options = {**options, "config": parse_config(options["config"])}
    lead = Agent(ScriptedLLM([[{"name": "looker", "arguments": {"input": "go"}}], "ok"]),
                 tools=[_looker(**options).as_tool()], name="lead")
    await lead.run("go")
    assert 0 < len(RAN) <= DEFAULT_MAX_ITERATIONS


async def test_a_member_may_go_as_far_as_its_caller_lets_it() -> None:
    lead = Agent(ScriptedLLM([[{"name": "looker", "arguments": {"input": "go"}}], "ok"]),
                 tools=[_looker(max_iterations=30).as_tool()], name="lead",
                 config=parse_config("runtime:\n  max_iterations: 30\n"))
    await lead.run("go")
    assert len(RAN) == 25
