"""`FallbackLLM`: ask the next model when one is rate-limited, down or unreachable.

A production run should not fail on one provider's 429 or 503. `FallbackLLM([primary,
secondary, ...])` asks each model in turn: when one fails transiently (rate limit, server
error, connection error, timeout: the `LLMTransientError` a provider raises once its own
retries are spent), the next is asked with the same request. Any other failure (a 400, a 401:
the caller's error) is raised at once; when every model failed transiently, a
`FallbackFailedError` (an `LLMTransientError`) names each failure, kept in its ``failures``.

Each switch is said with an ``llm.fallback`` event (``from``, ``to``, ``error``) on the run
whose node asked (`fallback_events`), and the reply names the model that answered
(`LLMResponse.model`). Usage is counted per model in `FallbackLLM.usage_by_model`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar, Token
from dataclasses import replace
from typing import Any, TypeVar

from jianmu.config import LLMConfig
from jianmu.errors import ConfigError, FallbackFailedError, LLMTransientError
from jianmu.llm.in_flight import IN_FLIGHT, another_model, passed_over
from jianmu.llm.messages import Usage
from jianmu.llm.provider import (
    BaseLLMProvider,
    ChatRequest,
    LLMProvider,
    LLMResponse,
    StreamDone,
    StreamEvent,
    ToolCallReady,
    can_stream,
    close_stream,
    from_config,
    from_name,
    replayed,
    takes_requests,
)

__all__ = ("FallbackLLM", "fallback_events")

Emit = Callable[..., object]

_EMIT: ContextVar[Emit | None] = ContextVar("jianmu_llm_fallback_emit", default=None)
_NOTHING = nullcontext()
_EACH: ContextVar[float | None] = ContextVar("jianmu_llm_fallback_each", default=None)
"""Seconds each model may take to answer (`FallbackLLM.each_within`), or no limit of ours."""
_T = TypeVar("_T")
_FORMATS = "jianmu_fallback_output_formats"
"""The request parameter under which `FallbackLLM.output_format_params` holds each model's
own; `FallbackLLM` replaces it by the asked model's before the request leaves."""


class fallback_events:
    """Within the block, a `FallbackLLM` in this task says its switches through ``emit``
    (an event bus's ``emit``): the agent node that asks the model sets it.

    A slotted class rather than a ``@contextmanager``: it is entered on every model turn,
    and a generator with its wrapper is two more objects for the collector each time.
    """

    __slots__ = ("_emit", "_token")

    def __init__(self, emit: Emit) -> None:
        self._emit = emit
        self._token: Token[Emit | None] | None = None

    @staticmethod
    def scope(emit: Emit, *, heard: bool) -> AbstractContextManager[None]:
        """``fallback_events(emit)``; or, when nobody hears the switches (``heard`` false)
        and no outer block set an emit this one must hide, a block that does nothing: a
        model turn then sets no context variable (nothing would be said anyway)."""
        if heard or _EMIT.get() is not None:
            return fallback_events(emit)
        return _NOTHING

    def __enter__(self) -> None:
        self._token = _EMIT.set(self._emit)

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _EMIT.reset(self._token)
            self._token = None


@contextmanager
def _each_within(timeout: float) -> Iterator[None]:
    token = _EACH.set(timeout)
    try:
        yield
    finally:
        _EACH.reset(token)


async def _in_time(call: Awaitable[_T], limit: float, llm: LLMProvider) -> _T:
    """``call``'s result, or `LLMTransientError` past ``limit`` seconds (its own
    TimeoutError, and a cancel from anyone else, go on as they are)."""
    timer = asyncio.timeout(limit)
    try:
        async with timer:
            return await call
    except TimeoutError:
        if not timer.expired():
            raise
        flight = IN_FLIGHT.get()  # waiting to retry a refusal (429, 503): said, as the node does
        refused = f" (its last answer: HTTP {flight.refused})" if flight and flight.refused else ""
        raise LLMTransientError(
            f"{_name(llm)} did not answer within {limit:g} s{refused}") from None


async def _first_in_time(
    events: AsyncIterator[StreamEvent], limit: float, llm: LLMProvider
) -> AsyncIterator[StreamEvent]:
    """``events``, whose first must come within ``limit`` seconds (`_in_time`)."""
    stream = aiter(events)  # an iterable that is no iterator of its own, too
    try:
        first = await _in_time(anext(stream), limit, llm)
    except StopAsyncIteration:
        return
    yield first
    async for event in stream:
        yield event


def _name(llm: LLMProvider) -> str:
    return str(getattr(llm, "model", "") or type(llm).__name__)


