"""Drives a random scenario (`tests/support/scenario.py`) and checks the runtime's promises.

A seeded driver runs the scenario's tree step by step: `run()`, `stream()` read to its end or
left at a random event (by ``break`` or closed), `cancel()` at a random event or when a slow
tool starts, the run's ``timeout`` while slow tools wait, the decisions on pending requests
in a random order (approve, reject, approve with edited arguments, an edit that does not fit),
`send()` of a new message, and a restore from the `SQLiteCheckpointer` in this process or in a
fresh one. Every step and the end are checked against README's contracts (`Violations`).

``python -m tests.support.scenario_driver SEED DB RUN_ID LEDGER DECISIONS`` is the fresh
process: it restores the run, takes the decisions, runs it once and prints how it ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import json
import random
import subprocess
import sys
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jianmu import ReactiveRunner, RunStatus, SQLiteCheckpointer
from jianmu.errors import ApprovalEditError
from jianmu.nodes import AgentState
from jianmu.nodes import _under_way as under_way
from jianmu.state import StateManager
from tests.support.scenario import BAD, Gates, Ledger, Scenario, build_tree, fresh_state, scenario

REPO = Path(__file__).resolve().parents[2]
STOPPED = (RunStatus.CANCELLED, RunStatus.TIMEOUT)
ENDS = ("tool.call.completed", "tool.call.failed", "tool.call.suspended", "tool.call.stopped")


@dataclass
class Trace:
    """What the driver did and saw, for the checks and for a failure's message."""

    steps: list[str] = field(default_factory=list)
    decisions: dict[str, str] = field(default_factory=dict)  # tag -> approved/rejected/edited
    edited: dict[str, str] = field(default_factory=dict)  # old tag -> new tag
    sent_after_stop: bool = False
    problems: list[str] = field(default_factory=list)
    final: RunStatus | None = None

    def problem(self, text: str) -> None:
        self.problems.append(f"step {len(self.steps)} ({self.steps[-1] if self.steps else '-'})"
                             f": {text}")


