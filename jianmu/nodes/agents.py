"""Agents that work with other agents: a hand-off passes the conversation on
(`jianmu.nodes.handoffs`, whose names are here too), an agent tool asks another agent for an
answer.

**Agent tools.** `agent_tool` makes any subtree that answers (a ReAct node, a `SkillNode`, a
tree) a tool: a lead agent calls a researcher like any other tool. Each call runs the
sub-agent's tree in a run of its own, nested in the caller's:

- in its own state namespace, ``<name>/<call id>`` under the caller's (a workflow's
  `ToolNode`, which gives no call id: ``<name>/step:<its path>``, and each time it runs the
  call is a new one), which starts with the call's input as the user's message (a namespace
  the tree gives some of its nodes, ``left``, and a skill's are nested in it:
  ``<name>/<call id>.left``);
- under the caller's constraints as the outer layer (the sub-agent can only tighten them),
  with its tokens added to the run's usage (the budget every layer reads) and its tool calls
  to the run's guard counts;
- with its events and spans nested under the caller's (node paths below the caller's
  executor, at ``<name>[<call>]``: ``researcher[call_1]``, a call id of digits alone marked
  ``researcher[#2]``, never read as a sibling's index, `jianmu.runtime.scopes.agent_part`;
  its run's own ``agent.*`` events from the executor; an ``invoke_agent <name>`` span
  inside ``execute_tool <name>``);
- on the caller's approval channel: a call inside the sub-agent that asks a person suspends
  the whole run, the request named by its path (``researcher > write_file(...)``, id
  ``researcher/<call id>/<sub-call id>``, after the caller's namespace's prefix if it has one:
  ``left/researcher/...``, `jianmu.runtime.scopes`). After the decision the sub-agent
  continues where it stopped, also in another process restored from the run's checkpoint:
  its node statuses are kept in its namespace (``agent_run``) and every finished call in its
  ``completed_call_ids``, so none runs twice. While the run suspends, a sub-agent in flight
  in a parallel batch runs to its end or its own request first (`ReactiveRunner.run`); one
  halted meanwhile keeps where it stood, and the call run again resumes there.

The tool's result is the sub-agent's ``final_output`` (its typed answer), else its
``final_answer``. A sub-agent that fails is the tool's failure: its error is the caller's
observation (a URL's password and ``key=value`` secrets masked: it is the run's own error,
which the CLI shows so, not a tool's word to the model), and the caller goes on. A call whose
tree the calling runs are running (an agent that is its own tool over one tree) fails so too:
a tree serves one run at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import re
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import py_trees
from py_trees.common import Status
from pydantic import ConfigDict, Field, PydanticUserError, TypeAdapter, ValidationError
from pydantic import create_model as _create_model
from pydantic_core import to_jsonable_python

from jianmu._secrets import redact_text
from jianmu.constraints import CallerConstraints, Constraints
from jianmu.errors import (
    GuardrailTripped,
    ToolExecutionError,
    ToolSuspended,
    ToolValidationError,
)
from jianmu.guard.guardrails import configured_guardrails, run_guardrails
from jianmu.llm.messages import Message
from jianmu.nodes.handoffs import (
    AgentSwitch,
    Handoff,
    HandoffTool,
    build_team,
    handoff,
    refuse_shared_tools,
    split_handoffs,
)
from jianmu.nodes.output import json_path
from jianmu.nodes.sealed import AnswerJudge
from jianmu.nodes.tool_failures import withheld
from jianmu.runtime.async_node import RuntimeNode, close_tree
from jianmu.runtime.context import ApprovalRequest, Interaction, RunContext
from jianmu.runtime.events import (
    GEN_AI_AGENT_NAME,
    GEN_AI_OPERATION_NAME,
    JIANMU_RUN_ID,
    Event,
    EventBus,
    EventHandler,
    NodeEvents,
    run_span,
)
from jianmu.runtime.runner import ReactiveRunner, RunStatus
from jianmu.runtime.scopes import ScopedInteraction, ScopedSteps, agent_part
from jianmu.state import StateManager, StateView
from jianmu.tools._arguments import input_error
from jianmu.tools.base import Tool
from jianmu.tools.calls import ToolResult, decode_container, non_finite_problem
from jianmu.tools.schema import Injected, InjectedParam, declared_injection, strip_titles
from jianmu.tools.spec import structural_problems

__all__ = (  # the hand-offs' names too, where they were first
    "AgentSwitch",
    "AgentTool",
    "Handoff",
    "HandoffTool",
    "agent_tool",
    "build_team",
    "handoff",
    "refuse_shared_tools",
    "split_handoffs",
)


MAX_AGENT_DEPTH = 8
"""How deep agent tools may nest (an agent that calls itself, directly or through others):
each level has its own iteration cap, so without this the run's work would have none."""

