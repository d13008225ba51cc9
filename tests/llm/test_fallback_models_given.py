"""`FallbackLLM`'s models as a user porting from pydantic-ai gives them: each is taken or refused
where the fallback is made, never at the first outage; a nested fallback counts each model."""

from __future__ import annotations

from typing import Any

import pytest

from jianmu import FallbackLLM
from jianmu.errors import ConfigError, LLMTransientError
from jianmu.llm import OpenAIProvider, ScriptedLLM
from jianmu.llm.messages import Usage

pytestmark = pytest.mark.anyio

_ASK = [{"role": "user", "content": "hi"}]


class _Down(ScriptedLLM):
    async def send(self, request: Any) -> Any:
        raise LLMTransientError("HTTP 503: overloaded")


@pytest.mark.parametrize(("models", "said"), [
    # each was taken and failed only when the primary did, as AttributeError: no 'complete'
    ([ScriptedLLM(["x"]), None], r"models\[1\] is NoneType None, not a model provider"),
    ([ScriptedLLM(["x"]), object()], r"models\[1\] is object .*, not a model provider"),
    ([ScriptedLLM], r"models\[0\] is the class ScriptedLLM: give an instance, ScriptedLLM\(...\)"),
    # was "'ScriptedLLM' object is not iterable", and a name was read letter by letter
    (ScriptedLLM(["x"]), r"takes a list of models, the preferred first: write FallbackLLM\(\["),
    ("openai:gpt-4o", r"takes a list of models, the preferred first: write FallbackLLM\(\["),
    (3, "takes a list of models, got int"),
])
def test_what_is_no_model_is_refused_where_the_fallback_is_made(models: Any, said: str) -> None:
    with pytest.raises(TypeError, match=said):
        FallbackLLM(models)


def test_a_provider_model_name_is_built_as_an_agent_builds_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    llm = FallbackLLM([ScriptedLLM(["x"], model="first"), "openai:gpt-4o-mini"])
    assert isinstance(llm.models[1], OpenAIProvider) and llm.models[1].model == "gpt-4o-mini"
    with pytest.raises(ConfigError, match="'gpt-4o' names no provider"):
        FallbackLLM([ScriptedLLM(["x"]), "gpt-4o"])  # was taken, and failed at the outage


async def test_a_nested_fallback_counts_the_model_that_answered_not_the_one_that_failed() -> None:
    inner = FallbackLLM([_Down([], model="down"), ScriptedLLM(["Hello."], model="backup")])
    outer = FallbackLLM([inner, ScriptedLLM(["x"], model="last")])
    assert [m.model for m in outer.models] == ["down", "backup", "last"]
    reply = await outer.complete(_ASK)
    assert reply.model == "backup"
    # was {"down": ...}: the tokens of the backup, credited to the model that had failed
    assert outer.usage_by_model == {"backup": Usage(input_tokens=1, output_tokens=2, requests=1)}