class Driver:
    """One scenario's run, driven by a seeded random choice of steps."""

    def __init__(self, seed: int, folder: Path, *, subprocesses: bool) -> None:
        self.seed = seed
        self.sc: Scenario = scenario(seed)
        self.rng = random.Random(f"driver-{seed}")
        self.folder = folder
        self.ledger = Ledger(folder / "ledger.jsonl")
        self.gates = Gates()
        self.trace = Trace()
        self.subprocesses = subprocesses
        self.db = folder / "runs.sqlite"
        self.checkpointer = SQLiteCheckpointer(self.db) if self.rng.random() < 0.6 else None
        self.run_id = f"fuzz{seed}"
        self.events: list[Any] = []
        self.runner = self._runner(None)
        self.sends_left = self.rng.randint(0, 2)
        self.last: Any = None

    # -- runners ---------------------------------------------------------------------------------
    def _runner(self, restore_from: Any) -> ReactiveRunner:
        tree = build_tree(self.sc, self.ledger, self.gates)
        if restore_from is None:
            runner = ReactiveRunner(tree, fresh_state(), checkpointer=self.checkpointer,
                                    run_id=self.run_id, constraints=self.sc.constraints())
        else:
            runner = ReactiveRunner.restore(tree, restore_from, self.run_id,
                                            state_manager=StateManager(AgentState),
                                            constraints=self.sc.constraints())
        runner.ctx.events.subscribe("*", self.events.append)
        runner.ctx.events.subscribe("tool.call.*", functools.partial(_agent_call, self.ledger))
        return runner

    # -- the steps -------------------------------------------------------------------------------
    async def drive(self, steps: int) -> Trace:
        for _ in range(steps):
            if self.last is not None and self.last.status.finished and not self.sends_left:
                break
            await self.step()
        await self.finish()
        return self.trace

    async def step(self) -> None:
        rng = self.rng
        if self.checkpointer is not None and self.last is not None and rng.random() < 0.25:
            await self.restore(fresh_process=self.subprocesses and rng.random() < 0.5)
        if self.runner.pending:
            self.decide(everything=rng.random() < 0.7)
        elif self.last is not None and self.sends_left and (
                self.last.status.finished or self.last.status in STOPPED) and rng.random() < 0.6:
            self.sends_left -= 1
            if self.last.status in STOPPED:
                self.trace.sent_after_stop = True
            self.trace.steps.append("send")
            self.runner.send(f"more, please ({self.sends_left})")
        how = rng.choice(["run", "run", "stream", "break", "close", "cancel", "cancel_slow",
                          "timeout"])
        await self.run_step(how)

    async def finish(self) -> None:
        """Run to the end, approving or rejecting what is asked."""
        for _ in range(40):
            if self.last is not None and self.last.status.finished:
                break
            if self.runner.pending:
                self.decide(everything=True)
            await self.run_step("run")
        self.trace.final = None if self.last is None else self.last.status

    def decide(self, *, everything: bool) -> None:
        pending = list(self.runner.pending)
        self.rng.shuffle(pending)
        if not everything:
            pending = pending[: self.rng.randint(1, len(pending))]
        for request in pending:
            self.decide_one(request)

    def decide_one(self, request: Any) -> None:
        arguments = request.payload.get("arguments") or {}
        tag = arguments.get("tag", "") if isinstance(arguments, dict) else ""
        roll = self.rng.random()
        if request.kind != "tool_call":
            self.trace.problem(f"a request of kind {request.kind!r}: {request}")
            return
        if roll < 0.1:
            try:
                self.runner.approve(request.id, arguments={"tag": 5})
            except ApprovalEditError:
                pass
            else:
                self.trace.problem(f"an edit that does not fit was taken: {request.id}")
            roll = self.rng.random()
        if roll < 0.5:
            self.trace.steps.append(f"approve {request.id}")
            self.ledger.write("decide", tag=tag, how="approved")
            self.trace.decisions[tag] = "approved"
            self.runner.approve(request.id)
        elif roll < 0.75:
            self.trace.steps.append(f"reject {request.id}")
            self.ledger.write("decide", tag=tag, how="rejected")
            self.trace.decisions[tag] = "rejected"
            self.runner.reject(request.id, "no")
        else:
            new = f"{tag}e"
            self.trace.steps.append(f"edit {request.id}")
            self.ledger.write("decide", tag=tag, how="edited")
            self.ledger.write("decide", tag=new, how="approved")
            self.trace.decisions[tag] = "edited"
            self.trace.decisions[new] = "approved"
            self.trace.edited[tag] = new
            self.runner.approve(request.id, arguments={"tag": new, "n": 1})

    async def run_step(self, how: str) -> None:
        self.trace.steps.append(how)
        runner, rng = self.runner, self.rng
        before = len(self.events)
        unhook: list[Any] = []
        timeout: float | None = 60
        if how == "cancel":
            at = rng.randint(1, 12)
            seen = [0]

            def count(_: Any) -> None:
                seen[0] += 1
                if seen[0] == at:
                    runner.cancel()

            unhook.append(runner.ctx.events.subscribe("*", count))
        elif how == "cancel_slow":
            self.gates.hold()
            self.gates.on_enter.append(lambda tag: runner.cancel())
        elif how == "timeout":
            self.gates.hold()
            timeout = 0.3
        self.ledger.phase = "running"
        self.ledger.write("step", how=how)
        stream_ended: list[str] = []
        try:
            if how in ("stream", "break", "close"):
                result = await self.read_stream(how, stream_ended)
            else:
                result = await runner.run(timeout=timeout)
        finally:
            for undo in unhook:
                undo()
            self.gates.on_enter.clear()
        self.ledger.phase = "left" if result is None else "returned"
        if result is not None and (result.status in STOPPED or how in ("break", "close")):
            self.ledger.write("stop")
        if result is None:  # the loop was left: the run stops as the generator is dropped
            for _ in range(50):
                await asyncio.sleep(0)
            result = await self.settle_left()
            self.ledger.phase = "returned"  # stopped: nothing of it may start from here on
            self.ledger.write("stop")
        self.after_step(how, result, before, stream_ended)

    async def read_stream(self, how: str, ended: list[str]) -> Any:
        runner = self.runner
        at = self.rng.randint(1, 15) if how != "stream" else None
        count = 0
        if how == "close":
            async with contextlib.aclosing(runner.stream(timeout=60)) as events:
                async for event in events:
                    count += 1
                    if event.name == "run.finished" and event.fields["result"].run_id == (
                            runner.run_id):
                        ended.append("finished")
                        return event.fields["result"]
                    if count == at:
                        break
            ended.append("closed")
            return self.last_result_after_close()
        async for event in runner.stream(timeout=60):
            count += 1
            if event.name == "run.finished" and event.fields["result"].run_id == runner.run_id:
                ended.append("finished")
                return event.fields["result"]
            if count == at:
                break
        ended.append("left")
        return None

    def last_result_after_close(self) -> Any:
        finished = [e for e in self.events if e.name == "run.finished"
                    and getattr(e.fields.get("result"), "run_id", None) == self.runner.run_id]
        return finished[-1].fields["result"] if finished else None

    async def settle_left(self) -> Any:
        """After a plain ``break``: the next run waits for the left one; here, its end."""
        for _ in range(200):
            if not self.runner._running:
                break
            await asyncio.sleep(0)
        gc.collect()
        for _ in range(20):
            await asyncio.sleep(0)
        return self.last_result_after_close()

    def after_step(self, how: str, result: Any, before: int, stream_ended: list[str]) -> None:
        self.gates.release()
        if not self.ledger.wait_threads():
            self.trace.problem("a sync tool's thread never ended")
        if result is None:
            self.trace.problem("no run.finished for the step")
            return
        self.last = result
        self.trace.steps[-1] += f" -> {result.status.value}"
        step_events = self.events[before:]
        finished = [e for e in step_events if e.name == "run.finished"
                    and getattr(e.fields.get("result"), "run_id", None) == self.runner.run_id]
        if len(finished) != 1:
            self.trace.problem(f"{len(finished)} run.finished events of the run in one step")
        self.check_conversation(final=result.status.finished)
        self.check_usage()

    # -- restores ------------------------------------------------------------------------------
    async def restore(self, *, fresh_process: bool) -> None:
        assert self.checkpointer is not None
        before = [_shape(m) for m in self.runner.state.get("messages") or ()]
        if fresh_process:
            decisions = {}
            for request in self.runner.pending:
                arguments = request.payload.get("arguments") or {}
                tag = arguments.get("tag", "") if isinstance(arguments, dict) else ""
                decisions[request.id] = tag
                self.ledger.write("decide", tag=tag, how="approved")
                self.trace.decisions[tag] = "approved"
            self.trace.steps.append(f"restore in a fresh process, approving {sorted(decisions)}")
            self.ledger.phase = "child"
            done = await asyncio.to_thread(
                subprocess.run,
                [sys.executable, "-m", "tests.support.scenario_driver", str(self.seed),
                 str(self.db), self.run_id, str(self.ledger.path), json.dumps(decisions)],
                cwd=REPO, capture_output=True, text=True, timeout=120,
            )
            self.ledger.phase = "returned"
            if done.returncode != 0:
                self.trace.problem(f"the fresh process failed: {done.stderr[-2000:]}")
                return
            self.trace.steps[-1] += f" -> {done.stdout.strip()}"
        else:
            self.trace.steps.append("restore")
        self.runner = self._runner(self.checkpointer)
        after = [_shape(m) for m in self.runner.state.get("messages") or ()]
        if not fresh_process and after != before:
            self.trace.problem(f"a restored run has other messages: {before} != {after}")
        if fresh_process:
            status = self.runner._finished
            self.last = status if status is not None else self.last
            if status is None and self.last is not None and self.last.status.finished:
                self.last = None  # it goes on: the fresh process left it running

    # -- checks ----------------------------------------------------------------------------------
    def conversations(self) -> dict[str, list[Any]]:
        state = self.runner.state
        found = {"": list(state.get("messages") or ())}
        for namespace in state.namespaces():
            found[namespace] = list(state.scope(namespace).get("messages") or ())
        return found

    def check_conversation(self, *, final: bool) -> None:
        """Each call gets one result, right after its assistant message; no orphan result."""
        for namespace, messages in self.conversations().items():
            i = 0
            while i < len(messages):
                message = messages[i]
                if message.role == "tool":
                    self.trace.problem(f"{namespace or 'root'}: an orphan result at {i}: "
                                       f"{message.tool_call_id} {message.content!r}")
                    i += 1
                    continue
                if message.role != "assistant" or not message.tool_calls:
                    i += 1
                    continue
                wanted = Counter(c.id for c in message.tool_calls)
                j = i + 1
                got: Counter[str] = Counter()
                while j < len(messages) and messages[j].role == "tool":
                    got[messages[j].tool_call_id or ""] += 1
                    j += 1
                # the last batch may wait for its results, and a sub-agent's namespace may
                # stay as a stop left it (the caller's conversation went on without it)
                last_batch = j == len(messages) and (not final or bool(namespace))
                if got != wanted and not (last_batch and not (got - wanted)):
                    self.trace.problem(
                        f"{namespace or 'root'}: the calls {dict(wanted)} at {i} got results "
                        f"{dict(got)}")
                i = j

    def check_usage(self) -> None:
        """``usage`` counts each model call, and each execution recorded as done: every one
        that ended, but one stopped may count or not (README: "counts only when it is
        recorded as done"), and one recorded as maybe done counts."""
        usage = self.runner.state.get("usage")
        lines = self.ledger.lines()
        requests = sum(1 for line in lines if line["k"] == "model")
        ran = sum(1 for line in lines if line["k"] in ("end", "agent_end"))
        stopped = _disturbed(lines, _late_thread_starts(lines, self.sc))
        certain = sum(1 for line in lines if line["k"] == "agent_end" or (line["k"] == "end"
                      and line["tag"] not in stopped))
        if usage is None:
            if requests:
                self.trace.problem("no usage after model calls")
            return
        if usage.requests != requests:
            self.trace.problem(f"usage.requests {usage.requests} != {requests} model calls")
        # a call stopped after it began, recorded as maybe done (never run again), counts as
        # done, ended or not, even before its tool got to start: the budget errs on the safe
        # side
        maybe = repr(self.runner.state.snapshot()).count("it was not run again")
        began = sum(1 for line in lines if line["k"] in ("start", "agent_end"))
        if not certain <= usage.tool_calls <= max(ran, began) + maybe:
            self.trace.problem(f"usage.tool_calls {usage.tool_calls} is not within "
                               f"{certain}..{ran} executions (+{maybe} maybe done)")


