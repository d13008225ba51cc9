"""A long tool call or a long thought streamed in many small pieces, on the real keep-alive
server: the pieces are joined once, and a call's arguments are parsed only when they could be
whole, so the time grows with the reply's length, not with its square. Each piece was added to
one string (copied whole each time), and a server naming the tool in every piece had the
arguments parsed again at every piece: a 400 KB file written by a tool took half a minute."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from jianmu.llm import openai as openai_provider
from tests.llm.test_odd_servers import ask, chunks, message, provider
from tests.support.model_server import ModelServer, Raw

# every awkward place for a piece to end: inside an escape, at a bracket within a string
CONTENT = 'fn main() { let s = "a \\"quoted\\" }"; }\n\\path\\to\\ [x] {y}\n' * 60


@pytest.fixture(scope="module")
def server() -> Iterator[ModelServer]:
    with ModelServer() as running:
        yield running


def _writer(written: list[dict[str, str]]) -> Any:
    def write(path: str, content: str) -> str:
        """Write a file.

        Args:
            path: where.
            content: what.
        """
        written.append({"path": path, "content": content})
        return "written"

    return write


def test_a_long_call_in_small_pieces_named_in_each_is_whole_and_parsed_rarely(
    server: ModelServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    parses: list[int] = []
    whole = openai_provider._whole
    monkeypatch.setattr(openai_provider, "_whole",
                        lambda text: parses.append(len(text)) or whole(text))
    first = json.dumps({"path": "a.rs", "content": CONTENT})
    second = json.dumps({"path": "b.rs", "content": "short"})
    pieces = [first[i:i + 3] for i in range(0, len(first), 3)]

    def piece(text: str) -> dict[str, Any]:  # no id, the tool named again in every piece
        return {"tool_calls": [{"index": 0, "function": {"name": "write", "arguments": text}}]}

    events = chunks(*map(piece, pieces), piece(second))  # the second call comes whole
    events[-1]["choices"][0]["finish_reason"] = "tool_calls"
    llm = provider(server, "openai")
    for _ in range(2):  # two runs on the provider's kept-alive connection
        parses.clear()
        server.add(Raw(events=events), Raw(events=chunks({"content": "Both written."})))
        written: list[dict[str, str]] = []
        result, _ = ask(llm, True, "write", tools=[_writer(written)])
        assert result.ok and result.output == "Both written.", result.error
        assert written == [json.loads(first), json.loads(second)]
        assert len(pieces) > 1000
        # the arguments so far parsed when a piece closed their object, not at every piece
        # (a piece that could be whole arguments itself is parsed alone: it is short)
        assert len([n for n in parses if n > 3]) < 10, parses


def test_a_long_thought_in_small_pieces_is_kept_exactly(server: ModelServer) -> None:
    thought = "Let me think. " * 2000
    deltas = [thought[i:i + 5] for i in range(0, len(thought), 5)]

    def thinking(index: int, pieces: list[str], signature: str) -> list[dict[str, Any]]:
        return [
            {"type": "content_block_start", "index": index,
             "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
            *({"type": "content_block_delta", "index": index,
               "delta": {"type": "thinking_delta", "thinking": p}} for p in pieces),
            {"type": "content_block_delta", "index": index,
             "delta": {"type": "signature_delta", "signature": signature}},
        ]

    events = [
        {"type": "message_start", "message": {**message("", {"input_tokens": 5}),
                                              "content": []}},
        # a block started again at its index is a new one: the first one's pieces go with it
        *thinking(0, ["dropped ", "with its block"], "old"),
        *thinking(0, deltas, "sig"),
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta",
                                                              "text": "Done."}},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
         "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]
    llm = provider(server, "anthropic")
    for _ in range(2):  # two runs on the provider's kept-alive connection
        server.add(Raw(events=events))
        result, _ = ask(llm, True, "think")
        assert result.ok and result.output == "Done.", result.error
        (said,) = [m for m in result.messages if m.role == "assistant"]
        assert said.reasoning == [{"type": "thinking", "thinking": thought, "signature": "sig"}]
