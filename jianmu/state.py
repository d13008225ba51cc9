"""`StateManager`: the one state every node reads and writes, with reducers and namespaces.

The state is a pydantic model given as ``schema`` (or free-form without one). Values are kept
per field and validated per field, so a read never copies the state and an update validates
only what it writes. A field declared ``Annotated[list[X], operator.add]`` (or with any
two-argument callable) is a reducer: writes are combined with the current value instead of
replacing it; appending to a list validates only the new items.

``scope("skill_runtime.Research_2_1_0")`` returns a `StateView` whose keys live in a namespace
of their own, with the same schema; views do not see each other's keys.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import operator
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticSerializationError, to_jsonable_python

from jianmu.errors import StateValidationError

__all__ = ("StateManager", "StateView", "merge_counts")

Subscriber = Callable[[frozenset[str]], None]
"""Called after every successful update with the changed keys (``ns/key`` in a namespace)."""

_MISSING: Any = object()
_SNAPSHOT_VERSION = 1


def merge_counts(old: Mapping[str, int] | None, new: Mapping[str, int] | None) -> dict[str, int]:
    """Reducer that adds counts key by key (``tool_effects``)."""
    merged = dict(old or {})
    for key, value in (new or {}).items():
        merged[key] = merged.get(key, 0) + value
    return merged


@dataclass(frozen=True)
class _Field:
    """How one schema field is validated and combined."""

    name: str
    adapter: TypeAdapter[Any]
    reducer: Callable[[Any, Any], Any] | None
    item_adapter: TypeAdapter[Any] | None  # for list fields with operator.add
    expected: str
    info: FieldInfo
    factory: Callable[[], Any] | None = None
    """The default factory when it takes no argument: called directly, since pydantic's
    ``get_default`` inspects the factory's signature on every call."""
    constant: bool = False
    """The default can never change (an immutable scalar, or what `_makes_constants` makes):
    `value` is handed out as it is, no copy (every run's state starts from the defaults)."""
    value: Any = None
    """The default, when it is ``constant``."""

    def default(self) -> Any:
        if self.constant:
            return self.value
        if self.factory is not None:
            return self.factory()
        return self.info.get_default(call_default_factory=True)


class _Extend:
    """Validated items to append to a list field (what `_validated` hands `_apply`)."""

    __slots__ = ("items",)

    def __init__(self, items: list[Any]) -> None:
        self.items = items


def _describe(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None) if get_origin(annotation) is None else None
    return text or str(annotation).replace("typing.", "")


@dataclass(frozen=True)
class _Compiled:
    """A schema's fields, and how a store of their defaults is made."""

    fields: dict[str, _Field]
    template: dict[str, Any]
    """Every field in schema order, holding its default when that never changes (`_Field.value`)."""
    makers: tuple[tuple[str, Callable[[], Any]], ...]
    """The other fields, each with what makes its default: called for every new store, which
    must not share a mutable default with another."""

    def defaults(self) -> dict[str, Any]:
        store = self.template.copy()  # keeps the schema's order: only values are replaced
        for name, make in self.makers:
            store[name] = make()
        return store


_compiled: weakref.WeakKeyDictionary[type[BaseModel], _Compiled] = weakref.WeakKeyDictionary()


_IMMUTABLE_DEFAULTS = frozenset({type(None), bool, int, float, str, bytes})


def _plain_factory(info: FieldInfo) -> Callable[[], Any] | None:
    """The field's default factory if it takes no argument (the validated data), else None."""
    factory = info.default_factory
    if factory is None or info.default_factory_takes_validated_data:
        return None
    return factory  # type: ignore[return-value]


def _makes_constants(factory: Any) -> bool:
    """Whether ``factory`` is a frozen dataclass (`Usage`) that makes, with no argument, an
    object no one can change: every field an immutable scalar by default, no
    ``__post_init__``. Each such object equals the first, so the first serves every state."""
    if not (isinstance(factory, type) and dataclasses.is_dataclass(factory)):
        return False
    if not factory.__dataclass_params__.frozen or hasattr(factory, "__post_init__"):  # type: ignore[attr-defined]
        return False
    return all(
        f.default_factory is dataclasses.MISSING and type(f.default) in _IMMUTABLE_DEFAULTS
        for f in dataclasses.fields(factory)
    )


