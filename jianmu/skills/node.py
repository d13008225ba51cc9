"""`FlattenedAgentNode` and `SkillNode`: skills compiled into a subtree on first tick.

The MCP servers that the skills name are started with the run, and their tools registered on
the node's executor (`connect_mcp_tools`).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import py_trees
from py_trees.common import Status
from pydantic import BaseModel, ConfigDict, Field

from jianmu._text import visible
from jianmu.constraints import DEFAULT_MAX_ITERATIONS, Constraints, SkillConstraints
from jianmu.errors import MCPError, PathEscapeError, SkillLoadError
from jianmu.guard import visible_tools
from jianmu.llm.messages import Message
from jianmu.llm.provider import LLMProvider
from jianmu.nodes.tool_executor import ToolExecutorConfig
from jianmu.runtime.async_node import RuntimeNode
from jianmu.runtime.context import RunContext
from jianmu.skills.disclosure import (
    DEFAULT_EAGER_MAX_CHARS,
    DEFAULT_LISTING_MAX_CHARS,
    Disclosure,
    LoadSkillTool,
    eager_prompt,
    is_progressive,
    listing_prompt,
)
from jianmu.tools.base import Tool
from jianmu.tools.registry import ToolSet

# The modules a skill's subtree is compiled from (the ReAct loop, the catalog, skills, the skill
# and BT-skill tools, the built-in bash) load on the first tick, not with the node's class.
if TYPE_CHECKING:
    from jianmu.guard.guardrails import Guardrail
    from jianmu.mcp import MCPClient, MCPToolProvider
    from jianmu.nodes.output import OutputMode, OutputSpec
    from jianmu.nodes.react import ReActLoop
    from jianmu.nodes.tool_executor import ToolExecutor
    from jianmu.skills.catalog import SkillCatalog
    from jianmu.skills.skill import Skill
    from jianmu.state import StateView

__all__ = (
    "FlattenedAgentNode",
    "PrepareSkillContext",
    "SkillNode",
    "SkillNodeConfig",
    "connect_mcp_tools",
    "mcp_references",
    "merge_skill_constraints",
)

logger = logging.getLogger("jianmu.mcp")


_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def merge_skill_constraints(base: Constraints | None, skills: Iterable[Skill]) -> Constraints:
    """Merge the skills' SKILL.md constraints under ``base`` (config and node layers).

    A skill's layer may only tighten what would really apply — the
    config's and the node's settings over the built-in defaults (see `jianmu.constraints`).

    Raises:
        ConfigError: a skill picks a workdir outside the effective one, another Docker image,
            or ``mode: local`` under Docker.
    """
    layers = (SkillConstraints.of(skill.constraints) for skill in skills)
    return Constraints.merge(base if base is not None else Constraints(), *layers)


class SkillNodeConfig(BaseModel):
    """A `SkillNode`'s own settings: its layer of constraints, history and seed messages."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    constraints: Constraints | None = None
    """The node's layer, between the config and the skills (tighten only)."""
    history_limit: int | None = Field(default=None, ge=0)
    """Messages of the global conversation the skill sees; default the skills' or config's."""
    seed_messages: list[Message] = Field(default_factory=list)
    """Messages the host adds to the skill's conversation after the history."""
    system_prompt: str = (
        "You are an agent that completes the task with the tools you are given. "
        "Follow the skill's instructions below."
    )
    """The system prompt; the skills' bodies (or their list) are appended to it."""
    executor: ToolExecutorConfig | None = None
    """How the skill's tool batches run."""
    disclosure: Disclosure = "auto"
    """``progressive``: the prompt lists each skill's name and description, and a skill's body,
    tools and constraints arrive when the model calls ``load_skill``; ``eager``: the bodies are
    in the prompt and every skill is active from the start; ``auto``: progressive when the node
    holds several skills or the bodies exceed ``eager_max_chars``."""
    eager_max_chars: int = Field(default=DEFAULT_EAGER_MAX_CHARS, ge=0)
    """Characters of prompt-skill bodies that ``auto`` still puts into the prompt."""
    listing_max_chars: int = Field(default=DEFAULT_LISTING_MAX_CHARS, ge=0)
    """Characters of skill descriptions the progressive list puts into the prompt; the skills
    past them are listed by name only."""


