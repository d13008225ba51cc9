"""`ScriptedLLM`: a stand-in model that replays a script, for tests and the offline demo.

It is not a model: it never reads the conversation unless a script entry is a function of it.
`from_config` returns it only when the config says ``provider: scripted``.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jianmu.errors import LLMError
from jianmu.llm.messages import Message, coerce_messages
from jianmu.llm.provider import (
    BaseLLMProvider,
    LLMResponse,
    MessagesInput,
    StreamDone,
    StreamEvent,
    TextDelta,
    ToolCallReady,
    ToolsInput,
    Usage,
    tool_choice_to_openai,
    tools_to_openai,
)
from jianmu.tools.calls import ToolCall

__all__ = ("ScriptEntry", "ScriptedLLM", "ScriptedRequest", "estimate_tokens")

ScriptEntry = (
    str
    | Sequence[ToolCall | Mapping[str, Any]]
    | LLMResponse
    | Message
    | Callable[[list[Message]], Any]
)
"""One scripted reply: a final answer, a tool-call turn, a ready reply, an assistant
message, or a function of the messages returning one of those."""

# `ToolCall()` without an id gets `new_call_id()`'s random id; such ids are replaced by
# deterministic ones so that scripted runs (and approval request ids) repeat exactly.
_RANDOM_CALL_ID = re.compile(r"call_[0-9a-f]{24}")
_WORDS = re.compile(r"\S+\s*|\s+")


def estimate_tokens(text: str) -> int:
    """A deterministic token estimate: one token per four characters, rounded up."""
    return (len(text) + 3) // 4


@dataclass(frozen=True, kw_only=True)
class ScriptedRequest:
    """What `ScriptedLLM` was asked, for assertions."""

    messages: tuple[Message, ...]
    """The history it received."""
    tools: tuple[dict[str, Any], ...] = ()
    """The tools offered, in the OpenAI shape."""
    tool_choice: Any = None
    """The ``tool_choice`` asked for, in the OpenAI shape."""
    params: dict[str, Any] = field(default_factory=dict)
    """Other request parameters."""

    @property
    def tool_names(self) -> list[str]:
        """Names of the tools offered."""
        return [t.get("function", {}).get("name", "") for t in self.tools]


def _check_entry(entry: Any, where: str) -> None:
    """Refuse a script entry of no known shape, naming it."""
    if isinstance(entry, (str, LLMResponse)) or callable(entry):
        return
    if isinstance(entry, Message):
        if entry.role != "assistant":
            raise ValueError(f"{where}: a scripted Message must be an assistant message, "
                             f"got role {entry.role!r}")
        return
    if isinstance(entry, (list, tuple)):
        if not entry:
            raise ValueError(
                f"{where}: an empty tool-call turn; give at least one call, or a string for a "
                f"final answer"
            )
        for call in entry:
            if not isinstance(call, (ToolCall, Mapping)):
                raise TypeError(
                    f"{where}: tool call {call!r} must be a ToolCall or a dict like "
                    f"{{'name': ..., 'arguments': {{...}}}}"
                )
        return
    raise TypeError(
        f"{where} is {entry!r} of type {type(entry).__name__}; expected a string (final "
        f"answer), a list of ToolCalls or dicts (tool-call turn), an LLMResponse, an "
        f"assistant Message, or a function of the messages returning one of those"
    )


class ScriptedLLM(BaseLLMProvider):
    """A scripted stand-in for a model: replays ``responses`` in order, for tests and demos.

    Each entry is a string (a final answer), a list of `ToolCall`s or dicts (one tool-call
    turn; calls without an id get ``call_1``, ``call_2``... in script order), an
    `LLMResponse` (returned as is), an assistant `Message`, or a function taking the
    messages and returning one of those. Usage is estimated as characters / 4 so that token
    budgets behave deterministically. Every request is kept in `requests`.

    Args:
        responses: the script.
        model: the name reported in responses.

    Raises:
        TypeError, ValueError: an entry has no known shape (the message names its index).
    """

    def __init__(self, responses: Iterable[ScriptEntry], *, model: str = "scripted") -> None:
        if isinstance(responses, (str, bytes, Mapping)):
            raise TypeError(
                f"ScriptedLLM takes a list of responses, got {type(responses).__name__}; "
                f"wrap a single answer in a list: ScriptedLLM([{responses!r}])"
            )
        self._script: list[Any] = list(responses)
        for i, entry in enumerate(self._script):
            _check_entry(entry, f"response #{i}")
        self.model = model
        self.requests: list[ScriptedRequest] = []
        """Every request received, oldest first."""
        self._position = 0
        self._next_id = 0

    @property
    def remaining(self) -> int:
        """How many scripted replies are left."""
        return len(self._script) - self._position

    def _call_id(self, given: str | None) -> str:
        if given and not _RANDOM_CALL_ID.fullmatch(given):
            return given
        self._next_id += 1
        return f"call_{self._next_id}"

    def _to_response(self, entry: Any, messages: list[Message], where: str) -> LLMResponse:
        if callable(entry):
            entry = entry(list(messages))
            if callable(entry):
                raise TypeError(f"{where}: the script function returned another function")
            _check_entry(entry, f"{where} (returned by the script function)")
        if isinstance(entry, LLMResponse):
            return entry
        if isinstance(entry, str):
            message = Message(role="assistant", content=entry)
        elif isinstance(entry, Message):
            message = entry
        else:
            message = Message(role="assistant", tool_calls=list(entry))
        message = message.model_copy(
            update={"tool_calls": [c.with_id(self._call_id(c.id)) for c in message.tool_calls]}
        )
        return LLMResponse(
            message=message,
            usage=Usage(
                input_tokens=self._prompt_tokens(messages),
                output_tokens=estimate_tokens(_message_text(message)),
            ),
            finish_reason="tool_calls" if message.tool_calls else "stop",
            model=self.model,
        )

    def _prompt_tokens(self, messages: list[Message]) -> int:
        request = self.requests[-1]
        text = "".join(_message_text(m) for m in messages)
        if request.tools:
            text += json.dumps(list(request.tools), sort_keys=True)
        return estimate_tokens(text)

    async def complete(
        self,
        messages: MessagesInput,
        *,
        tools: ToolsInput = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        **params: Any,
    ) -> LLMResponse:
        """Record the request and return the next scripted reply.

        Raises:
            LLMError: the script has run out.
        """
        history = coerce_messages(messages)
        self.requests.append(
            ScriptedRequest(
                messages=tuple(history),
                tools=tuple(tools_to_openai(tools)),
                tool_choice=tool_choice_to_openai(tool_choice),
                params=dict(params),
            )
        )
        if self._position >= len(self._script):
            raise LLMError(
                f"ScriptedLLM ran out of responses: all {len(self._script)} scripted replies "
                f"were used and request #{len(self.requests)} asked for another; add more "
                f"entries to the script"
            )
        where = f"response #{self._position}"
        entry = self._script[self._position]
        self._position += 1
        return self._to_response(entry, history, where)

    async def stream(
        self,
        messages: MessagesInput,
        *,
        tools: ToolsInput = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        **params: Any,
    ) -> AsyncIterator[StreamEvent]:
        """Yield the next scripted reply word by word, its tool calls, then `StreamDone`."""
        response = await self.complete(messages, tools=tools, tool_choice=tool_choice, **params)
        for piece in _WORDS.findall(response.text):
            yield TextDelta(text=piece)
        for index, call in enumerate(response.tool_calls):
            yield ToolCallReady(call=call, index=index)
        yield StreamDone(response=response)


def _message_text(message: Message) -> str:
    """The characters a message costs: its content and its calls' names and arguments."""
    parts = [message.content or ""]
    parts.extend(call.name + call.arguments_json() for call in message.tool_calls)
    return "".join(parts)
