"""`ToolSpec`: the one description of a tool, and what is made from it — the definitions each
model API and MCP take, and the checks a tool passes at registration.

Every tool has one spec, however it was made (`@tool`, a `Tool` subclass, `Tool.from_schema`
or `Tool.from_openai`, an MCP server, a skill): ``tool.tool_spec``. Export (OpenAI, Anthropic,
MCP), argument validation and the guard read the spec; a tool declares it through its
attributes (or `@tool`'s keywords, which set them) and the spec follows any change to them.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Mapping
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from jianmu.errors import ToolDefinitionWarning, ToolValidationError
from jianmu.tools._arguments import schema_types
from jianmu.tools.calls import TOOL_NAME_PATTERN, check_tool_name
from jianmu.tools.schema import strip_titles, wrap_parameters

__all__ = (
    "NAME_PATTERN",
    "SPEC_FIELDS",
    "ToolSpec",
    "check_definition",
    "offered_parameters",
    "strip_titles",
    "structural_problems",
    "to_mcp_annotations",
    "to_strict_schema",
    "unusable_names",
    "wrap_parameters",
)

NAME_PATTERN = TOOL_NAME_PATTERN
"""What a tool name may be (see `jianmu.tools.calls`)."""
_CATEGORIES = ("read", "write", "execute", "communicate", "dangerous")
_PERMISSIONS = ("auto", "user_confirm", "admin_only")


class ToolSpec(BaseModel):
    """Everything a tool says about itself: its name, description and schemas, its effects
    and who must allow a call (which drive the guard), and its limits.

    Made by `Tool.tool_spec` from the tool's attributes; frozen. The derived defaults are
    resolved: ``parallel_safe`` and ``idempotent`` are booleans, ``max_retries`` a number.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    name: str
    """The name the model calls the tool by (ASCII, ``^[A-Za-z0-9_-]{1,64}$``)."""
    description: str = ""
    """What the tool does, when to use it, what it returns."""
    input_schema: dict[str, Any] = Field(default_factory=dict)
    """JSON Schema of the arguments, as declared."""
    parameters: dict[str, Any] = Field(default_factory=dict)
    """The input schema as the object schema a model sees (others wrapped as ``input``)."""
    output_schema: dict[str, Any] = Field(default_factory=dict)
    """JSON Schema of the result."""
    category: str = "read"
    """Side-effect class: read, write, execute, communicate or dangerous."""
    permission: str = "auto"
    """Who must allow a call: auto, user_confirm or admin_only."""
    parallel_safe: bool = False
    """Whether calls may run beside others."""
    idempotent: bool = False
    """Whether repeating a call is harmless."""
    max_retries: int = 0
    """Retries after a transient failure."""
    effect_tags: tuple[str, ...] = ()
    """Side effects the guard counts (``file_write``, ``http``)."""
    timeout_seconds: float | None = 30.0
    """Per-call timeout; ``None`` for none."""
    max_result_length: int = 20000
    """Characters of output the model sees."""
    tags: tuple[str, ...] = ()
    """Labels for tool selection."""
    version: str = "1.0.0"
    """The tool's version."""
    examples: tuple[str, ...] = ()
    """Usage examples shown to the model."""
    deprecated: bool = False
    """Kept but not offered to new agents."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Free-form extra information."""
    sandboxed: bool = False
    """Runs code or commands through the sandbox."""
    remote: bool = False
    """Another process serves it (an MCP server)."""
    injected: tuple[str, ...] = ()
    """Parameters the runtime fills, never the model."""

    def to_schema(self) -> dict[str, Any]:
        """``{"name", "description", "parameters"}`` for LLM function calling (the parameters
        as `offered_parameters` gives them)."""
        return {"name": self.name, "description": self.description,
                "parameters": self._offered()}

    def to_openai(self, *, strict: bool = False) -> dict[str, Any]:
        """The OpenAI tool definition; ``strict=True`` gives a structured-outputs schema.

        Raises:
            ToolValidationError: ``strict=True`` and the schema has what strict mode cannot
                express (a free-form object, ``Any``), each named.
        """
        function = self.to_schema()
        if strict:
            function["parameters"] = to_strict_schema(function["parameters"], tool=self.name)
            function["strict"] = True
        return {"type": "function", "function": function}

    def to_anthropic(self) -> dict[str, Any]:
        """The Anthropic tool definition: ``{"name", "description", "input_schema"}``."""
        return {"name": self.name, "description": self.description,
                "input_schema": self._offered()}

    def _offered(self) -> dict[str, Any]:
        """The parameters a model is offered; another process's (a remote tool's) bounded."""
        offered = offered_parameters(self.parameters)
        if not self.remote:
            return offered
        from jianmu.tools._offer_bounds import bounded  # schemas a server wrote: rarely

        return bounded(offered)  # type: ignore[no-any-return]

    def to_mcp(self) -> dict[str, Any]:
        """An MCP tool definition (a plain dict); annotations follow from the category."""
        out: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.parameters,
            "annotations": to_mcp_annotations(
                category=self.category, effect_tags=self.effect_tags,
                idempotent=self.idempotent, title=self.name,
            ),
        }
        if self.output_schema.get("type") == "object":
            out["outputSchema"] = self.output_schema  # MCP only allows object output schemas
        return out

    def as_dict(self) -> dict[str, Any]:
        """Everything known about the tool as plain data, for prompts, UIs and documentation
        (``Tool.spec()``)."""
        return {
            **self.to_schema(),
            "input_schema": self.input_schema,
            "output_schema": self.output_schema,
            "returns": self.output_schema.get("description", ""),
            "category": self.category,
            "permission": self.permission,
            "parallel_safe": self.parallel_safe,
            "effect_tags": list(self.effect_tags),
            "timeout_seconds": self.timeout_seconds,
            "idempotent": self.idempotent,
            "max_retries": self.max_retries,
            "max_result_length": self.max_result_length,
            "tags": list(self.tags),
            "version": self.version,
            "examples": list(self.examples),
            "deprecated": self.deprecated,
            "metadata": dict(self.metadata),
            "sandboxed": self.sandboxed,
        }


