"""`Tool`, the abstract contract of every tool, and `@tool`, which turns a function into one.

A tool describes itself with class attributes (name, description, JSON Schemas and the
metadata the guard reads) and implements ``run()``. The framework calls ``execute()``, which
validates the model's arguments, adds the runtime's values to the parameters that declare
themselves injected, and either hands the call to a `ToolRunner` or runs it here under the
tool's timeout. `Tool.from_schema` and `Tool.from_openai` make a tool from a function and a
JSON Schema (a `SchemaTool`).

Injection is by declaration, never by name: the runtime's values (``ctx``, ``state``,
``call_id``; from an agent's executor also ``constraints``, the ones in force for the call, and
``node_path``) reach only a parameter annotated ``Injected[T]`` or typed `RunContext`, or named
in ``injected_params`` (``@tool(injected=[...])``). A schema property called ``state`` gets
the model's value; a parameter declared injected may not also be a schema property.

Derived defaults (documented once, here):

- ``parallel_safe``: ``True`` only for the ``read`` category, unless the tool says otherwise.
- ``idempotent``: ``True`` only for the ``read`` category, unless the tool says otherwise.
- ``max_retries``: 2 for idempotent tools, 0 otherwise, so that a write, a command, a message
  or a dangerous action is never repeated behind the author's back.
"""

from __future__ import annotations

import abc
import copy
import functools
import importlib
import inspect
import sys
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypedDict, TypeVar, Unpack, overload

import anyio
import anyio.to_thread

from jianmu._schema_rules import nesting_problem
from jianmu.errors import ToolDefinitionError, ToolTimeoutError, ToolValidationError
from jianmu.execution.runner import on_asyncio, within
from jianmu.execution.threads import WorkerPool, run_in_worker
from jianmu.tools import _arguments
from jianmu.tools._array_enums import with_item_enums
from jianmu.tools._definitions import openai_function, read_function
from jianmu.tools._schema_shape import check_given_schema, not_an_object
from jianmu.tools._signatures import (
    is_coroutine_function,
    may_inject_any,
    unbound_method_problem,
    unwrap,
)
from jianmu.tools.schema import (
    FunctionSchema,
    InjectedParam,
    copy_schema,
    declared_injection,
    fill_injected,
    function_injection,
    function_schema,
    injection_clashes,
)
from jianmu.tools.spec import (
    SPEC_FIELDS,
    ToolSpec,
    check_definition,
    structural_problems,
    unusable_names,
    wrap_parameters,
)

if TYPE_CHECKING:
    from jianmu.execution.runner import ToolRunner
    from jianmu.execution.sandbox import Sandbox

__all__ = (
    "CATEGORIES",
    "PERMISSIONS",
    "Category",
    "FunctionTool",
    "Permission",
    "SchemaTool",
    "Tool",
    "ToolMetadata",
    "tool",
)

Category = Literal["read", "write", "execute", "communicate", "dangerous"]
"""A tool's side-effect class; it drives the safety defaults."""
Permission = Literal["auto", "user_confirm", "admin_only"]
"""Who may let a call run: the agent alone, the user, or an administrator."""
CATEGORIES: tuple[str, ...] = ("read", "write", "execute", "communicate", "dangerous")
PERMISSIONS: tuple[str, ...] = ("auto", "user_confirm", "admin_only")

_DERIVED = ("parallel_safe", "idempotent", "max_retries")
_TOOL_NODE_MODULE = "jianmu.nodes.tool_node"
"""Where `Tool.as_node` finds `ToolNode` (a higher layer, so resolved by name at call time)."""
_F = TypeVar("_F", bound=Callable[..., Any])


def _derive(attr: str, category: str, idempotent: bool | None) -> Any:
    if attr in ("parallel_safe", "idempotent"):
        return category == "read"
    return 2 if (idempotent if idempotent is not None else category == "read") else 0


