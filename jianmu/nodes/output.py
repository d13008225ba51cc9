"""Typed answers: an agent whose answer is a validated object of an ``output_type``.

`OutputSpec` is what `AgentLLMNode(output_type=...)` (and `create_react_node`, `SkillNode`)
holds: how the model is asked for the answer (``mode``), how the answer is checked
(pydantic's `TypeAdapter`), and what the model is told when it does not fit:

- ``"tool"``: the model is offered one more tool, ``final_result``, whose input schema is the
  type's; a union gives one tool per member (``final_result_<Name>``, the name without its
  modules: ``final_result_list_Item``; ``_2``... after one that two members share). A call to
  it ends the loop. Works with every tool-calling model.
- ``"native"``: the provider's own structured output (OpenAI's ``response_format`` with a
  JSON Schema, ``strict`` where the schema allows it; Anthropic's ``output_config``). A
  provider without one is a `ConfigError` naming it.
- ``"text"``: the final text is parsed as JSON (a fenced block is accepted) and checked; the
  schema is added to the system prompt.

A non-object type (``list[Item]``, ``int``, a ``Literal``) travels wrapped as
``{"response": ...}`` wherever the wire needs an object (a tool's input, a native schema).

The answer tools are `NodeTool`s: offered to the model beside the real tools, their calls
taken by the model's own node and never run (the hand-off tools of `jianmu.nodes.handoffs` are
too).
"""

from __future__ import annotations

import json
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

from pydantic import ConfigDict, PydanticUserError, TypeAdapter, ValidationError
from pydantic import create_model as _create_model

from jianmu.errors import ConfigError, OutputValidationError, ToolExecutionError
from jianmu.tools.base import Tool
from jianmu.tools.calls import MAX_TOOL_NAME_LENGTH, ToolCall
from jianmu.tools.schema import strip_titles
from jianmu.tools.spec import to_strict_schema

__all__ = (
    "FINAL_RESULT",
    "OUTPUT_MODES",
    "NodeTool",
    "OutputMode",
    "OutputSpec",
    "OutputTool",
)