SPEC_FIELDS: frozenset[str] = frozenset(ToolSpec.model_fields) - {"parameters", "injected"} | {
    "injected_params",
}
"""The attributes of a `Tool` its spec is made from: setting one makes a new spec."""


def to_mcp_annotations(
    *, category: str, effect_tags: tuple[str, ...] | list[str], idempotent: bool, title: str
) -> dict[str, Any]:
    """MCP tool annotations derived from the category and effect tags.

    read: read-only; write/execute/dangerous: destructive; communicate or any network tag:
    open-world (the tool reaches beyond the local machine).
    """
    tags = {t.lower() for t in effect_tags}
    network = {"http", "network", "web", "email", "message", "search", "external"}
    return {
        "title": title,
        "readOnlyHint": category == "read",
        "destructiveHint": category in ("write", "execute", "dangerous")
        or bool(tags & {"destructive", "delete", "file_delete"}),
        "idempotentHint": idempotent,
        "openWorldHint": category == "communicate" or bool(tags & network),
    }


# -- what a model is offered ----------------------------------------------------------------

_ROOT_REFUSED = frozenset({"allOf", "anyOf", "oneOf", "enum", "const"})
"""What OpenAI and Anthropic refuse at the root of a tool's schema, for every request that
offers the tool ("schema must have type 'object' and not have 'oneOf'/'anyOf'/'allOf'/'enum'/
'not' at the top level"; "input_schema does not support oneOf, allOf, or anyOf at the top
level"). MCP servers write them for "give at least one of these". A root ``not`` is sent as
given."""


def offered_parameters(parameters: dict[str, Any]) -> dict[str, Any]:
    """The object schema a model is offered: ``parameters`` itself, unless its root holds
    what the APIs refuse (`_ROOT_REFUSED`). Then those keywords go, each ``allOf``, ``anyOf``
    or ``oneOf`` branch's properties join the root's (a name two branches give differently
    as ``anyOf`` of both), and an ``allOf`` branch's required names the root's; what they
    said beyond that only narrowed the arguments, which the tool still checks by its whole
    schema, so a call that misses it is told why."""
    if parameters.keys().isdisjoint(_ROOT_REFUSED):
        return parameters
    out = {k: v for k, v in parameters.items() if k not in _ROOT_REFUSED}
    props = dict(out.get("properties") or {})
    required = [r for r in out.get("required") or () if isinstance(r, str)]
    defs = parameters.get("$defs") or {}
    for key in ("allOf", "anyOf", "oneOf"):
        branches = parameters.get(key)
        for branch in branches if isinstance(branches, list) else ():
            ref = branch.get("$ref") if isinstance(branch, dict) else None
            if isinstance(ref, str) and ref.startswith("#/$defs/") and isinstance(defs, dict):
                branch = defs.get(ref[len("#/$defs/"):])
            if not isinstance(branch, dict) or not isinstance(branch.get("properties"), dict):
                continue
            for name, sub in branch["properties"].items():
                known = props.get(name)
                if known is None:
                    props[name] = sub
                    continue
                alternatives = known["anyOf"] if isinstance(known, dict) and list(known) == [
                    "anyOf"] and isinstance(known["anyOf"], list) else [known]
                if sub not in alternatives:
                    props[name] = {"anyOf": [*alternatives, sub]}
            if key == "allOf":
                required += [r for r in branch.get("required") or ()
                             if isinstance(r, str) and r not in required]
    out["properties"] = props
    if required:
        out["required"] = required
    return out


