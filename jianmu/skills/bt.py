"""Running behaviour-tree skills: `run_bt_skill` (from Python) and `RunBTSkillTool` (the model).

The skill's tree comes from `SkillTreeLoader` (`jianmu.skills.bt_loader`) and receives a
`BTSkillContext` (`jianmu.skills.bt_context`); both are re-exported here.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from jianmu.constraints import Constraints
from jianmu.errors import SkillRunError
from jianmu.runtime.context import RunContext
from jianmu.runtime.runner import ReactiveRunner, RunStatus
from jianmu.skills._bt_driver import child_context, drive_subtree
from jianmu.skills.bt_context import (
    BTSkillContext,
    describe_inputs,
    resolve_inputs,
    validate_result,
)
from jianmu.skills.bt_loader import TREE_MODULE_PREFIX, SkillTreeLoader
from jianmu.skills.skill import Skill
from jianmu.state import StateManager
from jianmu.tools.base import Tool
from jianmu.tools.registry import ToolSet

if TYPE_CHECKING:
    from jianmu.config import AppConfig
    from jianmu.runtime.interaction import ApprovalRequest
    from jianmu.state import StateView

__all__ = (
    "TREE_MODULE_PREFIX",
    "BTSkillContext",
    "RunBTSkillTool",
    "SkillTreeLoader",
    "resolve_inputs",
    "run_bt_skill",
    "validate_result",
)

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
            lines.append(
                f"- {skill.name}: {skill.description.strip()} Inputs: {describe_inputs(skill)}"
            )
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
