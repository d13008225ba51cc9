"""A function's signature and type hints as `function_schema` and the injection check read
them: a plain function's straight from its code object (`inspect.signature` builds objects
a tool made per request paid for), anything else through `inspect`."""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from jianmu.tools._hints import has_own_signature, may_annotate, module_globals, plain_hints

__all__ = ("in_class_body", "is_coroutine_function", "is_generator_function", "may_inject_any",
           "read_signature", "resolve_hints", "unbound_method_problem", "unwrap")


def in_class_body(fn: Any) -> bool:
    """Whether ``fn`` was defined in a class body (its qualified name says ``Class.name``, not
    ``name`` nor ``outer.<locals>.name``): only then is a first parameter ``cls`` the class's
    (a module's ``label(cls, text)`` takes a class label from the model)."""
    qualname = getattr(fn, "__qualname__", None)
    if not isinstance(qualname, str) or "." not in qualname:
        return False
    return qualname.rsplit(".", 2)[-2] != "<locals>"


def unwrap(fn: Any, stop: Callable[[Any], bool] | None = None) -> Any:
    """``inspect.unwrap(fn, stop=stop)``; a plain function that wraps nothing is itself."""
    if type(fn) is types.FunctionType and "__wrapped__" not in fn.__dict__:
        return fn
    return inspect.unwrap(fn, stop=stop)


def is_coroutine_function(fn: Any) -> bool:
    """``inspect.iscoroutinefunction(fn)``; a plain function's code object says (unless it is
    marked one, `inspect.markcoroutinefunction` on Python 3.12+)."""
    if type(fn) is types.FunctionType and "_is_coroutine_marker" not in fn.__dict__:
        return bool(fn.__code__.co_flags & inspect.CO_COROUTINE)
    return inspect.iscoroutinefunction(fn)


_GENERATORS = inspect.CO_GENERATOR | inspect.CO_ASYNC_GENERATOR


def is_generator_function(fn: Any) -> bool:
    """``inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn)``; a plain
    function's code object says."""
    if type(fn) is types.FunctionType:
        return bool(fn.__code__.co_flags & _GENERATORS)
    return inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn)


class _Param:
    """What `function_schema` reads of an `inspect.Parameter`, read from a code object."""

    __slots__ = ("annotation", "default", "kind", "name")
    POSITIONAL_ONLY = inspect.Parameter.POSITIONAL_ONLY
    POSITIONAL_OR_KEYWORD = inspect.Parameter.POSITIONAL_OR_KEYWORD
    VAR_POSITIONAL = inspect.Parameter.VAR_POSITIONAL
    KEYWORD_ONLY = inspect.Parameter.KEYWORD_ONLY
    VAR_KEYWORD = inspect.Parameter.VAR_KEYWORD

    def __init__(self, name: str, kind: Any, default: Any, annotation: Any) -> None:
        self.name, self.kind, self.default, self.annotation = name, kind, default, annotation


class _Signature:
    """What `function_schema` reads of an `inspect.Signature`."""

    __slots__ = ("parameters", "return_annotation")

    def __init__(self, parameters: dict[str, _Param], return_annotation: Any) -> None:
        self.parameters, self.return_annotation = parameters, return_annotation


_SIGNATURE_HOOKS = frozenset({"__wrapped__", "__signature__", "__text_signature__",
                              "_partialmethod", "__partialmethod__"})
"""A function attribute that `inspect.signature` reads instead of the code object."""