MAX_AGENT_RUNS = 256
"""How many sub-agent runs one run may start, at every depth together: the depth cap alone
bounds the work only by each level's iterations multiplied together, which is exponential."""

_ESCAPED = re.compile(r"[%./#\s]")
AgentFactory = Callable[[], py_trees.behaviour.Behaviour]
"""Builds a fresh tree of the sub-agent (one per call, so calls may run in parallel)."""
_CallKey = tuple[str, str]
"""A call's sub-run: the id of the run that called it, and its namespace there. The namespace
alone (``research/call_1``) names a call of every run of the agent, as models reuse call ids:
with it, another run went on with this one's sub-run."""


_HELD = threading.Lock()
"""Guards the calls every agent tool holds: one tool (an `Agent`'s ``as_tool()``) serves the
runs of every thread (``run_sync`` on a server's request threads), and a run adding its calls
while another read them failed that call ("Set changed size during iteration")."""


class _Calls:
    """One calling run's sub-runs of one agent tool (a call waiting for a person, say), and
    the trees built for them. The calling run's context holds them (`RunContext.agent_calls`),
    not the tool, which serves every run of its agent: a run suspended and never resumed
    (dropped) takes its sub-runs with it, where the tool kept them, and the run, for good."""

    __slots__ = ("__weakref__", "runs", "trees")

    def __init__(self) -> None:
        self.runs: dict[_CallKey, _SubRun] = {}
        self.trees: dict[_CallKey, py_trees.behaviour.Behaviour] = {}


def _call_label(call_id: str, node_path: str) -> str:
    """A call's namespace part: its call id's (`_label`); a workflow's step, which gives no
    call id, its path's, after ``step:``, which no model's id can spell (a ':' in one is
    escaped, `jianmu.nodes.tool_executor.unique_ids`): two steps never share a namespace."""
    return _label(call_id) if call_id else "step:" + _label(node_path or "call")