OutputMode = Literal["tool", "native", "text"]
"""How the model gives a typed answer: a ``final_result`` tool call, the provider's structured
output, or JSON text."""
OUTPUT_MODES: tuple[str, ...] = ("tool", "native", "text")
FINAL_RESULT = "final_result"
"""The name of the answer tool (``final_result_<Member>`` for each member of a union)."""
_WRAP_KEY = "response"
"""The property a non-object answer travels under (the wrapper model's field)."""
_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n?(.*?)```", re.S)
_UNSAFE = re.compile(r"[^A-Za-z0-9_]+")


def _type_name(tp: Any) -> str:
    name = getattr(tp, "__name__", None)
    if isinstance(name, str) and get_origin(tp) is None:
        return name
    return str(tp).replace("typing.", "")


def _short_name(tp: Any) -> str:
    """A type's name without its modules: ``list[shop.api.Item]`` is ``list_Item``."""
    args = get_args(tp)
    if get_origin(tp) is None or not args:
        name = getattr(tp, "__name__", None)
        return name if isinstance(name, str) else str(tp)
    origin = get_origin(tp)
    return "_".join([getattr(origin, "__name__", None) or str(origin).replace("typing.", ""),
                     *(_short_name(a) for a in args)])


def _member_tool_names(tool_name: str, members: list[Any]) -> list[str]:
    """The answer tool of each union member: ``<tool_name>_<Member>``, each a tool name (64
    characters at most) and each its own (members that share a name: ``_2``, ``_3``...)."""
    room = MAX_TOOL_NAME_LENGTH - len(tool_name) - 1
    names: list[str] = []
    for member in members:
        base = (_UNSAFE.sub("_", _short_name(member)).strip("_") or "value")[:room]
        name, n = f"{tool_name}_{base}", 1
        while name in names:
            n += 1
            name = f"{tool_name}_{base[:room - len(str(n)) - 1]}_{n}"
        names.append(name)
    return names


def _is_union(tp: Any) -> bool:
    origin = get_origin(tp)
    return origin is typing.Union or origin is types.UnionType


def json_path(loc: tuple[Any, ...] | list[Any]) -> str:
    """A pydantic error location as a JSON path: ``$.items[0].price``."""
    out = "$"
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and part.isidentifier():
            out += f".{part}"
        else:
            out += f"[{json.dumps(str(part))}]"
    return out


def _problems(exc: ValidationError) -> list[tuple[str, str]]:
    return [(json_path(e["loc"]), e["msg"]) for e in exc.errors(include_url=False)]


def _object_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """``schema`` as an object schema at its top (a top-level ``$ref`` inlined), else None."""
    if schema.get("type") == "object":
        return schema
    ref = schema.get("$ref")
    defs = schema.get("$defs") or {}
    if isinstance(ref, str) and ref.startswith("#/$defs/") and len(schema) <= 2:
        target = defs.get(ref.removeprefix("#/$defs/"))
        if isinstance(target, dict) and target.get("type") == "object":
            return {**target, "$defs": defs}
    return None


@dataclass(frozen=True)
class _Shape:
    """One answerable type and how it travels: its schema and its checker on the wire."""

    type: Any
    schema: dict[str, Any]
    """An object schema (the type's own, or ``{"response": ...}`` around it)."""
    checker: TypeAdapter[Any]
    """Checks what the model sent for ``schema``."""
    wrapped: bool
    """Whether the value is under ``response``."""

    def value(self, checked: Any) -> Any:
        return getattr(checked, _WRAP_KEY) if self.wrapped else checked


def _shape(tp: Any) -> _Shape:
    adapter: TypeAdapter[Any] = TypeAdapter(tp)
    schema = strip_titles(adapter.json_schema())
    found = _object_schema(schema)
    if found is not None:
        return _Shape(tp, found, adapter, False)
    wrapper = _create_model(
        "FinalResult", __config__=ConfigDict(extra="forbid"), response=(tp, ...)
    )
    checker: TypeAdapter[Any] = TypeAdapter(wrapper)
    wrapped = strip_titles(checker.json_schema())
    wrapped.pop("title", None)
    return _Shape(tp, wrapped, checker, True)


class NodeTool(Tool):
    """Offered to the model beside the real tools; `AgentLLMNode` reads its calls itself, so
    they never reach an executor."""

    category = "read"
    timeout_seconds = None
    purpose = "is read by the agent's model node"
    """What the tool is for, in the error of a run that should never happen."""

    def __init__(self, name: str, description: str, schema: dict[str, Any]) -> None:
        self.name = name
        self.description = description
        self.input_schema = schema

    def run(self, /, **kwargs: Any) -> Any:
        """Never called: the model's node takes the call."""
        raise ToolExecutionError(
            f"{self.name!r} {self.purpose} and is not run as a tool; give the agent's settings "
            "to create_react_node (or AgentLLMNode), not this tool to a ToolExecutor"
        )


class OutputTool(NodeTool):
    """The tool a model calls to give its typed answer (``final_result``)."""

    purpose = "carries the agent's answer"


@dataclass(frozen=True)
class Checked:
    """The outcome of checking one answer."""

    ok: bool
    value: Any = None
    """The validated object (when ``ok``)."""
    problems: tuple[tuple[str, str], ...] = ()
    """``(JSON path, message)`` of each problem (when not ``ok``)."""
    raw: str = ""
    """What the model gave, as text."""


class OutputSpec:
    """How an agent is asked for, and checks, an answer of ``output_type``.

    Args:
        output_type: anything pydantic's `TypeAdapter` takes: a model, a dataclass, a
            TypedDict, ``list[Item]``, ``int``, a ``Literal``, a union of models; a list of
            types is one of them, as in pydantic-ai (``[Forecast, str]``).
        mode: ``"tool"``, ``"native"`` or ``"text"`` (see the module's docstring).
        retries: answers that may fail the check before the loop fails with
            `OutputValidationError`; each retry is a model turn like any other.
        tool_name: the answer tool's name (tool mode).
        description: the answer tool's description.

    Raises:
        ValueError: an unknown mode or a negative ``retries``.
        TypeError: pydantic cannot build a schema for ``output_type``, or it is a value (a
            name as text, an instance) where its type was meant.
    """

    def __init__(
        self,
        output_type: Any,
        *,
        mode: OutputMode = "tool",
        retries: int = 2,
        tool_name: str = FINAL_RESULT,
        description: str | None = None,
    ) -> None:
        if mode not in OUTPUT_MODES:
            raise ValueError(f"output_mode must be one of {', '.join(OUTPUT_MODES)}, got {mode!r}")
        if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
            raise ValueError(f"output_retries must be an integer >= 0, got {retries!r}")
        _refuse_a_value(output_type)
        if isinstance(output_type, (list, tuple)) and output_type:
            # pydantic-ai's spelling of a union: [Forecast, str] is one of them (a list of
            # types has no schema of its own, so it cannot mean anything else)
            output_type = typing.Union[tuple(output_type)]  # noqa: UP007 (of a tuple)
        self.type = output_type
        self.mode: OutputMode = mode
        self.retries = retries
        self.type_name = _type_name(output_type)
        members = get_args(output_type) if _is_union(output_type) else ()
        self.text_ok = output_type is str or str in members
        """Whether a text answer is the answer as it is (``str``, or a union holding it, as
        pydantic-ai takes it): in tool mode, answer tools are made for the other members."""
        try:
            self.adapter: TypeAdapter[Any] = TypeAdapter(output_type)
            self.shape = _shape(output_type)
            # the answer tools: one for the type, or one for each member of a union that
            # is not str (a text answer is the str)
            offered = [] if mode != "tool" or output_type is str else (
                [_shape(m) for m in members if m is not str] if members else [self.shape])
        except (PydanticUserError, TypeError) as exc:
            raise TypeError(
                f"output_type {output_type!r} has no JSON Schema: {exc}; use a pydantic model, "
                "a dataclass, a TypedDict or a plain type"
            ) from None
        self.tools: tuple[OutputTool, ...] = ()
        self._by_tool: dict[str, _Shape] = {}
        self._make_tools(tool_name, description, offered)

    def _make_tools(self, tool_name: str, description: str | None, shapes: list[_Shape]) -> None:
        if len(shapes) == 1:
            only = shapes[0]
            said = description or (
                f"Give your final answer as {_type_name(only.type)}"
                f"{' (or as text)' if self.text_ok else ''}. Calling this ends your turn: "
                "call it once, when you are done."
            )
            self.tools = (OutputTool(tool_name, said, only.schema),)
            self._by_tool = {tool_name: only}
            return
        tools: list[OutputTool] = []
        names = _member_tool_names(tool_name, [shape.type for shape in shapes])
        for shape, name in zip(shapes, names, strict=True):
            member = _type_name(shape.type)
            said = description or (
                f"Give your final answer as {member} (one of {self.type_name}). Calling this "
                "ends your turn."
            )
            tools.append(OutputTool(name, said, shape.schema))
            self._by_tool[name] = shape
        self.tools = tuple(tools)

    # -- what the model is offered -------------------------------------------------------------
    @property
    def tool_names(self) -> frozenset[str]:
        """Names of the answer tools (tool mode; empty otherwise)."""
        return frozenset(self._by_tool)

    def instructions(self) -> str:
        """What the system prompt says about the answer's form (text mode only)."""
        if self.mode != "text" or self.type is str:
            return ""
        said = self.__dict__.get("_instructions")
        if said is None:  # the schema's text, made once: the prompt of every turn holds it
            schema = json.dumps(strip_titles(self.adapter.json_schema()), ensure_ascii=False)
            said = self.__dict__["_instructions"] = (
                "When you are done, answer with JSON only (a ```json fenced block is fine), "
                f"matching this JSON Schema:\n{schema}"
            )
        return str(said)

    def request_params(self, llm: Any) -> dict[str, Any]:
        """Request parameters for native mode: the provider's structured-output setting.

        Raises:
            ConfigError: the provider has no structured output (naming it).
        """
        if self.mode != "native" or self.type is str:  # text needs no structured output
            return {}
        make = getattr(llm, "output_format_params", None)
        provider = f"{type(llm).__name__} (model {getattr(llm, 'model', '?')!r})"
        if make is None:
            raise ConfigError(
                f"output_mode='native' needs structured output from the provider, and "
                f"{provider} has none; use output_mode='tool' (any tool-calling model) or 'text'"
            )
        schema, strict = self.native_schema()
        params = make(name=_UNSAFE.sub("_", self.type_name)[:64] or "output", schema=schema,
                      strict=strict)
        return dict(params)

    def native_schema(self) -> tuple[dict[str, Any], bool]:
        """The object schema for native mode, and whether OpenAI's strict mode can take it
        as it is (every property required, no free-form objects)."""
        schema = self.shape.schema
        if not _all_required(schema):
            return schema, False
        try:
            return to_strict_schema(schema, tool=self.type_name), True
        except ValueError:  # a free-form object or Any: not strict
            return schema, False

    # -- checking answers ----------------------------------------------------------------------
    def check_call(self, call: ToolCall) -> Checked:
        """Check a call to an answer tool."""
        shape = self._by_tool[call.name]
        raw = call.arguments_json()
        args = call.arguments
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except (ValueError, RecursionError) as exc:  # nested past the stack: not JSON
                return Checked(False, problems=(("$", f"arguments are not JSON: {exc}"),), raw=raw)
        try:
            checked = shape.checker.validate_python(args)
        except ValidationError as exc:
            return Checked(False, problems=tuple(_problems(exc)), raw=raw)
        return Checked(True, value=shape.value(checked), raw=raw)

    def text_answer(self, text: str) -> Checked:
        """Check a reply that is text: in tool mode the answer tool was not called, which
        only a type that takes text allows."""
        if self.mode == "tool":
            return Checked(True, value=text, raw=text) if self.text_ok else Checked(False, raw=text)
        return self.check_text(text)

    def check_text(self, text: str) -> Checked:
        """Check a text answer (text and native modes)."""
        if self.type is str:
            return Checked(True, value=text, raw=text)
        body = extract_json(text)
        shape = self.shape if self.mode == "native" else None
        try:
            if shape is not None:
                checked = shape.checker.validate_json(body)
                return Checked(True, value=shape.value(checked), raw=text)
            return Checked(True, value=self.adapter.validate_json(body), raw=text)
        except ValidationError as exc:
            if self.text_ok:  # none of the other members: the text itself
                return Checked(True, value=text, raw=text)
            return Checked(False, problems=tuple(_problems(exc)), raw=text)

    def retry_prompt(self, checked: Checked, *, called: bool) -> str:
        """What the model is told when its answer did not fit."""
        if not checked.problems:  # tool mode and a text answer: the tool was not called
            names = " or ".join(sorted(self.tool_names))
            return (
                f"Plain text is not accepted as the final answer: call {names} with your "
                f"answer ({self.type_name})."
            )
        lines = "\n".join(f"- {path}: {msg}" for path, msg in checked.problems)
        again = (
            "Fix these and call it again." if called
            else "Answer again with the corrected JSON only."
        )
        return f"The answer does not fit {self.type_name}:\n{lines}\n{again}"

    def failure(self, checked: Checked, tries: int) -> OutputValidationError:
        """The error after the last try."""
        problems = list(checked.problems) or [("$", "the answer tool was not called")]
        where = "; ".join(f"{path}: {msg}" for path, msg in problems[:5])
        raw = checked.raw if len(checked.raw) <= 300 else checked.raw[:300] + "…"
        return OutputValidationError(
            f"the model's answer did not fit {self.type_name} after {tries} "
            f"{'try' if tries == 1 else 'tries'}: {where} (last output: {raw!r})",
            problems=problems, raw=checked.raw,
        )

    # -- the answer in the state ---------------------------------------------------------------
    def revive(self, value: Any) -> Any:
        """``value`` as an object of the type again (after a restore it is its JSON);
        ``value`` itself when it does not validate."""
        try:
            return self.adapter.validate_python(value)
        except ValidationError:
            return value

    def __repr__(self) -> str:
        return f"OutputSpec({self.type_name}, mode={self.mode!r}, retries={self.retries})"