def read_signature(fn: Callable[..., Any]) -> inspect.Signature | _Signature:
    """``inspect.signature(fn)``; for a plain function, its parameters as
    `inspect.signature` reads them from the code object (as ``_signature_from_function``
    does), without building `inspect.Parameter` objects (a tool is built per request).

    Raises:
        TypeError, ValueError: as `inspect.signature`.
    """
    if type(fn) is not types.FunctionType or not _SIGNATURE_HOOKS.isdisjoint(vars(fn)):
        return inspect.signature(fn)
    code = fn.__code__
    empty = inspect.Parameter.empty
    annotations = fn.__annotations__ or {}
    names = code.co_varnames
    count, posonly, kwonly = code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount
    defaults = fn.__defaults__ or ()
    first_default = count - len(defaults)
    params: dict[str, _Param] = {}
    for i, name in enumerate(names[:count]):
        kind = _Param.POSITIONAL_ONLY if i < posonly else _Param.POSITIONAL_OR_KEYWORD
        default = defaults[i - first_default] if i >= first_default else empty
        params[name] = _Param(name, kind, default, annotations.get(name, empty))
    index = count + kwonly
    if code.co_flags & inspect.CO_VARARGS:
        name = names[index]
        params[name] = _Param(name, _Param.VAR_POSITIONAL, empty, annotations.get(name, empty))
        index += 1
    kwdefaults = fn.__kwdefaults__ or {}
    for name in names[count:count + kwonly]:
        params[name] = _Param(name, _Param.KEYWORD_ONLY, kwdefaults.get(name, empty),
                              annotations.get(name, empty))
    if code.co_flags & inspect.CO_VARKEYWORDS:
        name = names[index]
        params[name] = _Param(name, _Param.VAR_KEYWORD, empty, annotations.get(name, empty))
    return _Signature(params, annotations.get("return", empty))


def resolve_hints(
    fn: Callable[..., Any], sig: inspect.Signature | _Signature, localns: Mapping[str, Any] | None
) -> tuple[dict[str, Any], dict[str, str]]:
    """Resolved annotations, plus the raw strings of those that could not be resolved."""
    target = unwrap(getattr(fn, "__func__", fn), stop=has_own_signature)
    globalns = module_globals(target)
    # a signature set by hand is what inspect.signature gave: its annotations, not the
    # wrapper's own ``__annotations__`` (often ``*args, **kwargs``), are the parameters' types
    if not has_own_signature(target):
        plain = plain_hints(target, globalns, localns)
        if plain is not None:
            return plain, {}
        try:
            return typing.get_type_hints(target, globalns, dict(localns or {}),
                                         include_extras=True), {}
        except Exception:  # one bad annotation: resolve the others one by one below
            pass
    hints: dict[str, Any] = {}
    failed: dict[str, str] = {}
    items = [(p.name, p.annotation) for p in sig.parameters.values()]
    items.append(("return", sig.return_annotation))
    for pname, ann in items:
        if isinstance(ann, str):
            try:
                hints[pname] = eval(ann, dict(globalns), dict(localns or {}))
            except Exception:
                failed[pname] = ann
        elif ann is not inspect.Signature.empty:
            hints[pname] = ann
    return hints, failed


def may_inject_any(fn: Callable[..., Any], names: Mapping[str, Any]) -> bool:
    """Whether ``fn`` may declare injected a parameter named one of ``names``: False for a
    plain function that annotates nothing (a ``lambda **kwargs``), or whose code object names
    none of them as a parameter (a ``**kwargs`` handler): their hints need no reading."""
    if type(fn) is not types.FunctionType or not _SIGNATURE_HOOKS.isdisjoint(vars(fn)):
        return may_annotate(fn)
    code = fn.__code__
    return bool(fn.__annotations__) and not names.keys().isdisjoint(
        code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])


def unbound_method_problem(fn: Any, first: str, name: str) -> str:
    """Why a tool of ``fn``, a method read from its class, cannot run: no call gives its
    ``first`` parameter (``self``); the instance to take it from instead."""
    where = getattr(fn, "__qualname__", name)
    owner = where.rsplit(".", 1)[0] if "." in where else "TheClass"
    return (f"{where} is a method read from its class, so no call gives its {first!r}; take "
            f"the tool from an instance ({owner}().{getattr(fn, '__name__', name)})")
