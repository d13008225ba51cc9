"""Behaviour-tree skills: a skill whose ``tree.py`` builds the tree that does its work.

A bt skill's ``tree.py`` defines ``build_tree(ctx: BTSkillContext) -> Behaviour``.
`SkillTreeLoader` imports it under a private module name (one per file, replaced when the file
changes), from the folder pinned when the skill was loaded (its source is read there, never by
path), then prepares the tree: every runtime node gets the skill run's namespace, and every
``ToolNode`` gets the skill's name (for ``bt.skill.node.io`` events), the SKILL.md constraints
as its layer, the guard switched on and approval ids scoped to the skill run
(`GuardedToolNode`): a skill's tools never run past its policies. A tool the skill does not
declare in ``tools`` is a load error.

`BTSkillContext` is what ``build_tree`` receives. Inputs resolve in this order: the explicit
inputs, then the global state's field of the same name, then the schema's default. The tree
writes ``skill_result`` (``skill_result_key``) in its namespace; `BTSkillContext.result`
validates it against ``outputs``.

A bt skill runs from Python (`run_bt_skill`, under a runner of its own) or as the model's tool
(`RunBTSkillTool`). The tool ticks the skill's subtree inside the run that is already going
(`drive_subtree`): it shares the outer run's event bus, interaction channel, config and roles,
ticks as `ReactiveRunner` does (when a node's task finishes, and when py_trees' own loop would
find work: docs/design.md), and returns as soon as the subtree asks for approval.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import hashlib
import inspect
import json
import os
import sys
import threading
import time
import types
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from py_trees.behaviour import Behaviour
from py_trees.common import Status

from jianmu import _schema_rules
from jianmu.constraints import Constraints
from jianmu.errors import (
    PathEscapeError,
    SkillLoadError,
    SkillRunError,
    ToolInputError,
    failure_text,
)
from jianmu.nodes.tool_node import ToolNode
from jianmu.runtime.async_node import RuntimeNode, Ticker, close_tree
from jianmu.runtime.context import RunContext, copy_of
from jianmu.runtime.failures import failure_reason, stop_running_nodes
from jianmu.runtime.runner import ReactiveRunner, RunStatus
from jianmu.skills._tree_import import Stamp, TreeImport, forget, line_in, start_import
from jianmu.skills.loader import read_tree_source
from jianmu.skills.skill import Skill, find_named
from jianmu.state import StateManager
from jianmu.tools import _arguments
from jianmu.tools.base import Tool
from jianmu.tools.registry import ToolSet

if TYPE_CHECKING:
    from jianmu.config import AppConfig
    from jianmu.runtime.context import ApprovalRequest
    from jianmu.state import StateView

__all__ = (
    "MAX_SKILL_DEPTH",
    "TREE_MODULE_PREFIX",
    "BTSkillContext",
    "GuardedToolNode",
    "RunBTSkillTool",
    "SkillTreeLoader",
    "bind_tree",
    "describe_inputs",
    "fingerprint",
    "resolve_inputs",
    "run_bt_skill",
    "validate_result",
)


class GuardedToolNode(ToolNode):
    """A `ToolNode` that always asks the guard, with approval ids scoped to a BT skill run.

    The policy comes from the run's constraints merged with this node's layer (in a BT skill,
    the SKILL.md layer). ``deny`` makes the node FAILURE with the reason; ``confirm`` suspends
    the run with an approval request and the node stays RUNNING until a person decides, then
    runs the tool (approved) or fails (rejected).

    The request id is derived from the skill run's ``approval_scope`` (the skill and its
    inputs; by default the namespace), the node's place in the skill's tree, the tool and the
    arguments. So a run restored from a checkpoint, or the same skill called again with the
    same inputs after an approval, finds the decision instead of asking again.
    ``SkillTreeLoader`` gives every ``ToolNode`` of a BT skill the same guard and scope.

    Args:
        name: The node's name.
        tool: The tool to run.
        input_key: The state key holding the arguments (``None``: no arguments).
        output_key: The state key the output is written to (``None``: not written).
        execute: ``False`` skips the tool and succeeds.
        constraints: This node's layer of constraints (tighten only).
        approval_scope: Prefix of the approval ids (``""``: the namespace).
    """

    def __init__(
        self, name: str, tool: Tool, *, input_key: str | None = "input",
        output_key: str | None = "output", execute: bool = True,
        constraints: Constraints | None = None, approval_scope: str = "",
    ) -> None:
        super().__init__(
            name, tool, input_key, output_key, execute,
            constraints=constraints, guarded=True, approval_scope=approval_scope,
        )


_MISSING: Any = object()


def fingerprint(value: Any) -> str:
    """A short stable hash of a JSON-able value."""
    text = json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def describe_inputs(skill: Skill) -> str:
    """The skill's inputs in one line for the model: ``{path: string, depth: integer = 2}``;
    a field with a default shows it (the model may leave it out), one without is required."""
    inputs = (skill.inputs or {}).get("properties") or {}

    def shown(name: str, spec: Any) -> str:
        if not isinstance(spec, dict):
            return name
        text = f"{name}: {spec.get('type', 'any')}"
        if "default" in spec:
            default = json.dumps(spec["default"], ensure_ascii=False, default=str)
            text += f" = {default if len(default) <= 40 else default[:37] + '...'}"
        return text

    return "{" + ", ".join(shown(k, v) for k, v in inputs.items()) + "}"


def resolve_inputs(
    skill: Skill, explicit: Mapping[str, Any] | None = None, global_state: Any = None
) -> dict[str, Any]:
    """The skill's inputs: explicit values, then the global state's field of the same name,
    then the schema's default; validated against ``inputs``. An explicit ``null`` counts as
    not given (as a model writes it), unless the field's schema takes ``null``; a field whose
    default is ``null`` is there, as ``None``.

    Args:
        skill: The skill.
        explicit: Inputs given by the caller.
        global_state: A `StateView` (or anything with ``get(key, default)``) of the global state.

    Raises:
        SkillRunError: a required input is missing, unknown, or of the wrong type.
    """
    given = dict(explicit or {})
    schema = skill.inputs
    if schema is None:
        return given
    values: dict[str, Any] = {}
    for name, prop in (schema.get("properties") or {}).items():
        if given.get(name, _MISSING) is None and not _accepts_null(skill, name, prop):
            # a model writes null for "not given": validation would drop it, default and all
            del given[name]
        if name in given:
            values[name] = given.pop(name)
            continue
        found = global_state.get(name, _MISSING) if global_state is not None else _MISSING
        if found is not _MISSING and found is not None:
            values[name] = found
        elif isinstance(prop, dict) and "default" in prop:
            values[name] = prop["default"]
    values.update(given)  # unknown names: validation explains them
    try:
        checked = _arguments.validate_with_schema(f"{skill.name} inputs", schema, values)
    except ToolInputError as exc:
        problems = "; ".join(exc.problems)
        raise SkillRunError(
            f"skill {skill.name!r}: invalid inputs: {problems}. Pass inputs explicitly, set the "
            "state field of the same name, or give the field a default in SKILL.md"
        ) from None
    for name, prop in (schema.get("properties") or {}).items():
        # `default: null` is "none": validation drops a null, and the tree found no key
        if name not in checked and isinstance(prop, dict) and "default" in prop and (
                prop["default"] is None):
            checked[name] = None
    return checked


def _open(schema: dict[str, Any]) -> dict[str, Any]:
    return {"additionalProperties": True, **schema}


def _accepts_null(skill: Skill, name: str, prop: Any) -> bool:
    """Whether the input ``name``'s schema ``prop`` takes ``null`` as a value of its own."""
    schema = {"type": "object", "properties": {name: prop}}
    try:
        kept = _arguments.validate_with_schema(f"{skill.name} inputs", schema, {name: None},
                                               root=skill.inputs)  # where its refs point
    except ToolInputError:
        return False
    return name in kept