def _providers(models: Any) -> tuple[LLMProvider, ...]:
    """``models`` as providers, a nested `FallbackLLM`'s in its place; a `TypeError` where one
    is none, at once: found at the first outage, the backup meant to carry the run failed it.
    """
    if isinstance(models, (str, bytes)) or callable(getattr(models, "complete", None)):
        raise TypeError(f"FallbackLLM takes a list of models, the preferred first: write "
                        f"FallbackLLM([{models!r}, ...])")
    try:
        given = list(models)
    except TypeError:
        raise TypeError(f"FallbackLLM takes a list of models, got {type(models).__name__}") \
            from None
    found: list[LLMProvider] = []
    for index, llm in enumerate(given):
        if isinstance(llm, str):  # "openai:gpt-4o", as an agent (and pydantic-ai's) takes it
            llm = from_name(llm)
        if isinstance(llm, FallbackLLM):  # its models, so each is counted by its own name
            found.extend(llm.models)
            continue
        if isinstance(llm, type):
            raise TypeError(f"FallbackLLM models[{index}] is the class {llm.__name__}: give an "
                            f"instance, {llm.__name__}(...)")
        if not callable(getattr(llm, "complete", None)):
            raise TypeError(
                f"FallbackLLM models[{index}] is {type(llm).__name__} {llm!r:.60}, not a model "
                "provider (an LLMProvider such as OpenAIProvider, or a 'provider:model' name)"
            )
        found.append(llm)
    return tuple(found)


