"""Drives a random team (`tests/support/team_scenario.py`) through suspends and checks the
promises of README's "Agents that call agents" and "Tools, the guard and approvals".

A seeded plan, at each stop of the run: decide every request or some of them (approve, reject,
approve with edited arguments, answer a question), `send()` while requests wait (refused),
restore the run in this process or another, two other processes resuming at once, a
`cancel()` when a slow tool starts, the run's timeout while slow tools wait, a new message
after a stopped run. After every return of `run()`: nothing of the run runs on (the ledger
does not grow, no task of the run is left). At the end: every approved call ran exactly once
(a call stopped in flight at most once), no rejected call ran, an edited call ran with its
edit, each question's answer reached the agent that asked it, the root's usage counts every
model call of every agent, and the final answer is the one a run never restored gives.

``python -m tests.support.team_driver SEED DB RUN_ID LEDGER`` is the other process: it
restores the run, says ``ready``, waits for a line on stdin, decides every pending request,
runs once and prints how it ended as JSON.
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jianmu import ReactiveRunner, RunStatus, SQLiteCheckpointer, StateManager
from jianmu.errors import CheckpointError, InteractionError
from jianmu.nodes import AgentState
from tests.support.scenario import unpaired_calls
from tests.support.team_scenario import EDITED_N, TOKENS_IN, Gates, Ledger, build, decision, team

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Record:
    """What the driver did and saw, for the end's checks."""

    decided: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Request id -> (what was decided, the call's tag)."""
    stops: int = 0
    """Runs stopped by a cancel or a timeout (a call stopped so may be maybe done)."""
    sent_after: set[str] = field(default_factory=set)
    """Tags approved before a message was sent (such a call may be closed as not run)."""
    violations: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)


def tag_of(request: Any) -> str:
    """The tag of the call a request asks about (its question's, for a question)."""
    if request.kind == "question":
        return str(request.question).removeprefix("Q:")
    return str((request.arguments or {}).get("tag", ""))


def decide(runner: ReactiveRunner, seed: int, requests: list[Any], record: Record,
           bare: random.Random | None = None) -> None:
    """Decide ``requests`` as the seed says; a question is answered with its tag. With
    ``bare``, some are named by their call id alone: taken for the one request of that id,
    else refused as naming several."""
    for request in requests:
        tag = tag_of(request)
        name = request.id
        if bare is not None and bare.random() < 0.4:
            name = request.id.rsplit("/", 1)[-1]
            if name in {r.id for r in runner.pending}:  # the whole id of another request
                name = request.id
        try:
            taken = _decide_one(runner, seed, request, name, tag)
        except InteractionError as exc:
            # refused as naming several, or as naming a root call's request decided before
            if name == request.id or not any(w in str(exc) for w in ("requests, of", "already")):
                record.violations.append(f"deciding {request.id} as {name} was refused: {exc}")
                continue
            record.steps.append(f"bare {name} refused")
            try:
                taken = _decide_one(runner, seed, request, request.id, tag)
            except (InteractionError, CheckpointError) as again:
                record.violations.append(f"deciding {request.id} was refused: {again}")
                continue
        except CheckpointError as exc:
            record.violations.append(f"deciding {request.id} was refused: {exc}")
            continue
        if taken != request.id:
            record.violations.append(f"deciding {name} took {taken}, not {request.id}")
        record.decided[request.id] = (
            "answer" if request.kind == "question" else decision(seed, request.id), tag)


def _decide_one(runner: ReactiveRunner, seed: int, request: Any, name: str, tag: str) -> str:
    """Decide one request, named ``name``; the id of the request taken."""
    if request.kind == "question":
        return runner.answer(name, f"A:{tag}")
    what = decision(seed, request.id)
    if what == "reject":
        return runner.reject(name)
    if what == "edit":
        return runner.approve(name, arguments={**(request.arguments or {}), "n": EDITED_N})
    return runner.approve(name)


def jianmu_tasks() -> list[asyncio.Task[Any]]:
    """The run's node tasks still running in this loop."""
    return [t for t in asyncio.all_tasks() if t.get_name().startswith("jianmu:")
            and not t.done()]


