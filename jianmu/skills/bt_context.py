"""`BTSkillContext`: what a bt skill's ``build_tree(ctx)`` receives; its inputs and result.

Inputs resolve in the seed's order: the explicit inputs, then the global state's field of the
same name, then the schema's default. The tree writes ``skill_result`` (``skill_result_key``)
in its namespace; `BTSkillContext.result` validates it against ``outputs``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jianmu.errors import SkillRunError, ToolInputError
from jianmu.skills._guarded import GuardedToolNode
from jianmu.skills.skill import Skill
from jianmu.tools import _arguments
from jianmu.tools.base import Tool
from jianmu.tools.registry import ToolSet

if TYPE_CHECKING:
    from jianmu.runtime.context import RunContext
    from jianmu.state import StateManager, StateView

__all__ = (
    "BTSkillContext",
    "describe_inputs",
    "fingerprint",
    "resolve_inputs",
    "validate_result",
)

_MISSING: Any = object()


def fingerprint(value: Any) -> str:
    """A short stable hash of a JSON-able value."""
    text = json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# -- inputs and outputs ----------------------------------------------------------------------


def describe_inputs(skill: Skill) -> str:
    """The skill's inputs in one line for the model: ``{path: string, depth: integer}``."""
    inputs = (skill.inputs or {}).get("properties") or {}
    shown = ", ".join(
        f"{k}: {v.get('type', 'any')}" if isinstance(v, dict) else k for k, v in inputs.items()
    )
    return f"{{{shown}}}"


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
            name or found.name, found, input_key=input_key, output_key=output_key,
            approval_scope=self.approval_scope,
        )

    def result(self) -> Any:
        """The tree's ``skill_result``, validated against ``outputs``.

        Raises:
            SkillRunError: the result is missing or does not fit ``outputs``.
        """
        return validate_result(self.skill, self.state.get(self.skill_result_key))
