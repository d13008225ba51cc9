"""`create_react_node`: the ReAct loop — model, then tools, until the model answers."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import py_trees
from py_trees.common import Status

from jianmu.constraints import DEFAULT_MAX_ITERATIONS, Constraints
from jianmu.errors import StateValidationError, TokenBudgetExhausted
from jianmu.guard.guardrails import Guardrail, given_guardrails
from jianmu.llm.provider import LLMProvider
from jianmu.nodes.agent_llm import AgentLLMNode
from jianmu.nodes.cut_off import CutOffPolicy
from jianmu.nodes.handoffs import AgentSwitch, Handoff, build_team, split_handoffs
from jianmu.nodes.history import ProcessorInput
from jianmu.nodes.output import OutputMode
from jianmu.nodes.state import AgentState, tokens_spent
from jianmu.nodes.tool_executor import ToolExecutor, ToolExecutorConfig
from jianmu.runtime._composite_steps import composite_stop, decorator_stop, sequence_tick
from jianmu.runtime.async_node import LeanBehaviour, RuntimeNode, adopt, checked, logs_debug
from jianmu.runtime.events import GEN_AI_AGENT_NAME, GEN_AI_OPERATION_NAME, failed
from jianmu.tools.registry import ToolSet, as_tools

if TYPE_CHECKING:
    from jianmu.runtime.context import RunContext

__all__ = ("ReActLoop", "create_react_node", "fresh_handoffs")


@contextmanager
def agent_span(loop: ReActLoop, ctx: RunContext) -> Iterator[None]:
    """Make the agent's ``invoke_agent`` span current (started at its first tick in this run)
    while ``loop`` ticks: the tasks its nodes start, and so their spans, are its children.

    A sub-agent's whole tree already is one (`agent_tool`'s run): no second span for it.
    """
    runner = ctx.runner
    if runner is not None and runner.is_sub_run and _sole_agent(loop, runner.root):
        yield
        return
    from opentelemetry import context, trace

    current = ctx.open_spans.get(loop)
    if current is None:
        assert ctx.tracer is not None
        name = loop.agent_name or loop.name
        current = ctx.open_spans[loop] = ctx.tracer.start_span(
            f"invoke_agent {name}",
            attributes={GEN_AI_OPERATION_NAME: "invoke_agent", GEN_AI_AGENT_NAME: name})
    token = context.attach(trace.set_span_in_context(current))
    try:
        yield
    finally:
        context.detach(token)


def _sole_agent(loop: ReActLoop, root: py_trees.behaviour.Behaviour) -> bool:
    """Whether ``loop`` is the only agent of the tree under ``root`` (a skill's node around it,
    a node that writes its answer out): a sub-agent's run, whose span is the agent's. Worked
    out once per tree, not per tick."""
    known = loop._sole_in
    if known is not None and known[0] is root:
        return known[1]
    sole = not any(isinstance(node, ReActLoop) and node is not loop for node in root.iterate())
    loop._sole_in = (root, sole)
    return sole


def end_agent_span(loop: ReActLoop, ctx: RunContext, status: Status) -> None:
    """End the agent's span as the loop stops, after the span of the team's agent answering
    in it (`AgentSwitch`): an error when it failed."""
    team = loop.decorated
    if isinstance(team, AgentSwitch):
        team.end_spans(status)
    current = ctx.open_spans.pop(loop, None)
    if current is not None:
        if status is Status.FAILURE:
            failed(current, "failure")
        current.end()


class _Round(py_trees.composites.Sequence, LeanBehaviour):
    """One round, model then tools: a py_trees Sequence with memory that ticks and stops as
    py_trees' does, without its unread debug strings (`jianmu.runtime.async_node`)."""

    def __init__(self, name: str, children: Sequence[py_trees.behaviour.Behaviour]) -> None:
        super().__init__(name, memory=True)
        adopt(self, children)  # py_trees' add_child would read (so make) each child's uuid

    def tick(self) -> Iterator[py_trees.behaviour.Behaviour]:
        if logs_debug():
            return super().tick()
        return sequence_tick(self)

    def stop(self, new_status: Status = Status.INVALID) -> None:
        if logs_debug():
            super().stop(new_status)
            return
        composite_stop(self, new_status)