def validate_result(skill: Skill, value: Any) -> Any:
    """Check a ``skill_result`` against the skill's ``outputs`` (if any); return it coerced.

    Fields the schema does not list are allowed unless it sets ``additionalProperties``.

    Raises:
        SkillRunError: the result is missing or does not fit ``outputs``.
    """
    schema = skill.outputs
    if schema is None:
        return value
    if value is None:
        raise SkillRunError(
            f"skill {skill.name!r} declares outputs but its tree wrote no skill_result"
        )
    # made once per schema: its references are resolved once, in this copy
    schema = _schema_rules.per_list(schema, "open outputs", _open)
    try:
        return _arguments.validate_with_schema(f"{skill.name} outputs", schema, value)
    except ToolInputError as exc:
        problems = "; ".join(p.replace("argument", "field") for p in exc.problems)
        raise SkillRunError(
            f"skill {skill.name!r}: skill_result does not fit its outputs: {problems}"
        ) from None


@dataclass(kw_only=True, eq=False)
class BTSkillContext:
    """What ``build_tree(ctx)`` receives, and how the caller reads the result afterwards."""

    skill: Skill
    """The skill being run."""
    inputs: dict[str, Any]
    """The resolved, validated inputs."""
    state: StateView
    """The skill run's namespace of the state; the tree's nodes read and write here."""
    tools: ToolSet
    """The skill's tools."""
    namespace: str
    """The namespace's name."""
    skill_result_key: str = "skill_result"
    """The state key (in the namespace) the tree writes its result to."""
    run: RunContext | None = None
    """The run context, once known (set by `run_bt_skill`, the tool, or the caller)."""

    @classmethod
    def create(
        cls,
        skill: Skill,
        *,
        state_manager: StateManager,
        inputs: Mapping[str, Any] | None = None,
        namespace: str | None = None,
        tools: ToolSet | None = None,
        custom_tools: Iterable[Tool] = (),
        skill_result_key: str = "skill_result",
        run: RunContext | None = None,
    ) -> BTSkillContext:
        """Resolve the inputs against the global state and build the context.

        Raises:
            SkillRunError: the skill is not a bt skill, or its inputs do not resolve.
        """
        if not skill.is_bt:
            raise SkillRunError(
                f"skill {skill.name!r} is a prompt skill; only 'execution: bt' skills build trees"
            )
        resolved = resolve_inputs(skill, inputs, state_manager.root)
        namespace = namespace or f"skill_runtime.bt.{skill.name}.{uuid.uuid4().hex[:8]}"
        return cls(
            skill=skill,
            inputs=resolved,
            state=state_manager.scope(namespace),
            tools=tools if tools is not None else skill.toolset(custom_tools),
            namespace=namespace,
            skill_result_key=skill_result_key,
            run=run,
        )

    @property
    def approval_scope(self) -> str:
        """What approval ids of this run share: the skill and a hash of its inputs."""
        return f"{self.skill.name}:{fingerprint(self.inputs)}"

    def tool(self, name: str) -> Tool:
        """The skill's tool called ``name``.

        Raises:
            ToolNotFoundError: the skill has no such tool.
        """
        return self.tools[name]

    def tool_node(
        self,
        tool: str | Tool,
        *,
        name: str | None = None,
        input_key: str | None = "input",
        output_key: str | None = "output",
        confirm: bool = False,
    ) -> GuardedToolNode:
        """A guarded tool node for one of the skill's tools (by name or instance).

        Args:
            tool: The tool or its name.
            name: The node's name (default: the tool's).
            input_key: The state key (in the namespace) holding the arguments.
            output_key: The state key the output is written to.
            confirm: Ask a person before each call unless a ``tool_policy`` rule allows the
                tool (the node runs a copy of the tool whose permission is ``user_confirm``).
        """
        found = self.tool(tool) if isinstance(tool, str) else tool
        if confirm and found.permission == "auto":
            found = copy.copy(found)
            found.permission = "user_confirm"
        return GuardedToolNode(
            name or found.name, found, input_key=input_key, output_key=output_key,
            approval_scope=self.approval_scope,
        )

    def result(self) -> Any:
        """The tree's ``skill_result``, validated against ``outputs``.

        Raises:
            SkillRunError: the result is missing or does not fit ``outputs``.
        """
        return validate_result(self.skill, self.state.get(self.skill_result_key))