class FallbackLLM(BaseLLMProvider):
    """Asks ``models`` in order, moving on when one fails transiently (see the module).

    Args:
        models: the providers, the preferred first; at least one. A ``"provider:model"`` name
            (``"openai:gpt-4o"``) is built as an agent builds it (`from_name`); a
            `FallbackLLM` among them is asked as its own models in turn, each counted by its
            name in `usage_by_model`.

    Raises:
        ValueError: no model is given.
        TypeError: ``models`` is not a list, or one is not a model provider.
        ConfigError: a name names no provider or model.
    """

    def __init__(self, models: Sequence[LLMProvider | str]) -> None:
        self.models = _providers(models)
        if not self.models:
            raise ValueError("FallbackLLM needs at least one model")
        self.model = _name(self.models[0])
        self.provider_name = getattr(self.models[0], "provider_name", "")
        self.usage_by_model: dict[str, Usage] = {}
        """Tokens spent by each model that answered, by its name."""

    @classmethod
    def from_llm_config(cls, llm: LLMConfig) -> FallbackLLM:
        """The ``llm:`` section's model first, then each of ``llm.fallback`` in turn.

        Raises:
            ConfigError: ``llm.provider`` is ``fallback`` (name the first model's own), or a
                model lacks a setting.
        """
        if llm.provider == "fallback":
            raise ConfigError("llm.provider: name the first model's own provider (openai, "
                              "anthropic, ...) and list the others under llm.fallback")
        first = from_config(llm.model_copy(update={"fallback": []}))
        models = [first]
        for index, each in enumerate(llm.fallback):
            try:
                models.append(from_config(each))
            except ConfigError as exc:  # its message says "llm.": say which model it is
                raise ConfigError(f"llm.fallback[{index}]: {exc}") from exc
        return cls(models)

    def __repr__(self) -> str:
        return f"FallbackLLM([{', '.join(repr(m) for m in self.models)}])"

    def output_format_params(self, **kwargs: Any) -> dict[str, Any]:
        """Each model's own structured-output parameters, sent to that model alone (an OpenAI
        model's ``response_format``, an Anthropic one's ``output_config``); a model that makes
        none is sent the primary's, and one that refuses (an SDK too old) is passed over.

        Raises:
            NotImplementedError: the primary model offers no structured output.
        """
        primary = getattr(self.models[0], "output_format_params", None)
        if primary is None:
            raise NotImplementedError(f"{_name(self.models[0])} offers no structured output")
        first = dict(primary(**kwargs))
        own: list[dict[str, Any] | str] = [first]
        for llm in self.models[1:]:
            make = getattr(llm, "output_format_params", None)
            try:
                own.append(first if make is None else dict(make(**kwargs)))
            except (ConfigError, NotImplementedError) as exc:  # why it cannot, said if asked
                own.append(f"{_name(llm)} cannot give this typed answer: {exc}")
        return {_FORMATS: own}

    def _request_for(self, index: int, request: ChatRequest) -> ChatRequest:
        """``request`` as model ``index`` is sent it: its own structured-output parameters.

        Raises:
            LLMTransientError: that model cannot give the typed answer asked (passed over).
        """
        formats = request.params.get(_FORMATS)
        if formats is None:
            return request
        own = formats[index]
        if isinstance(own, str):
            raise LLMTransientError(own)
        params = {k: v for k, v in request.params.items() if k != _FORMATS}
        return replace(request, params={**params, **own})

    async def send(self, request: ChatRequest) -> LLMResponse:
        """The first model's reply that does not fail transiently.

        Raises:
            FallbackFailedError: every model failed transiently (an `LLMTransientError`
                naming each failure).
            LLMError: a model failed for any other reason (not passed on).
        """
        failed: list[tuple[str, LLMTransientError]] = []
        asked = request
        for index, llm in enumerate(self.models):
            another_model(_name(llm))
            try:
                request = self._request_for(index, asked)
                if takes_requests(llm, params=request.params):
                    call = llm.send(request)
                else:
                    call = llm.complete(request.messages, tools=request.tools or None,
                                        tool_choice=request.tool_choice, **request.params)
                limit = _EACH.get()
                response = await (call if limit is None else _in_time(call, limit, llm))
            except LLMTransientError as exc:
                passed_over(_name(llm))
                self._switch(index, exc, failed)
                continue
            return self._answered(llm, response)
        raise AssertionError("unreachable: the last model's failure is raised")

    async def send_stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """The first model's stream that does not fail transiently before its first delta
        (or its end); a failure after it is raised (what was shown cannot be taken back).
        A tool call that comes whole before either is held until then: a model passed over
        after one (Anthropic streams each call whole) shows nothing of its answer."""
        failed: list[tuple[str, LLMTransientError]] = []
        asked = request
        for index, llm in enumerate(self.models):
            another_model(_name(llm))
            try:
                request = self._request_for(index, asked)
            except LLMTransientError as exc:
                self._switch(index, exc, failed)
                continue
            if takes_requests(llm, stream=True, params=request.params):
                events = llm.send_stream(request)  # type: ignore[union-attr]
            elif not can_stream(llm):  # complete() alone: its reply replayed (it failed the run)
                events = _replay(llm.complete(request.messages, tools=request.tools or None,
                                              tool_choice=request.tool_choice, **request.params))
            else:
                events = llm.stream(request.messages, tools=request.tools or None,
                                    tool_choice=request.tool_choice, **request.params)
            limit = _EACH.get()
            source = events if limit is None else _first_in_time(events, limit, llm)
            started = False
            held: list[StreamEvent] = []  # whole tool calls before the first delta
            try:
                async for event in source:
                    if not started:
                        if isinstance(event, ToolCallReady):
                            held.append(event)
                            continue
                        started = True
                        for ready in held:
                            yield ready
                    if isinstance(event, StreamDone):
                        event = StreamDone(response=self._answered(llm, event.response))
                    yield event
                if not started:  # a stream that ended without its end: what it gave, as is
                    for ready in held:
                        yield ready
            except LLMTransientError as exc:
                if started:
                    raise
                passed_over(_name(llm))
                self._switch(index, exc, failed)
                continue
            finally:  # the model's stream closes with this one (a reader stopped, or done)
                await close_stream(source)
                await close_stream(events)
            return

    def each_within(self, timeout: float) -> AbstractContextManager[None]:
        """Within the block, each model asked in this task must answer (a stream: begin)
        within ``timeout`` seconds, or is passed over as if it had failed transiently: the
        agent node gives each model its whole ``timeout`` this way."""
        return _each_within(timeout)

    def _switch(
        self, index: int, exc: LLMTransientError, failed: list[tuple[str, LLMTransientError]]
    ) -> None:
        """Say the move from model ``index`` to the next; when it was the last, raise each
        failure (``failed``, to which ``exc`` is added) as one."""
        failed.append((_name(self.models[index]), exc))
        if index + 1 >= len(self.models):
            if len(failed) == 1:  # one model: its own error, as it came
                raise exc
            raise FallbackFailedError(tuple(failed)) from exc
        emit = _EMIT.get()
        if emit is not None:
            emit("llm.fallback", **{"from": _name(self.models[index]),
                                    "to": _name(self.models[index + 1]), "error": str(exc)})

    def _answered(self, llm: LLMProvider, response: LLMResponse) -> LLMResponse:
        """Count the reply's usage for its model, and name that model on the reply."""
        name = _name(llm)
        usage = response.usage
        if usage is None:  # the server said nothing: the agent node estimates the tokens
            self.usage_by_model[name] = self.usage_by_model.get(name, Usage()) + Usage(
                requests=1, estimated_requests=1)
            return replace(response, model=response.model or name)
        if not usage.requests:  # one request answered, as the agent node counts it
            usage = replace(usage, requests=1)
        self.usage_by_model[name] = self.usage_by_model.get(name, Usage()) + usage
        return replace(response, model=response.model or name, usage=usage)

    async def close(self) -> None:
        """Close every model, each even when another's ``close`` fails (the first failure is
        raised after all were asked)."""
        failure: BaseException | None = None
        for llm in self.models:
            try:
                await llm.close()
            except Exception as exc:  # the rest still hold connections: close them too
                failure = failure or exc
        if failure is not None:
            raise failure


async def _replay(reply: Awaitable[LLMResponse]) -> AsyncIterator[StreamEvent]:
    """The events of a provider's whole reply, as a stream would give them."""
    for event in replayed(await reply):
        yield event
