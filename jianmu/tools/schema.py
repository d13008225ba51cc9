"""JSON Schemas for tools: from a function's signature, and for each provider's export.

The input schema of a function comes from pydantic, through one model built from the
signature: the same model validates the model's arguments, so the schema and the check
never disagree. Description precedence for a parameter: ``Field(description=...)``, then a
string in ``Annotated[T, "..."]``, then the docstring.

Injected parameters (``Injected[T]``, or typed as `jianmu.runtime.context.RunContext`) are
left out of the schema and of every error message; `FunctionSchema.bind` fills them.
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
import re
import types
import typing
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic_core import CoreSchema, SchemaValidator, core_schema

from jianmu.errors import ToolDefinitionError, ToolExecutionError, ToolValidationError
from jianmu.tools._arguments import drop_default_nulls, input_error, schema_types
from jianmu.tools._docstrings import docstring_of, parse_docstring
from jianmu.tools._hints import described, partial_parts
from jianmu.tools._signatures import (
    in_class_body,
    is_coroutine_function,
    is_generator_function,
    unwrap,
)
from jianmu.tools._signatures import read_signature as _signature
from jianmu.tools._signatures import resolve_hints as _resolve_hints
from jianmu.tools.calls import (
    decode_container,
    non_finite_at,
    non_finite_problem,
    single_argument,
)

__all__ = (
    "FunctionSchema",
    "Injected",
    "InjectedParam",
    "declared_injection",
    "fill_injected",
    "function_injection",
    "function_schema",
    "injection_clashes",
    "strip_titles",
    "wrap_parameters",
)

_T = TypeVar("_T")


class _InjectedMarker:
    """Metadata that marks an ``Annotated`` parameter as injected by the caller."""

    def __repr__(self) -> str:
        return "INJECTED"


INJECTED = _InjectedMarker()
Injected = Annotated[_T, INJECTED]
"""``Injected[T]``: a parameter the caller fills (not the model); hidden from the schema."""

_CONTEXT_KEYS = ("ctx", "context", "run_context")
_INJECTED_STR = re.compile(r"^\s*(?:[\w.]+\.)?Injected\[")
_CONTEXT_STR = re.compile(
    r"^\s*(?:Optional\[)?(?:[\w.]+\.)?RunContext\]?(?:\s*\|\s*None)?\s*$"
)
# allow_inf_nan: a model's "nan" or "inf" text is no way past the rule that refuses numbers
# JSON has not (`non_finite_problem` reads the arguments as sent, before any coercion)
_CONFIG = ConfigDict(extra="forbid", arbitrary_types_allowed=True, protected_namespaces=(),
                     allow_inf_nan=False)
_CORE_CONFIG = core_schema.CoreConfig(extra_fields_behavior="forbid", allow_inf_nan=False)
"""What `_CONFIG` means to validation, for the typed dict built of per-type core schemas: those
leave their config to the schema that holds them (as a model's does)."""


# -- the fast path: an object schema from memoised per-type schemas ------------------------
# Every per-type schema is still pydantic's; only the assembly into an object schema is done
# here, exactly as pydantic's model would do it (a test compares both on every signature).
# The validating model is then built on a tool's first call instead of at definition.

_FRAGMENTS: dict[Any, dict[str, Any] | None] = {}
_FRAGMENTS_MAX = 4096


def has_field_info(annotation: Any) -> bool:
    return typing.get_origin(annotation) is Annotated and any(
        isinstance(m, FieldInfo) for m in getattr(annotation, "__metadata__", ())
    )


def plain_json(value: Any) -> bool:
    """A default the fast path writes as it is: JSON's own, and a float JSON can write (NaN or
    an infinity goes by the model path, which leaves it out of the schema)."""
    kind = type(value)
    return value is None or kind in (bool, int, str) or (kind is float and value - value == 0)


def _has_refs(schema: Any) -> bool:
    if isinstance(schema, dict):
        return "$ref" in schema or "$defs" in schema or any(
            _has_refs(v) for v in schema.values()
        )
    if isinstance(schema, list):
        return any(_has_refs(v) for v in schema)
    return False


def _fragment(annotation: Any, config: ConfigDict) -> dict[str, Any] | None:
    """pydantic's JSON Schema of one type, memoised; ``None`` when it needs ``$defs``."""
    try:
        return _FRAGMENTS[annotation]
    except KeyError:
        pass
    except TypeError:  # unhashable annotation: no memo
        return None
    try:
        # Inside a list, a named type (enum, model, dataclass...) shows as a $ref exactly as
        # in the model's schema, so those go to the model path and keep their $defs.
        wrapped = TypeAdapter(list[annotation], config=config).json_schema()  # type: ignore[valid-type]
        # a title here is the type's own (WithJsonSchema's): pydantic gives list items none,
        # and the model path keeps it too, stripping only the field name's
        schema: dict[str, Any] | None = strip_titles(wrapped.get("items", {}), ("",))
    except Exception:  # the model path reports the error with context
        schema = None
    if schema is not None and (_has_refs(schema) or "$defs" in wrapped):
        schema = None
    if len(_FRAGMENTS) >= _FRAGMENTS_MAX:
        _FRAGMENTS.clear()
    _FRAGMENTS[annotation] = schema
    return schema


def copy_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``copy.deepcopy(dict(schema))``, JSON's own types copied by hand (several times faster
    on a tool's schema), anything else by ``copy.deepcopy``."""
    return _copy_dict(dict(schema))


_ATOMS = frozenset({str, int, float, bool, type(None)})
"""JSON's immutable types: a copy is the value itself (checked inline: most values are)."""


def _copy_dict(copied: dict[str, Any]) -> dict[str, Any]:
    """``copied`` (a shallow copy) with its containers copied in turn: most values are atoms,
    left as the shallow copy has them."""
    for k, v in copied.items():  # replacing values, never keys: safe while iterating
        if type(v) not in _ATOMS:
            copied[k] = _copy_json(v)
    return copied


def _copy_json(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return _copy_dict(dict(value))
    if kind is list:
        return [v if type(v) in _ATOMS else _copy_json(v) for v in value]
    if kind in _ATOMS:
        return value
    return copy.deepcopy(value)


def fast_parameters(
    params: list[tuple[str, Any, str | None, bool, Any]], config: ConfigDict
) -> dict[str, Any] | None:
    """The object schema pydantic's model would produce, from memoised per-type schemas."""
    props: dict[str, Any] = {}
    required: list[str] = []
    for pname, annotation, description, has_default, default in params:
        fragment = _fragment(annotation, config)
        if fragment is None:
            return None
        prop = copy_schema(fragment)  # memoised fragments are shared: never hand them out
        if description:
            prop["description"] = description
        if has_default:
            prop["default"] = default
        else:
            required.append(pname)
        props[pname] = dict(sorted(prop.items()))
    out: dict[str, Any] = {"additionalProperties": False, "properties": props}
    if required:
        out["required"] = required
    out["type"] = "object"
    return out


# -- from a function -----------------------------------------------------------------------


@dataclass(frozen=True)
class InjectedParam:
    """A parameter the runtime fills (never the model): its name, whether it takes the run
    context (under ``ctx``, ``context`` or ``run_context``), and whether it may be left out."""

    name: str
    context: bool
    has_default: bool


def fill_injected(
    tool: str,
    params: tuple[InjectedParam, ...],
    values: dict[str, Any],
    injected: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """Add to ``values`` the runtime's value of each declared injected parameter.

    Only the parameters in ``params`` are filled: an injected value that no parameter declares
    is dropped, whatever its name, so it can never stand in for a model's argument.

    Raises:
        ToolExecutionError: a parameter without a default was given no value.
    """
    for param in params:
        if injected:
            if param.name in injected:
                values[param.name] = injected[param.name]
                continue
            if param.context:
                found = next((injected[k] for k in _CONTEXT_KEYS if k in injected), None)
                if found is not None:
                    values[param.name] = found
                    continue
        if not param.has_default:
            raise ToolExecutionError(
                f"tool {tool!r} needs the injected value {param.name!r}; the caller must "
                f"pass it in injected={{{param.name!r}: ...}}"
                + (" (or the run context as 'ctx')" if param.context else "")
            )
    return values


def declared_injection(
    fn: Callable[..., Any], names: tuple[str, ...] | frozenset[str] = ()
) -> tuple[InjectedParam, ...]:
    """The injected parameters of ``fn``: those annotated ``Injected[T]`` or typed
    `RunContext`, and those named in ``names``.

    Raises:
        ToolDefinitionError: a name in ``names`` is not a parameter of ``fn``.
    """
    target = fn.__call__ if _is_callable_object(fn) else fn  # type: ignore[operator]
    sig: Any  # an inspect.Signature, or a _Signature with the same attributes
    try:
        sig = _signature(target)  # a plain function's read from its code object
    except (TypeError, ValueError):
        sig = None
    params = {} if sig is None else {
        p.name: p for p in sig.parameters.values()
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }
    unknown = [n for n in names if n not in params]
    if unknown:
        tool = getattr(fn, "__name__", type(fn).__name__)
        raise ToolDefinitionError(tool, [
            f"injected parameter {n!r} is not a parameter of {tool!r} "
            f"({', '.join(params) or 'none'})" for n in unknown
        ])
    if sig is None:
        return ()
    hints, failed = _resolve_hints(target, sig, None)
    out: list[InjectedParam] = []
    for pname, param in params.items():
        has_default = param.default is not inspect.Parameter.empty
        raw = failed.get(pname)
        annotation = hints.get(pname, inspect.Parameter.empty)
        if raw is not None:
            context = bool(_CONTEXT_STR.match(raw))
            marked = context or bool(_INJECTED_STR.match(raw))
        else:
            context = annotation is not inspect.Parameter.empty and _is_context_type(annotation)
            marked = annotation is not inspect.Parameter.empty and _is_injected(annotation)
        if marked or pname in names:
            out.append(InjectedParam(pname, context, has_default))
    if not failed and not names and inspect.isfunction(target):
        _INJECTION[target] = tuple(out)  # every hint resolved: it stays true
    return tuple(out)


_INJECTION: weakref.WeakKeyDictionary[Callable[..., Any], tuple[InjectedParam, ...]] = (
    weakref.WeakKeyDictionary())


def function_injection(fn: Callable[..., Any]) -> tuple[InjectedParam, ...]:
    """`declared_injection` of ``fn``, remembered for a plain function once all its hints
    resolved (a tool made per task from the same handler reads its hints once; one with a
    hint not yet resolvable, which a later class may settle, is read again each time)."""
    found = _INJECTION.get(fn) if inspect.isfunction(fn) else None
    return declared_injection(fn) if found is None else found


def injection_clashes(
    tool: str, params: tuple[InjectedParam, ...], properties: Mapping[str, Any]
) -> None:
    """Refuse a tool that declares an injected parameter named like a schema property.

    Raises:
        ToolDefinitionError: naming each clash.
    """
    clashes = [p.name for p in params if p.name in properties]
    if clashes:
        raise ToolDefinitionError(tool, [
            f"parameter {name!r} is declared injected but is also a property of the input "
            "schema: the model's value and the runtime's would compete; rename one of them"
            for name in clashes
        ])


def _is_callable_object(fn: Any) -> bool:
    return not (inspect.isfunction(fn) or inspect.ismethod(fn)) and not isinstance(
        fn, functools.partial
    ) and callable(fn) and not inspect.isbuiltin(fn) and not isinstance(fn, type)


def _is_context_type(tp: Any) -> bool:
    origin = typing.get_origin(tp)
    if origin is Annotated:
        return _is_context_type(typing.get_args(tp)[0])
    if origin is typing.Union or type(tp).__name__ == "UnionType":
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return len(args) == 1 and _is_context_type(args[0])
    return (
        isinstance(tp, type)
        and tp.__name__ == "RunContext"
        and tp.__module__.startswith("jianmu.runtime")
    )


def _is_injected(tp: Any) -> bool:
    if type(tp) is type:  # a plain class (most parameters): no Annotated, no Union
        return tp.__name__ == "RunContext" and tp.__module__.startswith("jianmu.runtime")
    if typing.get_origin(tp) is Annotated and any(
        m is INJECTED for m in getattr(tp, "__metadata__", ())
    ):
        return True
    return _is_context_type(tp)


def _model_field(annotation: Any, base: FieldInfo | None, has_default: bool, default: Any,
                 overrides: dict[str, Any]) -> tuple[Any, FieldInfo]:
    """A parameter as a model field: its annotation and `FieldInfo`."""
    if base is not None:
        return annotation, _merge_field(base, **overrides)
    if has_default:
        return annotation, Field(default, **overrides)
    return annotation, Field(**overrides)


def _own_alias(default: FieldInfo | None, annotation: Any) -> bool:
    """Whether the author aliased a parameter (``Field(alias=...)`` or a validation alias, as
    its default or in its ``Annotated``): that name is the one offered and taken."""
    infos = [default] if default is not None else []
    if type(annotation) is not type and typing.get_origin(annotation) is Annotated:
        infos += [m for m in annotation.__metadata__ if isinstance(m, FieldInfo)]
    return any(info.alias is not None or info.validation_alias is not None for info in infos)


def _merge_field(base: FieldInfo, **overrides: Any) -> FieldInfo:
    if not overrides:
        return base
    alias = overrides.get("alias")
    if alias is not None:
        # merging sets only ``alias``, not the validation and serialization aliases that
        # `Field(alias=...)` derives from it: the model and its schema kept the internal name
        overrides.update(validation_alias=alias, serialization_alias=alias, alias_priority=2)
    merge = getattr(FieldInfo, "merge_field_infos", None)
    if merge is not None:
        return merge(base, **overrides)  # type: ignore[no-any-return]
    merged = {**getattr(base, "_attributes_set", {}), **overrides}  # pragma: no cover
    return Field(**merged)  # type: ignore[no-any-return]  # pragma: no cover


class FunctionSchema:
    """The schema, validator and call adapter for one function."""

    def __init__(
        self,
        *,
        name: str,
        description: str,
        parameters: dict[str, Any],
        model: type[BaseModel] | Callable[[], type[BaseModel]],
        fields: tuple[tuple[str, str], ...],
        injected: tuple[InjectedParam, ...],
        positional: tuple[str, ...],
        signature_names: frozenset[str] | None,
        is_async: bool,
        return_annotation: Any,
        returns_doc: str,
        param_descriptions: dict[str, str],
        plan: ArgumentPlan | None = None,
        validator: Callable[[], SchemaValidator | None] | None = None,
        method_self: str | None = None,
    ) -> None:
        self.name = name
        self.method_self = method_self
        """The first parameter (``self``), left out of the schema, of a method read from its
        class: no call gives it unless an instance binds it (`FunctionTool.__get__`)."""
        self._plan = plan
        self._validator: SchemaValidator | Callable[[], SchemaValidator | None] | None = validator
        self.description = description
        self.parameters = parameters
        self._model = model
        self.param_descriptions = param_descriptions
        self.signature_names = signature_names
        self.is_async = is_async
        self._fields = fields
        self._injected = injected
        self._positional = positional
        self._return = return_annotation
        self._returns_doc = returns_doc
        self._output: dict[str, Any] | None = None
        self._props: dict[str, Any] = parameters.get("properties", {})
        self._traits: tuple[list[str], frozenset[str], frozenset[str]] | None = None

    def _read_traits(self) -> tuple[list[str], frozenset[str], frozenset[str]]:
        """The allowed arguments (for errors), the properties whose value may come as a JSON
        string, and those whose ``null`` means their default: read on first need, as the plan
        takes most calls without them (a tool built per task is often called once)."""
        found = self._traits
        if found is None:
            parameters, props = self.parameters, self._props
            required = set(parameters.get("required", ()))
            allowed = [f"{k}{' (required)' if k in required else ''}" for k in props]
            decode_json: list[str] = []
            null_means_default: list[str] = []
            for k, sub in props.items():  # each property's types found once
                types_of = schema_types(sub, parameters)
                if types_of & {"array", "object"} and not types_of & {"string", "any"}:
                    decode_json.append(k)
                if k not in required and not types_of & {"null", "any"}:
                    null_means_default.append(k)
            found = self._traits = (
                allowed, frozenset(decode_json), frozenset(null_means_default))
        return found

    @property
    def _allowed(self) -> list[str]:
        """The allowed arguments, as an error lists them."""
        return self._read_traits()[0]

    @property
    def model(self) -> type[BaseModel]:
        """The pydantic model that validates arguments (built on first use)."""
        model = self._model
        if not isinstance(model, type):
            model = self._model = model()
        return model

    @property
    def validator(self) -> SchemaValidator | type[BaseModel]:
        """What checks the arguments (built on first use): a pydantic-core validator of the
        parameters as a typed dict when every parameter's type allows one, else `model`."""
        found = self._validator
        if found is not None and not isinstance(found, SchemaValidator):
            found = self._validator = found()
        return found if found is not None else self.model

    @property
    def output_schema(self) -> dict[str, Any]:
        """JSON Schema of the return annotation (computed on first use)."""
        if self._output is None:
            self._output = _output_schema(self._return, self._returns_doc)
        return self._output

    @property
    def injected_names(self) -> tuple[str, ...]:
        """Names of the injected parameters."""
        return tuple(p.name for p in self._injected)

    def validate(self, tool: str, args: Any) -> dict[str, Any]:
        """Validate the model's arguments with the signature's pydantic model (lax mode).

        Raises:
            ToolInputError: listing every problem and the allowed arguments.
        """
        args = single_argument(self.parameters, decode_container(args))
        if not isinstance(args, dict):
            raise input_error(
                tool, [f"arguments must be a JSON object, got {type(args).__name__} {args!r}"],
                self._allowed,
            )
        non_finite = non_finite_problem(args)
        if non_finite is not None:  # before the plan: a NaN is a float, as is inf
            raise input_error(tool, [non_finite], self._allowed)
        if self._plan is not None:
            planned = self._plan.take(args, self._fields)
            if planned is not None:
                return planned
        problems: list[str] = []
        data: dict[str, Any] = {}
        _, decode_json, null_means_default = self._read_traits()
        for key, value in args.items():
            if key not in self._props:
                problems.append(f"unknown argument {key!r}")
                continue
            if value is None and key in null_means_default:
                continue
            if key in decode_json and isinstance(value, str):
                # Models often send a JSON string for a list or object; never for str params.
                try:
                    value = json.loads(value)
                except ValueError:
                    pass  # pydantic reports the wrong type below
            if isinstance(value, (dict, list)):
                value = drop_default_nulls(value, self._props[key], self.parameters)
            data[key] = value
        validator = self.validator
        try:
            if isinstance(validator, SchemaValidator):
                checked = validator.validate_python(data)  # keyed by the parameters' names
            else:
                values = validator.model_validate(data).__dict__  # keyed by field names
        except ValidationError as exc:
            problems += [_format_error(e) for e in exc.errors(include_url=False)]
            raise input_error(tool, problems, self._allowed) from None
        if problems:
            raise input_error(tool, problems, self._allowed)
        if isinstance(validator, SchemaValidator):
            return {real: checked[real] for _, real in self._fields}
        return {real: values[internal] for internal, real in self._fields}

    def bind(
        self,
        tool: str,
        args: Any,
        injected: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        """Validate the model's ``args``, then fill the declared injected parameters."""
        values = self.validate(tool, args)
        if self._injected:
            fill_injected(tool, self._injected, values, injected)
        return values

    @property
    def injection(self) -> tuple[InjectedParam, ...]:
        """The injected parameters."""
        return self._injected

    def unwrap_input(self, args: dict[str, Any]) -> dict[str, Any]:
        """Map a wrapped ``{"input": v}`` call onto the function's first parameter."""
        names = [internal for internal, _ in self._fields]
        first = self._fields[0][1] if names else "input"
        out = {k: v for k, v in args.items() if k != "input"}
        out[first] = args["input"]
        return out

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Call ``fn``, passing positional-only parameters by position."""
        if self._positional:
            kwargs = dict(kwargs)
            pos = [kwargs.pop(n) for n in self._positional if n in kwargs]
            return fn(*pos, *args, **kwargs)
        return fn(*args, **kwargs)


def _format_error(err: Mapping[str, Any]) -> str:
    loc = err.get("loc") or ()
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    if err.get("type") == "missing":
        return f"missing required argument {path!r}"
    value = repr(err.get("input"))
    if len(value) > 80:
        value = value[:77] + "..."
    return f"{path or 'arguments'}: {err.get('msg')} (got {value})"


def _output_schema(annotation: Any, doc: str) -> dict[str, Any]:
    if annotation is inspect.Signature.empty:
        schema: dict[str, Any] = {}
    elif annotation is None or annotation is type(None):
        schema = {"type": "null"}
    else:
        try:  # remembered: a model's schema costs milliseconds, and tools may be made per run
            schema = copy_schema(_remembered_output_schema(annotation))
        except Exception:  # unhashable (described each time), or pydantic cannot describe it
            try:
                schema = strip_titles(TypeAdapter(annotation).json_schema())
            except Exception:  # any type pydantic cannot describe: say nothing rather than fail
                schema = {}
    if doc and "description" not in schema:
        schema["description"] = doc
    return schema


@lru_cache(maxsize=512)
def _remembered_output_schema(annotation: Any) -> dict[str, Any]:
    """pydantic's JSON Schema of a return type, remembered (callers copy it); a type it cannot
    describe (yet: a forward reference) raises, so is not remembered."""
    return strip_titles(TypeAdapter(annotation).json_schema())  # type: ignore[no-any-return]


_CORE: dict[Any, CoreSchema | None] = {}


def _core_schema(annotation: Any) -> CoreSchema | None:
    """pydantic's core schema of one type as a model field of `_CONFIG` gets it, memoised;
    None for a type that brings its own config or definitions (the model handles those)."""
    try:
        return _CORE[annotation]
    except KeyError:
        pass
    except TypeError:  # unhashable annotation: no memo
        return None
    try:
        schema: CoreSchema | None = TypeAdapter(annotation, config=_CONFIG).core_schema
    except Exception:
        schema = None
    if schema is not None and "definition" in repr(schema):  # definitions / definition-ref
        schema = None
    if len(_CORE) >= _FRAGMENTS_MAX:
        _CORE.clear()
    _CORE[annotation] = schema
    return schema


def typed_dict_validator(
    fast: list[tuple[str, Any, str | None, bool, Any]],
) -> SchemaValidator | None:
    """A validator of the parameters as a typed dict of pydantic's per-type core schemas:
    what the model would check, without building a model class (several times cheaper).
    None when a type has no such schema: the model is used."""
    fields: dict[str, Any] = {}
    for pname, annotation, _, has_default, default in fast:
        inner = _core_schema(annotation)
        if inner is None:
            return None
        if has_default:  # a plain JSON value, returned as it is (as the model does)
            inner = core_schema.with_default_schema(inner, default=default)
        fields[pname] = core_schema.typed_dict_field(inner, required=not has_default)
    return SchemaValidator(core_schema.typed_dict_schema(
        fields, extra_behavior="forbid", config=_CORE_CONFIG))


_PLAIN_KINDS: dict[Any, tuple[type, ...]] = {
    str: (str,), int: (int,), float: (float,), bool: (bool,),
}
"""Parameter types whose values, of exactly these Python types, pydantic (lax, as `_CONFIG`)
returns unchanged."""


def _plain_kinds(annotation: Any) -> tuple[tuple[type, ...], bool] | None:
    """The exact value types `ArgumentPlan` accepts for ``annotation``, and whether it is a
    list of them; None for any other annotation (it goes to the model)."""
    try:
        kinds = _PLAIN_KINDS.get(annotation)
    except TypeError:  # unhashable
        return None
    if kinds is not None:
        return kinds, False
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args:
        inner = _PLAIN_KINDS.get(args[0] if args[1] is type(None) else args[1])
        return ((*inner, type(None)), False) if inner is not None else None
    if origin is list and len(args) == 1 and args[0] in _PLAIN_KINDS:
        return _PLAIN_KINDS[args[0]], True
    return None


class ArgumentPlan:
    """A shortcut past the pydantic model for arguments it would return unchanged: every
    value already of its parameter's exact type (``str``, ``int``, ``float``, ``bool``,
    optional, or a list of them), every missing parameter one with a plain default. Anything
    else (a value to coerce or refuse, an unknown name) goes to the model, built on first use.
    """

    __slots__ = ("defaults", "kinds")

    def __init__(self, kinds: dict[str, tuple[tuple[type, ...], bool]],
                 defaults: dict[str, Any]) -> None:
        self.kinds = kinds
        self.defaults = defaults

    @classmethod
    def of(cls, fast: list[tuple[str, Any, str | None, bool, Any]]) -> ArgumentPlan | None:
        """The plan of a signature's fast-path parameters, or None when no parameter has one."""
        kinds: dict[str, tuple[tuple[type, ...], bool]] = {}
        defaults: dict[str, Any] = {}
        for pname, annotation, _, has_default, default in fast:
            if has_default:
                defaults[pname] = default  # a plain JSON value: pydantic returns it as it is
            found = _plain_kinds(annotation)
            if found is not None:
                kinds[pname] = found
        return cls(kinds, defaults) if kinds else None

    def take(self, args: dict[str, Any], fields: tuple[tuple[str, str], ...]) -> dict[
            str, Any] | None:
        """The validated arguments in field order, or None when the model must decide."""
        kinds = self.kinds
        for key, value in args.items():
            entry = kinds.get(key)
            if entry is None:
                return None
            allowed, many = entry
            if many:
                if type(value) is not list or not all(type(v) in allowed for v in value):
                    return None
            elif type(value) not in allowed:
                return None
        out: dict[str, Any] = {}
        defaults = self.defaults
        for _, real in fields:
            if real in args:
                value = args[real]
                out[real] = list(value) if kinds[real][1] else value
            elif real in defaults:
                out[real] = defaults[real]
            else:
                return None  # a missing required argument: the model says so
        return out


@lru_cache(maxsize=4096)
def _shadows_model(name: str) -> bool:
    """Whether a field ``name`` would hide an attribute of pydantic's `BaseModel` (asked once
    per name: a miss goes through pydantic's metaclass ``__getattr__`` and an exception)."""
    return hasattr(BaseModel, name)


def function_schema(
    fn: Callable[..., Any],
    *,
    docstring_format: str = "auto",
    namespace: Mapping[str, Any] | None = None,
    injected_names: Iterable[str] = (),
    _fast: bool = True,
) -> FunctionSchema:
    """Build the schema and validator of ``fn`` from its signature and docstring.

    Parameters annotated ``Injected[T]`` or typed `RunContext`, and those named in
    ``injected_names``, are injected: left out of the schema, filled by the runtime.

    Raises:
        ToolValidationError: the signature cannot be described (``*args``, an annotation that
            cannot be resolved, a type pydantic cannot handle).
        ToolDefinitionError: a name in ``injected_names`` is not a parameter of ``fn``.
    """
    inner, bound = partial_parts(fn)  # a partial is described by what it calls
    target: Callable[..., Any] = inner
    if _is_callable_object(inner):
        target = described(inner)  # what it wraps, its own __signature__, else its __call__
    unwrapped = unwrap(getattr(target, "__func__", target))
    raw_name = getattr(unwrapped, "__name__", None)
    name = raw_name if raw_name and raw_name != "__call__" else type(inner).__name__
    sig: Any  # an inspect.Signature, or a _Signature with the same attributes
    try:
        sig = _signature(target if inner is fn else fn)
    except (TypeError, ValueError) as exc:
        raise ToolValidationError(str(name), [f"cannot read the signature: {exc}"]) from None
    hints, failed = _resolve_hints(target, sig, namespace)
    doc = parse_docstring(docstring_of(
        unwrapped, inner if inner is not unwrapped and _is_callable_object(inner) else None),
        docstring_format)
    problems: list[str] = []
    if is_generator_function(unwrapped):
        # a call's result would be the generator, which is never drawn (`render_output`)
        problems.append("a generator function is not a tool: the model would read "
                        "'<generator object ...>', never its items; return a list")
    fields: dict[str, Any] = {}
    field_map: list[tuple[str, str]] = []
    injected: list[InjectedParam] = []
    positional: list[str] = []
    var_kw = False
    method_self: str | None = None
    declared = frozenset(injected_names)
    unknown = declared - {
        p.name for p in sig.parameters.values()
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }
    if unknown:
        raise ToolDefinitionError(str(name), [
            f"injected parameter {n!r} is not a parameter of the function "
            f"({', '.join(sig.parameters) or 'none'})" for n in sorted(unknown)
        ])
    # The fast path assembles the object schema from cached per-type schemas (each made by
    # pydantic) and builds the validating model only on first use; anything a per-type
    # schema cannot express exactly (Field infos, $defs, odd defaults) takes the model path.
    fast: list[tuple[str, Any, str | None, bool, Any]] | None = []
    for index, param in enumerate(sig.parameters.values()):
        pname = param.name
        if param.kind is param.VAR_POSITIONAL:
            problems.append(f"*{pname} is not supported; take a list parameter instead")
            continue
        if param.kind is param.VAR_KEYWORD:
            var_kw = True
            continue
        if (index == 0 and not inspect.ismethod(target) and (pname == "self" or (
                pname == "cls" and in_class_body(unwrapped)))) or pname in bound:
            if pname not in bound:
                method_self = pname
            continue
        has_default = param.default is not inspect.Parameter.empty
        if pname in failed:
            raw = failed[pname]
            if pname in declared or _INJECTED_STR.match(raw) or _CONTEXT_STR.match(raw):
                injected.append(InjectedParam(pname, "RunContext" in raw, has_default))
                continue
            problems.append(
                f"cannot resolve the annotation {raw!r} of parameter {pname!r}; import the "
                "type where the function is defined"
            )
            continue
        annotation = hints.get(pname, inspect.Parameter.empty)
        if pname in declared or (
            annotation is not inspect.Parameter.empty and _is_injected(annotation)
        ):
            context = annotation is not inspect.Parameter.empty and _is_context_type(annotation)
            injected.append(InjectedParam(pname, context, has_default))
            continue
        if param.kind is param.POSITIONAL_ONLY:
            positional.append(pname)
        if annotation is inspect.Parameter.empty:
            # Seed 001: an unannotated parameter is a string, unless its default says more.
            default_type = type(param.default) if has_default and param.default is not None \
                and not isinstance(param.default, FieldInfo) else str
            annotation = default_type
        annotated_doc: str | None = None
        field_desc: str | None = None
        if type(annotation) is not type and typing.get_origin(annotation) is Annotated:
            base, *meta = typing.get_args(annotation)
            strings = [m for m in meta if isinstance(m, str)]
            kept = [m for m in meta if not isinstance(m, str)]
            annotated_doc = strings[-1] if strings else None
            field_desc = next(
                (m.description for m in reversed(kept) if isinstance(m, FieldInfo)
                 and m.description), None,
            )
            annotation = Annotated[(base, *kept)] if kept else base  # type: ignore[valid-type]
        overrides: dict[str, Any] = {}
        default_info = param.default if isinstance(param.default, FieldInfo) else None
        if default_info is not None and default_info.description:
            field_desc = default_info.description
        description = field_desc or annotated_doc or doc.params.get(pname) or None
        if description and not field_desc:
            overrides["description"] = description
        safe = not pname.startswith("_") and not _shadows_model(pname)
        internal = pname if safe else f"p{index}_{pname.lstrip('_')}"
        if not safe and not _own_alias(default_info, annotation):
            overrides["alias"] = pname  # the author's own alias, if any, names it instead
        # the model's field, made only when the model is (see `_model_field`)
        fields[internal] = (annotation, default_info, has_default, param.default, overrides)
        field_map.append((internal, pname))
        if fast is not None:
            if default_info is not None or (
                type(annotation) is not type and has_field_info(annotation)) or (
                has_default and not plain_json(param.default)
            ):
                fast = None
            else:
                fast.append((pname, annotation, description, has_default, param.default))
    if problems:
        raise ToolValidationError(str(name), problems)
    model_name = f"{name}_arguments"

    def build_model() -> type[BaseModel]:
        made: dict[str, Any] = {k: _model_field(*spec) for k, spec in fields.items()}
        return create_model(model_name, __config__=_CONFIG, **made)

    parameters = fast_parameters(fast, _CONFIG) if fast is not None and _fast else None
    model: type[BaseModel] | Callable[[], type[BaseModel]] = build_model
    if parameters is None:
        try:
            model = build_model()
            parameters = strip_titles(model.model_json_schema(by_alias=True))
            if non_finite_at(parameters) is not None:
                drop_non_finite_defaults(parameters)
        except Exception as exc:  # pydantic's errors name a type, not the parameter
            from jianmu.tools._schema_problems import schema_problems

            problems = schema_problems(exc, fields, _model_field, _CONFIG, field_map)
            raise ToolValidationError(str(name), problems) from None
    parameters.setdefault("properties", {})
    parameters.pop("description", None)
    names = None if var_kw else frozenset(p for _, p in field_map) | {
        p.name for p in injected
    }
    return FunctionSchema(
        name=str(name),
        description=doc.description,
        parameters=parameters,
        model=model,
        fields=tuple(field_map),
        injected=tuple(injected),
        positional=tuple(positional),
        signature_names=names,
        is_async=is_coroutine_function(unwrapped) or (
            target is not unwrapped and inspect.iscoroutinefunction(target)) or (
            target is not inner and inspect.iscoroutinefunction(type(inner).__call__)),
        return_annotation=hints.get("return", sig.return_annotation),
        returns_doc=doc.returns,
        param_descriptions=dict(doc.params),
        plan=ArgumentPlan.of(fast) if fast is not None else None,
        validator=functools.partial(typed_dict_validator, fast) if fast is not None else None,
        method_self=method_self,
    )


# -- schema transforms ----------------------------------------------------------------------


def wrap_parameters(input_schema: Mapping[str, Any]) -> dict[str, Any]:
    """An object schema: object schemas as they are, others wrapped as ``{"input": ...}``."""
    if input_schema.get("type") == "object":
        schema = dict(input_schema)
        schema.setdefault("properties", {})
        return schema
    return {"type": "object", "properties": {"input": dict(input_schema)}, "required": ["input"]}


def _auto_titles(name: str) -> tuple[str, ...]:
    return (name.title().replace("_", " ").strip(), name.replace("_", " ").title().strip(), name)


_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_ONE = ("items", "additionalProperties", "not", "contains", "if", "then", "else")


def drop_non_finite_defaults(schema: Any) -> None:
    """Remove, in place, each ``default`` JSON cannot write (NaN, an infinity: ``float("inf")``
    as "no limit"): a model API refuses every request offering a schema that holds one. The
    parameter stays optional, and its default is still what a call that leaves it out gets."""
    if not isinstance(schema, dict):
        return
    if "default" in schema and non_finite_at(schema["default"]) is not None:
        del schema["default"]
    for key in _SCHEMA_MAPS:
        sub = schema.get(key)
        if isinstance(sub, dict):
            for value in sub.values():
                drop_non_finite_defaults(value)
    for key in _SCHEMA_LISTS:
        sub = schema.get(key)
        if isinstance(sub, list):
            for value in sub:
                drop_non_finite_defaults(value)
    for key in _SCHEMA_ONE:
        drop_non_finite_defaults(schema.get(key))


def strip_titles(schema: Any, _auto: tuple[str, ...] = ()) -> Any:
    """Remove pydantic's generated ``title`` keys in place; a property named ``title`` stays.

    Only keys that hold schemas are walked, so ``default``/``enum`` data is never touched;
    a title is removed when pydantic would have generated it (from the field or model name).
    """
    if not isinstance(schema, dict):
        return schema
    title = schema.get("title")
    if isinstance(title, str) and (not _auto or title in _auto):
        del schema["title"]
    for key in _SCHEMA_MAPS:
        sub = schema.get(key)
        if isinstance(sub, dict):
            for name, value in sub.items():
                strip_titles(value, _auto_titles(name) if key != "patternProperties" else ())
    for key in _SCHEMA_LISTS:
        sub = schema.get(key)
        if isinstance(sub, list):
            for value in sub:
                strip_titles(value, ("",))
    for key in _SCHEMA_ONE:
        if isinstance(schema.get(key), dict):
            strip_titles(schema[key], ("",))
    return schema