class ReActLoop(RuntimeNode, py_trees.decorators.Decorator, LeanBehaviour):
    """Repeats its child (one model → tools round) until ``final_answer`` is set.

    SUCCESS once the model answers without tool calls; FAILURE with the reason when
    ``max_iterations`` rounds are used up, the token budget runs out, or a round fails.
    Termination is the loop's decision: tools never set ``final_answer`` or ``done``.
    """

    def __init__(
        self,
        name: str,
        child: py_trees.behaviour.Behaviour,
        *,
        max_iterations: int = DEFAULT_MAX_ITERATIONS,
        constraints: Constraints | None = None,
    ) -> None:
        super().__init__(name=name, child=child)
        self.max_iterations = max_iterations
        self.constraints = constraints
        self.executor: ToolExecutor | None = None
        """The loop's executor, when built by `create_react_node` (to add tools later)."""
        self.llm_node: AgentLLMNode | None = None
        """The loop's model node, when built by `create_react_node`."""
        self.own_round: py_trees.behaviour.Behaviour = child
        """This agent's round [model → tools]; in a team, one of the switch's children."""
        self.handoffs: list[Handoff] = []
        """The hand-offs this agent's model may make."""
        self.recipe: tuple[Any, Any, dict[str, Any]] | None = None
        """What `create_react_node` built it from (model, tools, keywords), to build it
        again (`fresh_handoffs`)."""

    def answering_node(self, active_agent: str | None) -> AgentLLMNode | None:
        """The model node of the agent that answers: in a team, the one ``active_agent`` (the
        state's) names, else this loop's own."""
        team = self.decorated
        if active_agent is not None and isinstance(team, AgentSwitch):
            loop = team.loops.get(active_agent)  # the first agent's is no loop of the switch
            if loop is not None:
                return loop.llm_node
        return self.llm_node

    def limits(self) -> tuple[int, int | None]:
        """The effective ``max_iterations`` and token budget (smallest of every layer)."""
        merged = self.effective_constraints
        iterations = min(v for v in (self.max_iterations, merged.max_iterations) if v)
        return iterations, merged.guard.budget.total_tokens

    agent_name: str | None = None
    """The agent's name in its spans, when not the node's (a skill's loop: its skill node's)."""
    _sole_in: tuple[py_trees.behaviour.Behaviour, bool] | None = None
    """The sub-agent's tree last asked about, and whether this is its only agent."""

    error: BaseException | None = None
    """What ended the loop, when an error says it: `TokenBudgetExhausted` once the token
    budget is spent (the run's `RunResult.exception`); None otherwise."""
    _next_round_in_tick = False
    """Set while `tick` itself starts the next round (no wake-up needed for it then)."""
    _checked_manager: Any = None
    """The state manager whose schema `_check_schema` found to hold AgentState's fields."""

    def initialise(self) -> None:
        """Start a fresh loop: no answer, no rounds; unless the loop goes on from a stop that
        came after one of its nodes had finished its work (its model's answer, its calls),
        which that node keeps (`jianmu.runtime.kept`): then its answer and rounds stand."""
        fresh: dict[str, Any] = {"final_answer": None, "done": False, "rounds": 0,
                                 "agent_rounds": 0}
        state = self.state
        self._check_schema(state)
        self.error = None
        if any(getattr(node, "_finished", None) is not None for node in self.iterate()):
            return  # a fresh loop would ask the model again for the answer it kept
        if state.get("failed_outputs"):  # a typed answer's retries count per run
            fresh["failed_outputs"] = 0
        # only what differs: rewriting a fresh state's own values would only wake the runner
        # for a tick with nothing to do
        changed = {
            key: value for key, value in fresh.items()
            if not (type(state.get(key)) is type(value) and state.get(key) == value)
        }
        if changed:
            state.replace(changed)

    def _check_schema(self, state: Any) -> None:
        """Refuse a state that cannot hold the loop's keys, naming them and AgentState (else
        the first write fails on a key the user never wrote, such as ``done``)."""
        manager = getattr(state, "manager", None)
        if manager is None or manager is self._checked_manager:
            return
        schema = getattr(manager, "schema", None)
        missing = [] if isinstance(schema, type) and issubclass(schema, AgentState) else [
            key for key in AgentState.model_fields if not manager.accepts(key)]
        if missing:
            name = getattr(schema, "__name__", "the state")
            more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
            raise StateValidationError(
                f"the ReAct loop {self.name!r} needs AgentState's fields in its state; "
                f"{name} lacks {', '.join(missing[:3])}{more}: use StateManager(AgentState) "
                "or a subclass of AgentState as the schema"
            )
        self._checked_manager = manager

    def tick(self) -> Iterator[py_trees.behaviour.Behaviour]:
        """py_trees' decorator tick, except that a round that ends with the loop going on is
        followed by the next round in the same tick (once), not in a tick of its own.

        The runner would tick again at once anyway: this spares it a tick per round, with
        the same steps in the same order. In a traced run, the tick runs inside the agent's
        ``invoke_agent`` span (`agent_span`), so the calls its nodes start are its children.
        """
        ctx = getattr(self, "ctx", None)
        if ctx is None or ctx.tracer is None:
            return self._tick()  # the tick itself: no generator around it when nobody traces
        return self._traced_tick(ctx)

    def _traced_tick(self, ctx: RunContext) -> Iterator[py_trees.behaviour.Behaviour]:
        with agent_span(self, ctx):
            yield from self._tick()

    def _tick(self) -> Iterator[py_trees.behaviour.Behaviour]:
        if logs_debug():  # py_trees' own tick, its debug logs included
            yield from super().tick()
            return
        if self.status is not Status.RUNNING:
            self.initialise()
        for attempt in range(2):
            yield from self.decorated.tick()
            self._next_round_in_tick = attempt == 0
            try:
                new_status = checked(self, self.update())
            finally:
                self._next_round_in_tick = False
            if new_status is not Status.RUNNING or self.decorated.status is Status.RUNNING:
                break
        if new_status is not Status.RUNNING:
            self.stop(new_status)
        self.status = new_status
        yield self

    def stop(self, new_status: Status) -> None:
        """py_trees' decorator stop; the agent's span ends with it."""
        ctx = getattr(self, "ctx", None)
        if ctx is not None and ctx.open_spans:
            end_agent_span(self, ctx, new_status)
        if logs_debug():
            super().stop(new_status)
            return
        decorator_stop(self, new_status)

    def update(self) -> Status:
        """Decide after each round whether to answer, go again, or give up."""
        status = self.decorated.status
        if status is Status.RUNNING:
            return Status.RUNNING
        if status is not Status.SUCCESS:
            budget = self.limits()[1]
            spent = tokens_spent(self)
            if budget is not None and spent >= budget:  # its model refused to ask: said so
                return self._give_up(
                    f"token budget exhausted ({spent} of {budget} tokens used)", budget=True)
            self.feedback_message = self.decorated.feedback_message or "a round failed"
            return Status.FAILURE
        if self.state.get("final_answer") is not None and not self.state.get("actions"):
            return Status.SUCCESS
        iterations, budget = self.limits()
        rounds = self.state.get("rounds") or 0
        if rounds >= iterations:
            return self._give_up(f"max_iterations={iterations} reached without a final answer")
        spent = tokens_spent(self)  # the run's, not this namespace's: skills share the budget
        if budget is not None and spent >= budget:
            return self._give_up(
                f"token budget exhausted ({spent} of {budget} tokens used)", budget=True)
        team = self.decorated
        answering = team.answering_limits() if isinstance(team, AgentSwitch) else None
        if answering is not None:  # a hand-off target: its own limits hold while it answers
            agent, its_iterations, its_budget = answering
            if (self.state.get("agent_rounds") or 0) >= its_iterations:
                return self._give_up(f"agent {agent!r}: max_iterations={its_iterations} "
                                     "reached without a final answer")
            if its_budget is not None and spent >= its_budget:
                return self._give_up(f"agent {agent!r}: token budget exhausted ({spent} of "
                                     f"{its_budget} tokens used)", budget=True)
        if not self._next_round_in_tick:
            self.ctx.wake()  # the next tick starts the next round
        return Status.RUNNING

    def _give_up(self, reason: str, *, budget: bool = False) -> Status:
        self.feedback_message = reason
        if budget:  # the guard's limit: its error, as when a model call is refused for it
            self.error = TokenBudgetExhausted(reason)
        self.state.write_port("done", True)
        self.ctx.events.emit("react.stopped", node=self.path, reason=reason)
        return Status.FAILURE