# -- strict export -------------------------------------------------------------------------


def _nullable(schema: Any, root: Mapping[str, Any]) -> Any:
    if not isinstance(schema, dict) or "null" in schema_types(schema, root):
        return schema
    t = schema.get("type")
    if isinstance(t, str) and not any(k in schema for k in ("enum", "const", "$ref", "anyOf")):
        return {**schema, "type": [t, "null"]}
    inner = {k: v for k, v in schema.items() if k != "description"}
    out: dict[str, Any] = {"anyOf": [inner, {"type": "null"}]}
    if "description" in schema:
        out["description"] = schema["description"]
    return out


_STRICT_FORMATS = frozenset({
    "date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid",
})
"""The string formats OpenAI strict mode takes; it refuses the request for any other
("'path' is not a valid format"), such as pydantic's ``path`` or ``binary``."""
_STRICT_LOOSENED = frozenset({
    "uniqueItems", "contains", "minContains", "maxContains", "minProperties", "maxProperties",
    "propertyNames",
})
"""Keywords OpenAI strict mode refuses ("'uniqueItems' is not permitted") that only narrow a
value: left out of the strict schema, still checked when a call's arguments are validated."""
_STRICT_DROPPED = _STRICT_LOOSENED | {"default"}


def _strict(node: Any, where: str, root: Mapping[str, Any], problems: list[str]) -> Any:
    if node is True or node is False:  # a boolean schema: any value, or none
        problems.append(
            f"{where} is the schema {str(node).lower()} ({'any value' if node else 'no value'}),"
            " which OpenAI strict mode cannot express; give it a concrete type, or export with "
            "to_openai(strict=False)"
        )
        return node
    if not isinstance(node, dict):
        return node
    node = {k: v for k, v in node.items() if k not in _STRICT_DROPPED}
    if isinstance(node.get("format"), str) and node["format"] not in _STRICT_FORMATS:
        del node["format"]
    if "oneOf" in node:  # strict mode knows anyOf only; every branch here is disjoint anyway
        node["anyOf"] = node.pop("oneOf")
    for key in ("anyOf", "allOf"):
        if key in node:
            node[key] = [_strict(s, where, root, problems) for s in node[key]]
    if "$ref" in node:
        return _strict_ref(node, where, root, problems)
    types = schema_types(node, root)
    if "any" in types and not any(k in node for k in ("anyOf", "allOf", "enum", "const")):
        problems.append(
            f"{where} accepts Any, which OpenAI strict mode cannot express; give it a concrete "
            "type, or export with to_openai(strict=False)"
        )
        return node
    if ("object" in types and node.get("type") == "object") or "properties" in node:
        props = node.get("properties") or {}
        extra = node.get("additionalProperties")
        # No properties means no arguments at the top (a tool without parameters) and in an
        # explicit ``"properties": {}`` (an empty model); elsewhere it is a dict[str, Any].
        empty_ok = where == "parameters" or "properties" in node
        if isinstance(extra, dict) or extra is True or (not props and not empty_ok):
            problems.append(
                f"{where} is a free-form object (dict[str, ...]); OpenAI strict mode would forbid "
                "every key. Use a pydantic model or TypedDict with named fields, or export with "
                "to_openai(strict=False)"
            )
            return node
        required = set(node.get("required") or ())
        undeclared = sorted(r for r in required if isinstance(r, str) and r not in props)
        if undeclared:  # strict mode's required lists properties only: it would drop them
            problems.append(
                f"{where} requires {', '.join(map(repr, undeclared))}, not among its "
                "properties; OpenAI strict mode requires only named properties and forbids "
                "any other key, so no call could give it: define it under properties, or "
                "export with to_openai(strict=False)"
            )
            return node
        new_props = {}
        for name, sub in props.items():
            sub = _strict(sub, f"{where}.{name}" if where != "parameters" else
                          f"parameter {name!r}", root, problems)
            new_props[name] = sub if name in required else _nullable(sub, root)
        node["properties"] = new_props
        node["required"] = list(new_props)
        node["additionalProperties"] = False
    if isinstance(node.get("items"), dict):
        node["items"] = _strict(node["items"], f"{where}[]", root, problems)
    if isinstance(node.get("prefixItems"), list):
        node["prefixItems"] = [_strict(s, f"{where}[]", root, problems)
                               for s in node["prefixItems"]]
        _strict_tuple(node, where, problems)
    return node