TREE_MODULE_PREFIX = "jianmu._skill_trees"
"""Tree modules are imported as ``jianmu._skill_trees.<skill>_<hash of the path>``."""


TREE_IMPORT_TIMEOUT_S = 30.0
"""Seconds a tree module's import may take: one that loops at import is refused, not waited
for (a thread cannot be stopped: it goes on in the background, as a sync tool's does)."""


class SkillTreeLoader:
    """Imports bt skills' tree modules under private names and builds prepared trees.

    A module's code runs on a thread of its own for at most `TREE_IMPORT_TIMEOUT_S`;
    `load_module_async` and `build_async` wait for it without blocking the event loop. An
    import still running when its time is up is not started again for the same file (path and
    stamp) while its thread runs: a retry is refused at once.
    """

    def __init__(self) -> None:
        self._modules: dict[Path, tuple[Stamp, types.ModuleType]] = {}

    @staticmethod
    def module_name(skill: Skill) -> str:
        """The private module name of the skill's tree file."""
        assert skill.tree_path is not None
        where = os.path.join(skill.pinned.path, skill.tree_path.name)
        digest = hashlib.sha256(where.encode()).hexdigest()[:12]
        return f"{TREE_MODULE_PREFIX}.{skill.name.replace('-', '_')}_{digest}"

    def load_module(self, skill: Skill) -> types.ModuleType:
        """Import (or re-import, if the file changed) the skill's tree module, blocking the
        caller until it is imported (use `load_module_async` on an event loop).

        Raises:
            SkillLoadError: not a bt skill, the file is missing, importing it raised (anything,
                a `BaseException` too) or took too long, or it has no callable ``build_tree``.
        """
        found = self._start(skill)
        if isinstance(found, types.ModuleType):
            return found
        return self._finish(skill, found, found.wait(TREE_IMPORT_TIMEOUT_S))

    async def load_module_async(self, skill: Skill) -> types.ModuleType:
        """`load_module`, awaiting the import's thread instead of blocking the event loop.

        Raises:
            SkillLoadError: as `load_module`.
        """
        found = self._start(skill)
        if isinstance(found, types.ModuleType):
            return found
        return self._finish(skill, found, await found.wait_async(TREE_IMPORT_TIMEOUT_S))

    def _start(self, skill: Skill) -> types.ModuleType | TreeImport:
        """The cached module of the file as it is, or its import (running, or started here)."""
        path = skill.tree_path
        if path is None:
            raise SkillLoadError(
                "a prompt skill has no tree; set 'execution: bt'", path=str(skill.file),
                field="execution",
            )
        try:
            # from the folder pinned when the skill was loaded, never by its path again
            status = skill.pinned.stat(path.name)
            source = read_tree_source(skill.pinned, path.name)
        except (OSError, PathEscapeError) as exc:
            missing = isinstance(exc, FileNotFoundError)
            raise SkillLoadError(
                f"the tree module {path.name!r} does not exist" if missing
                else f"the tree module {path.name!r} cannot be read: {exc}",
                path=str(skill.file), field="tree",
            ) from None
        stamp = (status.st_mtime_ns, status.st_size, hashlib.sha256(source).hexdigest())
        cached = self._modules.get(path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        return start_import(self.module_name(skill), source, str(path), stamp)

    def _finish(self, skill: Skill, started: TreeImport, finished: bool) -> types.ModuleType:
        """The module ``started`` imported, cached, or the `SkillLoadError` saying why not."""
        module = started.module
        path = skill.tree_path
        assert path is not None
        if not finished:
            forget(module)
            raise SkillLoadError(
                f"importing the tree module did not finish within {TREE_IMPORT_TIMEOUT_S} s and "
                "is still running in a thread that cannot be stopped (the file is not imported "
                "again until it changes or that import ends): does its top level loop or wait? "
                "Do the work in build_tree(ctx) or in the tree's nodes",
                path=str(path), field="build_tree",
            )
        exc = started.raised
        if exc is not None:
            # anything it raised, KeyboardInterrupt included: its thread gets no signals
            forget(module)
            raise SkillLoadError(
                f"importing the tree module {failure_text(exc)}",
                path=str(path), field="build_tree",
                # a SyntaxError has no frame of the file: it says its line itself
                line=line_in(exc, path) or getattr(exc, "lineno", None),
            ) from exc
        if not callable(getattr(module, "build_tree", None)):
            forget(module)
            raise SkillLoadError(
                f"{path.name} defines no callable build_tree(ctx)", path=str(path),
                field="build_tree",
            )
        sys.modules[module.__name__] = module  # the module in use is the one found by name
        self._modules[path] = (started.key[1], module)
        return module

    def build(self, skill: Skill, ctx: BTSkillContext) -> Behaviour:
        """Call ``build_tree(ctx)`` and prepare the tree for the skill's namespace and guard
        (use `build_async` on an event loop: the import may take `TREE_IMPORT_TIMEOUT_S`).

        Raises:
            SkillLoadError: the module cannot be loaded, ``build_tree`` raised or returned
                something other than a behaviour, or the tree uses an undeclared tool.
        """
        return self._build(self.load_module(skill), skill, ctx)

    async def build_async(self, skill: Skill, ctx: BTSkillContext) -> Behaviour:
        """`build`, awaiting the module's import instead of blocking the event loop.

        Raises:
            SkillLoadError: as `build`.
        """
        return self._build(await self.load_module_async(skill), skill, ctx)

    def _build(self, module: types.ModuleType, skill: Skill, ctx: BTSkillContext) -> Behaviour:
        """Call the module's ``build_tree(ctx)`` and prepare the tree (see `build`)."""
        path = str(skill.tree_path)
        try:
            tree = module.build_tree(ctx)
        except SkillLoadError:
            raise
        except BaseException as exc:  # sys.exit() or a BaseException of its own ended the caller
            if isinstance(exc, KeyboardInterrupt) and (
                    threading.current_thread() is threading.main_thread()):
                raise  # a person's Ctrl-C may land here, and must stop what runs
            raise SkillLoadError(
                f"build_tree {failure_text(exc, 'raised')}", path=path,
                line=line_in(exc, path), field="build_tree",
            ) from exc
        if not isinstance(tree, Behaviour):
            code = getattr(module.build_tree, "__code__", None)
            raise SkillLoadError(
                f"build_tree must return a py_trees behaviour, got {type(tree).__name__}",
                path=path, field="build_tree",
                line=code.co_firstlineno if code is not None and code.co_filename == path
                else None,
            )
        self.prepare(tree, ctx)
        return tree

    @staticmethod
    def prepare(tree: Behaviour, ctx: BTSkillContext) -> None:
        """Give every node the namespace, and every tool node the skill's name, constraints,
        guard and approval scope.

        Raises:
            SkillLoadError: a tool node uses a tool the skill does not declare.
        """
        skill = ctx.skill

        def walk(node: Behaviour, position: str) -> None:
            if isinstance(node, RuntimeNode) and node.namespace is None:
                node.namespace = ctx.namespace
            if isinstance(node, RuntimeNode):
                _refuse_plain_update(node, str(skill.tree_path))
            if isinstance(node, ToolNode):
                if node.tool.name.lower() not in ctx.tools:
                    declared = ", ".join(ctx.tools.names()) or "none"
                    raise SkillLoadError(
                        f"node {node.name!r} uses tool {node.tool.name!r}, which the skill does "
                        f"not declare (declared: {declared}); add it to 'tools'",
                        path=str(skill.file), field="tools",
                    )
                # every tool node of a skill passes the guard, whatever its tree asked for
                node.guarded = True
                if not node.guarded:  # a subclass of the tree's own that keeps it off
                    raise SkillLoadError(
                        f"node {node.name!r} is a tool node whose guard cannot be turned "
                        "on; a skill's tool nodes always pass the guard",
                        path=str(skill.file), field="tree",
                    )
                node.bt_skill = skill.name
                node.constraints = Constraints.merge(skill.constraints, node.constraints)
                node.approval_scope = ctx.approval_scope
                node.tree_position = position
            for index, child in enumerate(node.children):
                walk(child, f"{position}/{index}")

        walk(tree, "0")


_STATUSES = frozenset({"SUCCESS", "FAILURE", "RUNNING", "INVALID"})


def _refuse_plain_update(node: Behaviour, path: str) -> None:
    """Refuse a node of the tree module whose ``update_async`` is a plain ``def`` returning
    a status: it would run, side effects and all, at its first tick, then fail its run.

    Raises:
        SkillLoadError: naming the tree module and the line of the ``def``.
    """
    method = getattr(type(node), "update_async", None)
    code = getattr(method, "__code__", None)
    if method is None or code is None or code.co_filename != path or (
            inspect.iscoroutinefunction(method)):
        return
    import ast
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(method)))
    except (OSError, TypeError, SyntaxError):
        return
    returns = [n.value for n in ast.walk(tree) if isinstance(n, ast.Return)]
    # only a plain def that returns statuses is surely wrong; one may return a coroutine
    if returns and all(isinstance(v, ast.Attribute) and v.attr in _STATUSES for v in returns):
        raise SkillLoadError(
            f"node {node.name!r}: {type(node).__name__}.update_async is a plain def; write "
            "'async def update_async(self) -> Status' (a plain def runs when called, blocking "
            "the run)", path=path, line=code.co_firstlineno, field="build_tree",
        )