def extract_json(text: str) -> str:
    """The JSON in a text answer: a fenced block's body, else the text from its first ``{`` or
    ``[`` to the matching last one (words before and after it left out), else the text."""
    fenced = _FENCE.search(text)
    if fenced:
        return fenced.group(1).strip()
    stripped = text.strip()
    if not stripped or stripped[0] == '"':
        return stripped
    if stripped[0] in "{[":  # words after it left out, as words before it are
        end = stripped.rfind("}" if stripped[0] == "{" else "]")
        return stripped[:end + 1] if end > 0 else stripped
    for opening, closing in (("{", "}"), ("[", "]")):
        start, end = stripped.find(opening), stripped.rfind(closing)
        if 0 <= start < end:
            return stripped[start:end + 1]
    return stripped


def _all_required(schema: Mapping[str, Any]) -> bool:
    """Whether every object in ``schema`` requires all of its properties."""
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, Mapping):
            continue
        props = node.get("properties")
        if isinstance(props, Mapping) and set(props) - set(node.get("required") or ()):
            return False
        for key, value in node.items():
            if key not in ("enum", "const", "default", "examples"):
                stack.append(value)
    return True


def output_spec(
    output_type: Any, mode: OutputMode, retries: int
) -> OutputSpec | None:
    """The spec for ``output_type``, or None when no type is asked for."""
    if output_type is None:
        return None
    if isinstance(output_type, OutputSpec):
        return output_type
    return OutputSpec(output_type, mode=mode, retries=retries)


def _refuse_a_value(output_type: Any) -> None:
    """Refuse a value given for the answer's type: ``"str"`` (read as a forward reference:
    no longer ``str``, so a text answer was refused and retried) or an instance of a model.

    Raises:
        TypeError: naming the type meant.
    """
    if isinstance(output_type, str):
        raise TypeError(f"output_type is the answer's type, got the text {output_type!r}: "
                        f"give the type itself ({output_type} rather than {output_type!r})")
    if not isinstance(output_type, type) and (
        hasattr(type(output_type), "model_fields") or hasattr(output_type, "__dataclass_fields__")
    ):
        name = type(output_type).__name__
        raise TypeError(f"output_type is the answer's type, got an instance of {name}: give "
                        f"the class, output_type={name}")
