"""`ScriptedLLM`: a stand-in model that replays a script, for tests and the offline demo.

It is not a model: it never reads the conversation unless a script entry is a function of it.
`from_config` returns it only when the config says ``provider: scripted``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self

from jianmu.errors import ConfigError, LLMError
from jianmu.llm.messages import Message
from jianmu.llm.provider import BaseLLMProvider, ChatRequest, LLMResponse, Usage
from jianmu.tools.calls import ToolCall

if TYPE_CHECKING:
    from jianmu.config import LLMConfig

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


ScriptedRequest = ChatRequest
"""What `ScriptedLLM` was asked, for assertions: the normalised `ChatRequest`."""


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
        # the estimate reads every message and tool schema on every turn; a message's length
        # is kept by identity (each is kept alive in `requests` anyway) and the tools' for the
        # last tuple offered, so a turn costs its new messages, not the whole history again
        self._chars: dict[int, tuple[Message, int]] = {}
        self._tools_chars: tuple[tuple[dict[str, Any], ...], int] | None = None

    @classmethod
    def from_llm_config(cls, llm: LLMConfig) -> Self:
        """The stand-in that the ``llm:`` section describes: ``provider: scripted`` replaying
        ``params.responses``.

        Raises:
            ConfigError: ``llm.params.responses`` is missing, not a list, or has a bad entry.
        """
        responses = llm.params.get("responses")
        if responses is None:
            raise ConfigError(
                "llm.provider is 'scripted' but llm.params.responses is not set; list the "
                "replies to replay (a string is a final answer, a list of {name, arguments} "
                "a tool-call turn), or set llm.provider: openai with llm.model and llm.base_url"
            )
        if not isinstance(responses, list):
            raise ConfigError(
                f"llm.params.responses must be a list of replies, got {responses!r}"
            )
        try:
            return cls(responses, model=llm.model or "scripted")
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"llm.params.responses: {exc}") from None

    def output_format_params(
        self, *, name: str, schema: dict[str, Any], strict: bool
    ) -> dict[str, Any]:
        """As `OpenAIProvider`'s (``response_format``), kept in `requests`; the script's JSON
        text plays the structured reply."""
        return {"response_format": {"type": "json_schema", "json_schema": {
            "name": name, "schema": schema, "strict": strict,
        }}}

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
            message = entry.model_copy(update={
                "tool_calls": [c.with_id(self._call_id(c.id)) for c in entry.tool_calls]
            })
        else:
            message = Message(role="assistant", tool_calls=self._calls(entry))
        return LLMResponse(
            message=message,
            usage=Usage(
                input_tokens=self._prompt_tokens(messages),
                output_tokens=estimate_tokens(_message_text(message)),
            ),
            finish_reason="tool_calls" if message.tool_calls else "stop",
            model=self.model,
        )

    def _calls(self, entry: Sequence[ToolCall | Mapping[str, Any]]) -> list[ToolCall]:
        """A tool-call turn's calls, in order, those without an id numbered ``call_N``."""
        calls: list[ToolCall] = []
        for item in entry:
            if isinstance(item, dict) and item.get(
                "id", item.get("tool_call_id", item.get("call_id"))
            ) in (None, ""):
                # numbered here rather than given a random id to replace (see _call_id)
                calls.append(ToolCall.from_dict({**item, "id": self._call_id(None)}))
                continue
            call = ToolCall.from_dict(item)
            given = self._call_id(call.id)
            calls.append(call if given == call.id else call.with_id(given))
        return calls

    def _prompt_tokens(self, messages: list[Message]) -> int:
        """`estimate_tokens` of the messages' text followed by the tools' JSON."""
        request = self.requests[-1]
        chars = sum(self._message_chars(m) for m in messages)
        if request.tools:
            chars += self._tool_chars(request.tools)
        return (chars + 3) // 4

    def _message_chars(self, message: Message) -> int:
        found = self._chars.get(id(message))
        if found is not None and found[0] is message:
            return found[1]
        count = len(_message_text(message))
        self._chars[id(message)] = (message, count)
        return count

    def _tool_chars(self, tools: tuple[dict[str, Any], ...]) -> int:
        last = self._tools_chars
        if last is not None and len(last[0]) == len(tools) and all(
            a is b for a, b in zip(last[0], tools, strict=True)
        ):
            return last[1]
        count = len(json.dumps(list(tools), sort_keys=True))
        self._tools_chars = (tools, count)
        return count

    async def send(self, request: ChatRequest) -> LLMResponse:
        """Record the request and return the next scripted reply.

        Raises:
            LLMError: the script has run out.
        """
        history = list(request.messages)
        if not self.requests:  # a fresh script meets a conversation: it may be a restored run
            self._skip_replayed(history, frozenset(request.tool_names))
        self.requests.append(request)
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

    def _skip_replayed(self, history: list[Message], offered: frozenset[str] = frozenset(),
                       ) -> None:
        """Go on after the turns this script already played in ``history``.

        A run restored from a checkpoint (in another process, by `jianmu resume`) gets a new
        `ScriptedLLM` whose conversation already holds the script's first replies; when every
        assistant turn there is the script's next entry, in order, the script goes on after
        them, and the call ids it numbered continue. An answer the token limit cut off that
        the agent had continued is one turn there, its entries' text joined. In a hand-off
        team's conversation, a turn calling a tool this request does not ``offered`` (the
        ``transfer_to_...`` of the agent that handed over) was another agent's, and is passed
        over when the turns do not match as they are. A conversation that differs anywhere
        else (a history from elsewhere), or a played turn that a function of the script would
        answer, starts the script at its beginning.
        """
        played = [m for m in history if m.role == "assistant"]
        found = self._played(played)
        own = [m for m in played if not m.tool_calls or offered.issuperset(
            call.name for call in m.tool_calls)]
        if found is None and len(own) < len(played):
            found = self._played(own)
        if found is not None:
            self._position, numbered = found
            self._next_id += numbered

    def _played(self, played: list[Message]) -> tuple[int, int] | None:
        """The script's position after ``played`` and how many call ids it numbered, if the
        turns are its first entries in order."""
        if not played or len(played) > len(self._script):
            return None
        position = numbered = 0
        for message in played:
            taken = _played_entries(self._script, position, message)
            if not taken:
                return None
            for entry in self._script[position:position + taken]:
                if isinstance(entry, (list, tuple)):
                    numbered += sum(1 for call in entry if _unnumbered(call))
            position += taken
        return position, numbered

    def text_pieces(self, text: str) -> list[str]:
        """A reply streams word by word."""
        return _WORDS.findall(text)