def create_react_node(
    llm: LLMProvider | str,
    tools: ToolSet | Sequence[Any] | None,
    *,
    system_prompt: str = "",
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    constraints: Constraints | None = None,
    name: str = "ReAct",
    skill_prompt: str | None = None,
    executor_config: ToolExecutorConfig | None = None,
    max_messages: int | None = None,
    llm_params: dict[str, Any] | None = None,
    stream: bool | None = None,
    output_type: Any = None,
    output_mode: OutputMode = "tool",
    output_retries: int = 2,
    history: Sequence[ProcessorInput] | None = None,
    input_guardrails: Sequence[Guardrail] = (),
    output_guardrails: Sequence[Guardrail] = (),
    tool_output_guardrails: Sequence[Guardrail] = (),
    llm_timeout: float | None = None,
    on_cut_off: CutOffPolicy | None = None,
    max_continuations: int | None = None,
) -> ReActLoop:
    """Build the ReAct subtree: a loop over [AgentLLMNode → ToolExecutor].

    It ends with SUCCESS when ``final_answer`` is set and FAILURE with the reason when
    ``max_iterations`` is reached or the budget runs out. Place it anywhere in a tree; it reads
    and writes the `AgentState` fields of the state (or namespace) it is bound to.

    With ``output_type``, the answer is a validated object in ``final_output`` (and
    ``RunResult.output``); see `jianmu.nodes.output`. `handoff` entries among ``tools`` let the
    model pass the conversation to another agent (`jianmu.nodes.handoffs`): the loop then runs
    the round of whichever agent answers now, under this loop's limits (iterations, budget)
    and, while it answers, the agent's own.

    Args:
        llm: the model provider, or a ``"provider:model"`` name (``"openai:gpt-4o"``).
        tools: the tools the model may call (a `ToolSet` or a list; a plain function in it
            is made a tool as ``@tool`` makes one).
        system_prompt: the system message.
        max_iterations: the most model turns; the constraints may lower it.
        constraints: this loop's layer of constraints (tighten only).
        name: the subtree's name.
        skill_prompt: instructions appended to the system prompt.
        executor_config: how tool batches run.
        max_messages: most recent messages sent to the model.
        llm_params: extra request parameters.
        stream: stream the model's replies (default: when ``llm.call.delta`` has a reader).
        output_type: the answer's type (a model, dataclass, TypedDict, ``list[X]``, a union...);
            ``str``, or a union holding it, takes a text answer as it is.
        output_mode: ``"tool"``, ``"native"`` or ``"text"``.
        output_retries: answers that may fail validation before `OutputValidationError`.
        history: history processors (`trim_history`, `summarize_history`, functions).
        input_guardrails: guardrails of the latest user message (`jianmu.guard.guardrails`):
            a trip fails the loop with `GuardrailTripped` before any call of the turn runs.
        output_guardrails: guardrails of the final answer (or typed output): a trip fails it.
        tool_output_guardrails: guardrails of each tool result: a trip replaces the result
            with a refusal the model reads. The configuration's ``guard.guardrails`` add to
            all three.
        llm_timeout: seconds one model call may take in all, retries and a stream's whole
            reply included (with a `FallbackLLM`, each model it asks); default the
            configuration's ``llm.timeout``. The provider's own ``timeout`` is only a read
            timeout: the longest wait for a byte.
        on_cut_off: what an answer (text, no tool call) that the token limit cut off
            becomes: ``"continue"`` asks the model to go on where it stopped and joins the
            parts into one answer; ``"fail"`` fails the loop with `OutputTruncatedError`
            (the text so far kept); ``"accept"`` keeps the partial answer. Every cut is an
            ``llm.call.cut_off`` event. Default the configuration's ``llm.on_cut_off``
            (``continue``).
        max_continuations: how often ``"continue"`` asks before `OutputTruncatedError`;
            default the configuration's ``llm.max_continuations`` (2).

    Raises:
        ValueError: ``max_iterations`` or ``max_messages`` is not an integer >= 1.
        TypeError: ``constraints`` is not a `Constraints`; ``tools`` is not a list of tools.
        ConfigError: ``output_mode="native"`` with a provider that has no structured output.
        HandoffError: two agents of the team reached by hand-offs share a name, or two
            hand-offs of one agent share a tool name.
    """
    options = {k: v for k, v in locals().items() if k not in ("llm", "tools")}  # every keyword
    check_limits(max_iterations, constraints, max_messages, executor_config)
    tools = as_tools(tools)
    recipe = (llm, tools, options)
    tools, handoffs = split_handoffs(tools)
    executor = ToolExecutor(
        f"{name}.tools", tools, config=executor_config, constraints=constraints,
        tool_output_guardrails=given_guardrails("tool_output", tool_output_guardrails),
    )
    model = AgentLLMNode(
        f"{name}.llm", llm, tools=executor, system_prompt=system_prompt,
        skill_prompt=skill_prompt, max_messages=max_messages, constraints=constraints,
        params=llm_params, stream=stream, output_type=output_type, output_mode=output_mode,
        output_retries=output_retries, history=history, handoffs=handoffs,
        input_guardrails=input_guardrails, output_guardrails=output_guardrails,
        timeout=llm_timeout, on_cut_off=on_cut_off, max_continuations=max_continuations,
    )
    model.agent_label = name
    round_ = _Round(f"{name}.round", [model, executor])
    child: py_trees.behaviour.Behaviour = round_
    if handoffs:
        model.agent_name = name
        child = build_team(name, round_, handoffs, constraints, {
            "input": model.input_guardrails, "output": model.output_guardrails,
            "tool_output": executor.tool_output_guardrails,
        }, interactive=executor.config.interactive)
    loop = ReActLoop(name, child, max_iterations=max_iterations, constraints=constraints)
    loop.own_round = round_
    loop.handoffs = handoffs
    loop.executor = executor
    loop.llm_node = model
    # the provider made of a named model, not the name: a rebuilt loop shares its client
    loop.recipe = (model.llm, *recipe[1:])
    return loop


