"""A reply cut off by the token limit (OpenAI ``finish_reason: "length"``, Anthropic
``stop_reason: "max_tokens"``) in the middle of a tool call, on the real keep-alive server,
streamed and not, over several turns: the half-written call never runs, the model is told its
reply was cut off at the token limit (not that it wrote invalid JSON), and the run's events
say why. The calls it wrote whole before the cut run."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from jianmu import Agent
from jianmu.llm import AnthropicProvider, OpenAIProvider
from jianmu.tools import tool
from tests.support.model_server import MODES, ModelServer, Turn

LONG = {"path": "notes.txt", "text": "a long note " * 20}
SHORT = {"path": "notes.txt", "text": "a short note"}


def _llm(server: ModelServer, api: str) -> Any:
    if api == "openai":
        return OpenAIProvider("m", base_url=server.openai_url, max_retries=0)
    return AnthropicProvider("m", base_url=server.anthropic_url, max_retries=0)


def _run(agent: Agent, prompt: str) -> tuple[Any, list[Any]]:
    """The run's result and every event it sent."""
    async def go() -> list[Any]:
        return [event async for event in agent.stream(prompt)]

    events = asyncio.run(go())
    return events[-1].fields["result"], events


def _tool_texts(request_body: dict[str, Any]) -> list[str]:
    """The tool results a request sends back (either API's shape)."""
    out = []
    for message in request_body["messages"]:
        if message.get("role") == "tool":
            out.append(message["content"])
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, list):
            out += [b["content"] for b in content if b.get("type") == "tool_result"]
    return out


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_a_call_cut_off_at_the_token_limit_never_runs_and_the_model_is_told_why(
    server: ModelServer, api: str, stream: bool,
) -> None:
    written: list[dict[str, Any]] = []

    @tool
    def write_note(path: str, text: str = "") -> str:
        """Write a note.

        Args:
            path: where.
            text: what.
        """
        written.append({"path": path, "text": text})
        return "written"

    server.add(
        Turn(calls=[{"name": "write_note", "arguments": {"path": "first.txt"}},
                    {"name": "write_note", "arguments": LONG}], cut=40),
        Turn(calls=[{"name": "write_note", "arguments": SHORT}]),
        "Done.",
    )
    agent = Agent(_llm(server, api), tools=[write_note], stream=stream)
    result, seen = _run(agent, "write a note")
    assert result.ok, result.error
    # the whole call before the cut ran; the half one never did, the next turn's did
    assert written == [{"path": "first.txt", "text": ""}, SHORT]
    told = _tool_texts(server.requests[1].body)  # in the calls' order: the half one last
    assert len(told) == 2 and told[0] == "written"
    assert "token limit" in told[1] and "not valid JSON" not in told[1]
    cut = [e for e in seen if e.name == "llm.call.cut_off"]
    assert len(cut) == 1
    assert cut[0].fields["tool_calls"] == ["write_note"]
    assert cut[0].fields["finish_reason"] == "length"
    # later turns go on as usual: the cut call keeps its result in the history
    assert _tool_texts(server.requests[2].body) == [*told, "written"]


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_a_call_cut_off_before_its_arguments_does_not_run_with_its_defaults(
    server: ModelServer, api: str, stream: bool,
) -> None:
    """Cut before a byte of arguments: ``""`` decodes as ``{}``, which a tool whose every
    parameter has a default would take: it must not run, and the model is asked again."""
    ran: list[int] = []

    @tool
    def delete_notes(older_than_days: int = 0) -> str:
        """Delete notes.

        Args:
            older_than_days: only those older than this.
        """
        ran.append(older_than_days)
        return "deleted"

    server.add(Turn(calls=[{"name": "delete_notes", "arguments": {"older_than_days": 30}}],
                    cut=0),
               Turn(calls=[{"name": "delete_notes", "arguments": {"older_than_days": 30}}]),
               "Done.")
    result, _ = _run(Agent(_llm(server, api), tools=[delete_notes], stream=stream), "tidy")
    assert result.ok, result.error
    assert ran == [30]
    assert result.messages[-1].content == "Done."
    assert len(server.requests) == 3


