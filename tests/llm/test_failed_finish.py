"""A reply that a server ended with a finish reason that says it failed midway (``error``:
OpenRouter's and Mistral's, with no error object beside it; ``abort``: vLLM's, the request
aborted in the engine), streamed or not, on a real keep-alive server: its text so far is no
answer. The run fails, transient (a fallback model may take over), saying why; it was taken
as the run's whole answer."""

from __future__ import annotations

from typing import Any

import pytest

from jianmu import Agent
from jianmu.errors import LLMTransientError
from jianmu.llm import OpenAIProvider
from tests.support.raw_http import (
    SSE,
    USAGE,
    RawServer,
    Recorded,
    Reply,
    chunk,
    completion,
    json_reply,
    openai_sse,
)


@pytest.mark.parametrize("finish", ["error", "abort"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_reply_that_failed_midway_is_no_answer(stream: bool, finish: str) -> None:
    def answer(request: Recorded) -> Reply:
        if not request.body.get("stream"):
            return json_reply(completion("The tide comes in tw", finish=finish, usage=USAGE))
        return Reply(pieces=openai_sse([chunk({"content": "The tide comes in tw"}),
                                        chunk(finish=finish, usage=USAGE)]),
                     chunked=True, headers=SSE)

    with RawServer(answer) as server:
        llm = OpenAIProvider("m", base_url=server.url + "/v1", max_retries=2)
        result = Agent(llm, stream=stream).run_sync("tides?")
    assert not result.ok and result.output is None
    assert isinstance(result.exception, LLMTransientError), result.error
    said = str(result.exception)
    assert f"finish_reason {finish!r}" in said and "127.0.0.1" in said
    assert len(server.requests) == 1  # answered, and billed: not asked again
    usage: Any = result.usage
    assert usage.requests == 1 and usage.output_tokens > 0  # what it spent still counts