def _agent_call(ledger: Ledger, event: Any) -> None:
    """A helper agent's call that ran to its end counts as an execution, as a tool's does; a
    sync call a stop found in a worker thread is noted (its body may begin after the stop)."""
    if event.fields.get("tool") == "helper" and event.name in ENDS[:2]:
        ledger.write("agent_end", call_id=event.fields.get("call_id"))
    elif event.name == "tool.call.failed" and str(event.fields.get("error")).startswith(
            under_way.IN_A_THREAD):
        ledger.write("in_thread", node=event.node, call_id=event.fields.get("call_id"))


def _late_thread_starts(lines: list[dict[str, Any]], sc: Scenario) -> set[int]:
    """The ledger lines of sync calls that a thread took before a stop, whose body began after
    it: the runtime said so (``in_thread``: recorded as maybe done, never run again). The
    thread's claim and the tool's first line are a race no run can close; the same call id
    under the same agent (a helper's node path names the lead's call of its input) only."""
    helper_call = {c["arguments"]["input"]: c["id"] for turn in sc.lead
                   for c in turn.get("calls", ()) if c["name"] == "helper"}

    def node_of(tag: str) -> str | None:  # a helper's tag starts with its input and ':'
        prefix, _, rest = tag.rpartition(":")
        return f"helper[{helper_call.get(prefix)}]/" if rest and prefix else None

    late: set[int] = set()
    taken: list[tuple[str, str]] = []  # (call id, node path) the step's stop found in threads
    stopped = False
    for index, line in enumerate(lines):
        if line["k"] == "step":
            taken, stopped = [], False
        elif line["k"] == "stop":
            stopped = True
        elif line["k"] == "in_thread":
            taken.append((line["call_id"], line["node"]))
        elif line["k"] == "start" and stopped:
            helper = node_of(str(line["tag"]))
            if any(call_id == line["call_id"] and (
                    helper in node if helper else "helper[" not in node)
                   for call_id, node in taken):
                late.add(index)
    return late