_NOTES = frozenset({"description", "title", "examples", "$comment", "deprecated"})
"""Keywords that say something of a value without narrowing it."""


def _strict_ref(node: dict[str, Any], where: str, root: Mapping[str, Any],
                problems: list[str]) -> Any:
    """A ``$ref`` as strict mode takes it: alone ("$ref cannot have keywords
    {'description'}", which pydantic writes for every described model or enum parameter), so
    a definition referred to with a description is written in place, the description kept."""
    ref = node["$ref"]
    if node.keys() <= {"$ref"} or not node.keys() - {"$ref"} <= _NOTES or not (
            isinstance(ref, str) and ref.startswith("#/$defs/")):
        return node
    name = ref[len("#/$defs/"):]
    target = (root.get("$defs") or {}).get(name)
    inlining: set[str] = root["inlining"]
    if not isinstance(target, dict) or "$ref" in target:
        return node
    if name in inlining:  # a model's field of its own type, described: the $ref alone
        return {"$ref": ref}
    inlining.add(name)
    try:
        return _strict({**target, **{k: v for k, v in node.items() if k != "$ref"}},
                       where, root, problems)
    finally:
        inlining.discard(name)


def _strict_tuple(node: dict[str, Any], where: str, problems: list[str]) -> None:
    """A tuple's ``prefixItems`` as strict mode takes them: it refuses the keyword ("array
    schema missing items"), so items all of one schema become ``items`` (the length stays in
    ``minItems``/``maxItems``); items of different schemas cannot be said without it."""
    first, *rest = node["prefixItems"] or [{}]
    if "items" not in node and all(item == first for item in rest):
        del node["prefixItems"]
        node["items"] = first
        return
    problems.append(
        f"{where} is a tuple of items of different types (prefixItems), which OpenAI strict "
        "mode cannot express; take a list of one type or a pydantic model with named fields, "
        "or export with to_openai(strict=False)"
    )


def to_strict_schema(parameters: Mapping[str, Any], *, tool: str) -> dict[str, Any]:
    """The OpenAI strict-mode form of an object schema.

    Every property required, optional ones nullable, defaults dropped, ``additionalProperties:
    false`` at every level including ``$defs``; a top-level ``$schema`` (the dialect, which
    MCP servers often send) is dropped: it says nothing about the arguments; so are the
    keywords strict mode refuses that only narrow a value (`_STRICT_LOOSENED`, a ``format``
    it does not know), and a tuple of one type is written as ``items``.

    Raises:
        ToolValidationError: a free-form object (``dict[str, X]``), ``Any`` or a tuple of
            mixed types is present.
    """
    root = copy.deepcopy(dict(parameters))
    root.pop("$schema", None)
    problems: list[str] = []
    defs = root.pop("$defs", None)
    # the definitions as given (refs resolve to them), and those being written in place
    context: dict[str, Any] = {"$defs": defs or {}, "inlining": set()}
    out = _strict(root, "parameters", context, problems)
    if defs:
        out["$defs"] = {
            name: _strict(sub, f"$defs.{name}", context, problems)
            for name, sub in defs.items()
        }
    if problems:
        raise ToolValidationError(tool, problems)
    return out  # type: ignore[no-any-return]


# -- registration checks -------------------------------------------------------------------


class ToolDefinition(Protocol):
    """What the registration checks read of a tool (a `Tool` has all of it)."""

    name: str
    input_schema: dict[str, Any]

    @property
    def category(self) -> str: ...

    @property
    def permission(self) -> str: ...

    @property
    def parameters(self) -> dict[str, Any]: ...

    @property
    def wraps_input(self) -> bool: ...

    def get_description(self) -> str: ...