@dataclass
class SubtreeOutcome:
    """How a subtree run ended."""

    status: str
    """``success``, ``failure``, ``suspended`` or ``timeout``."""
    error: str | None = None
    """Why it failed."""
    pending: list[ApprovalRequest] = field(default_factory=list)
    """The requests it waits for (when suspended)."""


def child_context(ctx: RunContext, wake: asyncio.Event) -> RunContext:
    """The outer context with a wake-up of the subtree's own and its own cleanup lists."""
    loop = asyncio.get_running_loop()
    loop_thread = threading.get_ident()

    def wake_up() -> None:
        if threading.get_ident() == loop_thread:
            wake.set()
        else:
            try:
                loop.call_soon_threadsafe(wake.set)
            except RuntimeError:  # the loop has closed: nothing to wake
                pass

    # a copy of what the tool was given: the run as its node sees it (its namespace's channel)
    return copy_of(ctx, wake=wake_up, cancelled_tasks=set(), closers=[], runner=None)


def bind_tree(node: Behaviour, manager: StateManager, ctx: RunContext, path: str) -> None:
    """Bind ``node`` and everything below it to a run driven without a runner (`drive_subtree`):
    state, context and paths (a child's label is its name, with its index if a sibling shares
    it)."""
    bind = getattr(node, "bind", None)
    if callable(bind):
        bind(manager, ctx, path)
    names = [c.name for c in node.children]
    for index, child in enumerate(node.children):
        label = child.name if names.count(child.name) == 1 else f"{child.name}[{index}]"
        bind_tree(child, manager, ctx, f"{path}/{label}")


