"""Behaviour-tree skills: `SkillTreeLoader`, `BTSkillContext`, `run_bt_skill` and
`RunBTSkillTool`.

A bt skill's ``tree.py`` defines ``build_tree(ctx: BTSkillContext) -> Behaviour``. The loader
imports it under a private module name (one per file, replaced when the file changes), then
prepares the tree: every runtime node gets the skill run's namespace, and every ``ToolNode``
gets the skill's name (for ``bt.skill.node.io`` events), the SKILL.md constraints as its layer,
and the guard (a plain ``ToolNode`` becomes a `GuardedToolNode`): a skill's tools never run
past its policies. A tool the skill does not declare in ``tools`` is a load error.

Inputs resolve in the seed's order: the explicit inputs, then the global state's field of the
same name, then the schema's default. The tree writes ``skill_result`` (``skill_result_key``)
in its namespace; `BTSkillContext.result` validates it against ``outputs``.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import os
import sys
import traceback
import types
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from py_trees.behaviour import Behaviour

from jianmu.constraints import Constraints
from jianmu.errors import SkillLoadError, SkillRunError, ToolInputError
from jianmu.nodes.tool_node import ToolNode
from jianmu.runtime.async_node import RuntimeNode
from jianmu.skills._guarded import GuardedToolNode
from jianmu.skills.skill import Skill
from jianmu.tools import _arguments
from jianmu.tools.base import Tool
from jianmu.tools.toolset import ToolSet

if TYPE_CHECKING:
    from jianmu.config import AppConfig
    from jianmu.runtime.context import RunContext
    from jianmu.runtime.interaction import ApprovalRequest
    from jianmu.state import StateManager, StateView

__all__ = (
    "TREE_MODULE_PREFIX",
    "BTSkillContext",
    "RunBTSkillTool",
    "SkillTreeLoader",
    "resolve_inputs",
    "run_bt_skill",
    "validate_result",
)

TREE_MODULE_PREFIX = "jianmu._skill_trees"
"""Tree modules are imported as ``jianmu._skill_trees.<skill>_<hash of the path>``."""

_MISSING: Any = object()


def fingerprint(value: Any) -> str:
    """A short stable hash of a JSON-able value."""
    text = json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# -- inputs and outputs ----------------------------------------------------------------------


def resolve_inputs(
    skill: Skill, explicit: Mapping[str, Any] | None = None, global_state: Any = None
) -> dict[str, Any]:
    """The skill's inputs: explicit values, then the global state's field of the same name,
    then the schema's default; validated against ``inputs``.

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
        return _arguments.validate_with_schema(f"{skill.name} inputs", schema, values)
    except ToolInputError as exc:
        problems = "; ".join(exc.problems)
        raise SkillRunError(
            f"skill {skill.name!r}: invalid inputs: {problems}. Pass inputs explicitly, set the "
            "state field of the same name, or give the field a default in SKILL.md"
        ) from None


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
    schema = {"additionalProperties": True, **schema}
    try:
        return _arguments.validate_with_schema(f"{skill.name} outputs", schema, value)
    except ToolInputError as exc:
        problems = "; ".join(p.replace("argument", "field") for p in exc.problems)
        raise SkillRunError(
            f"skill {skill.name!r}: skill_result does not fit its outputs: {problems}"
        ) from None


# -- the context handed to build_tree ---------------------------------------------------------


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
            name or found.name, found, input_key=input_key, output_key=output_key
        )

    def result(self) -> Any:
        """The tree's ``skill_result``, validated against ``outputs``.

        Raises:
            SkillRunError: the result is missing or does not fit ``outputs``.
        """
        return validate_result(self.skill, self.state.get(self.skill_result_key))


# -- loading tree modules ---------------------------------------------------------------------