class Driver:
    """One scenario's walk, in this process and others."""

    def __init__(self, seed: int, where: Path, plan: int | None,
                 processes: bool = True) -> None:
        self.seed, self.where, self.processes = seed, where, processes
        self.team = team(seed)
        self.ledger = Ledger(where / "ledger.jsonl")
        self.gates = Gates()
        self.db = where / "runs.sqlite"
        self.run_id = f"team{seed}"
        self.plan = random.Random(f"plan-{seed}-{plan}") if plan is not None else None
        self.record = Record()
        self.store = SQLiteCheckpointer(self.db)
        self.runner = ReactiveRunner(build(self.team, self.ledger, self.gates), StateManager(
            AgentState, {"messages": [{"role": "user", "content": "Go."}]}),
            checkpointer=self.store, run_id=self.run_id)
        for branch in self.team.branches:  # an agent beside the lead, in its own namespace
            self.runner.state.scope(branch.name).update(
                {"messages": [{"role": "user", "content": "Go."}]})

    async def restore(self) -> None:
        """A new runner of the run, from its checkpoint (this process)."""
        await self.runner.aclose()  # its lease, if it decided since its last run, let go
        self.runner = ReactiveRunner.restore(
            build(self.team, self.ledger, self.gates), self.store, self.run_id,
            state_manager=StateManager(AgentState))

    async def run(self, how: str = "plain") -> Any:
        """One `run()`; ``cancel`` stops it when a slow tool starts, ``timeout`` lets slow
        tools wait past the run's timeout. Then the ledger must not grow."""
        loop = asyncio.get_running_loop()
        hooks: list[Any] = []
        timeout: float | None = 120
        if how in ("cancel", "timeout"):
            self.gates.hold()
        if how == "cancel":
            runner = self.runner
            hooks.append(lambda _tag: loop.call_soon_threadsafe(runner.cancel))
        if how == "timeout":
            timeout = 0.3
        contenders: list[asyncio.Task[Any]] = []
        if how == "contend":  # another owner tries the run while a slow tool holds it here
            self.gates.hold()

            def contend(_tag: str) -> None:
                if not contenders:
                    contenders.append(loop.create_task(self._contend()))

            hooks.append(lambda tag: loop.call_soon_threadsafe(contend, tag))
        if how == "short":  # a timeout that may land anywhere, the gates open
            timeout = (self.plan or random.Random(0)).uniform(0.01, 0.3)
        self.gates.on_enter[:] = hooks
        self.ledger.phase = "running"
        pending_cleanups: list[Any] = []
        unsubscribe = [self.runner.ctx.events.subscribe("run.cleanup_pending",
                                                        pending_cleanups.append)]
        unsubscribe += self._event_hooks(how)
        result = await self.runner.run(timeout=timeout)
        for undo in unsubscribe:
            undo()
        for contender in contenders:
            await contender
        self.ledger.phase = "returned"
        self.gates.on_enter[:] = []
        self.record.steps.append(f"run:{how}->{result.status.value}")
        if result.status in (RunStatus.CANCELLED, RunStatus.TIMEOUT):
            self.record.stops += 1
        if how == "decide_early" and result.status is RunStatus.SUSPENDED and \
                self.runner.pending and all(r.id in self.record.decided
                                            for r in self.runner.pending):
            self.record.violations.append(
                f"suspended on requests decided while it settled: {self.runner.pending}")
        left = jianmu_tasks()
        # past the timeout's grace a cleanup goes on after run() returned, said by an event
        if left and not (result.status is RunStatus.TIMEOUT and pending_cleanups):
            self.record.violations.append(
                f"{result.status.value}: tasks left running {[t.get_name() for t in left]}")
        mark = len(self.ledger.lines())
        self.gates.release()
        for _ in range(30):
            await asyncio.sleep(0)
        self.ledger.wait_threads()
        await asyncio.sleep(0.01)  # what leaked has had its chance to write
        late = self.ledger.lines()[mark:]
        late_async = [line for line in late if result.status is RunStatus.SUSPENDED
                      or "_sync" not in line.get("tool", "")]
        if late_async:
            self.record.violations.append(
                f"after {result.status.value}, ran on: {late_async}")
        self.ledger.phase = "running"
        return result

    async def _contend(self) -> None:
        """Another owner restores, decides and runs the run while it runs here: refused,
        nothing of it runs; then the slow tools here go on."""
        try:
            for end in await self.others(1):
                if end["ran"] or end["status"] != "claimed":
                    self.record.violations.append(f"a second owner went on: {end}")
            self.record.steps.append("contended")
        finally:
            self.gates.release()

    def _event_hooks(self, how: str) -> list[Any]:
        """``cancel_at``: a cancel at the k-th of a random event; ``decide_early``: every
        request decided as soon as the run says it suspends (while calls still settle)."""
        plan, runner = self.plan or random.Random(0), self.runner
        loop = asyncio.get_running_loop()
        if how == "cancel_at":
            name = plan.choice(["tool.call.started", "tool.call.completed", "tool.call.failed",
                                "tool.call.suspended", "llm.call.started", "run.suspended"])
            count, seen = plan.randint(1, 3), [0]
            self.record.steps.append(f"cancel at {name} #{count}")

            def maybe_cancel(_event: Any) -> None:
                seen[0] += 1
                if seen[0] == count:
                    self.record.steps.append("cancelled")
                    loop.call_soon_threadsafe(runner.cancel)

            return [runner.ctx.events.subscribe(name, maybe_cancel)]
        if how == "decide_early":
            def decide_soon(_event: Any) -> None:
                loop.call_soon(lambda: decide(runner, self.seed, [
                    r for r in runner.pending if r.id not in self.record.decided],
                    self.record))

            return [runner.ctx.events.subscribe("run.suspended", decide_soon)]
        return []

    async def others_here(self, n: int) -> list[dict[str, Any]]:
        """``n`` other runners of this process restore the run, decide and run it at once."""

        async def other(n: int) -> dict[str, Any]:
            record, ledger = Record(), Ledger(self.ledger.path, owner=f"other{n}")
            ran, span, status, error = False, [0.0, 0.0], "claimed", None
            try:
                runner = ReactiveRunner.restore(
                    build(self.team, ledger, self.gates), self.store, self.run_id,
                    state_manager=StateManager(AgentState))
                await asyncio.sleep(0)  # both have restored before either decides
                decide(runner, self.seed, list(runner.pending), record)
                record.violations.clear()  # a decision the racer took first is refused here
                began = time.monotonic()
                result = await runner.run(timeout=120)
                await runner.aclose()
                span = [began, time.monotonic()]
                ran = any(line["owner"] == ledger.owner for line in ledger.lines())
                status, error = result.status.value, result.error
            except CheckpointError as exc:
                error = str(exc)
            return {"status": status, "error": error, "ran": ran, "span": span,
                    "violations": record.violations,
                    "decided": [[k, *v] for k, v in record.decided.items()]}

        return list(await asyncio.gather(*(other(i) for i in range(n))))

    async def others(self, n: int) -> list[dict[str, Any]]:
        """``n`` other owners (processes, or runners here) take the run on at once."""
        if self.processes:
            return await asyncio.to_thread(self.other_process, n)
        return await self.others_here(n)

    def other_process(self, n: int = 1) -> list[dict[str, Any]]:
        """``n`` other processes restore the run, decide and run it at once."""
        command = [sys.executable, "-m", "tests.support.team_driver", str(self.seed),
                   str(self.db), self.run_id, str(self.ledger.path)]
        children = [subprocess.Popen(command, cwd=REPO, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True) for _ in range(n)]
        for child in children:
            assert child.stdout is not None
            ready = child.stdout.readline()
            if ready != "ready\n":
                out, err = child.communicate(timeout=60)
                raise AssertionError(f"the other process did not start: {ready}{out}{err}")
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        ends = []
        for child in children:
            out, err = child.communicate(timeout=300)
            if child.returncode != 0 or "Traceback" in err:
                self.record.violations.append(f"the other process failed: {out}{err}")
                continue
            ends.append(json.loads(out.strip().splitlines()[-1]))
        return ends

    async def walk(self) -> Any:
        """The plan's walk to the run's end; the last result."""
        result = await self.run()
        for _ in range(150):
            if result.status is RunStatus.SUCCESS:
                return result
            if result.status is RunStatus.FAILURE:
                self.record.violations.append(f"the run failed: {result.error}")
                return result
            result = await self.step(result)
        self.record.violations.append(f"no end after 150 steps: {self.record.steps}")
        return result

    async def step(self, result: Any) -> Any:
        """One step of the plan from ``result`` (no plan: decide all, run here)."""
        plan = self.plan
        pending = list(self.runner.pending)
        if result.status is not RunStatus.SUSPENDED or not pending:
            roll = plan.random() if plan is not None else 1.0
            if roll < 0.2:  # a stopped run goes on in another process
                self.record.steps.append("stopped, other process")
                await self.runner.aclose()
                for end in await self.others(1):
                    self._take(end)
                await self.restore()
                return await self.run()
            if roll < 0.35:
                self.record.steps.append("stopped, restore here")
                await self.restore()
            if plan is not None and plan.random() < 0.3 and not self.runner.pending:
                self.runner.send("And then?")
                self.record.sent_after |= {t for w, t in self.record.decided.values()
                                           if w in ("approve", "edit")}
                self.record.steps.append("send")
            return await self.run()
        self._check_pending(pending)
        if plan is None:
            decide(self.runner, self.seed, pending, self.record)
            return await self.run()
        roll = plan.random()
        if roll < 0.1:
            try:
                self.runner.send("Meanwhile...")
                self.record.violations.append("send() while requests wait was taken")
            except RuntimeError:
                self.record.steps.append("send refused")
            return result
        if roll < 0.25:
            self.record.steps.append("other process")
            if plan.random() < 0.5:  # some decided here first: saved as they are made
                decide(self.runner, self.seed, plan.sample(pending, plan.randint(
                    1, len(pending))), self.record)
            await self.runner.aclose()  # what it decided handed on: its lease let go
            for end in await self.others(1):
                self._take(end)
            await self.restore()
            return await self.run()
        if roll < 0.35:
            self.record.steps.append("race")
            ends = await self.others(2)
            for end in ends:
                self._take(end)
            both = [e["span"] for e in ends if e["ran"]]
            if len(both) == 2 and both[0][0] < both[1][1] and both[1][0] < both[0][1]:
                self.record.violations.append(f"two processes ran at once: {ends}")
            await self.restore()
            return await self.run()
        if roll < 0.45:
            self.record.steps.append("restore here")
            await self.restore()
        subset = pending if plan.random() < 0.7 else plan.sample(
            pending, plan.randint(1, len(pending)))
        decide(self.runner, self.seed, subset, self.record)
        how = plan.choice(["plain"] * 3 + ["cancel"] * 2 + ["short"] * 2 + ["cancel_at"] * 3
                          + ["timeout", "decide_early", "contend"])
        return await self.run(how)

    def _take(self, end: dict[str, Any]) -> None:
        """What another process decided and saw."""
        for request_id, what, tag in end["decided"]:
            self.record.decided.setdefault(request_id, (what, tag))
        self.record.violations.extend(end["violations"])
        self.record.steps.append(f"other:{end['status']}")
        if end["status"] in ("cancelled", "timeout"):
            self.record.stops += 1

    def _check_pending(self, pending: list[Any]) -> None:
        ids = [r.id for r in pending]
        if len(set(ids)) != len(ids):
            self.record.violations.append(f"pending ids repeat: {ids}")
        for request in pending:
            tag = tag_of(request)
            agent = tag.split("@")[0]
            if agent != "lead" and not request.id.startswith(agent + "/"):
                if f"/{agent}/" not in request.id:
                    self.record.violations.append(
                        f"request {request.id} of {agent} is not under its namespace")
            if request.id in self.record.decided:
                self.record.violations.append(f"{request.id} asked again after its decision")

    def answers(self) -> list[Any]:
        """The final answers of the lead and of the agents beside it."""
        state = self.runner.state
        return [state.get("final_answer")] + [state.scope(b.name).get("final_answer")
                                              for b in self.team.branches]

    def _told(self, request_id: str) -> list[str]:
        """What the model that made ``request_id``'s call read as its result."""
        where, _, call_id = request_id.rpartition("/")
        state = self.runner.state
        scopes = [state.scope(ns) for ns in state.namespaces()
                  if ns.replace(".", "/").endswith(where)] if where else [state.root]
        return [str(m.content) for view in scopes for m in view.get("messages") or ()
                if m.role == "tool" and m.tool_call_id == call_id]

    def check_end(self, result: Any) -> list[str]:
        """The end's checks; every violation found."""
        lines = self.ledger.lines()
        starts = Counter(line["tag"] for line in lines if line["k"] == "start")
        violations = list(self.record.violations)
        for tag, count in starts.items():
            if count > 1:
                violations.append(f"{tag} started {count} times")
        for request_id, (what, tag) in self.record.decided.items():
            if what == "reject" and starts[tag]:
                violations.append(f"rejected {request_id} ran")
            if what in ("approve", "edit") and not starts[tag] and result.ok and \
                    tag not in self.record.sent_after:
                violations.append(f"approved {request_id} never ran: {self._told(request_id)}")
            if what == "edit":
                ran = [line["n"] for line in lines if line["k"] == "start" and
                       line["tag"] == tag]
                if ran and ran != [EDITED_N]:
                    violations.append(f"edited {request_id} ran with n={ran}")
            if what == "answer":
                read = [line["got"] for line in lines if line["k"] == "answer_read"
                        and line["tag"] == tag]
                if any(got.startswith("A:") and got != f"A:{tag}" for got in read):
                    violations.append(f"the answer to {tag} read as {read}")
                if result.ok and not self.record.stops and f"A:{tag}" not in read:
                    violations.append(f"the answer to {tag} never reached it: {read}")
        for line in lines:
            if line["k"] == "answer_read" and line["got"].startswith("A:") and \
                    line["got"] != f"A:{line['tag']}":
                violations.append(f"{line['who']} read {line['got']} for {line['tag']}")
        if result.ok:  # each call answered right after it (OpenAI's rule), a message never
            for view in [self.runner.state.root, *(  # between a call and its result
                    self.runner.state.scope(b.name) for b in self.team.branches)]:
                problems = unpaired_calls(list(view.get("messages") or ()))
                if problems:
                    violations.append(f"the conversation is out of order: {problems}")
        models = sum(1 for line in lines if line["k"] == "model")
        usage = result.usage
        if result.ok and usage is not None and (
                usage.requests != models or usage.input_tokens != TOKENS_IN * models):
            violations.append(f"usage {usage.requests} requests, {usage.input_tokens} tokens"
                              f" in; the models were called {models} times")
        # every call that ran counts once: a plain tool's, a sub-agent's, an answered question
        runs = {(line["who"], line["given"]) for line in lines  # a sub-agent's runs
                if line["k"] == "model" and line["given"]}
        calls = sum(starts.values()) + len(runs) + sum(
            1 for what, _tag in self.record.decided.values() if what == "answer")
        if result.ok and usage is not None and not self.record.stops and \
                "send" not in self.record.steps and usage.tool_calls != calls:
            violations.append(f"usage {usage.tool_calls} tool calls; {calls} ran")
        return violations


