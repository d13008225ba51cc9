"""`ToolCall` and `ToolResult`: what a model asks for and what it gets back.

A call names a tool. A tool's name is ASCII, ``^[A-Za-z0-9_-]{1,64}$``; the rules of what a
name may be, and the older names that are aliases of a built-in, are here, below everything
that reads a name. A requested name resolves to exactly one tool (`jianmu.tools.registry`) by,
in order: an exact match; an ASCII case-insensitive match (only for a name that is itself a
valid tool name); an alias (``file_read`` is ``read_file``). Nothing folds Unicode (no
``casefold()``, no normalisation): ``baſh`` (long s), ``write_ﬁle`` (a ligature) or fullwidth
letters are unknown tools, never ``bash`` or ``write_file`` — otherwise a look-alike name could
reach a tool that a rule written for its real name denies.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import functools
import json
import math
import re
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from jianmu._json import MAX_ARGUMENT_NESTING, nests_within, standard_json

__all__ = (
    "DEFAULT_ALIASES",
    "MAX_ARGUMENT_NESTING",
    "MAX_TOOL_NAME_LENGTH",
    "TOOL_NAME_PATTERN",
    "TOO_DEEP",
    "MediaPart",
    "ToolCall",
    "ToolOutput",
    "ToolResult",
    "builtin_aliases",
    "check_tool_name",
    "decode_arguments",
    "decode_container",
    "is_tool_name",
    "name_key",
    "new_call_id",
    "non_finite_at",
    "non_finite_problem",
    "not_json_message",
    "printable",
    "render_output",
    "reset_shared_aliases",
    "sent_tool_name",
    "shared_aliases",
    "shown_name",
    "single_argument",
    "truncate_text",
    "unknown_tool_text",
)

# -- a tool's name --------------------------------------------------------------------------

MAX_TOOL_NAME_LENGTH = 64
TOOL_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")
"""What a tool name may be (``\\Z``, not ``$``, which would accept a trailing newline)."""


def is_tool_name(name: object) -> bool:
    """Whether ``name`` is a valid tool name: ASCII letters, digits, ``_`` and ``-``, 1-64."""
    return isinstance(name, str) and TOOL_NAME_PATTERN.fullmatch(name) is not None


def check_tool_name(name: object) -> str | None:
    """The problem with ``name`` as a tool name, or ``None`` when it is valid."""
    if is_tool_name(name):
        return None
    shown = name if not isinstance(name, str) or len(name) <= 100 else name[:100] + "…"
    problem = f"name {shown!r} must match ^[A-Za-z0-9_-]{{1,64}}$ (ASCII letters, digits, _ and -)"
    if isinstance(name, str) and is_tool_name(name.replace(".", "_")):
        # dotted names (BFCL's "math.factorial") are what OpenAI clients rewrite this way
        problem += f"; write {name.replace('.', '_')!r}"
    elif name == "<lambda>":
        problem += "; a lambda has no name of its own: give it one, tool(name='...')(fn)"
    return problem


_NOT_NAME = re.compile(r"[^A-Za-z0-9_-]")


def sent_tool_name(name: str) -> str:
    """``name`` as a model API takes it in a conversation's call: as it is when valid, else
    each other character ``_`` and cut to 64 (``unknown`` when empty). A model may call a
    name no tool has (``functions.lookup``); its turn goes back, and OpenAI and Anthropic
    refuse the whole request for such a name."""
    if is_tool_name(name):
        return name
    return _NOT_NAME.sub("_", name)[:MAX_TOOL_NAME_LENGTH] or "unknown"


def name_key(name: str) -> str | None:
    """The case-insensitive key of a valid name (ASCII lower case); ``None`` for any other.

    Only ASCII is lower-cased: ``str.lower()`` maps some non-ASCII letters to ASCII ones (the
    Kelvin sign ``K`` becomes ``k``), which would let a look-alike pass for a real name.
    """
    return name.lower() if is_tool_name(name) else None


def shown_name(name: object) -> str:
    """``name`` safe to print and to send back to a model: escaped, at most 80 characters."""
    text = name if isinstance(name, str) else repr(name)
    if is_tool_name(text):
        return text
    escaped = ascii(text)[1:-1]
    return escaped if len(escaped) <= 80 else escaped[:79] + "…"


def unknown_tool_text(name: str, names: Iterable[str], known: str = "known tools") -> str:
    """What the model reads of a call to no tool among ``names`` (those it may see): the
    nearest name when one is close (``'serch'``: did you mean ``'search'``?), then them all."""
    listed = list(names)
    shown = shown_name(name) if name else "<missing name>"
    import difflib  # only a misnamed call needs it

    by_key = {n.lower(): n for n in listed}
    close = difflib.get_close_matches(shown.lower(), list(by_key), n=1) if name else []
    hint = f"did you mean {by_key[close[0]]!r}? " if close else ""
    return f"unknown tool {shown!r}; {hint}{known}: {', '.join(listed) or 'none'}"


DEFAULT_ALIASES: dict[str, str] = {
    "file_read": "read_file",
    "web_search": "duckduckgo_search",
}
"""Older names that resolve to a built-in."""

_shared: dict[str, str] = dict(DEFAULT_ALIASES)


def shared_aliases() -> dict[str, str]:
    """The live alias table of the shared `BuiltinToolProvider` (alias -> built-in name)."""
    return _shared


def reset_shared_aliases() -> None:
    """Forget aliases registered on the shared provider (for tests)."""
    _shared.clear()
    _shared.update(DEFAULT_ALIASES)


def builtin_aliases() -> dict[str, str]:
    """Alias -> built-in name, from the shared `BuiltinToolProvider` (``file_read`` ...)."""
    return dict(shared_aliases())




# -- a call ----------------------------------------------------------------------------------


def new_call_id() -> str:
    """Return a fresh, unique tool-call id in the OpenAI style."""
    return f"call_{uuid.uuid4().hex[:24]}"


TOO_DEEP = f"<arguments nested deeper than {MAX_ARGUMENT_NESTING} levels>"
"""What stands for arguments given as objects nested too deep (their text may not be made)."""


def decode_arguments(raw: Any) -> Any:
    """Decode JSON-string arguments; keep the raw string when it is not JSON, or nests past
    `MAX_ARGUMENT_NESTING`."""
    if raw is None:
        return {}
    if isinstance(raw, str):
        text = raw.strip()
        if not text:
            return {}
        try:
            decoded = json.loads(text)
        except (ValueError, RecursionError):  # nested past Python's stack: not usable JSON
            return raw
        if type(decoded) is str and decoded.lstrip().startswith("{"):
            # the object encoded twice, as a JSON string (some models and proxies send that):
            # decoded here, so every later step (the guard's rules too) reads what runs
            twice = decode_arguments(decoded)
            return twice if type(twice) is dict else decoded
        # nesting N deep takes 2N brackets: a short text cannot (most calls' arguments)
        if len(text) > 2 * MAX_ARGUMENT_NESTING and not nests_within(
            decoded, MAX_ARGUMENT_NESTING
        ):
            return raw
        return decoded
    if type(raw) is dict:
        for value in raw.values():  # most calls' arguments hold no container: nothing to walk
            if isinstance(value, dict | list | tuple):
                break
        else:
            return raw
    if isinstance(raw, dict | list) and not nests_within(raw, MAX_ARGUMENT_NESTING):
        return TOO_DEEP
    return raw


def decode_container(args: Any) -> Any:
    """``None`` -> ``{}``; a JSON-object string -> dict; anything else unchanged."""
    if args is None:
        return {}
    if isinstance(args, (str, bytes)):
        text = args.decode() if isinstance(args, bytes) else args
        if not text.strip():
            return {}
        try:
            decoded = json.loads(text)
        except (ValueError, RecursionError):  # not JSON, or nested past Python's stack
            return args
        return decoded if isinstance(decoded, dict) else args
    if isinstance(args, Mapping) and not isinstance(args, dict):
        return dict(args)
    return args


def single_argument(schema: Mapping[str, Any], args: Any) -> Any:
    """Give a bare value to the one required parameter (``execute("2+3")``)."""
    if isinstance(args, dict):
        return args
    required = list(schema.get("required") or [])
    if len(required) == 1 and args is not None:
        return {required[0]: args}
    return args


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    """One tool call requested by a model."""

    name: str
    """The tool's name as sent; the executor resolves it once to a registered tool's own name
    (`jianmu.tools.registry`) and every later step sees only that name."""
    arguments: Any = field(default_factory=dict)
    """Decoded arguments: usually a dict; the raw string when the model sent invalid JSON."""
    id: str = field(default_factory=new_call_id)
    """The provider's tool-call id, used to pair the call with its result."""

    def __post_init__(self) -> None:
        # kept as sent: folding here (lower(), strip()) would let look-alikes pass for real
        # names; the one resolution to a registered tool happens at the executor
        object.__setattr__(self, "name", self.name if isinstance(self.name, str) else str(
            self.name or ""
        ))
        if not self.id:
            object.__setattr__(self, "id", new_call_id())

    @classmethod
    def from_dict(cls, data: Any) -> ToolCall:
        """Build a call from any provider's shape; never raises.

        Accepts the OpenAI shape (``{"id", "type": "function", "function": {"name",
        "arguments": "<json>"}}``), Anthropic's ``tool_use`` block (``{"id", "name",
        "input"}``) and flat ``{"name", "arguments"}`` or ``{"tool", "args"}``. Arguments that
        are not valid JSON are kept as the raw string; anything that is not a mapping becomes a
        call with an empty name, which the executor reports as an unknown tool.
        """
        if isinstance(data, ToolCall):
            return data
        if not isinstance(data, dict):
            return cls(name="", arguments=data)
        function = data.get("function")
        body: dict[str, Any] = function if isinstance(function, dict) else data
        name = body.get("name", data.get("tool", data.get("tool_name", "")))
        if not isinstance(name, str):
            name = "" if name is None else json.dumps(name, default=str)
        raw_args: Any = None
        for key in ("arguments", "args", "input", "parameters"):
            if key in body:
                raw_args = body[key]
                break
        call_id = data.get("id", data.get("tool_call_id", data.get("call_id")))
        return cls(
            name=name,
            arguments=decode_arguments(raw_args),
            id=str(call_id) if call_id not in (None, "") else new_call_id(),
        )

    @classmethod
    def from_list(cls, items: Iterable[Any] | None) -> list[ToolCall]:
        """Normalise a batch of calls; idempotent (``ToolCall`` items pass through)."""
        if items is None:
            return []
        if isinstance(items, (dict, ToolCall)):
            items = [items]
        elif type(items) is list:
            for item in items:
                if type(item) is not ToolCall:
                    break
            else:  # canonical already (the state's ``actions``): a copy, nothing to convert
                return items.copy()
        return [cls.from_dict(item) for item in items]

    def arguments_json(self) -> str:
        """The arguments as the JSON string that chat APIs expect."""
        if isinstance(self.arguments, str):
            return self.arguments
        return standard_json(self.arguments, default=str, ensure_ascii=False)

    def to_openai(self) -> dict[str, Any]:
        """The call in the OpenAI chat format, as OpenAI takes it back: its name valid
        (`sent_tool_name`) and its arguments JSON (arguments that were not, a reply cut off
        midway or a model's broken JSON, go as a JSON string of their text)."""
        arguments = self.arguments_json()
        if isinstance(self.arguments, str):
            try:
                json.loads(arguments)
            except (ValueError, RecursionError):  # (nested past Python's stack: not JSON)
                arguments = json.dumps(self.arguments, ensure_ascii=False)
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": sent_tool_name(self.name), "arguments": arguments},
        }

    def with_id(self, call_id: str) -> ToolCall:
        """Return a copy with another id."""
        return dataclasses.replace(self, id=call_id)


