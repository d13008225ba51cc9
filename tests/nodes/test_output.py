"""Typed answers: ``output_type`` in tool, native and text mode, through `ReactiveRunner`."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from jianmu import (
    AgentLLMNode,
    ConfigError,
    ReactiveRunner,
    RunStatus,
    SQLiteCheckpointer,
    StateManager,
)
from jianmu.errors import OutputValidationError
from jianmu.llm import AnthropicProvider, LLMResponse, Message, OpenAIProvider, ScriptedLLM
from jianmu.nodes import AgentState, OutputSpec, create_react_node
from jianmu.tools import tool
from tests.support.fake_anthropic import FakeAnthropicServer
from tests.support.fake_openai import FakeOpenAIServer

pytestmark = pytest.mark.anyio
REPO = Path(__file__).resolve().parents[2]


class Item(BaseModel):
    name: str
    price: float


class Invoice(BaseModel):
    customer: str
    items: list[Item]


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Movie(TypedDict):
    title: str
    year: int


class Cat(BaseModel):
    meows: int


class Dog(BaseModel):
    barks: int


def start(question: str = "Bill Ada for a pen.") -> StateManager:
    return StateManager(AgentState, {"messages": [{"role": "user", "content": question}]})


def answer(name: str = "final_result", **arguments: Any) -> list[dict[str, Any]]:
    return [{"name": name, "arguments": arguments}]


GOOD = {"customer": "Ada", "items": [{"name": "pen", "price": 2.5}]}


async def test_tool_mode_gives_the_validated_object() -> None:
    llm = ScriptedLLM([answer(**GOOD)])
    state = start()
    result = await ReactiveRunner(create_react_node(llm, [], output_type=Invoice), state).run()
    assert result.ok and isinstance(result.output, Invoice)
    assert result.output == Invoice.model_validate(GOOD)
    assert state.get("final_output") == result.output
    assert state.get("final_answer") == (
        '{"customer": "Ada", "items": [{"name": "pen", "price": 2.5}]}')
    offered = llm.requests[0].tools[0]["function"]
    assert offered["name"] == "final_result"
    assert offered["parameters"]["required"] == ["customer", "items"]
    # the call has its one result: the history stays valid for the next turn
    roles = [(m.role, m.tool_call_id) for m in state.get("messages")]
    assert roles == [("user", None), ("assistant", None), ("tool", "call_1")]


async def test_a_bad_answer_is_sent_back_with_its_json_path_then_fixed() -> None:
    bad = {"customer": "Ada", "items": [{"name": "pen", "price": "cheap"}]}
    llm = ScriptedLLM([answer(**bad), answer(**GOOD)])
    state = start()
    events: list[Any] = []
    runner = ReactiveRunner(create_react_node(llm, [], output_type=Invoice), state)
    runner.ctx.events.subscribe("output.*", events.append)
    result = await runner.run()
    assert result.ok and result.output.items[0].price == 2.5
    told = state.get("messages")[2]
    assert told.role == "tool" and told.tool_call_id == "call_1"
    assert "$.items[0].price" in told.content and "valid number" in told.content
    assert [e.name for e in events] == ["output.invalid", "output.validated"]
    assert state.get("rounds") == 2 and state.get("failed_outputs") == 0


async def test_an_answer_that_never_validates_fails_with_path_and_raw_output() -> None:
    bad = {"customer": 7, "items": []}
    llm = ScriptedLLM([answer(**bad)] * 3)
    agent = create_react_node(llm, [], output_type=Invoice, output_retries=2)
    state = start()
    result = await ReactiveRunner(agent, state).run()
    assert result.status is RunStatus.FAILURE and result.output is None
    assert "OutputValidationError" in (result.error or "")
    assert "$.customer" in (result.error or "") and "after 3 tries" in (result.error or "")
    error = agent.llm_node.error  # type: ignore[union-attr]
    assert isinstance(error, OutputValidationError)
    assert error.problems[0][0] == "$.customer"
    assert error.raw == '{"customer": 7, "items": []}'
    assert llm.remaining == 0 and state.get("final_output") is None
    # the last answer is in the history, with the reason it was refused
    assert state.get("messages")[-1].role == "tool"


async def test_retries_count_against_the_iteration_cap_and_the_budget() -> None:
    llm = ScriptedLLM([answer(customer=1, items=[])] * 10)
    agent = create_react_node(llm, [], output_type=Invoice, output_retries=9, max_iterations=3)
    state = start()
    result = await ReactiveRunner(agent, state).run()
    assert result.status is RunStatus.FAILURE and "max_iterations=3" in (result.error or "")
    assert len(llm.requests) == 3
    assert state.get("usage").total_tokens > 0  # every retry was spent like any turn


@pytest.mark.parametrize(("output_type", "arguments", "expected"), [
    (Point, {"x": 1, "y": 2}, Point(1, 2)),
    (Movie, {"title": "Ran", "year": 1985}, {"title": "Ran", "year": 1985}),
    (list[Item], {"response": [{"name": "a", "price": 1}]}, [Item(name="a", price=1)]),
    (int, {"response": 42}, 42),
    (Literal["yes", "no"], {"response": "no"}, "no"),
])
async def test_any_type_the_type_adapter_takes(
    output_type: Any, arguments: dict[str, Any], expected: Any
) -> None:
    llm = ScriptedLLM([answer(**arguments)])
    result = await ReactiveRunner(create_react_node(llm, [], output_type=output_type),
                                  start()).run()
    assert result.ok and result.output == expected
    schema = llm.requests[0].tools[0]["function"]["parameters"]
    assert schema["type"] == "object"
    if "response" in arguments:  # a non-object type travels wrapped
        assert schema["required"] == ["response"]


async def test_a_union_of_models_gives_one_tool_per_member() -> None:
    llm = ScriptedLLM([answer("final_result_Dog", barks=3)])
    result = await ReactiveRunner(create_react_node(llm, [], output_type=Cat | Dog),
                                  start()).run()
    assert result.ok and result.output == Dog(barks=3)
    assert [t["function"]["name"] for t in llm.requests[0].tools] == [
        "final_result_Cat", "final_result_Dog"]


async def test_a_text_answer_in_tool_mode_is_asked_to_call_the_tool() -> None:
    llm = ScriptedLLM(["It is 42.", answer(response=42)])
    state = start()
    result = await ReactiveRunner(create_react_node(llm, [], output_type=int), state).run()
    assert result.ok and result.output == 42
    nudge = state.get("messages")[2]
    assert nudge.role == "user" and "call final_result" in (nudge.content or "")


async def test_other_calls_in_the_answering_turn_are_not_run() -> None:
    ran: list[str] = []

    @tool
    def side(x: str) -> str:
        """A tool.

        Args:
            x: anything.
        """
        ran.append(x)
        return x

    llm = ScriptedLLM([[{"name": "side", "arguments": {"x": "a"}},
                        {"name": "final_result", "arguments": {"response": 1}}]])
    state = start()
    result = await ReactiveRunner(create_react_node(llm, [side], output_type=int), state).run()
    assert result.ok and result.output == 1 and ran == []
    tools = [m for m in state.get("messages") if m.role == "tool"]
    assert sorted(m.tool_call_id for m in tools) == ["call_1", "call_2"]
    assert any("Not run" in (m.content or "") for m in tools)


async def test_text_mode_parses_a_fenced_block_and_retries_with_a_user_message() -> None:
    llm = ScriptedLLM([
        'Here:\n```json\n{"title": "Ran", "year": "soon"}\n```',
        '```json\n{"title": "Ran", "year": 1985}\n```',
    ])
    state = start("A film?")
    agent = create_react_node(llm, [], output_type=Movie, output_mode="text",
                              system_prompt="You know films.")
    result = await ReactiveRunner(agent, state).run()
    assert result.ok and result.output == {"title": "Ran", "year": 1985}
    assert state.get("final_answer") == '```json\n{"title": "Ran", "year": 1985}\n```'
    system = llm.requests[0].messages[0].content or ""
    assert system.startswith("You know films.") and '"year"' in system  # the schema is said
    assert not llm.requests[0].tools
    retry = state.get("messages")[2]
    assert retry.role == "user" and "$.year" in (retry.content or "")


@pytest.mark.parametrize("said", ['{"title": "Ran", "year": 1985} Enjoy!',
                                  'Here it is: {"title": "Ran", "year": 1985}. Enjoy!'])
async def test_text_mode_takes_a_json_answer_with_words_after_it(said: str) -> None:
    # words before the object were left out, words after it failed the try as trailing data
    llm = ScriptedLLM([said])
    agent = create_react_node(llm, [], output_type=Movie, output_mode="text")
    result = await ReactiveRunner(agent, start("A film?")).run()
    assert result.ok and result.output == {"title": "Ran", "year": 1985}
    assert len(llm.requests) == 1  # no retry spent on it


async def test_native_mode_asks_for_a_strict_json_schema() -> None:
    llm = ScriptedLLM(['{"customer": "Ada", "items": []}'])
    agent = create_react_node(llm, [], output_type=Invoice, output_mode="native")
    result = await ReactiveRunner(agent, start()).run()
    assert result.ok and result.output == Invoice(customer="Ada", items=[])
    asked = llm.requests[0].params["response_format"]
    assert asked["type"] == "json_schema" and asked["json_schema"]["strict"] is True
    assert asked["json_schema"]["schema"]["additionalProperties"] is False


async def test_native_mode_is_not_strict_where_the_schema_has_optional_fields() -> None:
    class Loose(BaseModel):
        name: str
        note: str = ""

    schema, strict = OutputSpec(Loose, mode="native").native_schema()
    assert strict is False and schema["required"] == ["name"]


def test_native_mode_with_a_provider_without_structured_output_is_a_config_error() -> None:
    class Plain:
        model = "plain-1"

        async def complete(self, messages: Any, **kwargs: Any) -> LLMResponse:
            return LLMResponse(message=Message.assistant("{}"))

    with pytest.raises(ConfigError, match=r"Plain \(model 'plain-1'\) has none"):
        create_react_node(Plain(), [], output_type=Invoice, output_mode="native")  # type: ignore[arg-type]


async def test_native_mode_over_real_http_with_openai() -> None:
    with FakeOpenAIServer(['{"response": [{"name": "pen", "price": 2}]}']) as server:
        llm = OpenAIProvider("fake-model", base_url=server.base_url, retry_backoff=0)
        agent = create_react_node(llm, [], output_type=list[Item], output_mode="native")
        result = await ReactiveRunner(agent, start()).run()
        await llm.close()
    assert result.ok and result.output == [Item(name="pen", price=2)]
    body = server.requests[0]
    assert body["response_format"]["json_schema"]["schema"]["required"] == ["response"]
    assert body["response_format"]["json_schema"]["strict"] is True


async def test_native_mode_over_real_http_with_anthropic() -> None:
    with FakeAnthropicServer(['{"customer": "Ada", "items": []}']) as server:
        llm = AnthropicProvider("claude-test", base_url=server.base_url)
        agent = create_react_node(llm, [], output_type=Invoice, output_mode="native")
        result = await ReactiveRunner(agent, start()).run()
        await llm.close()
    assert result.ok and result.output == Invoice(customer="Ada", items=[])
    sent = server.requests[0]["output_config"]["format"]
    assert sent["type"] == "json_schema" and sent["schema"]["required"] == ["customer", "items"]


async def test_tool_mode_over_real_http_with_openai() -> None:
    with FakeOpenAIServer([[{"name": "final_result", "arguments": GOOD}]]) as server:
        llm = OpenAIProvider("fake-model", base_url=server.base_url, retry_backoff=0)
        result = await ReactiveRunner(create_react_node(llm, [], output_type=Invoice),
                                      start()).run()
        await llm.close()
    assert result.ok and result.output == Invoice.model_validate(GOOD)
    assert server.tool_names(0) == ["final_result"]


async def test_an_agent_llm_node_alone_takes_the_same_keywords() -> None:
    llm = ScriptedLLM(['{"x": 1, "y": 2}'])
    node = AgentLLMNode("ask", llm, output_type=Point, output_mode="text")
    state = start()
    result = await ReactiveRunner(node, state).run()
    assert result.ok and result.output == Point(1, 2) and state.get("done") is True


def test_bad_arguments_are_refused_when_the_agent_is_built() -> None:
    with pytest.raises(ValueError, match="output_mode must be one of"):
        create_react_node(ScriptedLLM([]), [], output_type=int, output_mode="json")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="output_retries"):
        create_react_node(ScriptedLLM([]), [], output_type=int, output_retries=-1)
    with pytest.raises(TypeError, match="has no JSON Schema"):
        create_react_node(ScriptedLLM([]), [], output_type=object())


async def test_send_clears_the_last_typed_answer() -> None:
    llm = ScriptedLLM([answer(response=1), answer(response=2)])
    state = start()
    runner = ReactiveRunner(create_react_node(llm, [], output_type=int), state)
    assert (await runner.run()).output == 1
    runner.send("again")
    assert state.get("final_output") is None
    assert (await runner.run()).output == 2


# -- checkpoints ---------------------------------------------------------------------------


@tool(confirm=True)
def ask_first(note: str) -> str:
    """A call a person must approve.

    Args:
        note: anything.
    """
    return f"ok {note}"


def _retrying(llm: ScriptedLLM, retries: int = 1) -> Any:
    return create_react_node(llm, [ask_first], output_type=Invoice, output_retries=retries,
                             name="biller")


def _suspended_mid_retry(db: Path) -> None:
    """A run with one refused answer behind it, suspended on an approval."""
    llm = ScriptedLLM([answer(customer=1, items=[]),
                       [{"name": "ask_first", "arguments": {"note": "n"}}]])
    runner = ReactiveRunner(_retrying(llm), start(), checkpointer=SQLiteCheckpointer(db),
                            run_id="retry1")
    result = runner.run_sync(timeout=30)
    assert result.status is RunStatus.SUSPENDED
    assert runner.state.get("failed_outputs") == 1


def test_a_retry_restored_from_a_checkpoint_keeps_its_count(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    _suspended_mid_retry(db)
    later = ScriptedLLM([answer(customer=2, items=[])])
    restored = ReactiveRunner.restore(_retrying(later), SQLiteCheckpointer(db), "retry1",
                                      state_manager=StateManager(AgentState))
    restored.approve("call_2")
    result = restored.run_sync(timeout=30)
    # the second refusal is the last allowed by output_retries=1: the count survived
    assert result.status is RunStatus.FAILURE and "after 2 tries" in (result.error or "")


def test_a_retry_restored_from_a_checkpoint_can_still_succeed(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    _suspended_mid_retry(db)
    later = ScriptedLLM([answer(**GOOD)])
    restored = ReactiveRunner.restore(_retrying(later), SQLiteCheckpointer(db), "retry1",
                                      state_manager=StateManager(AgentState))
    restored.approve("call_2")
    result = restored.run_sync(timeout=30)
    assert result.ok and result.output == Invoice.model_validate(GOOD)
    told = [m.content for m in later.requests[0].messages if m.role == "tool"]
    assert any("$.customer" in (t or "") for t in told)  # the refusal before the restore


def test_the_typed_answer_is_restored_as_its_type_in_another_process(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    llm = ScriptedLLM([answer(**GOOD)])
    runner = ReactiveRunner(create_react_node(llm, [], output_type=Invoice, name="biller"),
                            start(), checkpointer=SQLiteCheckpointer(db), run_id="typed1")
    assert runner.run_sync(timeout=30).ok
    saved = SQLiteCheckpointer(db).load("typed1")
    assert saved is not None and saved["state"]["root"]["final_output"] == GOOD  # its JSON
    script = textwrap.dedent(f"""
        from pydantic import BaseModel
        from jianmu import ReactiveRunner, ScriptedLLM, SQLiteCheckpointer, StateManager
        from jianmu.nodes import AgentState, create_react_node

        class Item(BaseModel):
            name: str
            price: float

        class Invoice(BaseModel):
            customer: str
            items: list[Item]

        agent = create_react_node(ScriptedLLM([]), [], output_type=Invoice, name="biller")
        runner = ReactiveRunner.restore(agent, SQLiteCheckpointer({str(db)!r}), "typed1",
                                        state_manager=StateManager(AgentState))
        value = runner.state.get("final_output")
        print(type(value).__name__, value.items[0].price)
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["Invoice", "2.5"]