async def drive(seed: int, where: Path, plan: int | None,
                processes: bool = True) -> tuple[Driver, Any, list[str]]:
    """Walk the scenario of ``seed`` by ``plan`` (None: decide all, never restore); other
    owners are other processes, or with ``processes=False`` other runners of this one."""
    where.mkdir(parents=True, exist_ok=True)
    driver = Driver(seed, where, plan, processes)
    try:
        result = await driver.walk()
    finally:
        driver.gates.release()
    violations = driver.check_end(result)
    driver.store.close()
    return driver, result, violations


async def compare(seed: int, where: Path, plan: int, processes: bool = True) -> list[str]:
    """The plan's walk, and a plain walk: when the plan stopped nothing and sent nothing,
    both end with the same answer."""
    planned, result, violations = await drive(seed, where / "planned", plan, processes)
    _plain, plain_result, plain_violations = await drive(seed, where / "plain", None)
    violations += [f"(plain) {v}" for v in plain_violations]
    if not planned.record.stops and "send" not in planned.record.steps and result.ok and \
            plain_result.ok:
        answers = (planned.answers(), _plain.answers())
        if answers[0] != answers[1]:
            violations.append(f"the final answers differ: {answers}")
    if violations:
        violations.append(f"steps: {planned.record.steps}")
    return violations


def _other(seed: int, db: str, run_id: str, ledger_path: str) -> None:
    """The other process: restore, wait for the go, decide everything, run once."""
    sc = team(seed)
    ledger, gates, record = Ledger(Path(ledger_path)), Gates(), Record()
    print("ready", flush=True)
    sys.stdin.readline()
    ran, span = False, [0.0, 0.0]
    status, error = "claimed", None
    with SQLiteCheckpointer(db) as store:
        try:
            runner = ReactiveRunner.restore(build(sc, ledger, gates), store, run_id,
                                            state_manager=StateManager(AgentState))
            decide(runner, seed, list(runner.pending), record)
            record.violations.clear()  # a decision the racer took first is refused here
            began = time.time()
            result = runner.run_sync(timeout=120)
            span = [began, time.time()]
            ledger.phase = "returned"
            ran = any(line["owner"] == ledger.owner for line in ledger.lines())
            status, error = result.status.value, result.error
        except CheckpointError as exc:
            error = str(exc)
    print(json.dumps({"status": status, "error": error, "ran": ran, "span": span,
                      "violations": record.violations,
                      "decided": [[k, *v] for k, v in record.decided.items()]}))


if __name__ == "__main__":
    _other(int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4])