class Tool(abc.ABC):  # noqa: B024 (run is abstract; ruff reads the TYPE_CHECKING branch)
    """A capability that an agent or a workflow node can call.

    Subclass it, set the class attributes and implement ``run`` (sync or async). A sync
    ``run`` runs in a worker thread so it never blocks the event loop. A non-object
    ``input_schema`` is wrapped as ``{"input": ...}`` and ``run`` receives the single value.
    """

    _wraps_tools: ClassVar[bool] = True
    """Its docstring documents the class, not the tools it makes (see `get_description`)."""

    name: str = "unnamed_tool"
    """Unique name the model calls the tool by; must match ``^[A-Za-z0-9_-]{1,64}$``."""
    description: str = ""
    """What the tool does, when to use it, what it returns; falls back to the class docstring."""
    input_schema: dict[str, Any] = {"type": "string", "description": "The tool's input."}
    """JSON Schema of the arguments."""
    output_schema: dict[str, Any] = {"type": "string"}
    """JSON Schema of the result, for documentation and UIs."""
    category: Category = "read"
    """Side-effect class: read, write, execute, communicate or dangerous."""
    permission: Permission = "auto"
    """Who must allow a call; a dangerous tool cannot be ``auto``."""
    parallel_safe: bool | None = None
    """Whether calls may run concurrently with others; ``None`` derives it from the category."""
    effect_tags: tuple[str, ...] = ()
    """Side effects counted by the guard, e.g. ``"file_write"`` or ``"http"``."""
    timeout_seconds: float | None = 30.0
    """Per-call timeout; ``None`` for none."""
    idempotent: bool | None = None
    """Whether repeating a call is harmless; ``None`` derives it from the category."""
    max_retries: int | None = None
    """Retries after a failure; ``None`` derives it (2 if idempotent, else 0)."""
    max_result_length: int = 20000
    """Characters of output the model sees before the result is cut."""
    tags: tuple[str, ...] = ()
    """Labels for tool selection."""
    version: str = "1.0.0"
    """The tool's version."""
    examples: tuple[str, ...] = ()
    """Usage examples shown to the model."""
    deprecated: bool = False
    """Deprecated tools are kept but not offered to new agents."""
    metadata: Mapping[str, Any] = MappingProxyType({})
    """Free-form extra information."""
    sandboxed: bool = False
    """True for tools that run code or commands; they also implement ``run_sandboxed``."""
    remote: bool = False
    """True for tools that another process serves (an MCP server's)."""
    injected_params: tuple[str, ...] = ()
    """Parameters of ``run`` that the runtime fills (``ctx``, ``state``, ``call_id``), never
    the model; ``Injected[T]`` and `RunContext` annotations declare them too."""
    bounds_own_wait: ClassVar[bool] = False
    """True when ``run`` itself stops at ``timeout_seconds`` (an MCP client's read timeout):
    ``execute`` then sets no timer of its own."""
    records_own_steps: ClassVar[bool] = False
    """True when ``run`` records its own durable steps (an `agent_tool`'s sub-agent, whose model
    turns and calls are steps of their own): the executor does not make the call one step."""

    _derived_attrs: ClassVar[frozenset[str]] = frozenset(_DERIVED)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Resolve the derived defaults per class, so that `tool.parallel_safe` is a bool.
        # An attribute is explicit when some class (not a derived value) set it non-None.
        derived: set[str] = set()
        for attr in ("idempotent", "parallel_safe", "max_retries"):
            explicit = False
            for klass in cls.__mro__:
                if klass is Tool:
                    break
                if attr in klass.__dict__ and attr not in klass.__dict__.get(
                    "_derived_attrs", frozenset()
                ):
                    explicit = klass.__dict__[attr] is not None
                    break
            if not explicit:
                setattr(cls, attr, _derive(attr, cls.category, cls.idempotent))
                derived.add(attr)
        cls._derived_attrs = frozenset(derived)

    # -- the tool's logic -------------------------------------------------------------------

    if TYPE_CHECKING:
        run: Callable[..., Any]
    else:

        @abc.abstractmethod
        def run(self, *args: Any, **kwargs: Any) -> Any:
            """The tool's logic; sync or async. Called with validated arguments."""

    async def run_sandboxed(self, sandbox: Sandbox, **kwargs: Any) -> Any:
        """Run through ``sandbox.exec``; tools with ``sandboxed = True`` implement this."""
        raise NotImplementedError(
            f"tool {self.name!r} ({type(self).__name__}) sets sandboxed=True but does not "
            "implement run_sandboxed(sandbox, **kwargs)"
        )

    # -- descriptions and schemas -----------------------------------------------------------

    def get_description(self) -> str:
        """The explicit description, else the class docstring, else an empty string.

        The docstring of a class that wraps tools (``Tool``, `FunctionTool`, `SchemaTool`,
        `MCPTool`: ``_wraps_tools`` in its own body) documents the library, not the tool, so
        a tool made by one of them without a description has none.
        """
        if self.description and self.description != "No description provided":
            return self.description
        cls = type(self)
        doc = cls.__doc__  # a class's docstring is its own: never inherited
        if doc and not vars(cls).get("_wraps_tools", False):
            return inspect.cleandoc(doc)
        return ""

    @property
    def is_async(self) -> bool:
        """Whether ``run`` is a coroutine function (it runs on the loop, not in a thread)."""
        return inspect.iscoroutinefunction(self.run)

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name in SPEC_FIELDS:  # the spec follows what the tool says of itself
            self.__dict__.pop("_jm_spec", None)

    @property
    def tool_spec(self) -> ToolSpec:
        """The tool's one description (`ToolSpec`), made from its attributes; export, argument
        validation and the guard read it."""
        made = self.__dict__.get("_jm_spec")
        if made is not None:
            return made  # type: ignore[no-any-return]
        made = ToolSpec(
            name=self.name, description=self.get_description(),
            input_schema=self.input_schema, parameters=self.parameters,
            output_schema=self.output_schema or {}, category=self.category,
            permission=self.permission, parallel_safe=bool(self.parallel_safe),
            idempotent=bool(self.idempotent), max_retries=self.max_retries or 0,
            effect_tags=tuple(self.effect_tags), timeout_seconds=self.timeout_seconds,
            max_result_length=self.max_result_length, tags=tuple(self.tags),
            version=self.version, examples=tuple(self.examples), deprecated=self.deprecated,
            metadata=dict(self.metadata), sandboxed=self.sandboxed, remote=self.remote,
            injected=tuple(p.name for p in self.injection()),
        )
        self.__dict__["_jm_spec"] = made
        return made

    @property
    def parameters(self) -> dict[str, Any]:
        """The input schema as an object schema (non-object schemas wrapped as ``input``)."""
        cached = self.__dict__.get("_jm_params")
        if cached is not None and cached[0] is self.input_schema:
            return cached[1]  # type: ignore[no-any-return]
        params = wrap_parameters(self.input_schema)
        self.__dict__["_jm_params"] = (self.input_schema, params)
        return params

    @property
    def wraps_input(self) -> bool:
        """Whether ``input_schema`` is not an object and ``run`` takes the single value."""
        return self.input_schema.get("type") != "object"

    def to_schema(self) -> dict[str, Any]:
        """``{"name", "description", "parameters"}`` for LLM function calling."""
        return self.tool_spec.to_schema()

    def spec(self) -> dict[str, Any]:
        """Everything known about the tool as plain data, for prompts, UIs and documentation."""
        return self.tool_spec.as_dict()

    def to_openai(self, *, strict: bool = False) -> dict[str, Any]:
        """The OpenAI tool definition; ``strict=True`` gives a structured-outputs schema.

        Raises:
            ToolValidationError: ``strict=True`` and a parameter is a free-form object
                (``dict[str, X]``) or ``Any``, which strict mode cannot express.
        """
        return self.tool_spec.to_openai(strict=strict)

    def to_anthropic(self) -> dict[str, Any]:
        """The Anthropic tool definition: ``{"name", "description", "input_schema"}``."""
        return self.tool_spec.to_anthropic()

    def to_mcp(self) -> dict[str, Any]:
        """An MCP tool definition (a plain dict); annotations follow from the category."""
        return self.tool_spec.to_mcp()

    def check_definition(self, *, require_parameter_descriptions: bool = False) -> list[str]:
        """Check the definition; raise on problems, return parameter-description warnings.

        Raises:
            ToolValidationError: listing every problem (name, description, schema, permission).
        """
        return check_definition(
            self,
            signature_params=self._signature_params(),
            require_parameter_descriptions=require_parameter_descriptions,
        )

    def _signature_params(self) -> frozenset[str] | None:
        """Names the schema may declare; ``None`` when ``run`` takes ``**kwargs``."""
        return _arguments.accepted_names(self.run)

    def injection(self) -> tuple[InjectedParam, ...]:
        """The parameters of ``run`` the runtime fills: annotated ``Injected[T]`` or
        `RunContext`, or named in ``injected_params``.

        Raises:
            ToolDefinitionError: one of them is also a property of the input schema, or
                ``injected_params`` names a parameter ``run`` does not have.
        """
        params = self.parameters
        cached = self.__dict__.get("_jm_inject")
        if cached is not None and cached[0] is params:
            return cached[1]  # type: ignore[no-any-return]
        try:
            found = declared_injection(self.run, tuple(self.injected_params))
        except ToolDefinitionError as exc:
            raise ToolDefinitionError(self.name, exc.problems) from None
        injection_clashes(self.name, found, params.get("properties") or {})
        self.__dict__["_jm_inject"] = (params, found)
        return found

    # -- calling ----------------------------------------------------------------------------

    def validate_args(self, args: Any) -> dict[str, Any]:
        """Validate and coerce the model's arguments.

        Raises:
            ToolInputError: listing every problem, so that the model can correct its call.
        """
        return _arguments.validate_with_schema(self.name, self.parameters, args)

    def bind_args(self, args: Any, injected: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Validate the model's ``args`` and add the runtime's values: what ``invoke`` takes.

        Only the parameters that declare themselves injected (`injection`) get a value from
        ``injected``; every other injected value is dropped, whatever its name.

        Raises:
            ToolInputError: the arguments do not fit the schema.
            ToolExecutionError: an injected parameter without a default got no value.
        """
        if self.wraps_input and not isinstance(args, dict):
            args = {"input": args} if args is not None else {}
        values = self.validate_args(args)
        injection = self.injection()
        if injection:
            fill_injected(self.name, injection, values, injected)
        return values

    async def invoke(
        self, args: dict[str, Any], *, limiter: anyio.CapacityLimiter | None = None,
        executor: Executor | WorkerPool | None = None,
    ) -> Any:
        """Call ``run`` with validated ``args``; a sync ``run`` goes to a worker thread.

        The thread comes from ``executor`` when given (the `ToolRunner`'s bounded pool), else
        from anyio's pool under ``limiter``. No timeout here: ``execute`` or the `ToolRunner`
        applies it.
        """
        fn = self.run
        if self.wraps_input and "input" in args:
            rest = {k: v for k, v in args.items() if k != "input"}
            value = args["input"]

            def call() -> Any:
                return fn(value, **rest)
        else:

            def call() -> Any:
                return fn(**args)

        if inspect.iscoroutinefunction(fn):
            return await call()
        result = await run_in_worker(call, limiter=limiter, executor=executor)
        if inspect.isawaitable(result):
            result = await result
        return result

    async def execute(
        self,
        args: Any = None,
        *,
        injected: Mapping[str, Any] | None = None,
        runner: ToolRunner | None = None,
    ) -> Any:
        """Validate, add the declared injected values, and run here or through ``runner``.

        Returns:
            The tool's raw result.

        Raises:
            ToolInputError: the arguments do not fit the schema.
            ToolTimeoutError: the call ran past ``timeout_seconds``.
            Exception: whatever the tool itself raised.
        """
        call_args = self.bind_args(args, injected)
        if runner is not None:
            return await runner.run(self, call_args)
        timeout = self.timeout_seconds
        if timeout is None or timeout <= 0 or self.bounds_own_wait:
            return await self.invoke(call_args)

        def timed_out() -> ToolTimeoutError:
            return ToolTimeoutError(
                f"tool {self.name!r} did not finish within {timeout:g}s; "
                "raise its timeout_seconds or make the call smaller"
            )

        if on_asyncio():  # a shared loop timer, a fraction of a cancel scope's cost
            return await within(self.invoke(call_args), timeout, timed_out)
        try:
            with anyio.fail_after(timeout):
                return await self.invoke(call_args)
        except TimeoutError as exc:
            if isinstance(exc, ToolTimeoutError):
                raise
            raise timed_out() from None

    async def aclose(self) -> None:  # noqa: B027 (optional: most tools hold nothing)
        """Release what the tool holds (a connection to its server); a no-op by default."""

    @classmethod
    def from_schema(
        cls,
        fn: Callable[..., Any],
        *,
        name: str,
        description: str,
        input_schema: Mapping[str, Any],
        output_schema: Mapping[str, Any] | None = None,
        **metadata: Unpack[ToolMetadata],
    ) -> SchemaTool:
        """A tool that checks its arguments against exactly ``input_schema`` and calls ``fn``.

        As pydantic-ai's ``Tool.from_schema`` or the OpenAI Agents SDK's ``FunctionTool``:
        ``fn`` (sync or async) receives exactly the model's arguments that pass the schema.
        ``metadata`` takes what `@tool` takes (`ToolMetadata`); see `SchemaTool`.
        """
        return SchemaTool(
            fn, name=name, description=description, input_schema=input_schema,
            output_schema=output_schema, **metadata,
        )

    @classmethod
    def from_openai(
        cls,
        definition: Mapping[str, Any],
        fn: Callable[..., Any],
        **metadata: Unpack[ToolMetadata],
    ) -> SchemaTool:
        """A tool from an OpenAI function definition and the function that implements it.

        ``definition`` is ``{"type": "function", "function": {"name", "description",
        "parameters"}}`` or the inner dict (flat, as the Responses API's); its ``parameters``
        (Anthropic's ``input_schema``, MCP's ``inputSchema``) are the input schema.

        Raises:
            ToolDefinitionError: the definition has no name, or its schema is not valid.
        """
        return _from_openai(definition, fn, metadata)

    def as_node(
        self,
        name: str | None = None,
        *,
        input_key: str | None = None,
        output_key: str | None = None,
        **kwargs: Any,
    ) -> Any:
        """Wrap the tool in a `ToolNode` for a behaviour tree.

        `ToolNode` lives in `jianmu.nodes`, a layer above tools: it is looked up by name when
        called, so that this module never imports upward.
        """
        node_class = importlib.import_module(_TOOL_NODE_MODULE).ToolNode
        if input_key is not None:
            kwargs["input_key"] = input_key
        if output_key is not None:
            kwargs["output_key"] = output_key
        return node_class(name=name or self.name, tool=self, **kwargs)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} category={self.category!r}>"


class ToolMetadata(TypedDict, total=False):
    """What a tool says about itself besides its schema; `@tool`, `Tool.from_schema` and
    `Tool.from_openai` take the same keywords.

    ``read_only`` is the short form of ``category="read"`` (``False``: ``"write"``),
    ``confirm=True`` of ``permission="user_confirm"``, ``timeout`` of ``timeout_seconds``;
    ``effects`` is a category name or a list of effect tags. ``parallel_safe`` and
    ``idempotent`` default to ``True`` only for reads, ``max_retries`` to 2 only for
    idempotent tools.
    """

    category: Category
    read_only: bool
    permission: Permission
    confirm: bool
    effects: str | tuple[str, ...] | list[str]
    effect_tags: tuple[str, ...] | list[str]
    parallel_safe: bool | None
    idempotent: bool | None
    max_retries: int | None
    timeout: float | None
    timeout_seconds: float | None
    max_result_length: int
    tags: tuple[str, ...] | list[str]
    version: str
    examples: tuple[str, ...] | list[str]
    deprecated: bool
    metadata: Mapping[str, Any] | None


class ToolOptions(ToolMetadata, total=False):
    """The keyword options of `@tool(...)`; `FunctionTool` documents their defaults."""

    name: str | None
    description: str | None
    input_schema: dict[str, Any] | None
    output_schema: dict[str, Any] | None
    injected: tuple[str, ...] | list[str]
    docstring_format: str


_OPTIONS = frozenset(ToolMetadata.__annotations__)


def _apply_metadata(target: Tool, options: ToolMetadata, *, default_category: str) -> None:
    """Set ``target``'s metadata attributes from ``options`` (see `ToolMetadata`).

    Raises:
        ToolValidationError: contradicting options, or a category, permission or
            combination the guard refuses (a dangerous tool that asks nobody).
    """
    if not options:  # the common case: every attribute at its default for the category
        defaults = _DEFAULTS.get(default_category)
        if defaults is None:
            defaults = _DEFAULTS[default_category] = _metadata_values({}, default_category, "")
        _assign(target, {**defaults, "metadata": {}})
        return
    _assign(target, _metadata_values(options, default_category, target.name))


_DEFAULTS: dict[str, dict[str, Any]] = {}
"""The metadata attributes of a tool made without options, by default category (``metadata``
is a new dict for each tool)."""


def _metadata_values(options: ToolMetadata, default_category: str, name: str) -> dict[str, Any]:
    """The metadata attributes ``options`` give a tool named ``name``.

    Raises:
        ToolValidationError: contradicting or unknown options (see `_apply_metadata`).
    """
    unknown = options.keys() - _OPTIONS
    if unknown:
        raise TypeError(f"unknown tool option(s): {', '.join(sorted(unknown))}")
    effects = options.get("effects", ())
    tags = tuple(options.get("effect_tags", ()))
    category = options.get("category")
    if isinstance(effects, str):
        if effects in CATEGORIES:
            category = category or effects  # type: ignore[assignment]
        else:
            tags += (effects,)
    else:
        tags += tuple(effects)
    read_only = options.get("read_only")
    problems: list[str] = []
    if read_only is not None:
        implied = "read" if read_only else (category if category not in (None, "read") else "write")
        if category is not None and category != implied:
            problems.append(f"read_only={read_only} contradicts category={category!r}")
        category = implied  # type: ignore[assignment]
    category = category or default_category  # type: ignore[assignment]
    permission = options.get("permission")
    if permission is None:
        permission = "user_confirm" if options.get("confirm") else "auto"
    elif options.get("confirm") and permission == "auto":
        problems.append("confirm=True contradicts permission='auto'")
    if problems:
        raise ToolValidationError(name, problems)
    reads = category == "read"
    idempotent = options.get("idempotent")
    idempotent = reads if idempotent is None else idempotent
    parallel_safe = options.get("parallel_safe")
    max_retries = options.get("max_retries")
    return {
        "category": category,
        "permission": permission,
        "idempotent": idempotent,
        "parallel_safe": reads if parallel_safe is None else parallel_safe,
        "max_retries": (2 if idempotent else 0) if max_retries is None else max_retries,
        "effect_tags": tags,
        "timeout_seconds": (
            options["timeout"] if "timeout" in options else options.get("timeout_seconds", 30.0)
        ),
        "max_result_length": options.get("max_result_length", 20000),
        "tags": tuple(options.get("tags", ())),
        "version": options.get("version", "1.0.0"),
        "examples": tuple(options.get("examples", ())),
        "deprecated": options.get("deprecated", False),
        "metadata": dict(options.get("metadata") or {}),
    }


@functools.lru_cache(maxsize=256)
def _stored_as_is(cls: type) -> frozenset[str]:
    """The attributes ``setattr`` on a ``cls`` only stores in its ``__dict__``: its
    ``__setattr__`` is `Tool`'s and no property (or other data descriptor) takes them."""
    if cls.__setattr__ is not Tool.__setattr__:
        return frozenset()
    return frozenset(
        name for name in _ASSIGNED
        if not hasattr(type(inspect.getattr_static(cls, name, None)), "__set__")
    )


_ASSIGNED = frozenset({
    "category", "permission", "idempotent", "parallel_safe", "max_retries", "effect_tags",
    "timeout_seconds", "max_result_length", "tags", "version", "examples", "deprecated",
    "metadata", "name", "description", "input_schema", "output_schema",
    "_fn", "_schema", "_explicit_input", "_explicit_output", "_exact",
})


def _assign(target: Tool, values: dict[str, Any]) -> None:
    """``setattr(target, name, value)`` for each of ``values``, in one ``__dict__`` update
    where that is all ``setattr`` would do (a tool is built per request: ~20 attributes)."""
    if values.keys() <= _stored_as_is(type(target)):
        target.__dict__.update(values)
        if not SPEC_FIELDS.isdisjoint(values):
            target.__dict__.pop("_jm_spec", None)
    else:
        for name, value in values.items():
            setattr(target, name, value)


class FunctionTool(Tool):
    """A tool made from a plain function by `@tool`; the schema comes from its signature.

    With an explicit ``input_schema``, arguments are checked by exactly that schema (as for
    `Tool.from_schema`) and the function receives what the model sent, plus its injected
    parameters. ``injected`` names parameters the runtime fills (``state``, ``call_id``);
    see `ToolMetadata` for the rest. The category defaults to ``read``.
    """

    _wraps_tools: ClassVar[bool] = True
    """Its docstring documents the class, not the tools it makes (see `get_description`)."""
    _fn: Callable[..., Any]
    _schema: FunctionSchema
    _explicit_input: bool
    _explicit_output: dict[str, Any] | None
    _exact: _arguments.SchemaArguments | None
    method_bound: bool = False
    """Whether ``fn`` is a method bound by `__get__` (its ``self`` given)."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | None = None,
        injected: tuple[str, ...] | list[str] = (),
        docstring_format: str = "auto",
        namespace: Mapping[str, Any] | None = None,
        **options: Unpack[ToolMetadata],
    ) -> None:
        if not callable(fn):
            raise TypeError(f"@tool needs a function, got {fn!r}")
        schema = function_schema(
            fn, docstring_format=docstring_format, namespace=namespace,
            injected_names=tuple(injected),
        )
        _assign(self, {
            "_fn": fn, "_schema": schema,
            "name": name if name is not None else schema.name,
            "description": description if description is not None else schema.description,
            "input_schema": input_schema if input_schema is not None else schema.parameters,
            "_explicit_input": input_schema is not None, "_explicit_output": output_schema,
            "_exact": None,
        })
        _apply_metadata(self, options, default_category="read")
        if schema.is_async:
            self.run = self._run_async  # type: ignore[method-assign]
        problems = structural_problems(self)
        if input_schema is not None:  # given, not made from the signature: checked as given
            check_given_schema(self.name, input_schema, problems)
        elif problems:
            raise ToolValidationError(self.name, problems)
        if input_schema is not None:
            injection_clashes(self.name, self._schema.injection, self.parameters["properties"])
            accepted = self._schema.signature_names
            if accepted is not None:
                accepted -= {p.name for p in self._schema.injection}
            self._exact = _arguments.SchemaArguments(
                self.name, with_item_enums(self.parameters),
                accepted=None if self.wraps_input else accepted,
            )

    @property  # type: ignore[override]
    def output_schema(self) -> dict[str, Any]:
        """The explicit output schema, else the one derived from the return annotation."""
        if self._explicit_output is not None:
            return self._explicit_output
        return self._schema.output_schema

    @output_schema.setter
    def output_schema(self, value: dict[str, Any]) -> None:
        self._explicit_output = value

    @property
    def is_async(self) -> bool:
        """Whether the wrapped function is a coroutine function."""
        return self._schema.is_async

    @property
    def fn(self) -> Callable[..., Any]:
        """The wrapped function."""
        return self._fn

    @property
    def function_schema(self) -> FunctionSchema:
        """The schema and validator derived from the function's signature."""
        return self._schema

    def __get__(self, instance: Any, owner: type | None = None) -> FunctionTool:
        """``@tool`` on a method in a class body, read from an instance: the tool of the method
        bound to it, kept in the instance's ``__dict__`` under the method's name."""
        if instance is None or self._schema.method_self is None or self.method_bound:
            return self
        bound = copy.copy(self)
        _assign(bound, {"_fn": self._fn.__get__(instance, owner), "method_bound": True})
        if self._schema.is_async:
            bound.run = bound._run_async  # type: ignore[method-assign]
        name = self.__dict__.get("_jm_attribute")
        if name and isinstance(getattr(instance, "__dict__", None), dict):
            instance.__dict__[name] = bound
        return bound

    def __set_name__(self, owner: type, name: str) -> None:
        object.__setattr__(self, "_jm_attribute", name)

    def unbound_problem(self) -> str | None:
        """Why no call could run: a method read from its class, whose ``self`` nobody gives."""
        first = None if self.method_bound else self._schema.method_self
        return None if first is None else unbound_method_problem(self._fn, first, self.name)

    def run(self, /, *args: Any, **kwargs: Any) -> Any:
        """Call the function (positional-only parameters are passed by position)."""
        return self._schema.call(self._fn, args, kwargs)

    async def _run_async(self, /, *args: Any, **kwargs: Any) -> Any:
        return await self._schema.call(self._fn, args, kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the original function directly, bypassing validation."""
        return self._fn(*args, **kwargs)

    def _signature_params(self) -> frozenset[str] | None:
        return self._schema.signature_names

    def injection(self) -> tuple[InjectedParam, ...]:
        """The function's injected parameters (checked against the schema when made)."""
        return self._schema.injection

    def validate_args(self, args: Any) -> dict[str, Any]:
        """Validate with the explicit schema, else the pydantic model of the signature (lax).

        Raises:
            ToolInputError: listing every problem, injected parameters never mentioned.
        """
        if self._exact is not None:
            return self._exact.validate(args)
        return self._schema.validate(self.name, args)

    def bind_args(self, args: Any, injected: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Validate the model's arguments and fill the injected parameters from ``injected``."""
        if self._exact is not None:
            return super().bind_args(args, injected)
        return self._schema.bind(self.name, args, injected)

    async def invoke(
        self, args: dict[str, Any], *, limiter: anyio.CapacityLimiter | None = None,
        executor: Executor | WorkerPool | None = None,
    ) -> Any:
        """Call the function with validated ``args``; sync functions run in a worker thread."""
        if self._explicit_input and self.wraps_input and "input" in args:
            args = self._schema.unwrap_input(args)
        if self._schema.is_async:
            return await self._schema.call(self._fn, (), args)
        schema, fn = self._schema, self._fn
        result = await run_in_worker(
            lambda: schema.call(fn, (), args), limiter=limiter, executor=executor
        )
        if inspect.isawaitable(result):
            result = await result
        return result

    def __repr__(self) -> str:
        return f"<FunctionTool {self.name!r} of {getattr(self._fn, '__qualname__', self._fn)!r}>"


class SchemaTool(Tool):
    """A tool made from a function and a JSON Schema: `Tool.from_schema`, `Tool.from_openai`.

    The model's arguments are checked by exactly the given schema (see
    `jianmu.tools._arguments.SchemaArguments`: its own dialect, 2020-12 by default, nothing
    coerced; an array's ``enum`` of single values lists its items', `with_item_enums`), and
    ``fn`` (sync or async) receives a copy of exactly what the model sent: no extras and no
    injected values. Export gives back the given schema unchanged. The category
    defaults to ``write`` (a function's effects are unknown: its calls run one at a time and
    are never retried) unless ``read_only=True`` or ``category`` says otherwise.

    Raises:
        ToolDefinitionError: the schema is not valid JSON Schema, or names a property that
            ``fn`` cannot take.
        ToolValidationError: a bad name, category or permission.
    """

    _wraps_tools: ClassVar[bool] = True
    """Its docstring documents the class, not the tools it makes (see `get_description`)."""
    _fn: Callable[..., Any]

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str,
        description: str,
        input_schema: Mapping[str, Any],
        output_schema: Mapping[str, Any] | None = None,
        **options: Unpack[ToolMetadata],
    ) -> None:
        if not callable(fn):
            raise TypeError(f"a tool needs a function, got {fn!r}")
        if not isinstance(input_schema, Mapping):  # before it is copied
            raise ToolDefinitionError(str(name), [not_an_object(input_schema)])
        try:
            key, private = _arguments.keyed_copy(input_schema)
            if private is None:  # what JSON would not give back as it was given
                private = copy_schema(input_schema)
        except RecursionError:  # the JSON text and the copy recurse; the rules say why
            raise ToolDefinitionError(str(name), [
                nesting_problem(input_schema) or "input schema nests too deeply"
            ]) from None
        _assign(self, {
            "name": name, "description": description or "",
            "input_schema": private,
            "output_schema": dict(output_schema) if output_schema is not None else {},
            "_fn": fn,
        })
        _apply_metadata(self, options, default_category="write")
        check_given_schema(self.name, private, structural_problems(self))
        accepted = _arguments.accepted_names(fn)
        properties = self.parameters.get("properties") or {}
        unusable = unusable_names(self.parameters, None if self.wraps_input else accepted)
        if unusable:  # a property the function does not take, a required name no call gives
            raise ToolDefinitionError(self.name, unusable)
        if properties and may_inject_any(fn, properties):
            # a parameter typed as the runtime's (RunContext, Injected[T]) is never injected
            # here: a property of its name would hand it the model's forged "state" dict
            injection_clashes(self.name, function_injection(fn), properties)
        # checked as the schema can only mean it (`with_item_enums`), exported as given
        checked = with_item_enums(self.parameters) if key is None or '"enum"' in key else (
            self.parameters)
        self._arguments = _arguments.SchemaArguments(
            self.name, checked, accepted=None if self.wraps_input else accepted,
            key=key if checked is self.input_schema else None,  # its JSON, made above
        )
        call = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else type(fn).__call__
        if is_coroutine_function(unwrap(fn)) or is_coroutine_function(call):
            self.run = self._run_async  # type: ignore[method-assign]

    @property
    def parameters(self) -> dict[str, Any]:
        """The given schema as it is (a non-object schema is wrapped as ``input``)."""
        if self.input_schema.get("type") == "object":
            return self.input_schema
        return super().parameters

    @property
    def fn(self) -> Callable[..., Any]:
        """The wrapped function."""
        return self._fn

    def injection(self) -> tuple[InjectedParam, ...]:
        """Nothing: the function receives only the model's arguments."""
        return ()

    def validate_args(self, args: Any) -> dict[str, Any]:
        """Check ``args`` against exactly the given schema; a copy of them.

        Raises:
            ToolInputError: every problem, each with its JSON path.
        """
        return self._arguments.validate(args)

    def run(self, /, *args: Any, **kwargs: Any) -> Any:
        """Call the function with the model's arguments."""
        return self._fn(*args, **kwargs)

    async def _run_async(self, /, *args: Any, **kwargs: Any) -> Any:
        return await self._fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<SchemaTool {self.name!r} of {getattr(self._fn, '__qualname__', self._fn)!r}>"


def _from_openai(definition: Mapping[str, Any], fn: Callable[..., Any],
                 options: ToolMetadata) -> SchemaTool:
    return _from_function(openai_function(definition), fn, options)


def _from_function(function: Mapping[str, Any], fn: Callable[..., Any],
                   options: ToolMetadata) -> SchemaTool:
    """The tool of an OpenAI definition's inner ``{"name", "description", "parameters"}``."""
    name, description, schema = read_function(function)
    return SchemaTool(fn, name=name, description=description, input_schema=schema, **options)


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    fn: None = None, /, **options: Unpack[ToolOptions]
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None, /, **options: Unpack[ToolOptions]
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Turn a sync or async function into a `FunctionTool`: ``@tool`` or ``@tool(...)``.

    The input schema comes from the signature (through pydantic), parameter descriptions
    from the docstring (Google, NumPy or Sphinx), the output schema from the return
    annotation. See `FunctionTool` for the options.
    """
    # Names defined in the caller's scope resolve string annotations of local classes
    # (``from __future__ import annotations`` inside a function), as pydantic does.
    frame = sys._getframe(1)
    namespace = frame.f_locals if frame.f_locals is not frame.f_globals else None
    del frame
    if fn is not None:
        return FunctionTool(fn, namespace=namespace, **options)

    def decorate(func: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(func, namespace=namespace, **options)

    return decorate