def test_a_typed_answer_cut_off_is_asked_again_not_counted_as_a_wrong_one() -> None:
    """``final_result`` cut off at the limit is no answer that failed validation: the model is
    told why and answers again; no output retry is spent on it."""
    from pydantic import BaseModel

    from jianmu import ScriptedLLM
    from jianmu.llm import LLMResponse, Message

    class Note(BaseModel):
        title: str
        body: str

    half = LLMResponse(message=Message.assistant(tool_calls=[{
        "id": "c1", "name": "final_result", "arguments": '{"title": "Hi", "body": "lo'}]),
        finish_reason="length")
    llm = ScriptedLLM([half, [{"name": "final_result",
                               "arguments": {"title": "Hi", "body": "short"}}]])
    result = Agent(llm, output_type=Note, output_retries=0).run_sync("note")
    assert result.ok, result.error
    assert result.output == Note(title="Hi", body="short")
    told = [m.content for m in result.messages if m.role == "tool"]
    assert "token limit" in (told[0] or "")


# -- an answer cut off at the token limit ------------------------------------------------------


def _sent(request_body: dict[str, Any]) -> list[tuple[str, str]]:
    """Each message a request sends, as (role, text) (either API's shape)."""
    out = []
    for message in request_body["messages"]:
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(b.get("text", "") for b in content if b.get("type") == "text")
        out.append((message["role"], content or ""))
    return out


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_an_answer_cut_off_at_the_token_limit_is_continued_into_one_answer(
    server: ModelServer, api: str, stream: bool,
) -> None:
    from jianmu.nodes.cut_off import CONTINUE_NOTE

    server.add(Turn(text="The tide comes in tw", cut=0), Turn(text="ice a day, and goes",
                                                                cut=0), " out twice.")
    result, seen = _run(Agent(_llm(server, api), stream=stream), "tides?")
    assert result.ok, result.error
    whole = "The tide comes in twice a day, and goes out twice."
    assert result.output == whole
    assert [(m.role, m.content) for m in result.messages] == [("user", "tides?"),
                                                              ("assistant", whole)]
    # each continuation sends the answer so far as the model's turn, then the note
    assert _sent(server.requests[2].body)[-2:] == [
        ("assistant", "The tide comes in twice a day, and goes"), ("user", CONTINUE_NOTE)]
    cut = [e.fields for e in seen if e.name == "llm.call.cut_off"]
    assert [(c["outcome"], c["finish_reason"]) for c in cut] == [("continued", "length")] * 2
    assert (result.usage.requests, result.usage.input_tokens, result.usage.output_tokens) == (
        3, 30, 15)
    if stream:
        deltas = "".join(e.fields["text"] for e in seen if e.name == "llm.call.delta")
        assert deltas == whole
    assert all(r.stream is stream for r in server.requests)
    assert len(server.connections) == 1  # one kept-alive connection for every part


@pytest.mark.parametrize(("api", "stream"), MODES)
def test_an_answer_still_cut_off_fails_with_the_text_so_far(
    server: ModelServer, api: str, stream: bool,
) -> None:
    from jianmu import OutputTruncatedError

    server.add(Turn(text="The tide comes in tw", cut=0), Turn(text="ice a da", cut=0))
    result, seen = _run(Agent(_llm(server, api), stream=stream, max_continuations=1), "tides?")
    assert result.status.value == "failure"
    assert isinstance(result.exception, OutputTruncatedError)
    assert result.exception.text == "The tide comes in twice a da"
    with pytest.raises(OutputTruncatedError):
        result.raise_for_status()
    assert [e.fields["outcome"] for e in seen if e.name == "llm.call.cut_off"] == [
        "continued", "failed"]
    assert len(server.requests) == 2 and result.usage.requests == 2


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_mistrals_model_length_is_a_cut_off_too(stream: bool) -> None:
    """Mistral's API ends a reply that filled the model's context with ``model_length``: a
    cut-off answer, continued, not a whole one (it was taken as the run's answer, cut)."""
    from tests.support.raw_http import SSE, RawServer, Reply, chunk, completion, json_reply
    from tests.support.raw_http import openai_sse as sse

    parts = iter([("The tide comes in tw", "model_length"), ("ice a day.", "stop")])

    def answer(request: Any) -> Reply:
        text, finish = next(parts)
        if not stream:
            return json_reply(completion(text, finish=finish))
        return Reply(pieces=sse([chunk({"content": text}), chunk(finish=finish)]),
                     chunked=True, headers=SSE)

    with RawServer(answer) as server:
        llm = OpenAIProvider("m", base_url=server.url + "/v1", max_retries=0)
        result, seen = _run(Agent(llm, stream=stream), "tides?")
    assert result.ok, result.error
    assert result.output == "The tide comes in twice a day."
    cut = [e.fields for e in seen if e.name == "llm.call.cut_off"]
    assert [(c["outcome"], c["finish_reason"]) for c in cut] == [("continued", "model_length")]