def _compile(schema: type[BaseModel]) -> _Compiled:
    """The schema's fields with their validators, and its defaults' template, built once per
    schema class.

    Building a TypeAdapter costs about a millisecond; a process that runs thousands of runs
    of one tree (a durable worker) must not pay it per run.
    """
    cached = _compiled.get(schema)
    if cached is None:
        fields = _build_fields(schema)
        cached = _compiled[schema] = _Compiled(
            fields=fields,
            template={name: f.value for name, f in fields.items()},
            makers=tuple((name, f.factory or f.default) for name, f in fields.items()
                         if not f.constant),
        )
    return cached  # shared by every manager of the schema: read, never changed


def _build_fields(schema: type[BaseModel]) -> dict[str, _Field]:
    fields: dict[str, _Field] = {}
    for name, info in schema.model_fields.items():
        reducers = [m for m in info.metadata if callable(m) and not isinstance(m, type)]
        reducer = reducers[-1] if reducers else None
        annotation = info.annotation
        item_adapter = None
        if reducer is operator.add and get_origin(annotation) is list:
            (item,) = get_args(annotation) or (Any,)
            item_adapter = TypeAdapter(list[item])  # type: ignore[valid-type]
        factory = _plain_factory(info)
        value, constant = None, False
        if info.default_factory is None and type(info.default) in _IMMUTABLE_DEFAULTS:
            value, constant = info.default, True
        elif factory is not None and _makes_constants(factory):
            value, constant = factory(), True
        fields[name] = _Field(
            name=name,
            adapter=TypeAdapter(Annotated[annotation, info]),  # type: ignore[arg-type]
            reducer=reducer,
            item_adapter=item_adapter,
            expected=_describe(annotation),
            info=info,
            factory=factory,
            constant=constant,
            value=value,
        )
    return fields


_FREE_FORM = _Compiled(fields={}, template={}, makers=())
"""A state without a schema: no fields, nothing to default."""


