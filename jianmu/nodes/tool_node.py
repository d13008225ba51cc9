"""`ToolNode`: one tool, placed by the author, reading and writing state ports."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from py_trees.common import Status

from jianmu.constraints import Constraints
from jianmu.errors import StateValidationError, ToolValidationError
from jianmu.execution.runner import pinned_paths, reset_redirect_check, set_redirect_check
from jianmu.guard import GuardEnforcer, GuardLedger
from jianmu.guard.checkers import edited_call
from jianmu.guard.guardrails import configured_guardrails, run_guardrails
from jianmu.llm.messages import Usage
from jianmu.nodes import _under_way as under_way
from jianmu.nodes._before_run import replays, sandbox_refusal
from jianmu.nodes._redirects import redirect_check
from jianmu.nodes.state import ledger_view, tokens_spent, usage_view
from jianmu.nodes.tool_executor import (
    RunnerCache,
    elapsed_ms,
    input_schema_of,
    preview,
    with_calls_in_flight,
)
from jianmu.nodes.tool_failures import error_text, interrupts, own_failure, withheld
from jianmu.nodes.tool_spans import finish_span, tool_span_attributes
from jianmu.runtime.async_node import AsyncNode
from jianmu.runtime.context import consume_approval, fresh_request_id
from jianmu.runtime.events import span
from jianmu.tools.base import Tool
from jianmu.tools.calls import ToolCall, ToolResult, check_tool_name

__all__ = ("ToolNode",)


class ToolNode(AsyncNode):
    """Runs ``tool`` with the input at ``input_key`` and writes its output to ``output_key``.

    A dict input is the arguments; any other value goes to the tool's single parameter.
    The call passes the guard first, like a model's: ``deny`` makes the node FAILURE with the
    reason, ``confirm`` (or a tool whose permission is user_confirm) suspends the run until a
    person decides. ``guarded=False`` trusts the workflow's author instead (a step the author
    placed and vouches for). The tool runs through the `ToolRunner` built from the run's
    execution constraints (kept until they change). A failed result (an exception, or a string
    starting with ``Error:``) makes the node FAILURE with the error on ``feedback_message``;
    nothing is written then.

    Args:
        name: the node's name.
        tool: the tool to run.
        input_key: the state key holding the arguments (``None``: no arguments).
        output_key: the state key the output is written to (``None``: not written).
        execute: ``False`` skips the tool and succeeds (to switch a step off while debugging).
        constraints: this node's layer of constraints (tighten only).
        guarded: check the guard before running (the default).
        approval_scope: set inside a BT skill run: approval ids then come from it (the skill
            and its inputs; ``""``: the namespace) and the node's place in the skill's tree,
            so the same call asks once across runs; ``None``: from the node's path.
    """

    eager_start = False  # it waits on a model, a thread or a person (`AsyncNode.eager_start`)

    records_own_steps = True
    unwinds_first = True  # a call begun is recorded before the node starts again
    node_kind = "tool"

    def __init__(
        self,
        name: str,
        tool: Tool,
        input_key: str | None = "input",
        output_key: str | None = "output",
        execute: bool = True,
        *,
        constraints: Constraints | None = None,
        guarded: bool = True,
        approval_scope: str | None = None,
    ) -> None:
        super().__init__(name)
        problem = check_tool_name(getattr(tool, "name", None))
        if problem is not None:  # the guard's rules match by name: a look-alike never runs
            raise ToolValidationError(str(getattr(tool, "name", tool)), [problem])
        self.guarded = guarded
        self._enforcer: tuple[tuple[str, str | None], GuardEnforcer] | None = None
        self.tool = tool
        self.input_key = input_key
        self.output_key = output_key
        self.execute = execute
        self.constraints = constraints
        self.result: ToolResult | None = None
        self.bt_skill: str | None = None  # set by the skill loader inside a BT skill
        self.approval_scope = approval_scope
        self.tree_position: str | None = None  # e.g. ``0/2``; set by the skill loader
        self._runners = RunnerCache()
        self._marked = False  # this node saved its step as under way, in this process
        self._interrupted: tuple[str, object] | None = None
        """Why the step's call was stopped after it began, when its tool may not run twice,
        and the state it ran on: the run's next tick fails the step saying so instead of
        running it again (a tree given a fresh state starts afresh)."""

    def _arguments(self) -> Any:
        value = self.state.get(self.input_key) if self.input_key else None
        if value is None or isinstance(value, dict):
            return value or {}
        properties = list(self.tool.parameters.get("properties", {}))
        if len(properties) == 1:
            return {properties[0]: value}
        return value  # let validation explain what the tool expects

    def _approval_id(self, args: object) -> str:
        """A stable request id: the same step with the same arguments asks once."""
        prefix, place = "step-", [self.path]
        if self.approval_scope is not None:  # a BT skill's step: its run, its place in the tree
            where = self.tree_position if self.tree_position is not None else self.path
            prefix, place = "bt-", [self.approval_scope or self.namespace or "", where]
        material = json.dumps([*place, self.tool.name, args], sort_keys=True, default=str)
        return prefix + hashlib.sha256(material.encode()).hexdigest()[:24]

    def _check_guard(self, args: Any) -> Status | None:
        """None to go on; RUNNING while waiting for a person; FAILURE when denied."""
        constraints = self.effective_constraints
        guard = constraints.guard  # a team member's: its callers' guards too (floors)
        key = ("".join(g.model_dump_json() for g in (guard, *guard.floors)),
               constraints.execution.workdir)
        if self._enforcer is None or self._enforcer[0] != key:  # parse the rules once
            self._enforcer = (key, GuardEnforcer.from_guard_constraints(
                constraints.guard, workspace=constraints.execution.workdir
            ))
        enforcer = self._enforcer[1]
        ledgers = ledger_view(self)
        ledger = GuardLedger.of(ledgers.get("guard_ledger"))
        # the calls a parallel branch has under way count too, as they do for an agent's
        checked = with_calls_in_flight(ledger, self.ctx.running_calls, enforcer)
        request_id = fresh_request_id(self._approval_id(args), self.ctx)
        # a person who approved may have edited the arguments: the guard checks those
        call = edited_call(ToolCall(id=request_id, name=self.tool.name, arguments=args), self.ctx)
        # the run's tokens too: a budget an agent of the workflow spent holds for its steps
        (decision,) = enforcer.preflight(
            [call], [self.tool], run=self.ctx, tokens_used=tokens_spent(self), ledger=checked,
            events=self.events, resolved=[self.tool],
        )
        if decision.awaiting_approval:
            assert self.ctx.interaction is not None  # ConfirmChecker denies without one
            self.ctx.interaction.suspend(enforcer.approval_request(
                call, decision, node=self.path, parameters=input_schema_of(self.tool)
            ))
            self.feedback_message = f"waiting for approval of {self.tool.name} ({call.id})"
            return Status.RUNNING
        if decision.denied:
            self.feedback_message = f"the guard denied {self.tool.name}: {decision.reason}"
            self.events.emit("tool.call.failed", tool=self.tool.name, error=self.feedback_message)
            if self.bt_skill:
                self.events.emit("bt.skill.node.io", skill=self.bt_skill, stage="guard",
                                 tool_name=self.tool.name, ok=False,
                                 output_preview=decision.reason)
            return Status.FAILURE
        try:
            ledgers.update({"guard_ledger": ledger.after([self.tool.name], time.time())})
        except StateValidationError:  # a state schema without the ledger: no run-wide count
            pass
        consume_approval(self.ctx, request_id)
        self._approved_args = call.arguments
        return None

    def _count_call(self) -> None:
        """Add the call, which ran (also one that raised), to the run's ``usage``, as an
        agent's executed calls are: where the state keeps one (an `AgentState`)."""
        view = usage_view(self)
        if isinstance(view.get("usage"), Usage):
            view.update({"usage": Usage(tool_calls=1)})

    def _refused(self, args: Any, error: str) -> Status:
        """Fail the step, which never ran (its sandbox could not start): said so, not counted."""
        self.feedback_message = error
        self.result = ToolResult(tool=self.tool.name, ok=False, error=error)
        if self.bt_skill:
            self.events.emit("bt.skill.node.io", skill=self.bt_skill, stage="tool",
                             tool_name=self.tool.name, ok=False, input_preview=preview(args),
                             output_preview=preview(error))
        self.events.emit("tool.call.failed", tool=self.tool.name, error=error)
        return Status.FAILURE

    def _in_doubt(self, step: str, why: str = under_way.PROCESS_DIED) -> Status:
        """Fail a step that was stopped after it began (by a process that has since died, or
        a stopped run): it may have done its work, so it is neither asked about nor run
        again."""
        under_way.stopped(self, [step])
        self._interrupted = None
        self.feedback_message = under_way.uncertain(self.tool.name, why)
        self.events.emit("tool.call.failed", tool=self.tool.name, error=self.feedback_message,
                         in_doubt=True)
        return Status.FAILURE

    def _stopped(self, step: str, *, began: bool) -> None:
        """The step's call was stopped: if it ``began`` and may not run twice, the next tick
        fails it as maybe done (its mark, if saved, stays for a restore elsewhere); else it
        runs again."""
        tool = self.tool
        if began and not under_way.rerunnable(tool):
            self._interrupted = (under_way.why_stopped(tool), self.state.manager)
            self._marked = False  # not this tick's any more: the next one settles it
        elif self._marked:
            self._marked = False
            under_way.stopped(self, [step])

    async def _guarded(self, result: ToolResult) -> ToolResult:
        """``result``, or a refusal in its place when a tool-output guardrail trips: the
        run's (configured, or given to the agents that called this run), as for a model's
        call; ``guarded=False`` trusts the author's call, not what it brings back."""
        constraints = self.effective_constraints
        guardrails = configured_guardrails("tool_output", (), constraints, self.ctx.guardrails)
        if not guardrails:
            return result
        found = await run_guardrails("tool_output", guardrails, self.ctx, result, self.events,
                                     timeout=constraints.guard.guardrails.timeout_s,
                                     tool=result.tool)
        if found is None:
            return result
        return withheld(result, f"guardrail {found[0]!r} tripped ({found[1].reason})")

    async def aclose(self) -> None:
        """Close the sandbox and end the worker threads kept for the next run."""
        await self._runners.close()

    def terminate(self, new_status: Status) -> None:
        """Stop the call, if it runs (`AsyncNode.terminate`): it is then halted."""
        self._halted = True
        super().terminate(new_status)

    async def update_async(self) -> Status:
        """Check the guard, read the input, run the tool, write the output."""
        if not self.execute:
            return Status.SUCCESS
        with pinned_paths():  # the tool opens the paths the guard checked, links swapped
            return await self._update()

    async def _update(self) -> Status:
        """`update_async`, its paths pinned."""
        self.feedback_message = ""
        self._halted = False  # whether a cancel the tool sees is the runner's, not its own
        args = self._arguments()
        step = f"step:{self.path}"
        stopped = self._interrupted
        if stopped is not None and stopped[1] is self.state.manager:  # before the guard: its
            return self._in_doubt(step, stopped[0])  # approval was already used
        if not self._marked and step in (self.state.get(under_way.UNDER_WAY) or {}):
            return self._in_doubt(step)
        if self.guarded:
            verdict = self._check_guard(args)
            if verdict is not None:
                return verdict
            args = self._approved_args  # a person's edit, if they made one
        tool = self.tool
        key, steps = f"tool:{self.path}", self.ctx.steps
        if tool.sandboxed and (steps is None or not replays(steps, key)):
            # started first: a step whose sandbox cannot start never ran, nor says it did
            refusal = await sandbox_refusal(self, tool)
            if refusal is not None:
                return self._refused(args, refusal)
        if (self.ctx.checkpointed and self.ctx.steps is None and not tool.tool_spec.idempotent
                and under_way.start(self, step, tool.name)):
            self._marked = True  # saved as under way before it starts: never run twice
        self.events.emit("tool.call.started", tool=tool.name, mode="workflow",
                         args_preview=preview(args))
        constraints = self.effective_constraints
        start = time.perf_counter()
        with span(self.ctx.tracer, f"execute_tool {tool.name}",
                  tool_span_attributes(tool.name, None, tool)) as current:
            raised: list[str] = []  # the class of what the tool raised: the span's error.type
            # whether the call ran here (its arguments fit) or was replayed: it counts then
            asked: list[bool] = []

            async def call() -> ToolResult:
                asked.append(False)
                try:
                    runner = await self._runners.get(constraints.execution, self.ctx)
                    # an agent tool's sub-agent runs under this step's constraints, in a
                    # namespace named by its path (`jianmu.nodes.agents`)
                    bound = tool.bind_args(args, {
                        "ctx": self.ctx, "state": self.state, "node_path": self.path,
                        "constraints": constraints,
                    })
                    await runner.start_sandbox(tool)  # one that cannot start ran nothing
                    asked[-1] = True
                    raw = await runner.run(tool, bound)
                    done = ToolResult.from_raw(tool.name, raw, duration_ms=elapsed_ms(start))
                except Exception as exc:
                    raised.append(type(exc).__name__)
                    done = ToolResult(tool=tool.name, ok=False, error=error_text(exc),
                                      duration_ms=elapsed_ms(start))
                except BaseException as exc:  # sys.exit(), pytest's Failed, gevent's Timeout
                    error = own_failure(exc, halted=self._halted)
                    if error is None:  # the node was halted, Ctrl-C: not the tool's
                        raise
                    raised.append(type(exc).__name__)
                    done = ToolResult(tool=tool.name, ok=False, error=error,
                                      duration_ms=elapsed_ms(start))
                # checked inside the step: a durable run records what a reader may see
                shown = done.truncate(tool.max_result_length)
                checked = await self._guarded(shown)
                forget = getattr(tool, "result_withheld", None)
                if checked is not shown and forget is not None:
                    # an agent tool's answer is not kept in its call's namespace either
                    forget(self.state, "", checked, node_path=self.path)
                return checked

            # a redirect is followed only where the guard would let the call itself go
            check = None if not self.guarded or self._enforcer is None else redirect_check(
                self._enforcer[1], ToolCall(name=tool.name, arguments=args), tool
            )
            # in a durable run, the call runs once: a recovered run replays its result
            if steps is not None:
                call = await under_way.durable_factory(steps, key, None, tool, call)
            checking = set_redirect_check(check)
            try:
                result = await self.ctx.step(key, call)
            except BaseException as exc:  # stopped, Ctrl-C: one that began may not run again
                if interrupts(exc):
                    self._stopped(step, began=bool(asked and asked[-1]))
                raise
            finally:
                reset_redirect_check(checking)
            finish_span(current, result, args, self.ctx, raised[-1] if raised else None)
        if self._marked:  # done: no longer under way
            self._marked = False
            under_way.stopped(self, [step])
        if not asked or asked[-1]:  # arguments that did not fit ran nothing
            self._count_call()
        self.result = result
        if self.bt_skill:
            self.events.emit("bt.skill.node.io", skill=self.bt_skill, stage="tool",
                             tool_name=tool.name, ok=result.ok, input_preview=preview(args),
                             output_preview=preview(result.output if result.ok else result.error))
        if not result.ok:
            self.feedback_message = result.error or "the tool failed"
            self.events.emit("tool.call.failed", tool=tool.name, error=result.error,
                             **({"in_doubt": True} if result.maybe_done else {}))
            return Status.FAILURE
        if self.output_key:
            self.state.write_port(self.output_key, result.output)
        self.events.emit("tool.call.completed", tool=tool.name,
                         result_preview=preview(result.output), duration_ms=result.duration_ms)
        return Status.SUCCESS