class FlattenedAgentNode(RuntimeNode, py_trees.decorators.Decorator):
    """A decorator that compiles its subtree on its first tick and runs it in a namespace.

    The namespace (``skill_runtime.<Name>_<path indices>``, in the run's own namespace if it
    has one: an agent tool's call's) follows from the node's place in the tree, so it is the
    same after a restore; the node and everything below it read and
    write there. ``outer_state`` is the view the node was placed in, for copying the
    conversation in and the results out. The namespace is removed in ``terminate()``; when the
    subtree fails, a JSON snapshot of it is written to ``config.runtime.debug_dir`` first. A
    node the runner stops (the run's timeout, ``cancel()``) keeps it, and the next run goes on
    from it (`resumed`), as a sub-agent's call goes on where it was halted.

    Subclasses implement `compile_subtree` and may override `on_success`.
    """

    node_kind = "skill"

    def __init__(self, name: str, *, timeout: float | None = None) -> None:
        super().__init__(name=name, child=py_trees.behaviours.Running(f"{name}.uncompiled"))
        self.timeout = timeout
        self.outer_state: StateView | None = None
        self.debug_snapshot_path: Path | None = None
        self._compiled = False
        self.resumed = False
        """Whether this run of the node goes on in the namespace a run the runner stopped left
        (every other end removes it)."""
        self._expired = False
        self._ended: str | None = None
        """The namespace of the subtree's last run that ended (not stopped by the runner), until
        the node starts again: what its stopped calls write late is removed."""
        self._timer: asyncio.TimerHandle | None = None
        self._started_at: float | None = None

    # -- to implement ----------------------------------------------------------------------------
    def compile_subtree(self) -> py_trees.behaviour.Behaviour:
        """Build the subtree; called once, after the runner has bound the node."""
        raise NotImplementedError(f"{type(self).__name__} must implement compile_subtree()")

    def on_success(self) -> None:
        """Called when the subtree succeeds, before the namespace is removed."""

    def effective_timeout(self) -> float | None:
        """Seconds the subtree may run (``None``: no limit)."""
        return self.timeout

    # -- binding and compiling -------------------------------------------------------------------
    def bind(self, state_manager: Any, ctx: Any, path: str) -> None:
        """Attach the run; the outer view is the enclosing namespace's (or the root)."""
        super().bind(state_manager, ctx, path)
        if self._compiled:  # its subtree is bound next, in this run's namespace
            self._follow_run()
            self.state = state_manager.scope(self.namespace)
        outer = self._outer_namespace()
        self.outer_state = state_manager.scope(outer) if outer else state_manager.root

    def _outer_namespace(self) -> str | None:
        node = self.parent
        while node is not None:
            namespace = getattr(node, "namespace", None)
            if namespace:
                return str(namespace)
            node = node.parent
        return None

    @property
    def compiled(self) -> bool:
        """Whether the subtree has been built."""
        return self._compiled

    def compile(self) -> None:
        """Build the subtree now, derive the namespace and bind everything below."""
        if self._compiled:
            return
        self.namespace = self._run_namespace()
        subtree = self.compile_subtree()
        subtree.parent = self
        self.decorated = subtree
        self.children = [subtree]
        for node in subtree.iterate():
            node.namespace = self.namespace  # type: ignore[attr-defined]
        self.state = self.state_manager.scope(self.namespace)
        runner = self.ctx.runner
        if runner is not None:
            runner.bind_subtree(subtree)
        else:  # in a tree run_bt_skill drives (no runner): unbound, its first tick raised
            from jianmu.skills.bt import bind_tree

            bind_tree(subtree, self.state_manager, self.ctx, f"{self.path}/{subtree.name}")
        self._compiled = True
        self.ctx.events.emit("skill.compiled", node=self.path, namespace=self.namespace)

    def _run_namespace(self) -> str:
        """The namespace for this run: from the node's place in the tree, nested in the run's
        own namespace if it has one."""
        runner = self.ctx.runner
        # no runner (a tree run_bt_skill drives): the path names the call (its id) and the place
        key = runner.node_key(self) if runner is not None else _UNSAFE.sub("_", self.path or "0")
        own = f"skill_runtime.{_UNSAFE.sub('_', self.name)}_{key.replace('/', '_')}"
        # node keys are a run's own: in an agent tool's run, nested in the call's namespace,
        # so the same skill in two calls at once never shares one
        outer = getattr(self.ctx, "namespace", None)
        return f"{outer}.{own}" if outer else own

    def _follow_run(self) -> None:
        """Move the compiled subtree to this run's namespace before its nodes are bound: a
        tree that serves call after call of an agent tool runs each in the call's."""
        namespace = self._run_namespace()
        if namespace == self.namespace:
            return
        self.namespace = namespace
        for node in self.decorated.iterate():
            node.namespace = namespace  # type: ignore[attr-defined]

    def tick(self) -> Iterator[py_trees.behaviour.Behaviour]:
        """Compile on the first tick (also after a restore, when initialise is skipped)."""
        if not self._compiled:
            self.compile()
        yield from super().tick()

    # -- lifecycle -------------------------------------------------------------------------------
    def initialise(self) -> None:
        """Note whether the run goes on in a namespace a stopped run left; start the timeout
        clock, if the skill has one."""
        if self._ended:  # what the ended run's stopped calls wrote late is no run's
            self.state_manager.clear_namespace(self._ended)
            self._ended = None
        self.resumed = bool(self.namespace) and self.namespace in self.state_manager.namespaces()
        self._expired = False
        self._started_at = asyncio.get_running_loop().time()
        self.arm_timer()

    def arm_timer(self) -> None:
        """(Re)start the clock from the run's start, for a timeout that has changed."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        timeout = self.effective_timeout()
        if timeout and self._started_at is not None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_at(self._started_at + timeout, self._expire)

    def _expire(self) -> None:
        self._expired = True
        self.ctx.wake()

    def update(self) -> Status:
        """Mirror the subtree; write results out on success; fail when the time is up."""
        status = self.decorated.status
        if self._expired and status is Status.RUNNING:
            self.feedback_message = f"the skill did not finish within {self.effective_timeout()} s"
            return Status.FAILURE
        if status is Status.SUCCESS:
            self.on_success()
            return Status.SUCCESS
        if status is Status.FAILURE:
            reasons = [n.feedback_message for n in self.decorated.iterate() if n.feedback_message]
            self.feedback_message = reasons[-1] if reasons else "the skill's subtree failed"
            return Status.FAILURE
        return Status.RUNNING

    def terminate(self, new_status: Status) -> None:
        """Snapshot the namespace on failure, then remove it; keep it when the runner stops
        the run (a timeout, ``cancel()``): the next run goes on from it."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._started_at = None
        if not self._compiled or not self.namespace:
            return
        if new_status is Status.INVALID and getattr(self.ctx.runner, "halting", False):
            # the subtree's conversation and its record of calls stopped under way (maybe
            # done): dropped, the next run would start the skill afresh and its model ask
            # again for a payment that may have gone through, as a sub-agent's run keeps them
            return
        stopping: list[asyncio.Task[Any]] = []
        if self.decorated.status is Status.RUNNING:
            # stopped now (py_trees stops it after this), its calls would write their records
            # into the namespace after it went, and a later run take them as its own
            stopping = [t for n in self.decorated.iterate()
                        if (t := getattr(n, "in_flight", None)) is not None]
            self.decorated.stop(Status.INVALID)
        if new_status is Status.FAILURE:
            self.debug_snapshot_path = self._write_debug_snapshot()
        self.state_manager.clear_namespace(self.namespace)
        self._ended = self.namespace
        for task in stopping:  # a task's handlers write on its way out, a loop step later
            task.add_done_callback(functools.partial(self._clear_ended, self.namespace))

    def _clear_ended(self, namespace: str, _task: asyncio.Task[Any]) -> None:
        """Remove what a stopped task of the ended run wrote in ``namespace`` on its way out,
        unless the node has started again since."""
        if self._ended == namespace:
            self.state_manager.clear_namespace(namespace)

    def _write_debug_snapshot(self) -> Path | None:
        configured = Path(self.ctx.config.runtime.debug_dir)
        # one folder and one file: an agent tool's run id and namespace name its call with '/'
        folder, name = _one_part(self.ctx.run_id), _one_part(f"{self.namespace}.json")
        target = configured / folder / name
        payload = {
            "node": self.path,
            "namespace": self.namespace,
            "error": self.feedback_message,
            "time": time.time(),
            "state": self.state.snapshot(),
        }
        data = json.dumps(payload, indent=2, default=str).encode("utf-8")
        try:
            _write_without_links(configured, folder, name, data)
        except (OSError, PathEscapeError) as exc:  # a debug aid must not crash a failure
            self.ctx.events.emit("skill.debug_snapshot_failed", node=self.path, error=str(exc))
            return None
        self.ctx.events.emit("skill.debug_snapshot", node=self.path, path=str(target))
        return target