async def drive_subtree(
    root: Behaviour,
    manager: StateManager,
    ctx: RunContext,
    *,
    path: str,
    wake: asyncio.Event,
    timeout: float | None = None,
) -> SubtreeOutcome:
    """Bind, set up and tick ``root`` until it finishes, asks for approval or times out.

    ``ctx`` should come from `child_context` with the same ``wake`` event. The subtree is
    stopped (its tasks cancelled and awaited) and ``ctx.closers`` are awaited before returning.
    """
    bind_tree(root, manager, ctx, path)
    root.setup_with_descendants()
    deadline = None if timeout is None else time.monotonic() + timeout
    # py_trees' semantics: what needs a tick that no event brings
    ticker = Ticker(ctx.config.runtime.poll_interval)
    try:
        while True:
            wake.clear()
            plan = ticker.tick(root, wake)
            if root.status is Status.SUCCESS:
                return SubtreeOutcome("success")
            if root.status in (Status.FAILURE, Status.INVALID):
                return SubtreeOutcome("failure", failure_reason(root))
            interaction = ctx.interaction
            mine = [
                r for r in (interaction.pending if interaction is not None else [])
                if (r.node or "").startswith(path)
            ]
            if mine:
                return SubtreeOutcome("suspended", pending=mine)
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return SubtreeOutcome("timeout", f"the skill timed out after {timeout} s")
            if plan.again:  # yield to the loop, then tick at once
                await asyncio.sleep(0)
                continue
            wait = plan.wait(remaining, ctx.config.runtime.poll_interval)
            try:
                await asyncio.wait_for(wake.wait(), wait)
            except TimeoutError:
                if remaining is not None and wait is not None and wait >= remaining:
                    return SubtreeOutcome("timeout", f"the skill timed out after {timeout} s")
    finally:
        # every node left running, each once: a tick that raised midway left the statuses
        # above the raise unset, and stopping the root alone left their leaves' tasks running
        stop_running_nodes(root)
        while ctx.cancelled_tasks:
            batch = list(ctx.cancelled_tasks)
            ctx.cancelled_tasks.clear()
            await asyncio.gather(*batch, return_exceptions=True)
        for closer in [*ctx.closers, lambda: close_tree(root)]:
            try:
                await closer()
            except Exception as exc:  # cleanup must not hide the skill's outcome
                ctx.events.emit("run.cleanup_failed", error=f"{type(exc).__name__}: {exc}")


