"""Red team, an `Agent` with a configuration of its own used as another agent's team member.

Fixed here: ``Agent(..., config=...)`` held its config only in runs of its own; as another
agent's tool (``as_tool``), hand-off target or node the tree ran under the caller's config,
so a tool its config denies (or a sandbox it closes) ran for a model that reached it through
a lead agent with the default config. The config's layer now goes with the tree and tightens
only: the caller's config still binds it. Likewise ``Agent(interactive=False)``: wherever its
tree ran under a run a person answers (a tool, a hand-off target, a node), its calls that need a
confirmation were asked of that person; they are denied now, and its questions go unanswered.
"""

from __future__ import annotations

import pytest

from jianmu import Agent
from jianmu.config import parse_config
from jianmu.llm import ScriptedLLM
from jianmu.nodes import handoff
from jianmu.tools import tool

pytestmark = pytest.mark.anyio
RAN: list[str] = []
DENY_DEPLOY = "guard:\n  tool_policy:\n    deploy: deny\n"


@tool(read_only=False)
def deploy(target: str) -> str:
    """Deploy.

    Args:
        target: where.
    """
    RAN.append(target)
    return f"deployed to {target}"


def _deploys() -> ScriptedLLM:
    return ScriptedLLM([[{"name": "deploy", "arguments": {"target": "prod"}}], "done"])


def _helper(config: str) -> Agent:
    return Agent(_deploys(), tools=[deploy], name="helper", config=parse_config(config))


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


async def test_an_agents_own_config_denies_in_its_own_run() -> None:
    assert (await _helper(DENY_DEPLOY).run("go")).ok and RAN == []


async def test_an_agent_used_as_a_tool_keeps_its_configs_deny() -> None:
    lead = Agent(ScriptedLLM([[{"name": "helper", "arguments": {"input": "go"}}], "ok"]),
                 tools=[_helper(DENY_DEPLOY).as_tool()], name="lead")
    assert (await lead.run("go")).ok
    assert RAN == []


async def test_an_agent_handed_to_keeps_its_configs_deny() -> None:
    lead = Agent(ScriptedLLM([[{"name": "transfer_to_helper", "arguments": {}}]]),
                 tools=[handoff(_helper(DENY_DEPLOY))], name="lead")
    assert (await lead.run("go")).ok
    assert RAN == []


async def test_the_callers_config_still_binds_an_agent_with_a_laxer_one() -> None:
    helper = _helper("guard:\n  tool_policy:\n    deploy: allow\n")
    lead = Agent(ScriptedLLM([[{"name": "helper", "arguments": {"input": "go"}}], "ok"]),
                 tools=[helper.as_tool()], name="lead", config=parse_config(DENY_DEPLOY))
    assert (await lead.run("go")).ok
    assert RAN == []


async def test_an_agents_config_sandbox_settings_go_with_its_tree() -> None:
    helper = Agent(_deploys(), tools=[deploy], name="helper",
                   config=parse_config("execution:\n  network: false\n"))
    assert helper.as_node().constraints.execution.network is False


@tool(permission="user_confirm", read_only=False)
def pay(amount: int) -> str:
    """Pay.

    Args:
        amount: how much.
    """
    RAN.append(f"paid {amount}")
    return "paid"


def _payer(**options: object) -> Agent:
    return Agent(ScriptedLLM([[{"name": "pay", "arguments": {"amount": 5}}], "done"]),
                 tools=[pay], name="payer", **options)  # type: ignore[arg-type]


async def test_a_non_interactive_agent_used_as_a_tool_asks_nobody() -> None:
    # Agent(interactive=False) denies its confirm calls in its own runs; as the tool of a lead a
    # person watches it took the lead's channel and suspended the run to ask for the payment
    lead = Agent(ScriptedLLM([[{"name": "payer", "arguments": {"input": "pay"}}], "ok"]),
                 tools=[_payer(interactive=False).as_tool()], name="lead")
    result = await lead.run("go")
    assert result.ok and result.status.value == "success", result
    assert RAN == []
    tool_results = [m.content for m in result.messages if m.role == "tool"]
    assert tool_results and "done" in (tool_results[0] or "")


async def test_an_interactive_agent_used_as_a_tool_still_asks_the_callers_person() -> None:
    lead = Agent(ScriptedLLM([[{"name": "payer", "arguments": {"input": "pay"}}], "ok"]),
                 tools=[_payer().as_tool()], name="lead")
    result = await lead.run("go")
    assert result.status.value == "suspended" and result.pending, result
    assert RAN == []


async def test_a_non_interactive_agent_handed_to_asks_nobody() -> None:
    # a hand-off target runs its rounds in the lead's run, where a person answers: its
    # confirm calls were asked of that person although the agent was made non-interactive
    lead = Agent(ScriptedLLM([[{"name": "transfer_to_payer", "arguments": {}}]]),
                 tools=[handoff(_payer(interactive=False))], name="lead")
    result = await lead.run("go")
    assert result.status.value == "success", result
    assert RAN == [] and not result.pending


async def test_a_non_interactive_agents_node_in_another_tree_asks_nobody() -> None:
    from jianmu import ReactiveRunner, StateManager
    from jianmu.nodes import AgentState

    node = _payer(interactive=False).as_node()
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "pay"}]})
    result = await ReactiveRunner(node, state).run()  # an interactive run
    assert result.status.value == "success", result
    assert RAN == [] and not result.pending
    denied = [m.content or "" for m in state.get("messages") if m.role == "tool"]
    assert denied and "confirmation" in denied[0], denied


async def test_a_non_interactive_agents_question_goes_unanswered() -> None:
    from jianmu.tools import ToolSet

    asker = Agent(ScriptedLLM([[{"name": "ask_user", "arguments": {"question": "Card?"}}],
                               "done"]),
                  tools=ToolSet.resolve(["ask_user"]).tools, name="asker", interactive=False)
    lead = Agent(ScriptedLLM([[{"name": "asker", "arguments": {"input": "go"}}], "ok"]),
                 tools=[asker.as_tool()], name="lead")
    result = await lead.run("go")
    assert result.status.value == "success" and not result.pending, result