def _one_part(name: str) -> str:
    """``name`` as one path part: ``%`` and ``/`` escaped, one to one."""
    return name.replace("%", "%25").replace("/", "%2F")


def _write_without_links(configured: Path, folder: str, name: str, data: bytes) -> None:
    """Write ``data`` to ``configured/folder/name``, following no link below ``configured``
    (relative: below the engine's folder, often the workspace, where sandboxed code may have
    made ``.jianmu/debug`` a link to ``/etc``).

    Raises:
        PathEscapeError: a folder on the way is a symbolic link.
        OSError: the folder or the file could not be made.
    """
    from jianmu.tools.builtin._paths import open_dir_at

    if configured.is_absolute():
        configured.mkdir(parents=True, exist_ok=True)  # the operator's own path, as written
        top, parts = str(configured), [folder]
    else:
        top, parts = ".", [*configured.parts, folder]
    cloexec = getattr(os, "O_CLOEXEC", 0)
    top_fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | cloexec)
    try:
        dir_fd = open_dir_at(top_fd, parts, create=True)
    finally:
        os.close(top_fd)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | cloexec
        with os.fdopen(os.open(name, flags, 0o644, dir_fd=dir_fd), "wb") as fh:
            fh.write(data)
    finally:
        os.close(dir_fd)


