"""The SDK client's own settings given to a provider, on the real keep-alive server: headers and
query parameters sent with every request (Azure's ``api-key`` and ``api-version``), a user's own
HTTP client, a base URL given with ``/v1`` to Anthropic, a timeout that is no number. Each goes
where the SDK takes it, never into the request's JSON body."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest

from jianmu.errors import ConfigError, LLMError, LLMTransientError
from jianmu.llm import AnthropicProvider, OpenAIProvider
from jianmu.llm.provider import SDKProvider
from tests.support.raw_http import (
    USAGE,
    RawServer,
    Recorded,
    Reply,
    completion,
    json_reply,
    message,
)

KEY = "azure-key-0123456789abcdef"
HI = [{"role": "user", "content": "hi"}]


def _answer(request: Recorded) -> Reply:
    if "chat/completions" in request.path:
        return json_reply(completion("ok", usage=USAGE))
    return json_reply(message([{"type": "text", "text": "ok"}],
                              usage={"input_tokens": 1, "output_tokens": 1}))


def _provider(api: str, url: str, **options: Any) -> SDKProvider:
    if api == "openai":
        return OpenAIProvider("m", base_url=url + "/v1", max_retries=0, **options)
    return AnthropicProvider("m", base_url=url, max_retries=0, **options)


def _ask(llm: SDKProvider, *, stream: bool = False) -> str:
    async def go() -> str:
        try:
            if stream:
                return [e async for e in llm.stream(HI)][-1].response.text
            return (await llm.complete(HI)).text
        finally:
            await llm.close()

    return asyncio.run(go())


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_headers_and_query_parameters_go_with_the_request_not_in_its_body(
    api: str, stream: bool,
) -> None:
    with RawServer(_answer) as server:
        llm = _provider(api, server.url, default_headers={"api-key": KEY, "x-team": "a"},
                        default_query={"api-version": "2024-06-01"}, temperature=0.5)
        assert _ask(llm, stream=stream) == "ok"
    (request,) = server.requests
    assert request.headers["api-key"] == KEY and request.headers["x-team"] == "a"
    assert request.path.endswith("?api-version=2024-06-01")
    assert request.body["temperature"] == 0.5  # a request parameter stays in the body
    assert "default_headers" not in request.body and "default_query" not in request.body
    assert KEY not in json.dumps(request.body)


def test_openais_organization_and_project_are_headers() -> None:
    with RawServer(_answer) as server:
        assert _ask(_provider("openai", server.url, organization="org-1", project="p-1")) == "ok"
    (request,) = server.requests
    assert request.headers["openai-organization"] == "org-1"
    assert request.headers["openai-project"] == "p-1"
    assert "organization" not in request.body and "project" not in request.body


@pytest.mark.parametrize(("bad", "said"), [
    (["api-key", KEY], "default_headers must be a mapping"),
    ("api-version=1", "default_headers must be a mapping"),
    ({"x-retries": 3}, "default_headers' values must be text.*'x-retries': 3"),
])
def test_headers_that_are_no_mapping_of_text_are_refused_where_given(bad: Any, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        OpenAIProvider("m", base_url="http://127.0.0.1:9/v1", default_headers=bad)


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_users_own_http_client_carries_the_requests_and_is_left_open(api: str) -> None:
    seen: list[str] = []

    async def note(request: Any) -> None:
        seen.append(request.url.path)

    def answer(request: Recorded) -> Reply:
        if len(seen) == 2:  # the second request's answer breaks off after its first bytes
            return Reply(pieces=[b'{"id": "c', b'", "choices": []}'], break_after=1)
        return _answer(request)

    async def go() -> tuple[str, type[BaseException] | None, bool]:
        client = httpx2.AsyncClient(event_hooks={"request": [note]})
        llm = _provider(api, server.url, http_client=client)
        first = (await llm.complete(HI)).text
        try:
            await llm.complete(HI)
            failed = None
        except LLMTransientError as exc:
            failed = type(exc)
        await llm.close()
        left_open = not client.is_closed
        await client.aclose()
        return first, failed, left_open

    with RawServer(answer) as server:
        first, failed, left_open = asyncio.run(go())
    assert first == "ok" and left_open  # the user's client: theirs to close
    assert len(seen) == 2
    # Jianmu's hooks are on it too: an answer that broke off was billed, and not asked again
    assert failed is LLMTransientError and len(server.requests) == 2


def test_default_clients_share_one_ssl_context_per_trust_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    import certifi
    import openai

    from jianmu.llm._http import http_client

    def context(client: Any) -> Any:
        return client._transport._pool._ssl_context

    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    first, second = http_client(openai), http_client(openai)
    assert context(first) is context(second)  # the CA bundle loaded once, not per client
    assert context(first).verify_mode.name == "CERT_REQUIRED" and context(first).check_hostname
    bundle = tmp_path / "ca.pem"
    bundle.write_bytes(Path(certifi.where()).read_bytes())
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))  # still read from the environment
    assert context(http_client(openai)) is not context(first)
    mine = httpx2.AsyncClient()
    assert http_client(openai, mine) is mine  # a user's own client keeps its own context


def test_a_users_own_http_client_on_a_second_event_loop_is_a_clear_error() -> None:
    with RawServer(_answer) as server:
        client = httpx2.AsyncClient()
        llm = _provider("openai", server.url, http_client=client)

        async def ask() -> str:
            return (await llm.complete(HI)).text

        with asyncio.Runner() as runner:
            assert runner.run(ask()) == "ok"
            with pytest.raises(ConfigError, match="runs on one event loop"):
                asyncio.run(ask())
            runner.run(client.aclose())
    assert len(server.requests) == 1


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("suffix", ["/v1", "/v1/", "/proxy/v1"])
def test_an_anthropic_base_url_given_with_v1_is_asked_once_under_it(
    suffix: str, stream: bool,
) -> None:
    with RawServer(_answer) as server:
        llm = AnthropicProvider("m", base_url=server.url + suffix, max_retries=0)
        assert _ask(llm, stream=stream) == "ok"
    assert [r.path for r in server.requests] == [suffix.removesuffix("/").removesuffix("/v1")
                                                 + "/v1/messages"]


@pytest.mark.parametrize("make", [OpenAIProvider, AnthropicProvider])
@pytest.mark.parametrize("timeout", ["30", True, float("nan"), 0, httpx2.Timeout(5, connect=0)])
def test_a_timeout_that_is_no_number_of_seconds_is_refused_saying_what_is_taken(
    make: Callable[..., Any], timeout: Any,
) -> None:
    with pytest.raises(ValueError, match="timeout must be a number of seconds > 0"):
        make("m", base_url="http://127.0.0.1:9", timeout=timeout)


@pytest.mark.parametrize("kind", [httpx.Timeout, httpx2.Timeout])
@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_an_httpx_timeout_sets_the_read_wait_apart_from_the_others(
    api: str, kind: Callable[..., Any],
) -> None:
    """``Timeout(30, read=0.2)``: the answer's body going silent fails on the read wait (the
    waits to connect and to send are 30 s), and the error says that wait."""
    held = threading.Event()

    def silent_midway(request: Recorded) -> Reply:
        body = json.dumps(completion("ok") if api == "openai" else message([])).encode()
        return Reply(pieces=[body[:5], body[5:]], chunked=True, hold=held)

    with RawServer(silent_midway) as server:
        llm = _provider(api, server.url, timeout=kind(30, read=0.2))
        assert llm.timeout == 0.2
        try:
            with pytest.raises(LLMTransientError, match=r"no byte came from .* for 0\.2s"):
                _ask(llm)
        finally:
            held.set()
    assert len(server.requests) == 1  # its answer had begun: not asked again


@pytest.mark.parametrize("stream", [False, True])
def test_a_404_from_a_base_url_without_v1_says_it_likely_needs_it(stream: bool) -> None:
    def only_v1(request: Recorded) -> Reply:
        if request.path.startswith("/v1/"):
            return _answer(request)
        return Reply(status=404, pieces=[b'{"detail": "Not Found"}'])

    with RawServer(only_v1) as server:
        with pytest.raises(LLMError) as caught:
            _ask(OpenAIProvider("m", base_url=server.url, max_retries=0), stream=stream)
        assert _ask(_provider("openai", server.url), stream=stream) == "ok"  # under /v1
    said = str(caught.value)
    assert "HTTP 404" in said and "Not Found" in said
    assert f"most servers want {server.url}/v1" in said


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("given", "asked"), [
    ("/openai/deployments/d?api-version=2024-06-01",
     "/openai/deployments/d/chat/completions?api-version=2024-06-01&team=a"),
    ("/openai/deployments/d/chat/completions?api-version=2024-06-01",  # Azure's target URI
     "/openai/deployments/d/chat/completions?api-version=2024-06-01&team=a"),
    ("/v1/chat/completions/", "/v1/chat/completions?team=a"),
])
def test_an_openai_base_url_pasted_whole_asks_its_endpoint_once_with_its_query(
    given: str, asked: str, stream: bool,
) -> None:
    with RawServer(_answer) as server:
        llm = OpenAIProvider("m", base_url=server.url + given, max_retries=0,
                             default_query={"team": "a"})
        assert _ask(llm, stream=stream) == "ok"
        assert "?" not in llm.base_url
    assert [r.path for r in server.requests] == [asked]


@pytest.mark.parametrize("given", ["/v1/messages", "/v1/messages?beta=true"])
def test_an_anthropic_base_url_pasted_whole_asks_its_endpoint_once(given: str) -> None:
    with RawServer(_answer) as server:
        assert _ask(AnthropicProvider("m", base_url=server.url + given, max_retries=0)) == "ok"
    assert [r.path for r in server.requests] == ["/v1/messages" + given[len("/v1/messages"):]]