Approver = Callable[["ApprovalRequest"], "bool | Awaitable[bool]"]


async def run_bt_skill(
    skill: Skill,
    *,
    inputs: Mapping[str, Any] | None = None,
    state_manager: StateManager | None = None,
    config: AppConfig | None = None,
    constraints: Constraints | None = None,
    tools: ToolSet | None = None,
    custom_tools: Iterable[Tool] = (),
    approve: Approver | None = None,
    timeout: float | None = None,
    keep_namespace: bool = False,
    loader: SkillTreeLoader | None = None,
) -> Any:
    """Run a bt skill on its own `ReactiveRunner` and return its validated ``skill_result``.

    Args:
        skill: A bt skill.
        inputs: Explicit inputs (the global state and the defaults fill the rest).
        state_manager: The state (default: a free-form one); the skill runs in a namespace.
        config: The configuration (default: `jianmu.config.default_config`).
        constraints: The caller's layer of constraints.
        tools: The tools (default: the skill's declared tools, built-in or ``custom_tools``).
        custom_tools: Tools besides the built-ins.
        approve: Called with each approval request when the run suspends; returns (or awaits)
            True to approve. Without it, a suspension raises `SkillRunError`.
        timeout: Seconds the run may take (default: the merged constraints' ``timeout``).
        keep_namespace: Keep the namespace after the run (for debugging).
        loader: A `SkillTreeLoader` to reuse its module cache.

    Raises:
        SkillRunError: bad inputs, the tree failed or timed out, a request was rejected or
            nobody could approve, or the result does not fit ``outputs``.
        SkillLoadError: the tree module is broken.
    """
    manager = state_manager if state_manager is not None else StateManager()
    bt = BTSkillContext.create(
        skill, state_manager=manager, inputs=inputs, tools=tools, custom_tools=custom_tools
    )
    tree = await (loader or SkillTreeLoader()).build_async(skill, bt)
    runner = ReactiveRunner(tree, manager, config=config,
                            constraints=Constraints.merge(constraints, skill.constraints))
    bt.run = runner.ctx
    limit = timeout if timeout is not None else runner.ctx.constraints.timeout
    try:
        while True:
            outcome = await runner.run(timeout=limit)
            if outcome.status is RunStatus.SUSPENDED:
                if approve is None:
                    asked = "; ".join(r.summary or r.id for r in outcome.pending)
                    raise SkillRunError(
                        f"skill {skill.name!r} waits for approval ({asked}); pass approve= to "
                        "decide, or run its tree on a ReactiveRunner and call approve()"
                    )
                for request in outcome.pending:
                    answer = approve(request)
                    if inspect.isawaitable(answer):
                        answer = await answer
                    if answer:
                        runner.approve(request.id)
                    else:
                        runner.reject(request.id, "rejected by the caller")
                continue
            if not outcome.ok:
                raise SkillRunError(
                    f"skill {skill.name!r} {outcome.status.value}: {outcome.error or 'no reason'}"
                )
            return bt.result()
    finally:
        if not keep_namespace:
            manager.clear_namespace(bt.namespace)