class PrepareSkillContext(RuntimeNode, py_trees.behaviour.Behaviour):
    """Copies the recent global conversation and the host's seed messages into the skill."""

    def __init__(self, name: str, owner: SkillNode) -> None:
        super().__init__(name)
        self.owner = owner

    def update(self) -> Status:
        """Write the history and seed messages into the namespace."""
        outer = self.owner.outer_state
        limit = self.owner.history_limit()
        messages = list(outer.get("messages") or []) if outer is not None else []
        from jianmu.nodes.agent_llm import recent_messages

        owner, namespace = self.owner, self.owner.namespace or ""
        seen = owner.outer_seen.get(namespace)
        owner.outer_seen[namespace] = len(messages)
        if owner.resumed:
            # the conversation a stopped run left goes on (the calls it recorded as maybe done
            # in it), with what the enclosing one was told since (the user's next message)
            since = messages[seen:] if seen is not None and seen <= len(messages) else []
            added = recent_messages(since, limit) if limit else []
            if added:
                self.state.append_port_messages(added)
            return Status.SUCCESS
        history = recent_messages(messages, limit) if limit else []
        self.state.update({"messages": [*history, *owner.config.seed_messages]})
        return Status.SUCCESS


class SkillNode(FlattenedAgentNode):
    """Runs skills from SKILL.md folders with a ReAct loop, in a namespace of its own.

    On its first tick it loads the skills (`_load_skills`), merges the constraints of the
    config, the node and the active skills (`_merge_constraints`: a skill can only tighten),
    resolves their tools minus those whose policy is deny (`_resolve_tools`), and builds
    [prepare → ReAct]; ``max_iterations`` comes from the merged constraints. BT skills are the
    ``run_bt_skill`` tool; ``read_skill_file`` and ``run_skill_script`` reach the loaded
    skills' folders. The final answer (and a BT skill's ``skill_result``) is written back to
    the enclosing state.

    Disclosure (`SkillNodeConfig.disclosure`): eager, every body is in the system prompt and
    every skill is active; progressive, the prompt lists names and descriptions and the model
    calls ``load_skill``, which activates that skill for the rest of the node's run — its tools
    are offered from the next turn and its constraints merge in (tighten only). The loaded
    names are kept in the namespace's ``loaded_skills``, so a restored run has them again.

    Args:
        name: the node's name (part of the namespace).
        skills: skill names (looked up in the catalog) or `Skill` objects.
        llm: the model provider.
        catalog: where names are looked up; default a `SkillCatalog` over ``skills/`` and the
            config's ``skills.paths``.
        config: the node's settings.
        tools: custom tools the skills may name (they win over built-ins of the same name).
        output_type: the answer's type, as for `create_react_node`: the validated object is
            written to the enclosing state's ``final_output``.
        output_mode: ``"tool"``, ``"native"`` or ``"text"``.
        output_retries: answers that may fail validation before `OutputValidationError`.
        input_guardrails: guardrails of the latest user message, as for `create_react_node`
            (`jianmu.guard.guardrails`); a skill's SKILL.md may add configured ones
            (``constraints: guard: guardrails:``), never remove these or the run's.
        output_guardrails: guardrails of the skill's answer.
        tool_output_guardrails: guardrails of each tool result.

    Raises:
        ConfigError: ``output_mode="native"`` with a provider that has no structured output.
    """

    def __init__(
        self,
        name: str,
        skills: Sequence[str | Skill],
        llm: LLMProvider,
        *,
        catalog: SkillCatalog | None = None,
        config: SkillNodeConfig | None = None,
        tools: Sequence[Tool] = (),
        output_type: Any = None,
        output_mode: OutputMode = "tool",
        output_retries: int = 2,
        input_guardrails: Sequence[Guardrail] = (),
        output_guardrails: Sequence[Guardrail] = (),
        tool_output_guardrails: Sequence[Guardrail] = (),
    ) -> None:
        super().__init__(name)
        from jianmu.guard.guardrails import given_guardrails  # as the loop's modules: lazily

        self.input_guardrails = given_guardrails("input", input_guardrails)
        """Guardrails of the user's message (the configured ones add to them)."""
        self.output_guardrails = given_guardrails("output", output_guardrails)
        """Guardrails of the skill's answer."""
        self.tool_output_guardrails = given_guardrails("tool_output", tool_output_guardrails)
        """Guardrails of each tool result."""
        if not skills:
            raise ValueError("SkillNode needs at least one skill (a name or a Skill)")
        self.skill_refs = list(skills)
        self.llm = llm
        self.catalog = catalog
        self.config = config or SkillNodeConfig()
        self.custom_tools = list(tools)
        from jianmu.nodes.output import output_spec  # typed answers: loaded by a node that has one

        self.output: OutputSpec | None = output_spec(output_type, output_mode, output_retries)
        """The answer's type and how it is asked for (None: free text)."""
        if self.output is not None:
            self.output.request_params(llm)  # a provider without structured output: now
        self.skills: list[Skill] = []
        self.constraints: Constraints | None = None
        self.react: ReActLoop | None = None
        self.progressive = False
        """Whether the skills are disclosed on demand (decided when the subtree is built)."""
        self.loaded: dict[str, Skill] = {}
        """The active skills by name: all of them when eager, those loaded when progressive."""
        self._start: tuple[Constraints, ToolSet] | None = None
        self._engine_tools: frozenset[str] = frozenset()
        self.outer_seen: dict[str, int] = {}
        """By namespace, the messages the enclosing conversation held when the skill's was
        last prepared (in this process: a run restored elsewhere goes on without those sent
        since)."""
        self._mcp_connected: set[str] = set()
        """The active skills whose MCP servers this run has connected (closed as it ends)."""

    def bind(self, state_manager: Any, ctx: Any, path: str) -> None:
        """Attach the run; a typed answer restored as JSON in the enclosing state becomes an
        object again."""
        super().bind(state_manager, ctx, path)
        output, outer = self.output, self.outer_state
        if output is None or outer is None:
            return
        value = outer.get("final_output")
        if value is not None:
            revived = output.revive(value)
            if revived is not value:
                outer.replace({"final_output": revived})

    # -- the steps of a skill node --------------------------------------------------------------
    def _load_skills(self) -> list[Skill]:
        """Resolve names through the catalog; `Skill` objects pass through."""
        from jianmu.skills.catalog import SkillCatalog
        from jianmu.skills.skill import Skill

        if self.catalog is None and any(isinstance(s, str) for s in self.skill_refs):
            self.catalog = SkillCatalog(config=self.ctx.config, custom_tools=self.custom_tools)
        skills = [
            ref if isinstance(ref, Skill) else self.catalog.get(ref)  # type: ignore[union-attr]
            for ref in self.skill_refs
        ]
        by_name: dict[str, Skill] = {}
        for skill in skills:
            other = by_name.setdefault(skill.name, skill)
            if other is not skill and other.folder != skill.folder:
                # the model would be shown both under one name and load_skill load either
                raise SkillLoadError(
                    f"two skills named {skill.name!r} in node {self.name!r}: "
                    f"{str(other.folder)!r} and {str(skill.folder)!r}; rename one",
                    path=str(skill.file), field="name",
                )
        return list(by_name.values())

    def _merge_constraints(self, active: Iterable[Skill]) -> Constraints:
        """Config → node → the active skills, tighten only."""
        base = Constraints.merge(self.ctx.constraints, self.config.constraints)
        return merge_skill_constraints(base, active)

    def _resolve_tools(self, active: Iterable[Skill]) -> ToolSet:
        """The active skills' tools (custom ones win), the skill-file tools, ``load_skill``
        when progressive, BT skills as ``run_bt_skill``; deny removed."""
        from jianmu.skills.bt import RunBTSkillTool
        from jianmu.skills.skill_tools import ReadSkillFileTool, RunSkillScriptTool

        toolset = ToolSet()
        for skill in active:
            toolset = toolset.merge(skill.toolset(self.custom_tools))
        toolset = ToolSet(self._skill_bash(toolset))
        engine: list[Tool] = []
        if self.progressive:
            engine.append(LoadSkillTool({s.name: s for s in self.skills}, self._activate))
        engine += [ReadSkillFileTool(self._loaded), RunSkillScriptTool(self._loaded)]
        bt_skills = [s for s in self.skills if s.is_bt]
        if bt_skills:
            engine.append(RunBTSkillTool(bt_skills, custom_tools=self.custom_tools,
                                         listed=self.progressive))
        self._engine_tools = frozenset(t.name for t in engine)
        return visible_tools(toolset.with_tools(engine), self.ctx, self.constraints)

    def _loaded(self) -> dict[str, Skill]:
        return self.loaded

    def _skill_bash(self, tools: Iterable[Tool]) -> list[Tool]:
        """``tools`` with the built-in ``bash`` made the skills' (`SkillBashTool`): its
        commands see the loaded skills' folders read-only, where `load_skill` says they are."""
        from jianmu.skills.skill_tools import SkillBashTool
        from jianmu.tools.builtin.bash import BashTool

        return [SkillBashTool(self._loaded) if type(t) is BashTool else t for t in tools]

    def _add_mcp_source(self, skills: Sequence[Skill]) -> None:
        """Have the loop's executor fetch the MCP tools the skills name before it next needs
        tools (see `ToolExecutor.add_tool_source`), also after a restore in a new process."""
        executor = self.react.executor if self.react is not None else None
        if executor is not None and mcp_references(skills, self.ctx):
            executor.add_tool_source(self._connect_mcp)

    async def _connect_mcp(self) -> None:
        """Connect the MCP servers that the active skills name and this run has not yet, and
        register their tools (`connect_mcp_tools`)."""
        executor = self.react.executor if self.react is not None else None
        wanted = [s for s in self.loaded.values() if s.name not in self._mcp_connected]
        if executor is None or not mcp_references(wanted, self.ctx):
            return
        names = {s.name for s in wanted}
        self._mcp_connected |= names  # before the wait: a second prepare meanwhile starts none
        self.ctx.on_close(self._mcp_run_ended)
        try:
            await connect_mcp_tools(wanted, self.ctx, lambda: self.constraints, executor)
        except BaseException:  # the source stays pending: the next prepare tries again
            self._mcp_connected -= names
            raise

    async def _mcp_run_ended(self) -> None:
        """The run closes its servers as it ends (their tools withdrawn with them): the node
        stays compiled, so the next run — a conversation's next turn, a run again after a
        timeout or cancel — connects those its active skills name again, on first use."""
        if not self._mcp_connected:  # registered by each connect of the run: done once
            return
        self._mcp_connected.clear()
        self._add_mcp_source(list(self.loaded.values()))

    def history_limit(self) -> int:
        """Messages of the global conversation copied in."""
        for value in (
            self.config.history_limit,
            *(s.history_limit for s in self.skills),
        ):
            if value is not None:
                return value
        return self.ctx.config.skills.history_limit

    def skill_prompt(self) -> str:
        """The skills' part of the system prompt: their bodies, or their list when progressive."""
        if self.progressive:
            return listing_prompt(self.skills, self.config.listing_max_chars)
        return eager_prompt(self.skills)

    # -- progressive disclosure ------------------------------------------------------------------
    def _activate(self, skill: Skill, *, record: bool = True) -> str | None:
        """Make ``skill`` active for the rest of this run (``load_skill`` calls this).

        Its constraints merge into the node's — tighten only — and reach the loop's nodes
        (new objects, so their cached merges are redone, and the executor's guard is rebuilt);
        its tools are registered on the executor, offered from the model's next turn.

        Returns:
            For the model, the tools the skill names that this run withholds; else ``None``.

        Raises:
            ConfigError: the skill's constraints would loosen the run's (nothing changes).
        """
        if skill.name in self.loaded or self.react is None:
            return None
        constraints = merge_skill_constraints(self.constraints, [skill])
        self.loaded[skill.name] = skill
        self._apply_constraints(constraints)
        executor = self.react.executor
        withheld: list[str] = []
        if executor is not None:
            shown = visible_tools(skill.toolset(self.custom_tools), self.ctx, constraints)
            for found in self._skill_bash(shown):
                if found.name not in self._engine_tools:  # those serve every loaded skill
                    executor.register_tool(found)
            self._add_mcp_source([skill])
            offered = {t.name for t in shown} | self._engine_tools
            # an MCP tool (server__tool) comes from its server later: not judged here
            withheld = [n for n in skill.tool_names if n not in offered and "__" not in n]
        if record and self.state_manager.accepts("loaded_skills"):
            self.state.update({"loaded_skills": list(self.loaded)})
        self.ctx.events.emit("skill.loaded", node=self.path, skill=skill.name)
        if not withheld:
            return None
        return (f"Not available in this run, though the skill names them: {', '.join(withheld)} "
                "(the run's policy denies them or they are not set up here); do without them, "
                "or tell the user what you could not do.")

    def _apply_constraints(self, constraints: Constraints) -> None:
        """Give the node and the loop's nodes ``constraints``; a shorter timeout applies now."""
        self.constraints = constraints
        react = self.react
        if react is not None:
            for node in (react, react.llm_node, react.executor):
                if node is not None:
                    node.constraints = constraints
            if react.executor is not None:
                react.executor.reset_for_run()
        self.arm_timer()

    def initialise(self) -> None:
        """A new run of the node starts with no skill loaded (progressive), then the clock;
        one that goes on from a stopped run keeps those its model loaded."""
        super().initialise()
        if self.progressive and self.loaded and self._start is not None and not self.resumed:
            constraints, toolset = self._start
            self.loaded.clear()
            if self.react is not None and self.react.executor is not None:
                self.react.executor.toolset = toolset
            self._apply_constraints(constraints)

    def terminate(self, new_status: Status) -> None:
        """As `FlattenedAgentNode.terminate`; a run that ended forgets what it had seen."""
        super().terminate(new_status)
        if self._ended is not None:
            self.outer_seen.pop(self._ended, None)

    # -- FlattenedAgentNode ----------------------------------------------------------------------
    def compile_subtree(self) -> py_trees.behaviour.Behaviour:
        """Load, merge, resolve, then build [prepare → ReAct]."""
        from jianmu.nodes.react import create_react_node

        self.skills = self._load_skills()
        self.progressive = is_progressive(
            self.skills, self.config.disclosure, self.config.eager_max_chars
        )
        active = [] if self.progressive else list(self.skills)
        self.loaded = {s.name: s for s in active}
        self.constraints = self._merge_constraints(active)
        tools = self._resolve_tools(active)
        react = self.react = create_react_node(
            self.llm,
            tools,
            system_prompt=self.config.system_prompt,
            skill_prompt=self.skill_prompt(),
            max_iterations=self.constraints.max_iterations or DEFAULT_MAX_ITERATIONS,
            constraints=self.constraints,
            name=f"{self.name}.react",
            executor_config=self.config.executor,
            output_type=self.output,
            input_guardrails=self.input_guardrails,
            output_guardrails=self.output_guardrails,
            tool_output_guardrails=self.tool_output_guardrails,
        )
        # the agent its spans name is this node, not its inner loop (``Pinger.react``)
        react.agent_name = self.name
        if react.llm_node is not None:
            react.llm_node.agent_label = self.name
        self._add_mcp_source(active)
        if react.executor is not None:
            self._start = (self.constraints, react.executor.toolset)
        # a run restored in a new process: the skills its model had loaded are active again
        by_name = {s.name: s for s in self.skills}
        restored = self.state_manager.scope(self.namespace or "").get("loaded_skills") or ()
        for name in restored if self.progressive else ():
            if name in by_name:
                self._activate(by_name[name], record=False)
        prepare = PrepareSkillContext(f"{self.name}.prepare", self)
        return py_trees.composites.Sequence(
            f"{self.name}.steps", memory=True, children=[prepare, react]
        )

    def effective_timeout(self) -> float | None:
        """The merged constraints' ``timeout``."""
        return self.constraints.timeout if self.constraints is not None else self.timeout

    def on_success(self) -> None:
        """Write the final answer and any ``skill_result`` to the enclosing state, and the
        answer to its conversation, so that the user's next turn follows on from it."""
        if self.outer_state is None:
            return
        answer = self.state.get("final_answer")
        update: dict[str, Any] = {"final_answer": answer}
        output = self.state.get("final_output")
        if output is not None:
            update["final_output"] = output
        result = self.state.get("skill_result")
        if result is not None:
            update["skill_result"] = result
        self.outer_state.update(update)
        if isinstance(answer, str) and answer and self.outer_state.manager.accepts("messages"):
            self.outer_state.append_port_messages(Message.assistant(answer))
        self.ctx.events.emit("skill.completed", node=self.path,
                             skills=[s.name for s in self.skills])


