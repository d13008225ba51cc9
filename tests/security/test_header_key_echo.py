"""A key given as a header of the SDK client (Azure OpenAI's ``api-key``, a gateway's
``Authorization: Bearer``) goes as that header, never in the request's JSON body, and a server
that echoes it in its error (some do on a 401) shows it masked, as the provider's own key is."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from jianmu.errors import LLMError
from jianmu.llm import AnthropicProvider, OpenAIProvider
from tests.support.raw_http import RawServer, Recorded, Reply

KEY = "azure-key-0123456789abcdef"
HEADERS = [{"api-key": KEY}, {"Authorization": f"Bearer {KEY}"}]


@pytest.mark.parametrize("headers", HEADERS)
@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_key_given_as_a_header_is_masked_in_the_error_a_server_echoes_it_in(
    api: str, headers: dict[str, str],
) -> None:
    def refuse(request: Recorded) -> Reply:
        # what it was sent, wherever it was: a key put in the body is echoed too
        sent = (request.headers.get("api-key"), request.headers.get("authorization"),
                request.body.get("default_headers"))
        said = f"Access denied: {json.dumps(sent)}"
        return Reply(status=401, pieces=[json.dumps({"error": {"message": said}}).encode()])

    async def ask(llm: Any) -> None:
        try:
            await llm.complete([{"role": "user", "content": "hi"}])
        finally:
            await llm.close()

    with RawServer(refuse) as server:
        llm = (OpenAIProvider("m", base_url=server.url + "/v1", max_retries=0,
                              default_headers=headers) if api == "openai" else
               AnthropicProvider("m", base_url=server.url, max_retries=0,
                                 default_headers=headers))
        with pytest.raises(LLMError) as caught:
            asyncio.run(ask(llm))
    (request,) = server.requests  # a 401 is never asked again
    assert KEY not in json.dumps(request.body)
    assert "Access denied" in str(caught.value) and "***" in str(caught.value)
    assert KEY not in str(caught.value)


def test_an_anthropic_auth_token_goes_as_a_bearer_header_and_is_masked() -> None:
    def refuse(request: Recorded) -> Reply:
        said = f"bad token: {request.headers.get('authorization')} {json.dumps(request.body)}"
        return Reply(status=401, pieces=[json.dumps({"error": {"message": said}}).encode()])

    async def ask(llm: Any) -> None:
        try:
            await llm.complete([{"role": "user", "content": "hi"}])
        finally:
            await llm.close()

    with RawServer(refuse) as server:
        llm = AnthropicProvider("m", base_url=server.url, max_retries=0, auth_token=KEY)
        with pytest.raises(LLMError) as caught:
            asyncio.run(ask(llm))
    (request,) = server.requests
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert "auth_token" not in request.body
    assert "bad token: Bearer ***" in str(caught.value) and KEY not in str(caught.value)


def test_a_key_in_the_base_urls_query_is_sent_there_and_masked() -> None:
    def refuse(request: Recorded) -> Reply:
        said = f"bad key in {request.path}"
        return Reply(status=401, pieces=[json.dumps({"error": {"message": said}}).encode()])

    async def ask(llm: Any) -> None:
        try:
            await llm.complete([{"role": "user", "content": "hi"}])
        finally:
            await llm.close()

    with RawServer(refuse) as server:
        llm = OpenAIProvider("m", base_url=f"{server.url}/v1?api-key={KEY}", max_retries=0)
        assert KEY not in llm.base_url and KEY not in repr(llm)
        with pytest.raises(LLMError) as caught:
            asyncio.run(ask(llm))
    (request,) = server.requests
    assert request.path == f"/v1/chat/completions?api-key={KEY}"
    assert "bad key in /v1/chat/completions?api-key=***" in str(caught.value)


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_key_in_the_urls_query_is_masked_in_the_http_clients_log(
    api: str, caplog: pytest.LogCaptureFixture,
) -> None:
    """httpx logs each request's URL at INFO: a key sent in the query (a base URL pasted with
    ``?api-key=``, ``default_query``) reached every log a user turned on."""
    import logging

    from tests.support.raw_http import USAGE, completion, json_reply, message

    def answer(request: Recorded) -> Reply:
        if "chat/completions" in request.path:
            return json_reply(completion("ok", usage=USAGE))
        return json_reply(message([{"type": "text", "text": "ok"}],
                                  usage={"input_tokens": 1, "output_tokens": 1}))

    async def ask(llm: Any) -> None:
        try:
            await llm.complete([{"role": "user", "content": "hi"}])
        finally:
            await llm.close()

    with RawServer(answer) as server, caplog.at_level(logging.INFO):
        llm = (OpenAIProvider("m", base_url=server.url + "/v1", max_retries=0,
                              default_query={"api-key": KEY}) if api == "openai" else
               AnthropicProvider("m", base_url=server.url, max_retries=0,
                                 default_query={"key": KEY}))
        asyncio.run(ask(llm))
    (request,) = server.requests
    assert KEY in request.path  # it was sent where it was asked to go
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("httpx")]
    assert lines and all(KEY not in line for line in lines), lines
    assert any("***" in line for line in lines), lines