def _validation_error(key: str, value: Any, expected: str, exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    detail = f" at {where}" if where else ""
    return (
        f"state key {key!r}: got a value of type {type(value).__name__}, expected {expected}"
        f"{detail}: {first['msg']}"
    )


class StateManager:
    """Holds the run's state: a pydantic schema's fields, or free-form JSON values.

    Args:
        schema: a pydantic model class whose fields are the state's keys; reducers are declared
            with ``Annotated[list[X], operator.add]``. ``None`` for free-form state.
        initial: initial values, validated like an update.

    Raises:
        TypeError: ``schema`` is not a pydantic model class.
        StateValidationError: ``initial`` does not fit the schema.
    """

    def __init__(
        self, schema: type[BaseModel] | None = None, initial: Mapping[str, Any] | None = None
    ) -> None:
        if schema is not None and not (
                isinstance(schema, type) and issubclass(schema, BaseModel)):
            shown = type(schema).__name__ if not isinstance(schema, str) else repr(schema)
            raise TypeError(
                f"schema must be a pydantic model class (AgentState, yours) or None, got "
                f"{shown}; initial values go second: StateManager(AgentState, {{...}})"
            )
        self.schema = schema
        self._compiled = _compile(schema) if schema is not None else _FREE_FORM
        self._fields = self._compiled.fields
        self._extra_allowed = schema is None or schema.model_config.get("extra") == "allow"
        self._lock = threading.RLock()
        self._stores: dict[str | None, dict[str, Any]] = {None: self._compiled.defaults()}
        # a tuple replaced whole on (un)subscribe: every write notifies without a lock or a copy
        self._subscribers: tuple[Subscriber, ...] = ()
        self.root = StateView(self, None)
        if initial:
            self._apply(None, _as_dict(initial, "StateManager(schema, initial)"), reduce=False)

    # -- the root view's methods, for convenience -------------------------------------------
    def get(self, key: str, default: Any = None) -> Any:
        """Return the value of ``key`` (no copy), or ``default`` when it is not set."""
        return self.root.get(key, default)

    def read_port(self, key: str) -> Any:
        """Return the value of ``key``, or ``None``."""
        return self.root.read_port(key)

    def write_port(self, key: str, value: Any) -> None:
        """Write one key (through its reducer, if it has one)."""
        self.root.write_port(key, value)

    def update(self, values: Mapping[str, Any]) -> None:
        """Write several keys atomically: if one fails validation, nothing changes."""
        self.root.update(values)

    def append_port_messages(self, messages: Any, key: str = "messages") -> None:
        """Append one message or a list of them to ``key``."""
        self.root.append_port_messages(messages, key)

    def replace(self, values: Mapping[str, Any]) -> None:
        """Write keys bypassing their reducers (set, not combine)."""
        self.root.replace(values)

    def to_dict(self) -> dict[str, Any]:
        """A shallow copy of the root state's values."""
        return self.root.to_dict()

    def accepts(self, key: str) -> bool:
        """Whether ``key`` can be written: a field of the schema, or any key when free-form."""
        return key in self._fields or self._extra_allowed

    # -- namespaces ----------------------------------------------------------------------------
    def scope(self, namespace: str) -> StateView:
        """Return a view whose keys live under ``namespace`` (created empty on first write)."""
        if not namespace:
            return self.root
        return StateView(self, namespace)

    def namespaces(self) -> list[str]:
        """The namespaces that hold state, in creation order."""
        with self._lock:
            return [ns for ns in self._stores if ns is not None]

    def clear_namespace(self, namespace: str) -> None:
        """Remove a namespace and the namespaces nested in it (``ns.child``)."""
        with self._lock:
            doomed = [
                ns
                for ns in self._stores
                if ns is not None and (ns == namespace or ns.startswith(namespace + "."))
            ]
            for ns in doomed:
                del self._stores[ns]
        if doomed:
            self._notify(frozenset(f"{ns}/*" for ns in doomed))

    # -- subscription --------------------------------------------------------------------------
    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback(changed_keys)`` after every successful update; return unsubscribe."""
        with self._lock:
            self._subscribers = (*self._subscribers, callback)

        return lambda: self.unsubscribe(callback)

    def unsubscribe(self, callback: Subscriber) -> None:
        """Stop calling ``callback`` (one subscription of it; nothing if there is none)."""
        with self._lock:
            subscribers = list(self._subscribers)
            if callback in subscribers:
                subscribers.remove(callback)
                self._subscribers = tuple(subscribers)

    # -- snapshot ------------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """Return the whole state, namespaces included, as JSON-serialisable data."""
        with self._lock:
            stores = {ns: dict(values) for ns, values in self._stores.items()}
        return {
            "version": _SNAPSHOT_VERSION,
            "root": self._dump(stores.pop(None)),
            "namespaces": {ns: self._dump(values) for ns, values in stores.items()},
        }

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Replace the whole state with a `snapshot`; nothing changes if it does not validate."""
        if snapshot.get("version") != _SNAPSHOT_VERSION:
            raise StateValidationError(
                f"unsupported state snapshot version {snapshot.get('version')!r}"
            )
        stores: dict[str | None, dict[str, Any]] = {
            None: self._validated(snapshot.get("root", {}), None, reduce=False, whole=True)
        }
        for ns, values in snapshot.get("namespaces", {}).items():
            stores[ns] = self._validated(values, ns, reduce=False, whole=True)
        with self._lock:
            self._stores = stores
        self._notify(frozenset(["*"]))

    # -- internals -----------------------------------------------------------------------------
    def _defaults(self) -> dict[str, Any]:
        return self._compiled.defaults()

    def _dump(self, values: dict[str, Any]) -> dict[str, Any]:
        return {k: to_jsonable_python(v, fallback=repr) for k, v in values.items()}

    def _store(self, namespace: str | None) -> dict[str, Any]:
        store = self._stores.get(namespace)
        if store is None:
            store = self._stores[namespace] = self._defaults()
        return store

    def _check_key(self, key: str) -> _Field | None:
        spec = self._fields.get(key)
        if spec is None and not self._extra_allowed:
            known = ", ".join(self._fields)
            raise StateValidationError(
                f"state key {key!r} is not a field of {self.schema.__name__}; "  # type: ignore[union-attr]
                f"fields are: {known}"
            )
        return spec

    def _validate_value(self, key: str, value: Any, spec: _Field | None, *, appending: bool) -> Any:
        if spec is None:
            try:
                json.dumps(to_jsonable_python(value))
            except (PydanticSerializationError, TypeError, ValueError) as exc:
                raise StateValidationError(
                    f"state key {key!r}: got a value of type {type(value).__name__}, expected "
                    f"a JSON-serialisable value: {exc}"
                ) from None
            return value
        adapter = spec.item_adapter if appending and spec.item_adapter else spec.adapter
        try:
            # the core validator itself: TypeAdapter's method only forwards its defaults
            return adapter.validator.validate_python(value)
        except ValidationError as exc:
            expected = f"list of items for {spec.expected}" if appending else spec.expected
            raise StateValidationError(_validation_error(key, value, expected, exc)) from None

    def _validated(
        self, values: Mapping[str, Any], namespace: str | None, *, reduce: bool,
        whole: bool = False,
    ) -> dict[str, Any]:
        """Validate every value (and reduce it onto the current one) without writing.

        With ``whole``, the result is a complete store: unset fields take their defaults.
        """
        fields = self._fields
        current = self._stores.get(namespace) or {}
        result = self._defaults() if whole else {}
        for key, value in values.items():
            spec = fields.get(key)
            if spec is None:
                self._check_key(key)  # refused unless the state takes keys of its own
                result[key] = self._validate_value(key, value, None, appending=False)
                continue
            reducer = spec.reducer if reduce else None
            if reducer is None:
                result[key] = self._validate_value(key, value, spec, appending=False)
            elif spec.item_adapter is not None:
                items = value if isinstance(value, list) else [value]
                result[key] = _Extend(self._validate_value(key, items, spec, appending=True))
            else:
                new = self._validate_value(key, value, spec, appending=False)
                old = current[key] if key in current else spec.default()
                try:
                    combined = reducer(old, new)
                except Exception as exc:
                    raise StateValidationError(
                        f"state key {key!r}: reducer {getattr(reducer, '__name__', reducer)!r} "
                        f"failed: {exc}"
                    ) from None
                result[key] = combined
        return result

    def _apply(self, namespace: str | None, values: Mapping[str, Any], *, reduce: bool) -> None:
        with self._lock:
            validated = self._validated(values, namespace, reduce=reduce)
            store = self._store(namespace)
            for key, value in validated.items():
                if type(value) is _Extend:
                    existing = store.get(key)
                    if existing is None:
                        store[key] = list(value.items)
                    else:
                        existing.extend(value.items)  # O(new items): see the module docstring
                else:
                    store[key] = value
        if not self._subscribers:  # a state being filled before its runner subscribes
            return
        if namespace:
            self._notify(frozenset(f"{namespace}/{key}" for key in validated))
        else:
            self._notify(frozenset(validated))

    def _notify(self, keys: frozenset[str]) -> None:
        for callback in self._subscribers:  # the tuple of this moment: (un)subscribe replaces it
            callback(keys)


def _as_dict(values: Any, where: str) -> dict[str, Any]:
    """``values`` as a dict, or a TypeError naming what was given instead of the mapping of
    keys to values that ``where`` takes (``dict()`` said only "not iterable")."""
    try:
        return dict(values)
    except (TypeError, ValueError):
        raise TypeError(
            f"{where} takes a mapping of state keys to values, e.g. {{'key': value}}, got "
            f"{type(values).__name__} {values!r:.80}; one key: write_port('key', value)"
        ) from None


class StateView:
    """The state as seen from one namespace (or the root): same methods, separate keys."""

    def __init__(self, manager: StateManager, namespace: str | None) -> None:
        self.manager = manager
        self.namespace = namespace

    def get(self, key: str, default: Any = None) -> Any:
        """Return the value of ``key`` (no copy), or ``default`` when it is not set."""
        store = self.manager._stores.get(self.namespace)
        if store is None:
            spec = self.manager._fields.get(key)
            return spec.default() if spec is not None else default
        value = store.get(key, _MISSING)
        return default if value is _MISSING else value

    def read_port(self, key: str) -> Any:
        """Return the value of ``key``, or ``None``."""
        return self.get(key)

    def write_port(self, key: str, value: Any) -> None:
        """Write one key (through its reducer, if it has one)."""
        self.manager._apply(self.namespace, {key: value}, reduce=True)

    def update(self, values: Mapping[str, Any]) -> None:
        """Write several keys atomically: if one fails validation, nothing changes."""
        # read once and never kept: a dict needs no copy
        self.manager._apply(self.namespace, values if type(values) is dict
                            else _as_dict(values, "update()"), reduce=True)

    def replace(self, values: Mapping[str, Any]) -> None:
        """Write keys bypassing their reducers (set, not combine)."""
        self.manager._apply(self.namespace, values if type(values) is dict
                            else _as_dict(values, "replace()"), reduce=False)

    def check_port_messages(self, messages: Any, key: str = "messages") -> None:
        """Raise what `append_port_messages` would for ``messages``, writing nothing.

        Raises:
            StateValidationError: a message ``key`` does not take, or no such key.
        """
        items = list(messages) if isinstance(messages, (list, tuple)) else [messages]
        spec = self.manager._check_key(key)
        if spec is not None:
            self.manager._validate_value(key, items, spec, appending=spec.item_adapter is not None)
            return
        for item in items:
            self.manager._validate_value(key, item, None, appending=False)

    def append_port_messages(self, messages: Any, key: str = "messages") -> None:
        """Append one message or a list of them to ``key``."""
        items = list(messages) if isinstance(messages, (list, tuple)) else [messages]
        spec = self.manager._fields.get(key)
        if spec is not None and spec.item_adapter is not None:
            self.update({key: items})
            return
        if spec is not None:  # a list field without a reducer: replace it whole
            with self.manager._lock:
                self.replace({key: [*(self.get(key) or []), *items]})
            return
        self.manager._check_key(key)
        for item in items:
            self.manager._validate_value(key, item, None, appending=False)
        with self.manager._lock:
            store = self.manager._store(self.namespace)
            existing = store.get(key)
            if isinstance(existing, list):
                existing.extend(items)
            else:
                store[key] = [*(existing or []), *items]
        prefix = f"{self.namespace}/" if self.namespace else ""
        self.manager._notify(frozenset([prefix + key]))

    def scope(self, namespace: str) -> StateView:
        """A view nested under this one (``parent.child``)."""
        full = f"{self.namespace}.{namespace}" if self.namespace else namespace
        return self.manager.scope(full)

    def keys(self) -> Iterable[str]:
        """The keys set in this view."""
        return list(self.manager._stores.get(self.namespace, {}))

    def to_dict(self) -> dict[str, Any]:
        """A shallow copy of this view's values."""
        return dict(self.manager._stores.get(self.namespace) or self.manager._defaults())

    def clear(self) -> None:
        """Remove this view's namespace (the root view is reset to its defaults)."""
        if self.namespace is None:
            with self.manager._lock:
                self.manager._stores[None] = self.manager._defaults()
            self.manager._notify(frozenset(["*"]))
        else:
            self.manager.clear_namespace(self.namespace)

    def snapshot(self) -> dict[str, Any]:
        """This view's values as JSON-serialisable data (a debug aid)."""
        return self.manager._dump(copy.copy(self.to_dict()))

    def __repr__(self) -> str:
        return f"StateView(namespace={self.namespace!r})"