def mcp_references(skills: Iterable[Skill], ctx: RunContext) -> dict[str, set[str]]:
    """Configured MCP servers the skills name, with the tools asked for (``*``: all)."""
    servers = {name.lower(): name for name in ctx.config.mcp.servers}
    wanted: dict[str, set[str]] = {}
    for skill in skills:
        for ref in skill.tools:
            key = ref.strip().lower()
            server, _, tool_name = key.partition("__")
            if server in servers:
                wanted.setdefault(servers[server], set()).add(key if tool_name else "*")
    return wanted


async def connect_mcp_tools(
    skills: Iterable[Skill],
    ctx: RunContext,
    constraints: Callable[[], Constraints | None],
    executor: ToolExecutor,
) -> None:
    """Start the MCP servers the skills name (closed with the run) and register on
    ``executor`` the tools they asked for, minus those whose policy under ``constraints()``
    is deny. When a server says its tools changed, they are listed again before the model's
    next turn (tools it dropped are removed, new ones it added registered). The read-only
    ``mcp_list_resources`` and ``mcp_read_resource`` cover the servers named whole. The
    servers start together; the first that fails (in the skills' order) raises. As the run
    ends, the tools are withdrawn from ``executor`` and the servers closed."""
    references = mcp_references(skills, ctx)
    if not references:
        return
    from jianmu.mcp import MCPToolProvider  # the MCP SDK only for skills that name a server

    providers: list[MCPToolProvider] = []
    syncs: list[_Sync] = []

    async def withdraw() -> None:
        # a tool of a closed server would only fail its calls: the next run connects anew
        _withdraw(executor, providers, syncs, ctx, constraints)

    ctx.on_close(withdraw)
    for server in references:
        provider = MCPToolProvider.from_config(server, ctx.config.mcp.servers[server])
        ctx.on_close(provider.close)
        providers.append(provider)
    # each start and handshake takes seconds (a process, a runtime, a network round trip):
    # one after another, a skill naming many servers would wait for their sum
    started = await asyncio.gather(*(p.initialize() for p in providers), return_exceptions=True)
    for outcome in started:
        if isinstance(outcome, BaseException):
            raise outcome
    for provider, names in zip(providers, references.values(), strict=True):
        sync = _Sync(provider, names, ctx, constraints, executor)
        syncs.append(sync)
        sync.attach()
        if "*" in names:  # a skill that names one tool of a server gets only that tool
            _add_resource_tools(provider, ctx, constraints, executor)


