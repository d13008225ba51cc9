"""`Message`: one turn of a chat, and its conversions to the OpenAI and Anthropic formats,
images and audio of tool messages included; and `Usage`, the tokens the turns of a chat cost."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from jianmu._json import MAX_ARGUMENT_NESTING, finite, nests_within
from jianmu.tools.calls import MediaPart, ToolCall, ToolResult, sent_tool_name

__all__ = (
    "OPENAI_REASONING_FIELDS",
    "REASONING_BLOCKS",
    "Message",
    "Role",
    "Usage",
    "close_unanswered",
    "coerce_messages",
    "messages_from_anthropic",
    "messages_from_openai",
    "messages_to_anthropic",
    "messages_to_openai",
)

Role = Literal["system", "user", "assistant", "tool"]

# Part types whose ``text`` is plain text, across OpenAI chat, OpenAI responses and Anthropic.
_TEXT_PARTS = frozenset({"text", "input_text", "output_text"})
# Anthropic needs tool inputs to be objects; other argument values travel wrapped in this key.
_RAW_ARGUMENTS_KEY = "_raw_arguments"


def _join_text_parts(parts: Iterable[Any], where: str) -> str:
    """Join the text of content parts; refuse parts that are not text."""
    texts: list[str] = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, Mapping) and part.get("type", "text") in _TEXT_PARTS:
            texts.append(str(part.get("text") or ""))
        else:
            kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
            raise ValueError(
                f"{where}: content part of type {kind!r} is not supported; a Message holds "
                f"text (parts {{'type': 'text', 'text': ...}} or a string) and base64 images "
                f"(image_url data URLs, image blocks, or Message.media)"
            )
    return "\n".join(texts)


class Message(BaseModel):
    """One chat message: a system prompt, a user turn, an assistant turn or a tool result.

    ``tool_calls`` accepts `ToolCall`s and dicts in the OpenAI, Anthropic ``tool_use`` or flat
    ``{"name", "arguments"}`` shapes; ``content`` accepts a list of text parts, joined by
    newlines, and base64 image parts, which move to ``media``; an OpenAI chat message's own keys
    (``developer``, ``refusal``, ``reasoning_content``...) read as `from_openai` reads them.
    ``model_dump(mode="json")`` and ``model_validate`` round-trip, so messages can live in
    checkpointed state.
    """

    model_config = ConfigDict(defer_build=True, extra="forbid")

    role: Role
    """Who speaks: ``system``, ``user``, ``assistant`` or ``tool``."""
    content: str | None = None
    """The text; ``None`` for an assistant turn that only calls tools."""
    name: str | None = None
    """Optional speaker name; for a tool message, the tool's name."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """The tool calls an assistant turn asks for."""
    tool_call_id: str | None = None
    """For a tool message, the id of the call it answers."""
    media: list[MediaPart] = Field(default_factory=list)
    """Images and audio beside the text (a tool's `ToolOutput`, a user's picture); providers
    send the images as image parts when the model reads them, and a text stand-in always."""
    reasoning: list[dict[str, Any]] = Field(default_factory=list)
    """An assistant turn's reasoning as its provider returned it: Anthropic's ``thinking``
    blocks with their signatures and ``redacted_thinking``, sent back unchanged with the turn,
    as Anthropic requires beside its tool calls; or an OpenAI-compatible server's
    ``{"type": "reasoning_content" | "reasoning", "text": ...}`` (DeepSeek, Kimi, vLLM,
    OpenRouter), OpenRouter's ``{"type": "reasoning_details", "details": [...]}`` and Mistral's
    thinking parts (``thinking_parts``, never sent back), sent back only by a provider told to
    (``OpenAIProvider(send_reasoning=True)``). Never shown as the text, never sent to another
    API."""

    @model_serializer(mode="wrap")
    def _without_empty_media(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if not self.media:  # the common case: dumps stay as they were before media existed
            data.pop("media", None)
        if not self.reasoning:  # and as they were before reasoning was kept
            data.pop("reasoning", None)
        return data

    @model_validator(mode="before")
    @classmethod
    def _read_shapes(cls, data: Any) -> Any:
        """Other shapes of a message read as a `Message`'s fields.

        An OpenAI chat message with what a `Message` spells otherwise (the ``developer`` role,
        ``refusal``, ``reasoning_content``, the openai SDK dump's null ``audio``,
        ``annotations`` and ``function_call``) is read as `from_openai` reads it: a history
        kept as the SDK gives it validates, rather than each such key refused as unknown. Image
        parts in ``content`` (OpenAI ``image_url`` data URLs, Anthropic ``image`` blocks) move
        to ``media``. A plain message's dict passes with a key lookup and a set test.
        """
        if type(data) is not dict and not isinstance(data, Mapping):  # no ABC test for a dict
            return data
        if data.get("role") == "developer" or (not _OPENAI_HINTS.isdisjoint(data) and (
            isinstance(data.get("reasoning"), str) or not _OPENAI_ONLY_KEYS.isdisjoint(data)
        )):
            data = _openai_fields(data)
        content = data.get("content")
        if type(content) is list or isinstance(content, tuple):
            rest, found = media_from_parts(content)
            if found:
                return {**data, "content": _without_stand_ins(rest, found),
                        "media": [*data.get("media", ()), *found]}
        return data

    @field_validator("content", mode="before")
    @classmethod
    def _content_parts(cls, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return _join_text_parts(value, "Message.content")
        return value

    @field_validator("reasoning")
    @classmethod
    def _bounded_reasoning(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # a history's turn (a client's to send) may hold anything here: the run's records (a
        # checkpoint, the request sent back) are written by walks that stop at a fixed depth
        if value and not nests_within(value, MAX_ARGUMENT_NESTING):
            raise ValueError(f"nested deeper than {MAX_ARGUMENT_NESTING} levels (a "
                             "provider's reasoning blocks are a few levels deep)")
        return value

    @field_validator("tool_calls", mode="before")
    @classmethod
    def _normalise_calls(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, (dict, ToolCall)):
            return [ToolCall.from_dict(value)]
        if isinstance(value, (list, tuple)):
            return ToolCall.from_list(value)
        return value

    @model_validator(mode="after")
    def _check_role_fields(self) -> Message:
        if self.tool_calls and self.role != "assistant":
            raise ValueError(
                f"only assistant messages carry tool_calls, not a {self.role!r} message; "
                f"set role='assistant' or drop tool_calls"
            )
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError(
                "a tool message needs tool_call_id: the id of the assistant's tool call it answers"
            )
        if self.tool_call_id is not None and self.role != "tool":
            raise ValueError(
                f"tool_call_id belongs on tool messages, not on a {self.role!r} message"
            )
        if self.media and self.role not in ("tool", "user"):
            raise ValueError(f"only tool and user messages carry media, not a {self.role!r} one")
        if self.reasoning and self.role != "assistant":
            raise ValueError(f"only assistant messages carry reasoning, not a {self.role!r} one")
        return self

    # -- constructors ------------------------------------------------------------------------

    @classmethod
    def system(cls, content: str) -> Message:
        """A system prompt."""
        return cls(role="system", content=content)

    @classmethod
    def user(cls, content: str, *, name: str | None = None) -> Message:
        """A user turn."""
        return cls(role="user", content=content, name=name)

    @classmethod
    def assistant(
        cls, content: str | None = None, *, tool_calls: Iterable[Any] | None = None
    ) -> Message:
        """An assistant turn: text, tool calls, or both."""
        return cls(role="assistant", content=content, tool_calls=list(tool_calls or []))

    @classmethod
    def tool(
        cls, content: str, *, tool_call_id: str, name: str | None = None,
        media: Iterable[MediaPart] = (),
    ) -> Message:
        """A tool result answering the call ``tool_call_id``, with any images or audio."""
        parts = list(media)
        if not parts:  # most results: the field's own empty default, not a list to validate
            return cls(role="tool", content=content, tool_call_id=tool_call_id, name=name)
        return cls(
            role="tool", content=content, tool_call_id=tool_call_id, name=name, media=parts
        )

    @classmethod
    def from_tool_result(cls, result: ToolResult) -> Message:
        """The tool message that reports ``result`` to the model.

        Raises:
            ValueError: the result has no ``call_id`` to answer.
        """
        if not result.call_id:
            raise ValueError(
                f"ToolResult for tool {result.tool!r} has no call_id; a tool message must name "
                f"the call it answers"
            )
        return cls.tool(
            result.text, tool_call_id=result.call_id, name=result.tool, media=result.media
        )

    # -- OpenAI ------------------------------------------------------------------------------

    @classmethod
    def from_openai(cls, data: Mapping[str, Any] | Message) -> Message:
        """Build a message from the OpenAI chat format; a ``refusal`` (structured outputs)
        with no content is the content, a legacy ``function_call`` a tool call, a
        ``reasoning_content`` or ``reasoning`` text the turn's `reasoning`; other keys
        (``audio``, ...) are ignored.

        Raises:
            pydantic.ValidationError: the role or a field is invalid.
        """
        if isinstance(data, Message):
            return data
        if not isinstance(data, Mapping):
            raise TypeError(
                f"expected an OpenAI message dict, got {data!r} of type {type(data).__name__}"
            )
        return cls.model_validate(_openai_fields(data))

    def to_openai(self) -> dict[str, Any]:
        """This message in the OpenAI chat format: its media each said by a line of its text
        (`with_stand_ins`), and its images ``image_url`` parts after it, but in a tool message,
        which holds text only there (`messages_to_openai` sends them after it)."""
        content: Any = self.content
        if self.media:  # else a user's picture was lost on the way (and back: `_read_shapes`)
            content = with_stand_ins(content, self.media)
            parts = openai_image_parts(self.media) if self.role != "tool" else []
            if parts:
                content = [{"type": "text", "text": content}, *parts]
        if content is None and not self.tool_calls:
            # OpenAI refuses a null content but beside tool calls (an empty reply streamed)
            content = ""
        out: dict[str, Any] = {"role": self.role, "content": content}
        if self.name:  # OpenAI refuses a name of other characters ("John Doe", "a.b")
            out["name"] = sent_tool_name(self.name)
        if self.tool_calls:
            out["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        return out


OPENAI_REASONING_FIELDS = ("reasoning_content", "reasoning")
"""Where OpenAI-compatible servers put an assistant turn's reasoning text: DeepSeek, Kimi and
vLLM's reasoning parsers say ``reasoning_content``, OpenRouter and newer vLLM ``reasoning``."""

REASONING_DETAILS = "reasoning_details"
"""OpenRouter's structured reasoning (``reasoning.text`` with its ``signature``,
``reasoning.summary``, ``reasoning.encrypted``), kept whole as a block
``{"type": "reasoning_details", "details": [...]}``: the model that made it (Claude's thinking,
Gemini's thought signatures) needs it back unchanged beside its tool calls."""


_OPENAI_ONLY_KEYS = frozenset({
    "refusal", "audio", "annotations", "function_call", "reasoning_content", REASONING_DETAILS,
})
"""Keys of an OpenAI chat message (as the openai SDK dumps one) that a `Message` lacks."""
_OPENAI_HINTS = _OPENAI_ONLY_KEYS | {"reasoning"}
"""The keys that may make a message's dict one of OpenAI's shape (``reasoning`` as text)."""


def _openai_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """The `Message` fields of an OpenAI chat message (`Message.from_openai`)."""
    fields = {k: data[k] for k in ("role", "content", "name", "tool_call_id", "media")
              if k in data}
    if not fields.get("content") and data.get("refusal"):  # else the answer is lost
        fields["content"] = data["refusal"]
    if fields.get("role") == "developer":  # OpenAI's newer name for the system role
        fields["role"] = "system"
    reasoning = _openai_reasoning(data)
    if reasoning:
        fields["reasoning"] = reasoning
    fields["tool_calls"] = data.get("tool_calls") or []
    legacy = data.get("function_call")
    if not fields["tool_calls"] and isinstance(legacy, Mapping) and legacy.get("name"):
        # the older shape of one call (finish reason ``function_call``): else it is lost
        fields["tool_calls"] = [{"type": "function", "function": dict(legacy)}]
    return fields


def _openai_reasoning(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """An OpenAI-style message's reasoning: the first field of `OPENAI_REASONING_FIELDS` that
    holds text (a server that sends both sends the same text twice) and OpenRouter's
    `REASONING_DETAILS`, or a `Message`'s own dumped ``reasoning`` list."""
    given = data.get("reasoning")
    if isinstance(given, list) and all(isinstance(b, Mapping) for b in given):
        return [dict(b) for b in given]
    out: list[dict[str, Any]] = []
    for key in OPENAI_REASONING_FIELDS:
        value = data.get(key)
        if isinstance(value, str) and value:
            out.append({"type": key, "text": value})
            break
    details = data.get(REASONING_DETAILS)
    if isinstance(details, list) and details and all(isinstance(d, Mapping) for d in details):
        out.append({"type": REASONING_DETAILS, "details": [dict(d) for d in details]})
    return out


def coerce_messages(messages: Iterable[Message | Mapping[str, Any]]) -> list[Message]:
    """Normalise a history of `Message`s and OpenAI-style dicts to `Message`s.

    Raises:
        TypeError: ``messages`` is a single message or string rather than a sequence.
    """
    if isinstance(messages, (str, bytes, Mapping, Message)):
        raise TypeError(
            f"expected a sequence of messages, got {type(messages).__name__}; wrap it in a list"
        )
    return [Message.from_openai(m) for m in messages]


NOT_RUN = (  # a call waiting for a person's approval never began: both are said
    "not run, or not run to its end: the run was stopped before this call's result came, and "
    "the conversation went on without it"
)
"""The result recorded for a call the conversation left behind (`close_unanswered`)."""


def close_unanswered(
    messages: Sequence[Message], recorded: Mapping[str, Message] | None = None,
) -> list[Message] | None:
    """``messages`` with every tool call that a later turn left without its result answered
    as `NOT_RUN` (or by its result in ``recorded``, by call id: one recorded before its
    batch was appended, such as a call stopped as maybe done), right after the results it
    has; None when every call has its result.

    A run stopped during a call, then a new message (``send``, a history passed on): every
    provider refuses a call without its result, and the call is not to run any more.
    Calls of the last turn, with nothing after them, are still to run: they are left alone.
    """
    recorded = recorded or {}
    out: list[Message] | None = None
    waiting: list[ToolCall] = []
    answered: set[str | None] = set()  # a set: a turn of 10,000 calls is not 10,000 passes
    for i, m in enumerate(messages):
        if m.role == "tool":
            if waiting:
                answered.add(m.tool_call_id)
            if out is not None:
                out.append(m)
            continue
        left = [c for c in waiting if c.id not in answered] if waiting else waiting
        if left:
            if out is None:
                out = list(messages[:i])
            out += [recorded.get(c.id) or Message.tool(NOT_RUN, tool_call_id=c.id, name=c.name)
                    for c in left]
        if out is not None:
            out.append(m)
        waiting = list(m.tool_calls) if m.role == "assistant" else []
        if answered:
            answered = set()
    return out


ORPHAN_RESULT = "The result of a call ({tool}, id {id}) that this conversation does not hold:"
"""What a tool result whose call is not right before it goes as (`paired_turns`)."""


def paired_turns(messages: Sequence[Message]) -> list[Message]:
    """``messages`` as the model APIs take them: a tool result that answers no call of the
    turn right before it (a history given with its start cut off, a processor that cut a
    turn in two, a result given twice) sent as a user message of its text, `ORPHAN_RESULT`
    first, after the results of that turn; and each call without a result answered as
    `NOT_RUN` (as `close_unanswered` does; those of the last turn too): OpenAI and
    Anthropic refuse the whole request for a result without its call or a call without its
    result. System messages go first, in their order, as Anthropic's one system prompt holds
    them all (a history given with its own system prompt or notes)."""
    began = next((i for i, m in enumerate(messages) if m.role != "system"), len(messages))
    if any(m.role == "system" for m in messages[began:]):
        messages = [*(m for m in messages if m.role == "system"),
                    *(m for m in messages if m.role != "system")]
    out: list[Message] = []
    # the ids of the last assistant turn's calls still without a result, each with how many
    # (counted, not a list searched per result: a turn of 10,000 calls, its results in
    # another order, was 50,000,000 comparisons on every request)
    waiting: dict[str, int] = {}
    orphans: list[Message] = []  # results of no call there, sent after the turn's results
    results = 0  # where the last turn's results begin in ``out``
    for m in messages:
        if m.role == "tool":
            left = waiting.get(m.tool_call_id or "")
            if left:
                waiting[m.tool_call_id or ""] = left - 1
                out.append(m)
                continue
            lead = ORPHAN_RESULT.format(tool=m.name or "a tool", id=m.tool_call_id)
            orphans.append(Message(role="user", content=f"{lead}\n{m.content or ''}",
                                   media=m.media))
            continue
        out += _not_run(out, waiting)
        _in_call_order(out, results)
        out += orphans
        orphans = []
        waiting = {}
        for c in m.tool_calls:
            waiting[c.id] = waiting.get(c.id, 0) + 1
        out.append(m)
        results = len(out)
    out += _not_run(out, waiting)
    _in_call_order(out, results)
    return out + orphans


def _in_call_order(out: list[Message], start: int) -> None:
    """Put the results from ``start`` on (a turn's) in the order of its calls: the answer
    the model node writes to a call the token limit cut off, its last, came before the
    others' results; templates of open models that drop the ids pair results by place."""
    if start == 0 or len(out) - start < 2:
        return
    turn = out[start - 1]
    place = {c.id: i for i, c in enumerate(turn.tool_calls)}
    ranks = [place.get(m.tool_call_id or "", len(place)) for m in out[start:]]
    if ranks != sorted(ranks):
        out[start:] = [m for _, m in sorted(zip(ranks, out[start:], strict=True),
                                            key=lambda pair: pair[0])]


def _not_run(out: list[Message], waiting: dict[str, int]) -> list[Message]:
    """`NOT_RUN` results of the calls in ``waiting`` (of the last assistant turn of ``out``,
    each id with how many of its calls are still without a result)."""
    if not any(waiting.values()):
        return []
    last = next(m for m in reversed(out) if m.role == "assistant")
    left = dict(waiting)
    results = []
    for c in last.tool_calls:
        if left.get(c.id):
            left[c.id] -= 1
            results.append(Message.tool(NOT_RUN, tool_call_id=c.id, name=c.name))
    return results


def messages_to_openai(
    messages: Iterable[Message | Mapping[str, Any]], *, images: bool = True,
    reasoning: bool = False,
) -> list[dict[str, Any]]:
    """A history in the OpenAI chat format.

    A tool message's images follow its run of tool messages in a user message of
    ``image_url`` parts (tool messages hold only text there); ``images=False`` leaves only
    their text stand-ins, for a model that reads no images. With ``reasoning``, each assistant
    turn after the last user message carries its OpenAI-style reasoning under the field it
    came in (``reasoning_content``: DeepSeek's thinking mode with tools requires it there);
    earlier turns' never goes (a new question starts without it).
    """
    return _openai_chat_messages(paired_turns(coerce_messages(messages)), images=images,
                                 reasoning=reasoning)


def _openai_chat_messages(
    messages: Sequence[Message], *, images: bool = True, reasoning: bool = False
) -> list[dict[str, Any]]:
    """A history in the OpenAI chat format, images of tool results included.

    A tool message can only hold text there, so the images of a run of tool messages follow
    it in one user message, each introduced by the call it came from; with ``images`` off
    (a model that reads no images) only the text stand-ins remain.
    """
    out: list[dict[str, Any]] = []
    ids = _CallIds(openai_call_id)
    pending: list[dict[str, Any]] = []  # the image parts of the current run of tool messages
    turn_starts = 0  # the current turn: the messages after the last user message
    if reasoning:
        turn_starts = next((len(messages) - i for i, m in enumerate(reversed(messages))
                            if m.role == "user"), 0)
    for index, message in enumerate(messages):
        if message.role != "tool" and pending:
            out.append({"role": "user", "content": pending})
            pending = []
        entry = message.to_openai()
        _short_ids(entry, ids)
        if reasoning and message.reasoning and index >= turn_starts:
            _send_reasoning(entry, message.reasoning)
        if message.media:
            entry["content"] = with_stand_ins(message.content, message.media)
            parts = openai_image_parts(message.media) if images else []
            if parts and message.role == "tool":
                who = f" ({message.name})" if message.name else ""
                pending.append({
                    "type": "text",
                    "text": f"Images returned by tool call {message.tool_call_id}{who}:",
                })
                pending.extend(parts)
            elif parts:
                entry["content"] = [{"type": "text", "text": entry["content"]}, *parts]
        out.append(entry)
    if pending:
        out.append({"role": "user", "content": pending})
    return out


OPENAI_MAX_CALL_ID = 40
"""The longest call id OpenAI takes ("string too long" past it); vLLM's are 46 characters."""


def openai_call_id(call_id: str) -> str:
    """``call_id`` as OpenAI takes it: as it is up to `OPENAI_MAX_CALL_ID` characters, else
    its start and a digest of it (the same for the call and its result, each turn)."""
    if len(call_id) <= OPENAI_MAX_CALL_ID:
        return call_id
    digest = hashlib.sha256(call_id.encode("utf-8", "replace")).hexdigest()[:16]
    return f"{call_id[:OPENAI_MAX_CALL_ID - 17]}_{digest}"


def _short_ids(entry: dict[str, Any], ids: _CallIds) -> None:
    """The call ids of an OpenAI chat message made ones OpenAI takes: unique in the request
    and of `OPENAI_MAX_CALL_ID` characters at most (`openai_call_id`)."""
    for call in entry.get("tool_calls") or ():
        call["id"] = ids.use(call["id"])
    if "tool_call_id" in entry:
        entry["tool_call_id"] = ids.result(entry["tool_call_id"])


def _send_reasoning(entry: dict[str, Any], blocks: Sequence[Mapping[str, Any]]) -> None:
    """Put an assistant turn's OpenAI-style reasoning on its wire ``entry``: OpenRouter's
    details whole when it gave them (they carry the text, and the signatures the model
    checks), else the text under the field it came in."""
    details = [b for b in blocks if b.get("type") == REASONING_DETAILS]
    if details and isinstance(details[0].get("details"), list):
        entry[REASONING_DETAILS] = details[0]["details"]
        return
    for block in blocks:
        if block.get("type") in OPENAI_REASONING_FIELDS and isinstance(block.get("text"), str):
            entry[block["type"]] = block["text"]


def messages_from_openai(messages: Iterable[Mapping[str, Any]]) -> list[Message]:
    """A history from the OpenAI chat format."""
    return coerce_messages(messages)


# -- Anthropic ---------------------------------------------------------------------------------


def _anthropic_input(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, dict):
        # the SDK writes the body as standard JSON: an inf (a model's 1e400) raised in it
        written: dict[str, Any] = finite(arguments)
        return written
    return {_RAW_ARGUMENTS_KEY: arguments}


def _from_anthropic_input(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {_RAW_ARGUMENTS_KEY}:
        return value[_RAW_ARGUMENTS_KEY]
    return {} if value is None else value


_NOT_ANTHROPIC_ID = re.compile(r"[^A-Za-z0-9_-]")


def _anthropic_id(call_id: str) -> str:
    return _NOT_ANTHROPIC_ID.sub("_", call_id) or "call"


class _CallIds:
    """Call ids as an API takes them: each call's id unique in the request (a 400 else, from
    OpenAI as from Anthropic) and of the API's form (``make``: Anthropic's
    ``^[A-Za-z0-9_-]+$``, OpenAI's 40 characters), each result naming its call's id. A
    conversation may hold others: a server that numbers calls per reply (``call_0`` each
    turn), Kimi's ``functions.lookup:0``, an id a run made unique (``call_0.1``), a history
    given with an id used twice. Made the same from the same conversation, so each turn's
    request begins as the last one did (the prompt cache)."""

    def __init__(self, make: Callable[[str], str]) -> None:
        self._make = make
        self._sent: set[str] = set()
        self._suffix: dict[str, int] = {}  # an id: the suffix it got last (below: all taken)
        self._latest: dict[str, str] = {}  # a call's id: what its latest call went as
        self._open: dict[str, list[str]] = {}  # a call's id: its calls not yet answered

    def use(self, call_id: str) -> str:
        base = sent = self._make(call_id)
        if sent in self._sent:  # from the suffix it got last: one id 10,000 times is not
            n = self._suffix.get(base, 1)  # 50,000,000 tries
            while sent in self._sent:
                n += 1
                sent = self._make(f"{base}_{n}")
            self._suffix[base] = n
        self._sent.add(sent)
        self._latest[call_id] = sent
        self._open.setdefault(call_id, []).append(sent)
        return sent

    def result(self, call_id: str) -> str:
        """The id a result of ``call_id`` names: the first call of that id still without a
        result (two calls of one id in a turn: each result its own), else the latest."""
        waiting = self._open.get(call_id)
        if waiting:
            return waiting.pop(0)
        return self._latest.get(call_id) or self._make(call_id)


REASONING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
"""The kinds of Anthropic content block that are a turn's reasoning (`Message.reasoning`)."""


def messages_to_anthropic(
    messages: Iterable[Message | Mapping[str, Any]], *, images: bool = True
) -> tuple[str | None, list[dict[str, Any]]]:
    """Convert a history to the Anthropic messages format.

    Returns ``(system, messages)``: every system message joined into the top-level system
    prompt, assistant tool calls as ``tool_use`` blocks and each run of consecutive tool
    messages as one user message of ``tool_result`` blocks, as Anthropic requires. Speaker
    names do not exist in that format and are dropped; tool arguments that are not an object
    travel as ``{"_raw_arguments": value}``; a tool result whose text starts with ``Error:``
    is marked ``is_error``. A tool result's images go inside it as ``image`` blocks (with
    ``images`` on), after its text, which names every media part. Call ids go as
    `_CallIds` makes them: unique and of Anthropic's pattern.
    """
    system_parts: list[str] = []
    out: list[dict[str, Any]] = []
    results: list[dict[str, Any]] | None = None  # the blocks of the run of tool results going on
    ids = _CallIds(_anthropic_id)
    for message in paired_turns(coerce_messages(messages)):
        if message.role != "tool":
            results = None
        if message.role == "system":
            if message.content and not message.content.isspace():  # a blank one is refused
                system_parts.append(message.content)
        elif message.role == "user":
            pictures = anthropic_media_blocks(message.media) if images else []
            said = with_stand_ins(message.content, message.media)
            out.append({
                "role": "user",
                "content": [{"type": "text", "text": said}, *pictures] if pictures else said,
            })
        elif message.role == "assistant":
            # the turn's thinking first, as returned: Anthropic checks it beside tool use
            blocks: list[dict[str, Any]] = [
                dict(b) for b in message.reasoning if b.get("type") in REASONING_BLOCKS
            ]
            # Anthropic refuses a text block that is empty or only whitespace, which Claude
            # may write itself ("\n\n" before a tool use)
            if message.content and not message.content.isspace():
                blocks.append({"type": "text", "text": message.content})
            blocks.extend(
                {
                    "type": "tool_use",
                    "id": ids.use(call.id),
                    "name": sent_tool_name(call.name),
                    "input": _anthropic_input(call.arguments),
                }
                for call in message.tool_calls
            )
            out.append({"role": "assistant", "content": blocks})
        else:
            text = message.content or ""
            images_in = anthropic_media_blocks(message.media) if images else []
            described = with_stand_ins(text, message.media)
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": ids.result(message.tool_call_id or ""),
                "content": [{"type": "text", "text": described}, *images_in]
                if images_in else described,
            }
            if text.startswith("Error:"):
                block["is_error"] = True
            if results is not None:  # one user message of the run's results
                results.append(block)
            else:
                results = [block]
                out.append({"role": "user", "content": results})
    system = "\n\n".join(system_parts) if system_parts else None
    return system, out


def _blocks(content: Any, where: str) -> list[Any]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, Sequence):
        return list(content)
    raise ValueError(f"{where}: content must be a string or a list of blocks, got {content!r}")


def messages_from_anthropic(
    system: str | Sequence[Any] | None, messages: Iterable[Mapping[str, Any]]
) -> list[Message]:
    """Convert an Anthropic ``(system, messages)`` pair back to `Message`s.

    ``tool_result`` blocks become tool messages named after the ``tool_use`` they answer;
    text blocks of one message are joined; base64 ``image`` blocks are its ``media`` (the
    stand-in lines `messages_to_anthropic` wrote for them left out); ``thinking`` and
    ``redacted_thinking`` blocks are kept as the message's ``reasoning``.

    Raises:
        ValueError: a role or block that has no `Message` equivalent (a document, an image
            by URL).
    """
    out: list[Message] = []
    if system is not None:
        text = system if isinstance(system, str) else _join_text_parts(system, "system")
        out.append(Message(role="system", content=text))
    call_names: dict[str, str] = {}
    for i, raw in enumerate(messages):
        where = f"messages[{i}]"
        role = raw.get("role")
        blocks = _blocks(raw.get("content"), where)
        if role == "assistant":
            texts: list[str] = []
            calls: list[ToolCall] = []
            reasoning: list[dict[str, Any]] = []
            for block in blocks:
                kind = block.get("type") if isinstance(block, Mapping) else None
                if kind in _TEXT_PARTS:
                    texts.append(str(block.get("text") or ""))
                elif kind == "tool_use":
                    call = ToolCall.from_dict(
                        {**block, "input": _from_anthropic_input(block.get("input"))}
                    )
                    call_names[call.id] = call.name
                    calls.append(call)
                elif kind in REASONING_BLOCKS:
                    reasoning.append(dict(block))
                else:
                    raise ValueError(f"{where}: assistant block {block!r} is not supported")
            out.append(
                Message(role="assistant", content="\n".join(texts) if texts else None,
                        tool_calls=calls, reasoning=reasoning)
            )
        elif role == "user":
            pending: list[Any] = []
            for block in blocks:
                if isinstance(block, Mapping) and block.get("type") == "tool_result":
                    if pending:
                        out.append(Message(role="user", content=_join_text_parts(pending, where)))
                        pending = []
                    call_id = str(block.get("tool_use_id") or "")
                    content = block.get("content")
                    texts_in, media = media_from_anthropic(_blocks(content, where))
                    text = content if isinstance(content, str) else _join_text_parts(
                        _without_stand_ins(texts_in, media) if media else texts_in, where
                    )
                    out.append(
                        Message(role="tool", content=text, tool_call_id=call_id,
                                name=call_names.get(call_id), media=media)
                    )
                else:
                    pending.append(block)
            if pending or not blocks:
                rest, media = media_from_parts(pending)  # a user's pictures: refused, they were
                out.append(Message(role="user", media=media, content=_join_text_parts(
                    _without_stand_ins(rest, media) if media else rest, where)))
        else:
            raise ValueError(
                f"{where}: role {role!r} is not an Anthropic role; use 'user' or 'assistant' "
                f"(the system prompt goes in the separate system argument)"
            )
    return out

# -- images and audio --------------------------------------------------------------------------

OPENAI_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""Image types OpenAI's chat models read from an ``image_url`` data URL."""
ANTHROPIC_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""Image types an Anthropic ``image`` block takes."""


def _without_stand_ins(parts: list[Any], media: Sequence[MediaPart]) -> list[Any]:
    """Content parts read back without the stand-in lines `with_stand_ins` wrote after their
    text for ``media``: a history sent again would say each part once more per round."""
    said = "\n".join(part.describe() for part in media)
    last = parts[-1] if parts else None
    text = last.get("text") if isinstance(last, dict) and part_type(last) == "text" else last
    if not isinstance(text, str) or not text.endswith(said):
        return parts
    kept = text[:-len(said)].removesuffix("\n")
    shortened = {**last, "text": kept} if isinstance(last, dict) else kept
    return [*parts[:-1], shortened] if kept else parts[:-1]


def with_stand_ins(text: str | None, media: Sequence[MediaPart]) -> str:
    """The text of a message with a one-line stand-in per media part, so that a model always
    knows a part was there (and where), whether or not it can see it."""
    lines = [text] if text else []
    lines.extend(part.describe() for part in media)
    return "\n".join(lines)


def openai_image_parts(media: Iterable[MediaPart]) -> list[dict[str, Any]]:
    """The ``image_url`` parts (data URLs) for the images OpenAI's chat models can read."""
    return [
        {"type": "image_url", "image_url": {"url": part.data_url()}}
        for part in media
        if part.kind == "image" and part.mime_type in OPENAI_IMAGE_TYPES
    ]


def anthropic_media_blocks(media: Iterable[MediaPart]) -> list[dict[str, Any]]:
    """The ``image`` blocks for the media Anthropic can take (audio and other types: none)."""
    return [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": part.mime_type, "data": part.data},
        }
        for part in media
        if part.kind == "image" and part.mime_type in ANTHROPIC_IMAGE_TYPES
    ]


def media_from_anthropic(blocks: Iterable[Any]) -> tuple[list[Any], list[MediaPart]]:
    """Split Anthropic content blocks into the text ones and base64 images."""
    texts: list[Any] = []
    media: list[MediaPart] = []
    for block in blocks:
        source = block.get("source") if isinstance(block, dict) else None
        if isinstance(source, dict) and block.get("type") == "image":
            if source.get("type") != "base64":
                raise ValueError(f"image block {block!r}: only base64 images are supported")
            media.append(MediaPart(
                kind="image", mime_type=str(source.get("media_type")), data=str(source["data"])
            ))
        else:
            texts.append(block)
    return texts, media


def media_from_parts(parts: Iterable[Any]) -> tuple[list[Any], list[MediaPart]]:
    """Split content parts into the others and the images: OpenAI ``image_url`` parts (the
    Responses API's and the Agents SDK's ``input_image``) with a base64 ``data:`` URL, and
    Anthropic base64 ``image`` blocks."""
    rest: list[Any] = []
    media: list[MediaPart] = []
    for part in parts:
        url = part.get("image_url") if isinstance(part, dict) else None
        url = url.get("url") if isinstance(url, dict) else url
        if part_type(part) in ("image_url", "input_image") and isinstance(url, str):
            head, sep, data = url.partition(";base64,")
            if not (head.startswith("data:") and sep):
                raise ValueError(f"image part {url[:40]!r}: only base64 data URLs are supported")
            media.append(MediaPart(kind="image", mime_type=head[len("data:"):], data=data))
        elif part_type(part) == "image":
            _texts, found = media_from_anthropic([part])
            media.extend(found)
        else:
            rest.append(part)
    return rest, media


def part_type(part: Any) -> Any:
    """A content part's ``type`` (``None`` for a string)."""
    return part.get("type") if isinstance(part, dict) else None


@dataclass(frozen=True, kw_only=True)
class Usage:
    """What one or more model calls (and a run's tool calls) used; ``+`` adds them up."""

    input_tokens: int = 0
    """Prompt tokens, every one of them: those read from or written to a prompt cache
    included."""
    output_tokens: int = 0
    """Completion tokens."""
    cache_read_tokens: int = 0
    """Of the prompt tokens, those read from the provider's prompt cache."""
    cache_creation_tokens: int = 0
    """Of the prompt tokens, those written to the provider's prompt cache."""
    requests: int = 0
    """Model calls made (a provider's reply counts as one when its usage says none)."""
    tool_calls: int = 0
    """Tool calls executed, also those that raised (not those unknown, with arguments that do
    not fit, denied or waiting for a person; one stopped mid-run only if recorded as done)."""
    estimated_requests: int = 0
    """Of the ``requests``, those whose server said no usage (or a count that is not one, or
    whose reply was stopped before its count came): their tokens are an offline estimate (a
    token per four characters), so the totals are not the provider's bill."""

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_creation_tokens=self.cache_creation_tokens + other.cache_creation_tokens,
            requests=self.requests + other.requests,
            tool_calls=self.tool_calls + other.tool_calls,
            estimated_requests=self.estimated_requests + other.estimated_requests,
        )

    def __radd__(self, other: Any) -> Usage:
        # Lets sum(usages) start from its default 0.
        if other == 0:
            return self
        return NotImplemented