def _message_text(message: Message) -> str:
    """The characters a message costs: its content and its calls' names and arguments."""
    parts = [message.content or ""]
    parts.extend(call.name + call.arguments_json() for call in message.tool_calls)
    return "".join(parts)


def _unnumbered(call: ToolCall | Mapping[str, Any]) -> bool:
    """Whether a scripted call gets its id from the script's numbering (``call_N``)."""
    if isinstance(call, ToolCall):
        return bool(_RANDOM_CALL_ID.fullmatch(call.id or "")) or not call.id
    return call.get("id", call.get("tool_call_id", call.get("call_id"))) in (None, "")


def _played_entries(script: Sequence[Any], start: int, message: Message) -> int:
    """How many script entries from ``start`` ``message`` plays (0: none): one, or an answer
    the token limit cut off and the entries that continued it, their text joined."""
    if start >= len(script):
        return 0
    if _same_turn(script[start], message):
        return 1
    text = ""
    for end in range(start, len(script)):
        entry = script[end]
        if callable(entry):
            return 0
        if end > start:
            reply = entry.message if isinstance(entry, LLMResponse) else entry
            if isinstance(reply, str):
                reply = Message.assistant(reply)
            if isinstance(reply, Message) and _same_turn(reply.model_copy(update={
                    "content": text + (reply.content or "")}), message):
                return end - start + 1
        if not (isinstance(entry, LLMResponse) and entry.cut_off and not entry.tool_calls):
            return 0  # only a cut-off answer is continued by the next entry
        text += entry.text
    return 0


def _same_turn(entry: Any, message: Message) -> bool:
    """Whether ``message`` is what the script entry replies (a function's reply cannot be
    known without calling it: it is never taken as played)."""
    if callable(entry):
        return False
    if isinstance(entry, LLMResponse):
        entry = entry.message
    if isinstance(entry, str):
        return not message.tool_calls and (message.content or "") == entry
    if isinstance(entry, Message):
        wanted = [(c.name, c.arguments) for c in entry.tool_calls]
        return (message.content or "") == (entry.content or "") and wanted == [
            (c.name, c.arguments) for c in message.tool_calls]
    calls = [c if isinstance(c, ToolCall) else ToolCall.from_dict({**c, "id": "x"})
             for c in entry]
    return [(c.name, c.arguments) for c in calls] == [
        (c.name, c.arguments) for c in message.tool_calls]