class SkillTreeLoader:
    """Imports bt skills' tree modules under private names and builds prepared trees."""

    def __init__(self) -> None:
        self._modules: dict[Path, tuple[tuple[int, int], types.ModuleType]] = {}

    @staticmethod
    def module_name(skill: Skill) -> str:
        """The private module name of the skill's tree file."""
        assert skill.tree_path is not None
        digest = hashlib.sha256(str(skill.tree_path.resolve()).encode()).hexdigest()[:12]
        return f"{TREE_MODULE_PREFIX}.{skill.name.replace('-', '_')}_{digest}"

    def load_module(self, skill: Skill) -> types.ModuleType:
        """Import (or re-import, if the file changed) the skill's tree module.

        Raises:
            SkillLoadError: not a bt skill, the file is missing, importing it raised, or it has
                no callable ``build_tree``.
        """
        path = skill.tree_path
        if path is None:
            raise SkillLoadError(
                "a prompt skill has no tree; set 'execution: bt'", path=str(skill.file),
                field="execution",
            )
        try:
            stat = path.stat()
        except OSError:
            raise SkillLoadError(
                f"the tree module {path.name!r} does not exist", path=str(skill.file), field="tree"
            ) from None
        stamp = (stat.st_mtime_ns, stat.st_size)
        cached = self._modules.get(path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        name = self.module_name(skill)
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses and pickling look the module up by name
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            sys.modules.pop(name, None)
            # tracebacks name the file as it was imported; compare real paths
            real = os.path.realpath(path)
            frames = [
                f for f in traceback.extract_tb(exc.__traceback__)
                if os.path.realpath(f.filename) == real
            ]
            line = frames[-1].lineno if frames else getattr(exc, "lineno", None)
            raise SkillLoadError(
                f"importing the tree module failed: {type(exc).__name__}: {exc}",
                path=str(path), line=line, field="build_tree",
            ) from exc
        if not callable(getattr(module, "build_tree", None)):
            sys.modules.pop(name, None)
            raise SkillLoadError(
                f"{path.name} defines no callable build_tree(ctx)", path=str(path),
                field="build_tree",
            )
        self._modules[path] = (stamp, module)
        return module

    def build(self, skill: Skill, ctx: BTSkillContext) -> Behaviour:
        """Call ``build_tree(ctx)`` and prepare the tree for the skill's namespace and guard.

        Raises:
            SkillLoadError: the module cannot be loaded, ``build_tree`` raised or returned
                something other than a behaviour, or the tree uses an undeclared tool.
        """
        module = self.load_module(skill)
        path = str(skill.tree_path)
        try:
            tree = module.build_tree(ctx)
        except SkillLoadError:
            raise
        except Exception as exc:
            frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == path]
            raise SkillLoadError(
                f"build_tree raised {type(exc).__name__}: {exc}", path=path,
                line=frames[-1].lineno if frames else None, field="build_tree",
            ) from exc
        if not isinstance(tree, Behaviour):
            raise SkillLoadError(
                f"build_tree must return a py_trees behaviour, got {type(tree).__name__}",
                path=path, field="build_tree",
            )
        self.prepare(tree, ctx)
        return tree

    @staticmethod
    def prepare(tree: Behaviour, ctx: BTSkillContext) -> None:
        """Give every node the namespace, and every tool node the skill's name, constraints
        and guard.

        Raises:
            SkillLoadError: a tool node uses a tool the skill does not declare.
        """
        skill = ctx.skill

        def walk(node: Behaviour, position: str) -> None:
            if isinstance(node, RuntimeNode) and node.namespace is None:
                node.namespace = ctx.namespace
            if isinstance(node, ToolNode):
                if node.tool.name.lower() not in ctx.tools:
                    declared = ", ".join(ctx.tools.names()) or "none"
                    raise SkillLoadError(
                        f"node {node.name!r} uses tool {node.tool.name!r}, which the skill does "
                        f"not declare (declared: {declared}); add it to 'tools'",
                        path=str(skill.file), field="tools",
                    )
                if type(node) is ToolNode:
                    node.__class__ = GuardedToolNode  # same fields; adds the guard check
                elif not isinstance(node, GuardedToolNode):
                    # a ToolNode subclass of the tree's own keeps its class, not its switch:
                    # `guarded=False` would run the tool past the guard
                    node.guarded = True
                    if not node.guarded:
                        raise SkillLoadError(
                            f"node {node.name!r} is a tool node whose guard cannot be turned "
                            "on; a skill's tool nodes always pass the guard",
                            path=str(skill.file), field="tree",
                        )
                node.bt_skill = skill.name
                node.constraints = Constraints.merge(skill.constraints, node.constraints)
                if isinstance(node, GuardedToolNode):
                    node.approval_scope = ctx.approval_scope
                    node.tree_position = position
            for index, child in enumerate(node.children):
                walk(child, f"{position}/{index}")

        walk(tree, "0")


# -- running a bt skill directly --------------------------------------------------------------

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
        config: The configuration (default `AppConfig()`).
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
    import inspect

    from jianmu.runtime.runner import ReactiveRunner, RunStatus
    from jianmu.state import StateManager

    manager = state_manager if state_manager is not None else StateManager()
    bt = BTSkillContext.create(
        skill, state_manager=manager, inputs=inputs, tools=tools, custom_tools=custom_tools
    )
    tree = (loader or SkillTreeLoader()).build(skill, bt)
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

# -- the tool the model calls ------------------------------------------------------------------


class RunBTSkillTool(Tool):
    """``run_bt_skill``: the model runs one of the given bt skills with inputs; the output is
    the skill's validated ``skill_result``.

    Each call runs the skill's tree in a namespace of its own
    (``<caller's namespace>.bt.<skill>.<call id>``, or ``skill_runtime.bt...`` at the root),
    removed afterwards, with the outer run's event bus, interaction channel, config and roles.

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

    Raises:
        ValueError: no bt skill among ``skills``.
    """

    name = "run_bt_skill"
    category = "write"
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
    ) -> None:
        self.skills = {s.name: s for s in skills if s.is_bt}
        if not self.skills:
            raise ValueError("RunBTSkillTool needs at least one skill with 'execution: bt'")
        self.tools = tools
        self.custom_tools = list(custom_tools)
        self.skill_result_key = skill_result_key
        self.loader = loader or SkillTreeLoader()
        lines = []
        for skill in self.skills.values():
            inputs = (skill.inputs or {}).get("properties") or {}
            shown = ", ".join(
                f"{k}: {v.get('type', 'any')}" if isinstance(v, dict) else k
                for k, v in inputs.items()
            )
            lines.append(f"- {skill.name}: {skill.description.strip()} Inputs: {{{shown}}}")
        self.description = (
            "Run a behaviour-tree skill and return its structured result.\n" + "\n".join(lines)
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
            SkillRunError: bad inputs, a failure, a pending or rejected approval, a bad result.
        """
        import asyncio

        from jianmu.runtime.context import RunContext
        from jianmu.skills._bt_driver import child_context, drive_subtree
        from jianmu.state import StateManager

        chosen = self.skills[skill]
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
        tree = self.loader.build(chosen, bt)
        limit = Constraints.merge(outer.constraints, chosen.constraints).timeout
        root_path = f"run_bt_skill:{chosen.name}:{suffix}"
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
            return bt.result()
        finally:
            manager.clear_namespace(namespace)