async def test_a_skill_node_gives_its_typed_answer_to_the_enclosing_state(
    tmp_path: Path,
) -> None:
    from jianmu.config import parse_config
    from jianmu.skills import SkillCatalog, SkillNode

    folder = tmp_path / "skills" / "billing"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: billing\ndescription: Write invoices.\n---\nWrite the invoice.\n")
    llm = ScriptedLLM([answer(**GOOD)])
    node = SkillNode("Bill", ["billing"], llm, catalog=SkillCatalog([tmp_path / "skills"]),
                     output_type=Invoice)
    state = start()
    config = parse_config(f"runtime:\n  debug_dir: {tmp_path / 'debug'}\n")
    result = await ReactiveRunner(node, state, config=config).run(timeout=30)
    assert result.ok and result.output == Invoice.model_validate(GOOD)
    assert isinstance(state.get("final_output"), Invoice)
    assert "final_result" in [t["function"]["name"] for t in llm.requests[0].tools]


def test_a_tool_named_like_the_answer_tool_is_refused() -> None:
    from jianmu.errors import ToolValidationError

    @tool
    def final_result(x: int) -> int:
        """Mine.

        Args:
            x: a number.
        """
        return x

    with pytest.raises(ToolValidationError, match="agent's answer tool has that name"):
        create_react_node(ScriptedLLM([]), [final_result], output_type=int)


def test_union_members_of_one_name_or_a_long_one_each_get_an_answer_tool() -> None:
    def model(name: str, module: str) -> Any:
        return type(name, (BaseModel,), {"__annotations__": {"v": int}, "__module__": module})

    clash = model("Item", "shop.api") | model("Item", "shop.db")
    assert sorted(OutputSpec(clash).tool_names) == ["final_result_Item", "final_result_Item_2"]
    long = model("A" * 70, "pkg") | model("A" * 70, "other")
    names = sorted(OutputSpec(long).tool_names)
    assert len(names) == 2 and all(len(n) <= 64 for n in names)
    assert OutputSpec(list[model("Cat", "zoo.cats")] | int).tool_names == {
        "final_result_list_Cat", "final_result_int"}