def check_limits(max_iterations: Any, constraints: Any, max_messages: Any,
                 executor_config: Any = None) -> None:
    """Refuse a limit or setting the loop would trip on only mid-run, after the model's turn
    or a round's tools (``0`` rounds read as no limit, ``"3"`` failed comparing, a dict of
    constraints had no ``guard``, a dict of executor settings no ``interactive``).

    Raises:
        ValueError: a count that is not a whole number >= 1.
        TypeError: constraints or executor settings that are not of their class.
    """
    for label, value in (("max_iterations", max_iterations), ("max_messages", max_messages)):
        if label == "max_iterations" or value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{label} must be an integer >= 1, got {value!r}")
    for label, value, cls in (("constraints", constraints, Constraints),
                              ("executor_config", executor_config, ToolExecutorConfig)):
        if value is not None and not isinstance(value, cls):
            hint = (f": write {cls.__name__}.model_validate({{...}}), or {cls.__name__}(...)"
                    if isinstance(value, dict) else "")
            raise TypeError(f"{label} must be a {cls.__name__}, got {type(value).__name__}"
                            + hint)


def fresh_handoffs(tools: Any, made: dict[int, ReActLoop] | None = None) -> Any:
    """``tools`` with each hand-off's target agent built again by its own recipe, and its
    targets' targets (each agent once, in ``made``): the tree of a run holds its team's
    nodes, bound to that run, so a second tree built while the first runs needs a team of
    its own. A target not built by `create_react_node` stays as it is."""
    if made is None:
        made = {}
    _, handoffs = split_handoffs(tools)
    if not handoffs:
        return tools
    rebuilt = {id(h): _fresh(h, made) for h in handoffs}
    return [rebuilt.get(id(t), t) for t in tools]


def _fresh(given: Handoff, made: dict[int, ReActLoop]) -> Handoff:
    target = given.target
    recipe = getattr(target, "recipe", None)
    if recipe is None:  # a name, or a loop built some other way
        return given
    copy = made.get(id(target))
    if copy is None:
        llm, tools, options = recipe
        copy = made[id(target)] = create_react_node(
            llm, fresh_handoffs(tools, made), **options
        )
        if copy.executor is not None and target.executor is not None:
            # with the tools registered on it since it was built (a ToolSet never changes:
            # one set serves both)
            copy.executor.toolset = target.executor.toolset
    return dataclasses.replace(given, target=copy)