def _add_resource_tools(
    provider: MCPToolProvider, ctx: RunContext,
    constraints: Callable[[], Constraints | None], executor: ToolExecutor,
) -> None:
    """(Re-)register ``mcp_list_resources`` / ``mcp_read_resource`` over every server the
    run has connected so far, this one included (unless a policy denies them)."""
    from jianmu.mcp import MCPReadResourceTool, resource_tools

    existing = executor.toolset.get(MCPReadResourceTool.name)
    clients: dict[str, MCPClient] = (
        existing.clients if isinstance(existing, MCPReadResourceTool)  # type: ignore[assignment]
        else {}
    )
    clients[provider.name] = provider.client
    for tool in visible_tools(resource_tools(clients), ctx, constraints() or Constraints()):
        executor.register_tool(tool)


def _withdraw(
    executor: ToolExecutor, providers: Sequence[MCPToolProvider], syncs: Iterable[_Sync],
    ctx: RunContext, constraints: Callable[[], Constraints | None],
) -> None:
    """Remove from ``executor`` the tools served by ``providers``' connections (those another
    connection registered since under the same name stay), and their servers from the
    resource tools (removed when they cover no server left)."""
    from jianmu.mcp import MCPReadResourceTool, resource_tools

    ours = [p.client for p in providers]
    for sync in syncs:
        sync.detached = True  # a change its server announced is not listed again
        for name in sync.registered:
            tool = executor.toolset.get(name)
            if tool is not None and any(getattr(tool, "client", None) is c for c in ours):
                executor.unregister_tool(name)
        sync.registered = set()
    existing = executor.toolset.get(MCPReadResourceTool.name)
    if not isinstance(existing, MCPReadResourceTool):
        return
    left = {k: c for k, c in existing.clients.items() if not any(c is o for o in ours)}
    if len(left) == len(existing.clients):
        return
    for tool in resource_tools(left):
        executor.unregister_tool(tool.name)
    if left:
        for tool in visible_tools(resource_tools(left), ctx, constraints() or Constraints()):
            executor.register_tool(tool)