MAX_SKILL_DEPTH = 8
"""How many behaviour-tree skill runs may be nested, one inside another's tree."""
_DEPTH: contextvars.ContextVar[int] = contextvars.ContextVar("jianmu_bt_skill_depth", default=0)
"""The run_bt_skill runs around the current task (tasks started inside inherit it)."""


class RunBTSkillTool(Tool):
    """``run_bt_skill``: the model runs one of the given bt skills with inputs; the output is
    the skill's validated ``skill_result``.

    Each call runs the skill's tree in a namespace of its own
    (``<caller's namespace>.bt.<skill>.<call id>``, or ``skill_runtime.bt...`` at the root),
    removed afterwards, with the outer run's event bus, interaction channel, config and roles.
    The result is also written to the caller's ``skill_result`` (its namespace, when it has
    one; the root, when its schema has the key), which a `SkillNode` writes back.

    Approvals: when a tool in the tree needs confirmation, the request goes to the outer run's
    interaction channel, so the outer run suspends and a person sees it like any other tool
    call; the tool call itself returns at once with an error saying so (it never holds a tool
    call open while a person decides). Request ids depend on the skill, its inputs and the
    node, so once the request is approved, calling ``run_bt_skill`` again with the same skill
    and inputs runs through (a rejection makes that call fail with the person's message).

    Args:
        skills: The skills; prompt skills among them are ignored.
        tools: Tools for the trees (default: each skill's declared tools).
        custom_tools: Tools besides the built-ins.
        skill_result_key: The state key the trees write their result to.
        listed: The skills' descriptions and inputs are in the model's prompt already (a
            `SkillNode`'s progressive list): the tool's description names them only.

    Raises:
        ValueError: no bt skill among ``skills``.
    """

    name = "run_bt_skill"
    category = "write"
    injected_params = ("state", "call_id")  # ctx is a RunContext: injected by its type
    timeout_seconds = None  # the skill's own constraints (timeout) bound the run
    max_result_length = 20000

    def __init__(
        self,
        skills: Iterable[Skill],
        *,
        tools: ToolSet | None = None,
        custom_tools: Iterable[Tool] = (),
        skill_result_key: str = "skill_result",
        loader: SkillTreeLoader | None = None,
        listed: bool = False,
    ) -> None:
        self.skills = {s.name: s for s in skills if s.is_bt}
        if not self.skills:
            raise ValueError("RunBTSkillTool needs at least one skill with 'execution: bt'")
        self.tools = tools
        self.custom_tools = list(custom_tools)
        self.skill_result_key = skill_result_key
        self.loader = loader or SkillTreeLoader()
        if listed:  # the prompt's list has each one's description and inputs: not twice a turn
            self.description = (
                "Run a behaviour-tree skill and return its structured result. The skills, with "
                "their descriptions and inputs, are listed under Skills in your instructions: "
                + ", ".join(self.skills)
            )
        else:
            lines = [
                f"- {skill.name}: {skill.description.strip()} Inputs: {describe_inputs(skill)}"
                for skill in self.skills.values()
            ]
            self.description = (
                "Run a behaviour-tree skill and return its structured result.\n"
                + "\n".join(lines)
            )
        self.input_schema = {
            "type": "object",
            "properties": {
                "skill": {"type": "string", "enum": list(self.skills),
                          "description": "The skill to run."},
                "inputs": {"type": "object", "description": "The skill's inputs by name."},
            },
            "required": ["skill"],
        }
        self.output_schema = {"description": "The skill's skill_result."}

    async def run(
        self,
        skill: str,
        inputs: dict[str, Any] | None = None,
        ctx: RunContext | None = None,
        state: StateView | None = None,
        call_id: str | None = None,
    ) -> Any:
        """Run the chosen skill's tree; return its validated ``skill_result``.

        Raises:
            ToolInputError: no such skill.
            SkillRunError: bad inputs, a failure, a pending or rejected approval, a bad result,
                or `MAX_SKILL_DEPTH` skills running one inside another already.
        """
        chosen = find_named(self.skills, skill)  # 'Report' or ' report' as a model writes it
        if chosen is None:
            raise ToolInputError(
                f"no behaviour-tree skill {skill!r} here; run one of: {', '.join(self.skills)}"
            )
        depth = _DEPTH.get()
        if depth >= MAX_SKILL_DEPTH:  # a skill whose tree calls itself never ended
            raise SkillRunError(
                f"skill {chosen.name!r} would run inside {depth} behaviour-tree skills already "
                f"running (the limit is {MAX_SKILL_DEPTH}): skills that call themselves or "
                "each other do not end; answer with what you have"
            )
        token = _DEPTH.set(depth + 1)
        try:
            return await self._run(chosen, inputs, ctx, state, call_id)
        finally:
            _DEPTH.reset(token)

    async def _run(self, chosen: Skill, inputs: dict[str, Any] | None, ctx: RunContext | None,
                   state: StateView | None, call_id: str | None) -> Any:
        """Run ``chosen``'s tree in a namespace of its own (see `run`)."""
        manager = state.manager if state is not None else StateManager()
        suffix = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in (call_id or ""))
        suffix = suffix or uuid.uuid4().hex[:8]
        parent = state.namespace if state is not None else None
        namespace = f"{parent or 'skill_runtime'}.bt.{chosen.name}.{suffix}"
        outer = ctx if ctx is not None else RunContext()
        wake = asyncio.Event()
        inner = child_context(outer, wake)
        bt = BTSkillContext.create(
            chosen, state_manager=manager, inputs=inputs, namespace=namespace, tools=self.tools,
            custom_tools=self.custom_tools, skill_result_key=self.skill_result_key, run=inner,
        )
        tree = await self.loader.build_async(chosen, bt)
        limit = Constraints.merge(outer.constraints, chosen.constraints).timeout
        # the skill and its inputs, not the call: a call made again once a person approved finds
        # the approval of what a node in its tree asked (a SkillNode's tools too) at one path
        root_path = f"run_bt_skill:{bt.approval_scope}"
        outer.events.emit("bt.skill.started", skill=chosen.name, namespace=namespace,
                          inputs=bt.inputs)
        try:
            outcome = await drive_subtree(tree, manager, inner, path=root_path, wake=wake,
                                          timeout=limit)
            outer.events.emit("bt.skill.finished", skill=chosen.name, status=outcome.status,
                              error=outcome.error)
            if outcome.status == "suspended":
                outer.wake()  # the outer runner notices the pending request and suspends
                asked = "; ".join(r.summary or r.id for r in outcome.pending)
                raise SkillRunError(
                    f"skill {chosen.name!r} needs a person's approval before it can go on "
                    f"({asked}). The run is suspended until they decide; once approved, call "
                    "run_bt_skill again with the same skill and inputs"
                )
            if outcome.status != "success":
                raise SkillRunError(
                    f"skill {chosen.name!r} {outcome.status}: {outcome.error or 'no reason'}"
                )
            result = bt.result()
            # the caller's namespace keeps it (the call's own is cleared below; none is made
            # for it): a SkillNode writes it back to the enclosing state, as its answer
            if state is not None and (
                    parent in manager.namespaces() if parent is not None
                    else manager.accepts(self.skill_result_key)):
                state.write_port(self.skill_result_key, result)
            return result
        finally:
            manager.clear_namespace(namespace)