def _disturbed(lines: list[dict[str, Any]], late: set[int]) -> Counter[str]:
    """How many stopped steps started each call: whether the run recorded it as done is a
    race with the stop (README: a call stopped mid-run may run again). A call whose thread
    took it before the stop and began after it (``late``, `_late_thread_starts`) counts."""
    started: set[str] = set()
    found: Counter[str] = Counter()
    for index, line in enumerate(lines):
        if line["k"] == "start":
            if index in late:
                found[line["tag"]] += 1
            else:
                started.add(line["tag"])
        elif line["k"] == "step":
            started = set()
        elif line["k"] == "stop":
            found.update(started)
            started = set()
    return found


def _shape(message: Any) -> tuple[Any, ...]:
    return (message.role, message.content, tuple((c.id, c.name) for c in message.tool_calls),
            message.tool_call_id)


def check_ledger(trace: Trace, lines: list[dict[str, Any]], sc: Scenario) -> None:
    """The calls' executions against the decisions, the run's ends and the model's calls."""
    confirm = {s.name for s in [*sc.tools, *sc.helper_tools] if s.confirm}
    reads = {s.name for s in [*sc.tools, *sc.helper_tools] if s.read}
    decided: dict[str, str] = {}
    starts: Counter[str] = Counter()
    ends: Counter[str] = Counter()
    late = _late_thread_starts(lines, sc)
    disturbed = _disturbed(lines, late)
    last_stop = 0
    for index, line in enumerate(lines):
        kind, tag = line["k"], line.get("tag")
        if kind == "decide":
            decided[tag] = line["how"]
        elif kind == "model" and line.get("unpaired"):
            trace.problems.append(f"the {line['who']} model was sent a conversation that breaks "
                                  f"the tool-call pairing: {line['unpaired']}")
        elif kind == "stop":  # a step stopped: what it started may run again
            last_stop = index
        elif kind == "start":
            starts[tag] += 1
            # (``returned``: after `run()` returned, a closed stream's loop ended, or a
            # stream left by ``break`` had its run stopped)
            if line["phase"] == "returned" and index not in late:
                trace.problems.append(f"{line['tool']} {tag} started after the run returned")
            if line["tool"] == sc.denied or (sc.edits_denied and str(tag).endswith("e")):
                trace.problems.append(f"{line['tool']} {tag} ran, though the policy denies it")
            if str(tag).startswith(BAD) or not tag:
                trace.problems.append(f"a call whose arguments do not fit ran: {line}")
            if line["tool"] in confirm and decided.get(tag) != "approved":
                trace.problems.append(f"{line['tool']} {tag} ran without an approval "
                                      f"({decided.get(tag)})")
        elif kind == "end":
            ends[tag] += 1
            if line["phase"] == "returned" and tag not in disturbed:
                trace.problems.append(f"{line['tool']} {tag} ended after the run returned")
    tools_of = {line["tag"]: line["tool"] for line in lines if line["k"] == "start"}
    for tag, count in starts.items():
        # a read stopped may run again after each stop; a write that began never runs again
        limit = 1 + disturbed[tag] if tools_of[tag] in reads else 1
        if count > limit:
            trace.problems.append(f"{tools_of[tag]} {tag} ran {count} times (stopped "
                                  f"{disturbed[tag]} times)")
    if trace.final is not RunStatus.SUCCESS:
        return
    for index, line in enumerate(lines):
        if line["k"] != "model":
            continue
        for tag in line["tags"]:
            if not tag or tag.startswith(BAD) or tag not in tools_of:
                continue  # not a tool of the ledger's (a helper, a hand-off), or never ran
            if tag in disturbed:
                if tools_of[tag] in reads and not trace.sent_after_stop and not ends[tag]:
                    trace.problems.append(f"the read call {tag} was lost after a stop")
                continue
            if index < last_stop or decided.get(tag) in ("rejected", "edited"):
                continue
            if ends[tag] != 1:
                trace.problems.append(f"{tag} ended {ends[tag]} times in a run that succeeded")