class _Sync:
    """Keeps an executor's tools of one MCP server in step with the server's list."""

    detached = False
    """Whether its run ended (its tools withdrawn): the server's changes are not followed."""

    def __init__(
        self, provider: MCPToolProvider, names: set[str], ctx: RunContext,
        constraints: Callable[[], Constraints | None], executor: ToolExecutor,
    ) -> None:
        self.provider, self.names, self.ctx = provider, names, ctx
        self.constraints, self.executor = constraints, executor
        self.registered: set[str] = set()
        self.pending = False

    def attach(self) -> None:
        """Register the tools now and follow the server's changes."""
        self.provider.on_tools_changed(self._changed)
        self._register()

    def _register(self) -> None:
        wanted = self.names
        chosen = [t for t in self.provider.get_tools() if "*" in wanted or t.name.lower() in wanted]
        shown = visible_tools(chosen, self.ctx, self.constraints() or Constraints())
        now = {t.name for t in shown}
        for gone in self.registered - now:
            self.executor.unregister_tool(gone)
        for tool in shown:
            self.executor.register_tool(tool)
        self.registered = now

    def _changed(self) -> None:
        # runs on the session's loop: only schedule; the executor lists before the next turn
        if not self.pending and not self.detached:
            self.pending = True
            self.executor.add_tool_source(self._refresh)

    async def _refresh(self) -> None:
        self.pending = False
        if self.detached:  # the run ended before the executor asked: its server is closed
            return
        try:
            await self.provider.refresh()
        except MCPError as exc:  # the model keeps the tools it had; a call says what failed
            # the server's words: shown by their escapes, never written raw to a terminal
            logger.warning("MCP server %r: could not list its changed tools: %s",
                           self.provider.name, visible(str(exc)))
            return
        self._register()