def _fingerprint(message: str) -> str:
    """What identifies a call's input in its record (a step may ask again, another question)."""
    return hashlib.sha256(message.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _label(call_id: str) -> str:
    """A call id as a namespace part, one to one: ``%``, ``.`` (which nests namespaces), ``/``
    (which separates path parts), ``#`` (which numbers durable steps) and spaces escaped, so
    two ids of one run never share a namespace."""
    return _ESCAPED.sub(lambda m: f"%{ord(m.group()):02X}", call_id) or "call"


class _ScopedInteraction(ScopedInteraction):
    """The caller's approval channel as a sub-agent sees it: the sub-agent's request ids live
    under ``prefix`` there, and their summaries start with the agent's name."""

    def __init__(self, parent: Interaction, prefix: str, label: str) -> None:
        super().__init__(parent, prefix)
        self.label = label

    def shown(self, request: ApprovalRequest) -> ApprovalRequest:
        """``request`` as the caller's channel asks it: under this sub-agent's path."""
        asked = super().shown(request)
        payload = dict(asked.payload)
        payload["agent_path"] = [self.label, *payload.get("agent_path", ())]
        return dataclasses.replace(asked, summary=f"{self.label} > {request.summary}",
                                   payload=payload)


def _renamed(name: str) -> str:
    # the nested run's own run.* events would read as the end of the caller's run
    return "agent." + name[4:] if name.startswith("run.") else name


class _AgentEvents(EventBus):
    """The caller's event bus, as the sub-agent's run emits on it: its run's own events
    (``agent.*``) name the agent and come from ``at``, the calling node's path, so they
    nest where the call does (the studio's timeline)."""

    def __init__(self, parent: EventBus, agent: str, at: str | None = None) -> None:
        super().__init__(parent.run_id)
        self.parent = parent
        self.agent = agent
        self.at = at or None

    def subscribe(self, pattern: str, handler: EventHandler) -> Callable[[], None]:
        return self.parent.subscribe(pattern, handler)

    def wants(self, name: str) -> bool:
        return self.parent.wants(_renamed(name))

    def asked_for(self, name: str) -> bool:
        return self.parent.asked_for(_renamed(name))

    def emit(self, name: str, *, node: str | None = None, **fields: Any) -> Event | None:
        if name.startswith("run."):
            fields.setdefault("agent", self.agent)
            node = node or self.at
        return self.parent.emit(_renamed(name), node=node, **fields)


class _AgentRoot(RuntimeNode, py_trees.decorators.Decorator):
    """The sub-agent's tree in its namespace; finishes as the tree does."""

    def update(self) -> Status:
        """The tree's status."""
        return self.decorated.status


_OWN_NAMESPACE = "_jm_own_namespace"
"""Where `_place` keeps the namespace a node was given by its author, for the next call."""


def _place(node: py_trees.behaviour.Behaviour, namespace: str) -> None:
    """Put ``node`` and the nodes below it in ``namespace``, a node given a namespace of its
    own (a branch of parallel agents: ``left``) in that one nested in it, as the tree keeps
    them apart in a run of its own; a node that compiles its own subtree (a `SkillNode`)
    keeps its own namespace and reads this one as its outer state."""
    if hasattr(node, "compile_subtree"):
        return
    own = node.__dict__.setdefault(_OWN_NAMESPACE, getattr(node, "namespace", None))
    node.namespace = f"{namespace}.{own}" if own else namespace  # type: ignore[attr-defined]
    for child in node.children:
        _place(child, namespace)


def _running_in(tree: py_trees.behaviour.Behaviour, ctx: RunContext) -> bool:
    """Whether a node of ``tree`` is in the tree of the run of ``ctx`` or of a run that
    called it (an agent tool's run, up to the outermost run)."""
    mine = {id(node) for node in tree.iterate()}
    runner = getattr(ctx, "runner", None)
    while runner is not None:
        if any(id(node) in mine for node in runner.root.iterate()):
            return True
        runner = runner.parent.runner if isinstance(runner, _SubRun) else None
    return False


def _waits_for(pending: Sequence[ApprovalRequest]) -> str:
    """What a suspended run waits for, in words: approvals, answers, or both."""
    asked = [r.id for r in pending if r.question is not None]
    approve = [r.id for r in pending if r.question is None]
    parts = ([f"approval of {', '.join(approve)}"] if approve else []) + (
        [f"an answer to {', '.join(asked)}"] if asked else [])
    return " and ".join(parts) or "a decision"


class _SubRun(ReactiveRunner):
    """One call's run of the sub-agent: the caller's state, context and approvals, its own
    ticks. Its checkpoints go into its namespace and save the caller's run."""

    is_sub_run = True
    answer_judge: AnswerJudge | None = None
    """In a durable run, the caller's tool-output guardrails on its answer: its model nodes
    run them inside the step that records the answer (`jianmu.nodes.sealed`)."""
    judged: tuple[Any, ...] = ()
    """The last answer `answer_judge` passed (none yet: empty)."""
    asked: str = ""
    """The fingerprint of the call's input (`_fingerprint`), kept in its record: only a call
    asking the same resumes the run."""

    def __init__(
        self, root: _AgentRoot, state: StateManager, parent: RunContext, *,
        constraints: Constraints, label: str, prefix: str, view: StateView,
        guardrails: dict[str, tuple[Any, ...]] | None = None, interactive: bool = True,
    ) -> None:
        # an agent made non-interactive stays so under a caller a person watches: tighten only
        interactive = interactive and parent.interaction is not None
        super().__init__(
            # the member's own layers merge over the caller's without loosening them
            root, state, config=parent.config, constraints=CallerConstraints.of(constraints),
            run_id=f"{parent.run_id}:{view.namespace}", user_roles=parent.user_roles,
            interactive=interactive, extras=parent.extras,
        )
        if interactive and parent.interaction is not None:
            self.interaction = _ScopedInteraction(parent.interaction, prefix, label)
            self.ctx.interaction = self.interaction
        # the root's name is its path, the caller's and the call's part (`agent_part`)
        self.ctx.events = _AgentEvents(parent.events, label, root.name.rpartition("/")[0])
        self.ctx.tracer = parent.tracer
        self.ctx.steps = None if parent.steps is None else ScopedSteps(parent.steps, prefix)
        self.ctx.running_calls = parent.running_calls  # the caller's calls in flight count here
        self.ctx.agent_runs = parent.agent_runs  # one count for the whole tree of sub-agents
        self.ctx.agent_calls = parent.agent_calls  # held by the calling run, as its state
        self.ctx.guardrails = dict(parent.guardrails if guardrails is None else guardrails)
        self.depth = getattr(parent.runner, "depth", 0) + 1
        self.parent = parent
        self.label = label
        self.view = view
        # checkpoints only when the caller's run has a checkpointer (`save_checkpoint`)
        self.checkpointer = parent.runner.checkpointer if parent.checkpointed else None

    def resume_nodes(self, record: dict[str, Any]) -> None:
        """Take the node statuses of a run that was suspended (restored in a new process)."""
        self._restored_nodes = dict(record.get("nodes") or {})
        root = self._restored_nodes.get("0")
        if isinstance(root, dict):  # the root's name is its path, which a record written
            # before `agent_part` marked a call id of digits may spell otherwise: ours alone
            self._restored_nodes["0"] = {**root, "name": self.root.name}
        self.ticks = int(record.get("ticks") or 0)

    def save_checkpoint(self, status: str = "running") -> None:
        """Keep the node statuses in the namespace, then checkpoint the caller's run."""
        self._keep(status)
        self.parent.save_checkpoint()

    def _keep(self, status: str) -> None:
        """Write where the run stands to its namespace (``agent_run``), for the next call."""
        nodes = {
            key: {"name": node.name, "status": node.status.name}
            for key, node in self._walk(self.root, "0")
        }
        self.view.replace({"agent_run": {"status": status, "nodes": nodes, "ticks": self.ticks,
                                         "input": self.asked}})

    def _stop_tree(self) -> None:
        """Keep where the run stood, then stop it: a call run again after a halt (the caller
        cancelled, timed out) resumes there, as after a restore, and runs no finished call
        again, checkpointer or not."""
        if self.root.status is Status.RUNNING:
            self._keep("running")
        super()._stop_tree()

    def detach(self) -> None:
        """Stop listening to the shared state (the run is over)."""
        self._stop_listening()

    def _span(self) -> Any:
        return run_span(self.ctx.tracer, f"invoke_agent {self.label}", {
            GEN_AI_OPERATION_NAME: "invoke_agent", GEN_AI_AGENT_NAME: self.label,
            JIANMU_RUN_ID: self.parent.run_id,
        }, self.ctx.open_spans)


class AgentTool(Tool):
    """A sub-agent as a tool; made by `agent_tool` (see the module's docstring).

    One tree serves one call at a time (calls to it run one after another); give a function
    that builds the tree for calls that may run in parallel.
    """

    node_kind: ClassVar[str] = "agent"
    """How the studio draws it: a sub-agent under the node that calls it."""
    category = "execute"
    idempotent = False
    max_retries = 0
    parallel_safe = False
    timeout_seconds = None  # the sub-agent's own limits bound it (and execution.timeout_s)
    records_own_steps = True  # in a durable run, its turns and calls are steps of their own

    def __init__(
        self,
        agent: py_trees.behaviour.Behaviour | AgentFactory,
        *,
        name: str,
        description: str,
        input_type: Any = str,
        interactive: bool = True,
    ) -> None:
        if not isinstance(agent, py_trees.behaviour.Behaviour) and not callable(agent):
            raise TypeError(
                f"agent_tool() takes a behaviour tree (a ReAct node, a SkillNode, any subtree) "
                f"or a function that builds one, got {type(agent).__name__}"
            )
        self.agent = agent
        self.name = name
        self.description = description
        self.input_type = input_type
        self.interactive = interactive
        self._factory = not isinstance(agent, py_trees.behaviour.Behaviour)
        self.parallel_safe = self._factory
        try:
            self._schema_of(input_type)
        except (PydanticUserError, TypeError, ValueError) as exc:
            raise ToolValidationError(name, [f"input_type {input_type!r}: {exc}"]) from None
        problems = structural_problems(self)
        if problems:
            raise ToolValidationError(self.name, problems)
        self._held: weakref.WeakSet[_Calls] = weakref.WeakSet()
        """The calls of runs still alive (for `aclose`)."""
        self._holder: _CallKey | None = None
        self._lock: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None

    def _schema_of(self, input_type: Any) -> None:
        adapter: TypeAdapter[Any] = TypeAdapter(input_type)
        schema = strip_titles(adapter.json_schema())
        if schema.get("type") == "object":
            self.input_schema = schema
            self._checker = adapter
            self._wrapped = False
            return
        said = "What to ask the agent." if input_type is str else "The agent's input."
        wrapper = _create_model(
            "AgentInput", __config__=ConfigDict(extra="forbid"),
            input=(input_type, Field(description=said)),
        )
        self._checker = TypeAdapter(wrapper)
        self.input_schema = strip_titles(self._checker.json_schema())
        self.input_schema.pop("title", None)
        self._wrapped = True

    # -- arguments -------------------------------------------------------------------------
    def injection(self) -> tuple[InjectedParam, ...]:
        """``run``'s injected parameters. The model's arguments reach ``run`` as one value,
        never by name, so a property named like one of them (``state``) clashes with nothing."""
        found = self.__dict__.get("_jm_run_injection")
        if found is None:  # resolving the annotations costs: once per tool
            found = self.__dict__["_jm_run_injection"] = declared_injection(self.run)
        return found  # type: ignore[no-any-return]

    def _signature_params(self) -> frozenset[str] | None:
        """None: the schema's names are ``input_type``'s, never ``run``'s parameters (the
        arguments reach it as one value), so a registry checks none against its signature."""
        return None

    def validate_args(self, args: Any) -> dict[str, Any]:
        """Check the model's arguments against ``input_type`` (pydantic, paths in errors).

        Raises:
            ToolInputError: every problem, with its JSON path.
        """
        args = decode_container(args)
        if self._wrapped and not isinstance(args, dict):
            args = {"input": args}
        non_finite = non_finite_problem(args)
        if non_finite is not None:  # the input goes to the sub-agent as JSON: none has NaN
            allowed = list(self.parameters.get("properties") or {})
            raise input_error(self.name, [non_finite], allowed)
        try:
            checked = self._checker.validate_python(args)
        except ValidationError as exc:
            problems = [
                f"{json_path(e['loc'])}: {e['msg']}" for e in exc.errors(include_url=False)
            ]
            allowed = list(self.parameters.get("properties") or {})
            raise input_error(self.name, problems, allowed) from None
        return {"arguments": checked.input if self._wrapped else checked}

    def _message(self, value: Any) -> str:
        """The sub-agent's first user message: the text, or the input as JSON."""
        if isinstance(value, str):
            return value
        return json.dumps(to_jsonable_python(value), ensure_ascii=False)

    # -- running ---------------------------------------------------------------------------
    async def run(
        self,
        arguments: Any = None,
        *,
        ctx: RunContext,
        state: Injected[StateView],
        call_id: Injected[str] = "",
        constraints: Injected[Constraints | None] = None,
        node_path: Injected[str] = "",
        guardrails: Injected[Callable[[], dict[str, tuple[Any, ...]]] | None] = None,
    ) -> Any:
        """Run the sub-agent for one call (or resume it) and return its answer.

        Raises:
            ToolSuspended: the sub-agent waits for a person; the call runs again afterwards.
            ToolExecutionError: the sub-agent failed (its error in the message).
        """
        if getattr(ctx.runner, "depth", 0) >= MAX_AGENT_DEPTH:
            raise ToolExecutionError(
                f"agent {self.name!r} not run: agent tools are nested {MAX_AGENT_DEPTH} deep "
                "(an agent calling itself?); answer with what you have"
            )
        label = _call_label(call_id, node_path)
        relative = f"{self.name}/{label}"
        view = state.scope(relative)
        key = (ctx.run_id, str(view.namespace))
        asked = _fingerprint(self._message(arguments))
        record = view.get("agent_run")
        # a step asks again, maybe another question, under one name (a model's calls each
        # have an id of their own): a run of another input is not this call's, nor are the
        # requests it left waiting
        if not call_id and isinstance(record, dict) and record.get("input", asked) != asked:
            record = None
            if ctx.interaction is not None:
                ctx.interaction.withdraw(f"{relative}/")
        if call_id and isinstance(record, dict) and \
                record.get("status") == RunStatus.SUCCESS.value:
            # it finished before the caller recorded the call (a crash, a restore)
            if record.get("withheld") is not None:  # what the caller's guardrail put instead
                return ToolResult(tool=self.name, ok=False, error=str(record["withheld"]))
            return ToolResult(tool=self.name, ok=True, output=self._answer(view))
        guard = self._exclusive()
        calls = self._calls(ctx)
        async with guard:
            runner = calls.runs.get(key)
            if runner is not None and not call_id and runner.asked != asked:
                # a run of another question: never resumed by this one
                await self._finish(calls, key)
                runner = None
            if runner is not None and runner.view.manager is not view.manager:
                # the run was restored into a new state since (in this process): the call
                # goes on from its record there, not in the state the old runner left
                await self._finish(calls, key)
                runner = None
            if runner is None:
                self._claim(key)
                try:
                    if ctx.agent_runs[0] >= MAX_AGENT_RUNS:
                        raise ToolExecutionError(
                            f"agent {self.name!r} not run: this run already started "
                            f"{MAX_AGENT_RUNS} agent runs; answer with what you have"
                        )
                    ctx.agent_runs[0] += 1
                    runner = self._start(
                        calls, arguments, view, record, ctx, constraints or ctx.constraints,
                        f"{node_path}/{agent_part(self.name, label)}" if node_path else
                        agent_part(self.name, label), f"{relative}/",
                        None if guardrails is None else guardrails(), (call_id, node_path),
                    )
                except BaseException:
                    self._release(key)
                    raise
                runner.asked = asked
            else:  # a call resumed holds the tree as it did, waiting for a person
                self._claim(key)
            try:
                result = await runner.run()
            except BaseException:
                await self._finish(calls, key)
                raise
            if result.status is RunStatus.SUSPENDED:
                raise ToolSuspended(f"agent {self.name!r} waits for {_waits_for(result.pending)}")
            await self._finish(calls, key)
        trip = result.exception
        if isinstance(trip, GuardrailTripped) and trip.kind == "tool_output":
            # its answer, judged in its own turn (`answer_judge`): the refusal the caller's
            # guardrails would put in its place
            refusal = withheld(ToolResult(tool=self.name, ok=True, call_id=call_id or None),
                               f"guardrail {trip.guardrail!r} tripped ({trip.reason})")
            view.clear()
            view.update({"final_answer": None, "final_output": None, "agent_run": {
                "status": RunStatus.SUCCESS.value, "withheld": refusal.error, "input": asked}})
            return refusal
        if not result.ok:  # what failed inside, for a model: its passwords and keys out
            raise ToolExecutionError(redact_text(
                f"agent {self.name!r} failed: {result.error or result.status.value}"))
        answer = self._answer(view)
        # what the caller needs of the finished run is its answer (also a caller restored
        # before it recorded the call); the conversation goes, so the state stays small
        view.clear()
        view.update({
            "final_answer": _text(answer), "final_output": _output(answer),
            "agent_run": {"status": RunStatus.SUCCESS.value, "input": asked},
        })
        # judged in its own turn (a durable run): the caller's guardrails passed this answer
        judged = runner.judged == (answer,)
        return ToolResult(tool=self.name, ok=True, output=answer, judged=judged)

    def _calls(self, ctx: RunContext) -> _Calls:
        """The calling run's sub-runs of this tool, kept in its context."""
        calls: _Calls | None = ctx.agent_calls.get(id(self))  # the run holds this tool
        if calls is None:
            calls = ctx.agent_calls[id(self)] = _Calls()
            with _HELD:
                self._held.add(calls)
        return calls

    def _start(
        self, calls: _Calls, arguments: Any, view: StateView, record: Any, ctx: RunContext,
        constraints: Constraints, root_name: str, prefix: str,
        guardrails: dict[str, tuple[Any, ...]] | None = None, call: tuple[str, str] = ("", ""),
    ) -> _SubRun:
        key = (ctx.run_id, str(view.namespace))
        tree = self._tree(calls, key, ctx)
        tree.parent = None  # a tree served to an earlier call hangs off that call's root
        root = _AgentRoot(root_name, tree)
        root.namespace = str(view.namespace)
        _place(tree, str(view.namespace))
        resumed = isinstance(record, dict) and record.get("status") in (
            RunStatus.SUSPENDED.value, "running",
        )
        if not resumed:
            view.clear()  # what an attempt left before it could checkpoint
            view.update({"messages": [Message.user(self._message(arguments))]})
        runner = _SubRun(
            root, view.manager, ctx, constraints=constraints, label=self.name, prefix=prefix,
            view=view, guardrails=guardrails, interactive=self.interactive,
        )
        if ctx.steps is not None and guardrails is not None:
            runner.answer_judge = self._judge(ctx, call, constraints, guardrails, runner)
        if resumed:
            runner.resume_nodes(record)
        calls.runs[key] = runner
        return runner

    def _tree(
        self, calls: _Calls, key: _CallKey, ctx: RunContext
    ) -> py_trees.behaviour.Behaviour:
        """The tree for the call: the one given, or a fresh one built for it.

        Raises:
            ToolExecutionError: the function did not build a tree, or built one that
                another call or the calling runs are running (`_running_in`).
        """
        if not self._factory:
            self._refuse_running(self.agent, ctx)  # type: ignore[arg-type]
            return self.agent  # type: ignore[return-value]
        tree = calls.trees.get(key)
        if tree is None:
            tree = self.agent()  # type: ignore[operator]
            if not isinstance(tree, py_trees.behaviour.Behaviour):
                raise ToolExecutionError(
                    f"the function given to agent_tool({self.name!r}) returned "
                    f"{type(tree).__name__}, not a behaviour tree"
                )
            with _HELD:
                taken = any(tree is held for each in self._held for held in each.trees.values())
            if taken:
                raise ToolExecutionError(
                    f"the function given to agent_tool({self.name!r}) returned the tree "
                    "another call is running; it must build a fresh tree for each call"
                )
            self._refuse_running(tree, ctx)
            with _HELD:
                calls.trees[key] = tree
        return tree

    def _refuse_running(self, tree: py_trees.behaviour.Behaviour, ctx: RunContext) -> None:
        """Refuse to run ``tree`` for a call when a node of it is one the calling run, or a
        run that called it, is running: an agent that is its own tool over one tree, or a tree
        placed in the calling tree too. Bound to the call's run, its nodes would leave the
        caller's run, which waited on them for ever."""
        if _running_in(tree, ctx):
            raise ToolExecutionError(
                f"agent {self.name!r} not run: its tree is part of the run that calls it (an "
                "agent that is its own tool, or one it hands off to?); give agent_tool() a "
                "function that builds the tree, for a tree per call"
            )

    def _claim(self, key: _CallKey) -> None:
        """Take a shared tree for the call ``key``, at once: another thread's run may ask for
        it as this one does (a tree per call needs none).

        Raises:
            ToolExecutionError: a call of another run holds it: running (on another thread),
                or waiting for a person, whose decision belongs to that run.
            ToolSuspended: another call of this run holds it, waiting for a person.
        """
        if self._factory:
            return
        with _HELD:
            holder = self._holder
            if holder is None or holder == key:
                self._holder = key
                return
        if holder[0] != key[0]:  # waiting would never end: that run's, not this one's
            raise ToolExecutionError(
                f"agent {self.name!r} is busy with a call of another run (running, or waiting "
                "for a person); its tree serves one call at a time (give agent_tool() a "
                "function that builds the tree, for a tree per call)"
            )
        raise ToolSuspended(f"agent {self.name!r} is busy with call {holder[1]!r}, which waits "
                            "for a person; this call runs after it")

    def _release(self, key: _CallKey) -> None:
        """Give the shared tree back, if the call ``key`` holds it."""
        with _HELD:
            if self._holder == key:
                self._holder = None

    def _exclusive(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """One call at a time on a shared tree (a lock of the running loop); none needed for
        a tree per call."""
        if self._factory:
            return contextlib.nullcontext()
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock[0] is not loop:
            self._lock = (loop, asyncio.Lock())
        return self._lock[1]

    async def _finish(self, calls: _Calls, key: _CallKey) -> None:
        """Forget a call's run; a tree built for the call ends its threads and sandboxes."""
        runner = calls.runs.pop(key, None)
        if runner is not None:
            runner.detach()
        self._release(key)
        with _HELD:
            tree = calls.trees.pop(key, None)
        if tree is not None:
            await close_tree(tree)

    def _judge(self, ctx: RunContext, call: tuple[str, str], constraints: Constraints,
               guardrails: dict[str, tuple[Any, ...]], runner: _SubRun) -> AnswerJudge | None:
        """The caller's tool-output guardrails on the answer of a call (its id, the caller's
        node path), as its executor runs them on the call's result (`ToolExecutor._guarded`);
        None when it runs none. What they pass is noted in ``runner.judged``."""
        chosen = configured_guardrails("tool_output", (), constraints, guardrails)
        if not chosen:
            return None
        call_id, events = call[0], NodeEvents(ctx.events, call[1])

        async def judge(answer: Any) -> GuardrailTripped | None:
            result = ToolResult(tool=self.name, ok=True, output=answer, call_id=call_id or None)
            found = await run_guardrails(
                "tool_output", chosen, ctx, result.truncate(self.max_result_length), events,
                timeout=constraints.guard.guardrails.timeout_s, tool=self.name, call_id=call_id)
            if found is None:
                runner.judged = (answer,)
                return None
            return GuardrailTripped(found[0], found[1].reason, "tool_output")

        return judge

    def result_withheld(self, state: StateView, call_id: str, result: ToolResult,
                        node_path: str = "") -> None:
        """The caller's tool-output guardrail withheld the answer of call ``call_id`` (of a
        workflow's step at ``node_path``: no call id): the call's namespace keeps the refusal
        (``result``) in its place, never the answer."""
        view = state.scope(f"{self.name}/{_call_label(call_id, node_path)}")
        record = view.get("agent_run")
        if isinstance(record, dict):
            view.update({"final_answer": None, "final_output": None, "agent_run": {
                "status": RunStatus.SUCCESS.value, "withheld": result.error,
                "input": record.get("input")}})

    @staticmethod
    def _answer(view: StateView) -> Any:
        output = view.get("final_output")
        return output if output is not None else (view.get("final_answer") or "")

    async def aclose(self) -> None:
        """End the worker threads and sandboxes the sub-agent's tree keeps."""
        with _HELD:
            held = list(self._held)
        for calls in held:
            for key in list(calls.runs):
                await self._finish(calls, key)
        if not self._factory:
            await close_tree(self.agent)

    def __repr__(self) -> str:
        return f"<AgentTool {self.name!r}>"


def _text(answer: Any) -> str:
    return answer if isinstance(answer, str) else json.dumps(
        to_jsonable_python(answer), ensure_ascii=False
    )


def _output(answer: Any) -> Any:
    return None if isinstance(answer, str) else answer


def agent_tool(
    agent: py_trees.behaviour.Behaviour | AgentFactory,
    *,
    name: str,
    description: str,
    input_type: Any = str,
    interactive: bool = True,
) -> AgentTool:
    """A tool that runs ``agent`` (a ReAct node, a `SkillNode`, any subtree that sets
    ``final_answer``/``final_output``) for each call, in a namespace of its own, under the
    caller's guard, budget, approvals and checkpoints (see `jianmu.nodes.agents`).

    Args:
        agent: the sub-agent's tree, or a function that builds a fresh one per call (then
            several calls may run at once).
        name: the tool's name (and the sub-agent's, in request paths and events).
        description: when to call it, for the model.
        input_type: the input's type (pydantic); its JSON Schema is the tool's input schema.
            ``str``: ``{"input": "..."}``, given to the sub-agent as its user message; other
            types arrive as their JSON.
        interactive: ``False``: nobody is asked during the sub-agent's runs, even when a
            person answers the caller's requests: its calls that need a confirmation are
            denied, and its questions go unanswered.

    Raises:
        ToolValidationError: a bad name, or an ``input_type`` without a JSON Schema.
        TypeError: ``agent`` is neither a tree nor a function.
    """
    return AgentTool(agent, name=name, description=description, input_type=input_type,
                     interactive=interactive)