def not_json_message(tool: str, parameters: Mapping[str, Any], raw: str) -> str:
    """Why a call's arguments were refused: a string that is not a JSON object, or JSON that
    nests past `MAX_ARGUMENT_NESTING`."""
    allowed = ", ".join(parameters.get("properties", {})) or "none"
    shown = raw if len(raw) <= 80 else raw[:77] + "..."
    problem = "are not valid JSON"
    if raw == TOO_DEEP or _too_deep(raw):
        problem = f"nest deeper than {MAX_ARGUMENT_NESTING} levels"
    return (
        f"the arguments for tool {tool!r} {problem}: {shown!r}; "
        f"send a JSON object with these keys: {allowed}"
    )


def _too_deep(raw: str) -> bool:
    """Whether ``raw`` is JSON that nests past the limit (asked only of refused arguments)."""
    try:
        decoded = json.loads(raw)
    except RecursionError:  # JSON nested past Python's own stack
        return True
    except ValueError:
        return False
    return not nests_within(decoded, MAX_ARGUMENT_NESTING)


def non_finite_at(value: Any, limit: int = MAX_ARGUMENT_NESTING) -> str | None:
    """The JSON path (``$.a[0]``) of the first NaN or infinite number in ``value``, or None.

    JSON has no such numbers, but Python's `json` reads ``NaN``, ``Infinity`` and ``1e309``
    (as inf): a NaN passes every ``minimum`` and ``maximum`` (each comparison is false), so a
    bounded ``amount`` took it. A walk with a stack of its own that gives up ``limit`` levels
    down (what nests deeper is refused for that); a path is spelled only when one is found."""
    if type(value) is dict:  # most arguments: a flat object of strings, ints and bools
        for item in value.values():
            kind = type(item)
            if kind is not str and kind is not int and kind is not bool and item is not None:
                break
        else:
            return None
    stack: list[tuple[Any, Any, int]] = [(value, None, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        node, trail, depth = pop()
        if depth > limit:  # nested too deep (or holding itself): refused for that, not here
            return None
        keys: Iterable[Any]
        items: Iterable[Any]
        kind = type(node)
        if kind is float or (kind is not dict and isinstance(node, float)):
            if not math.isfinite(node):
                return _spelled(trail)
            continue
        if kind is dict or isinstance(node, Mapping):
            keys, items = node.keys(), node.values()
        elif isinstance(node, list | tuple):
            keys, items = range(len(node)), node
        else:
            continue
        for key, item in zip(keys, items, strict=False):
            kind = type(item)  # most values are plain scalars: no ABC check for them
            if kind is str or kind is int or kind is bool or item is None:
                continue
            if isinstance(item, float | Mapping | list | tuple):
                push((item, (trail, key), depth + 1))
    return None


def _spelled(trail: Any) -> str:
    """``$.a[0]`` from a trail of ``(parent, key)`` pairs."""
    parts: list[str] = []
    while trail is not None:
        trail, key = trail
        parts.append(f"[{key}]" if isinstance(key, int) else f".{key}")
    return "$" + "".join(reversed(parts))


def non_finite_problem(args: Any) -> str | None:
    """Why ``args`` (a model's arguments) hold a number JSON has not (NaN, an infinity), or
    None: whatever the schema says, such a number is refused (a NaN passes every bound)."""
    where = non_finite_at(args)
    if where is None:
        return None
    return (f"{where}: NaN and Infinity are not JSON numbers (nor is one past ±1.8e308); "
            "send a finite number")


def printable(value: Any) -> str:
    """``str(value)``; never raises: a placeholder naming the type when that fails (a
    ``__str__`` that raises, an int past Python's digits limit, a container nested past its
    stack), so what a tool returned or raised is always something a model can be told."""
    try:
        return str(value)
    except Exception as exc:
        return f"<{type(value).__name__} that cannot be shown: {type(exc).__name__}>"


def render_output(value: Any) -> str:
    """Render a tool's output as the text a model reads; never raises."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    kind = type(value)
    try:
        if kind is int:  # what json.dumps writes, without building an encoder per call
            return int.__repr__(value)
        if kind is bool:
            return "true" if value else "false"
        if isinstance(value, bytes):
            return value.decode("utf-8", errors="replace")
        return _ENCODER.encode(value)
    except Exception:  # not JSON, nested past the stack, an int past the digits limit
        pass
    try:  # a dict key JSON has not (a tuple, a date, an enum member): written as text
        return _ENCODER.encode(_text_keys(value))
    except Exception:
        return printable(value)


_IMAGE_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
"""The leading bytes of the image types every model API that reads images takes."""


def image_type(data: bytes | bytearray) -> str | None:
    """The media type of ``data`` when its leading bytes are a PNG, JPEG, GIF or WebP's."""
    for signature, mime in _IMAGE_SIGNATURES:
        if data.startswith(signature):
            return mime
    return "image/webp" if data[:4] == b"RIFF" and data[8:12] == b"WEBP" else None


_JSON_KEYS = (str, int, float, bool, type(None))


def _text_keys(value: Any) -> Any:
    """``value`` with each dict key JSON cannot hold written as text: an enum member as its
    value, a date or time in ISO form, anything else as ``str`` gives it. Only dicts, lists and
    tuples are walked (an iterator is never drawn); nested past the stack it raises."""
    if isinstance(value, Mapping):
        return {_text_key(k): _text_keys(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_text_keys(v) for v in value]
    return value


def _text_key(key: Any) -> Any:
    if type(key) in _JSON_KEYS:
        return key
    if isinstance(key, enum.Enum) and type(key.value) in _JSON_KEYS:
        return key.value
    iso = getattr(key, "isoformat", None)
    return iso() if callable(iso) else printable(key)


def _jsonable(value: Any) -> Any:
    """A value the encoder does not know, as JSON data: a pydantic model or a dataclass (an
    agent's typed answer) as its fields, anything else as its text."""
    from pydantic_core import to_jsonable_python

    if isinstance(value, Iterator | AsyncIterator):
        # never drawn from here (pydantic would iterate it): an endless generator would hang
        # the event loop, and each item may do anything; a tool returns a list to be read
        return printable(value)
    try:
        return to_jsonable_python(value)
    except Exception:  # no serializer for it: its text
        return printable(value)


_ENCODER = json.JSONEncoder(ensure_ascii=False, default=_jsonable)
"""What ``render_output`` writes with: ``json.dumps`` would build an encoder per call."""


def truncate_text(text: str, limit: int | None) -> tuple[str, int]:
    """Cut ``text`` to ``limit`` characters with a marker; return the text and chars dropped."""
    if limit is None or limit <= 0 or len(text) <= limit:
        return text, 0
    dropped = len(text) - limit
    return f"{text[:limit]}\n…[truncated: {dropped} more characters]", dropped


@dataclass(frozen=True, kw_only=True)
class MediaPart:
    """An image or audio clip a tool returned, kept whole (base64) for the model to see."""

    kind: str
    """``image`` or ``audio``."""
    mime_type: str
    """Its media type, e.g. ``image/png``."""
    data: str
    """The bytes, base64-encoded (as MCP and the model APIs carry them)."""

    def describe(self) -> str:
        """A one-line text stand-in, for a model or a log that cannot take the media."""
        size = len(self.data) * 3 // 4 - self.data.count("=", -2)  # base64 padding
        return f"[{self.kind}: {self.mime_type}, about {size} bytes]"

    def data_url(self) -> str:
        """The part as a ``data:`` URL (OpenAI's ``image_url``)."""
        return f"data:{self.mime_type};base64,{self.data}"


@dataclass(frozen=True, kw_only=True)
class ToolOutput:
    """What a tool returns when its result holds media: the value, and the images or audio.

    `ToolResult.from_raw` unpacks it: ``output`` is ``value``, ``media`` the parts, which the
    tool message carries as content parts (never cut to ``max_result_length``).
    """

    value: Any = None
    """The result proper (text or data)."""
    media: tuple[MediaPart, ...] = ()
    """Images and audio clips, in the order the tool gave them."""


_STATUS_KEYS = frozenset({"ok", "output", "result", "error"})
"""The keys of a dict a tool returns to say how its call went (`ToolResult.from_raw`)."""


@dataclass(frozen=True, kw_only=True)
class ToolResult:
    """The normalised outcome of one tool call."""

    tool: str
    """Name of the tool that ran."""
    ok: bool
    """Whether the call succeeded."""
    output: Any = None
    """The tool's result when it succeeded."""
    error: str | None = None
    """What went wrong when it did not."""
    call_id: str | None = None
    """Id of the `ToolCall` this answers."""
    duration_ms: float | None = None
    """How long the call took."""
    truncated: bool = False
    """Whether the output (or the error) was cut to the tool's ``max_result_length``."""
    maybe_repeated: bool = False
    """A durable run was recovered while this call, of an idempotent tool, was in flight: it
    ran again, so it may have run twice; completed calls are replayed, never repeated."""
    maybe_done: bool = False
    """The call was stopped after it began (a cancel, a timeout, its process or worker gone)
    and, its tool not idempotent, was not run again: whether it took effect is unknown."""
    media: tuple[MediaPart, ...] = ()
    """Images and audio the tool returned (`ToolOutput`), sent to the model as content parts."""
    judged: bool = False
    """The caller's tool-output guardrails passed this output already, inside the call (a
    durable sub-agent's answer, judged in the step that recorded it): not judged again."""

    @property
    def is_error(self) -> bool:
        """``not ok``, under the name the tool-call protocol gives it."""
        return not self.ok

    @classmethod
    def from_raw(
        cls,
        tool: str,
        raw: Any,
        *,
        error: str | None = None,
        call_id: str | None = None,
        duration_ms: float | None = None,
    ) -> ToolResult:
        """Normalise whatever a tool returned; never raises.

        The shapes: a `ToolResult` (passed through, ids filled in); an explicit ``error``; an
        exception; a dict with an ``ok`` field (``output``/``result`` and ``error`` read from
        it; without ``output`` or ``result`` but with other keys, the whole dict is the
        output, and a failure's error names those keys too); a string starting with
        ``Error:`` (a failure); a `ToolOutput` (a success with media); the bytes of a PNG,
        JPEG, GIF or WebP image (a success whose media is that image); anything else (a
        success).
        """
        if isinstance(raw, ToolResult):
            return dataclasses.replace(
                raw,
                call_id=raw.call_id or call_id,
                duration_ms=raw.duration_ms if raw.duration_ms is not None else duration_ms,
            )
        common: dict[str, Any] = {"tool": tool, "call_id": call_id, "duration_ms": duration_ms}
        if error is not None:
            return cls(ok=False, output=raw, error=printable(error), **common)
        if isinstance(raw, ToolOutput):
            return cls(ok=True, output=raw.value, media=tuple(raw.media), **common)
        if isinstance(raw, BaseException):
            return cls(ok=False, error=f"{type(raw).__name__}: {printable(raw)}", **common)
        if isinstance(raw, dict) and "ok" in raw:
            ok = bool(raw.get("ok"))
            err = raw.get("error")
            if not ok and not err:
                err = "the tool reported a failure"
            rest = {k: v for k, v in raw.items() if k not in _STATUS_KEYS}
            if "output" in raw or "result" in raw or not rest:
                output = raw.get("output", raw.get("result"))
            else:  # the tool's own data with an ok flag (Slack's API answers so): all kept
                output = raw
                if not ok:  # what else it says (Slack's ``needed`` scope) is for the model too
                    err = f"{printable(err)} {render_output(rest)}"
            return cls(ok=ok, output=output, error=None if ok else printable(err), **common)
        if isinstance(raw, str):
            if raw.lstrip().startswith("Error:"):
                message = raw.lstrip()[len("Error:") :].strip() or "the tool reported an error"
                return cls(ok=False, error=message, **common)
        elif isinstance(raw, bytes | bytearray) and (mime := image_type(raw)) is not None:
            # an image's bytes are a media part the model sees, as a `ToolOutput` gives one
            data = base64.b64encode(raw).decode("ascii")
            return cls(ok=True, media=(MediaPart(kind="image", mime_type=mime, data=data),),
                       **common)
        return cls(ok=True, output=raw, **common)

    @functools.cached_property
    def text(self) -> str:
        """The observation text: the rendered output, or ``Error: ...`` (rendered once)."""
        if self.ok:
            return render_output(self.output)
        return f"Error: {self.error}"

    def truncate(self, limit: int | None) -> ToolResult:
        """Return a copy whose output text, or error, is cut to ``limit`` characters with a
        marker: every observation the model reads is bounded, failures included."""
        if not self.ok:
            error, dropped = truncate_text(self.error or "", limit)
            return dataclasses.replace(self, error=error, truncated=True) if dropped else self
        text, dropped = truncate_text(self.text, limit)
        if not dropped:
            return self
        return dataclasses.replace(self, output=text, truncated=True)

    def to_message(self) -> dict[str, Any]:
        """The tool message for the model, in the OpenAI chat shape."""
        return {
            "role": "tool",
            "tool_call_id": self.call_id,
            "name": self.tool,
            "content": self.text,
        }
