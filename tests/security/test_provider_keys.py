"""A provider's key never goes to another provider's server.

The shipped config once read ``api_key: ${OPENAI_API_KEY:-}``: switching the provider to
``anthropic`` would have sent the OpenAI key to the Anthropic endpoint (or to whatever
``base_url`` points at). Each provider now falls back to its own variable only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu.config import load_config
from jianmu.llm.messages import Message
from jianmu.llm.provider import from_config
from tests.support.fake_anthropic import FakeAnthropicServer

pytestmark = pytest.mark.anyio
pytest.importorskip("anthropic")

SHIPPED = Path(__file__).resolve().parents[2] / "configs" / "jianmu.yaml"


async def test_the_openai_key_does_not_reach_an_anthropic_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with FakeAnthropicServer(["hi"]) as server:
        monkeypatch.setenv("JIANMU_LLM_PROVIDER", "anthropic")
        monkeypatch.setenv("JIANMU_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-secret")
        monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
        monkeypatch.delenv("JIANMU_LLM_API_KEY", raising=False)
        llm = from_config(load_config(SHIPPED))
        try:
            await llm.complete([Message.user("hello")])
        finally:
            await llm.close()
        sent = " ".join(f"{k}={v}" for k, v in server.headers[0].items())
    assert "sk-openai-secret" not in sent


async def test_the_anthropic_key_comes_from_its_own_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with FakeAnthropicServer(["hi"]) as server:
        monkeypatch.setenv("JIANMU_LLM_PROVIDER", "anthropic")
        monkeypatch.setenv("JIANMU_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-own")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-secret")
        monkeypatch.delenv("JIANMU_LLM_API_KEY", raising=False)
        llm = from_config(load_config(SHIPPED))
        try:
            await llm.complete([Message.user("hello")])
        finally:
            await llm.close()
        sent = " ".join(f"{k}={v}" for k, v in server.headers[0].items())
    assert "sk-ant-own" in sent and "sk-openai-secret" not in sent