async def run_scenario(seed: int, folder: Path, *, steps: int = 8,
                       subprocesses: bool = False) -> Trace:
    """Drive scenario ``seed`` and check it; the trace lists every problem found."""
    loop = asyncio.get_running_loop()
    errors: list[str] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(str(context)))
    driver = Driver(seed, folder, subprocesses=subprocesses)
    # what earlier tests of this worker left for the collector (an unclosed socket's warning)
    # is collected now, not counted as this scenario's
    gc.collect()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            trace = await driver.drive(steps)
        finally:
            await driver.runner.aclose()
            driver.gates.release()
            if driver.checkpointer is not None:
                driver.checkpointer.close()
        gc.collect()
        for _ in range(5):
            await asyncio.sleep(0)
    check_ledger(trace, driver.ledger.lines(), driver.sc)
    left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    if left:
        trace.problems.append(f"tasks left running: {left}")
    trace.problems.extend(f"loop error: {e}" for e in errors)
    trace.problems.extend(f"warning: {w.category.__name__}: {w.message}" for w in caught)
    trace.problems.extend(_unpaired(driver.events))
    return trace


def _unpaired(events: list[Any]) -> list[str]:
    """Each ``tool.call.started`` has exactly one end event of its call."""
    open_calls: Counter[tuple[Any, Any]] = Counter()
    problems = []
    for event in events:
        key = (event.node, event.fields.get("call_id"))
        if event.name == "tool.call.started" and event.fields.get("mode") == "agent":
            open_calls[key] += 1
        elif event.name in ENDS and event.fields.get("call_id") is not None:
            if open_calls[key] > 0:  # a call refused before it started ends without one
                open_calls[key] -= 1
    problems.extend(f"a started call with no end event: {key}"
                    for key, n in open_calls.items() if n > 0)
    return problems


def _child(seed: int, db: str, run_id: str, ledger_path: str, decisions: str) -> None:
    """The fresh process: restore, decide, run once, print how it ended."""
    ledger = Ledger(Path(ledger_path), phase="child")
    sc = scenario(seed)
    runner = ReactiveRunner.restore(build_tree(sc, ledger, Gates()), SQLiteCheckpointer(db),
                                    run_id, state_manager=StateManager(AgentState),
                                    constraints=sc.constraints())
    runner.ctx.events.subscribe("tool.call.*", functools.partial(_agent_call, ledger))
    for request_id in json.loads(decisions):
        runner.approve(request_id)
    result = runner.run_sync(timeout=60)
    ledger.phase = "returned"
    print(result.status.value)


if __name__ == "__main__":
    _child(int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