def structural_problems(t: ToolDefinition) -> list[str]:
    """Problems that make a tool unusable in any registry: name, category, permission."""
    problems: list[str] = []
    name_problem = check_tool_name(t.name)
    if name_problem is not None:
        problems.append(name_problem)
    if t.category not in _CATEGORIES:
        problems.append(f"category {t.category!r} must be one of {', '.join(_CATEGORIES)}")
    if t.permission not in _PERMISSIONS:
        problems.append(f"permission {t.permission!r} must be one of {', '.join(_PERMISSIONS)}")
    if t.category == "dangerous" and t.permission == "auto":
        problems.append(
            "a dangerous tool cannot have permission 'auto'; use 'user_confirm' or 'admin_only'"
        )
    return problems


def unusable_names(params: Mapping[str, Any], accepted: frozenset[str] | None) -> list[str]:
    """What of an object schema no call could give, one line each: a property the function
    does not take (``accepted``, its keyword names; None when it takes ``**kwargs``), and a
    required name the schema does not define that its object refuses (``additionalProperties:
    false``) or the function does not take (so every call was refused, with it and without)."""
    props = params.get("properties") or {}
    problems: list[str] = []
    if accepted is not None and not accepted.issuperset(props):
        problems = [f"schema property {p!r} is not a parameter of the function "
                    f"({_names(accepted)})" for p in props if p not in accepted]
    required = params.get("required")
    if not isinstance(required, list) or not isinstance(props, dict):
        return problems
    try:
        if props.keys() >= set(required):  # most schemas: every required name is a property
            return problems
    except TypeError:  # a name that is no string (unhashable): read one by one below
        pass
    missing = [r for r in required if isinstance(r, str) and r not in props]
    if not missing:
        return problems
    closed = params.get("additionalProperties") is False and not params.get("patternProperties")
    for name in dict.fromkeys(missing):
        if closed:
            problems.append(
                f"required argument {name!r} is not among the properties "
                f"({', '.join(props) or 'none'}) and additionalProperties is false: no call "
                "could pass; define it under properties"
            )
        elif accepted is not None and name not in accepted:
            problems.append(
                f"required argument {name!r} is not a parameter of the function "
                f"({_names(accepted)}): no call could pass"
            )
    return problems


def _names(accepted: frozenset[str]) -> str:
    """A function's keyword names, for a message."""
    return ", ".join(sorted(accepted)) or "none"


def check_definition(
    t: ToolDefinition,
    *,
    signature_params: frozenset[str] | None,
    require_parameter_descriptions: bool = False,
) -> list[str]:
    """Check a tool at registration; return the warnings it emitted.

    Raises:
        ToolValidationError: every problem at once, naming the tool.
    """
    problems = structural_problems(t)
    if not t.get_description().strip():
        problems.append(
            "description is empty; say what the tool does, when to use it and what it returns"
        )
    params = t.input_schema if t.input_schema.get("type") == "object" else t.parameters
    props = params.get("properties", {})
    if not isinstance(props, dict):
        problems.append(f"parameters.properties must be an object, got {props!r}")
        props = {}
    required = params.get("required", [])
    if not isinstance(required, list):
        problems.append(f"parameters.required must be a list, got {required!r}")
        required = []
    for name in required:
        if name not in props:
            problems.append(
                f"required parameter {name!r} is not in properties ({', '.join(props) or 'none'})"
            )
    if signature_params is not None and not t.wraps_input:
        for name in props:
            if name not in signature_params:
                problems.append(
                    f"schema parameter {name!r} is not in the function's signature "
                    f"({', '.join(sorted(signature_params)) or 'no parameters'})"
                )
    missing = [
        name for name, sub in props.items()
        if not (isinstance(sub, dict) and str(sub.get("description") or "").strip())
    ]
    notes: list[str] = []
    for name in missing:
        message = (
            f"tool {t.name!r}: parameter {name!r} has no description; document it in the "
            "docstring's Args section or with Annotated[T, 'description']"
        )
        if require_parameter_descriptions:
            problems.append(message.split(": ", 1)[1])
        else:
            notes.append(message)
    if problems:
        raise ToolValidationError(t.name, problems)
    for message in notes:
        warnings.warn(message, ToolDefinitionWarning, stacklevel=3)
    return notes
