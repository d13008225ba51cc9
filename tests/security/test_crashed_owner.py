"""A call the crashed owner of a run had started is never run again unrecorded.

Before the fix, `jianmu resume RUN --approve pay_1` killed (SIGKILL) while paying left nothing
saying the payment had started: the decision was lost with the process, the next resume asked
for the approval again as if nothing had happened, and approving it paid a second time. Now a
call that may not run twice is saved as under way before it starts (its approval with it); a
restore by the next owner records it as maybe done, tells the model, and does not run it.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

import py_trees
import pytest
from py_trees.common import Status

from jianmu import AgentState, AsyncNode, ToolExecutor, tool
from jianmu.errors import RunClaimedError
from jianmu.runtime import ReactiveRunner, RunStatus, SQLiteCheckpointer
from jianmu.runtime.fork import fork_run
from jianmu.state import StateManager
from jianmu.tools.base import FunctionTool
from tests.support.payments import Payments, payments

pytestmark = [pytest.mark.timeout(300), pytest.mark.anyio]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Payments:
    made = payments(tmp_path / "shop")
    monkeypatch.chdir(made.root)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return made


def test_a_payment_under_way_when_its_owner_was_killed_is_not_paid_again(
    project: Payments,
) -> None:
    run_id = project.suspended()
    owner = project.start("resume", run_id, "--approve", "pay_1", gated=True)
    try:
        project.wait_paying()  # paid, and held open: the owner dies before it records that
    finally:
        os.kill(owner.pid, signal.SIGKILL)
        owner.communicate(timeout=60)
    assert project.paid() == ["paid 40"]
    # the dead owner's lease is taken at once; the payment is not asked about or made again
    code, out, err = project.jianmu("resume", run_id)
    assert code == 0, out + err
    assert "approval needed" not in out
    assert "whether it did its work is unknown" in out
    assert project.paid() == ["paid 40"]
    code, out, err = project.jianmu("resume", run_id, "--approve", "pay_1")
    assert code == 2 and "already finished" in err, out + err
    assert project.paid() == ["paid 40"]


PAID: list[str] = []


class Plan(AsyncNode):
    """Asks for one call, as a model would."""

    def __init__(self, name: str, tool_name: str) -> None:
        super().__init__("plan")
        self.tool_name = tool_name

    async def update_async(self) -> Status:
        self.state.update({"actions": [{"id": "c1", "name": self.tool_name,
                                        "arguments": {"amount": 40}}]})
        return Status.SUCCESS


def blocking_pay(
    started: threading.Event, release: threading.Event, **options: Any
) -> FunctionTool:
    """A ``pay`` tool (a write) that records its payment, sets ``started`` and waits for
    ``release``: a payment under way while the test kills or outruns its owner."""

    @tool(category="write", **options)
    def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: how much.
        """
        PAID.append(f"paid {amount}")
        started.set()
        assert release.wait(60)
        return f"paid {amount}"

    return pay


def flow(*tools: object, name: str = "pay") -> py_trees.behaviour.Behaviour:
    return py_trees.composites.Sequence("flow", memory=True, children=[
        Plan("plan", name), ToolExecutor("execute", list(tools)),  # type: ignore[arg-type]
    ])


class Later:
    """A store whose clock runs an hour ahead: every lease it sees has expired."""

    @staticmethod
    def store(db: Path) -> SQLiteCheckpointer:
        import time

        return SQLiteCheckpointer(db, clock=lambda: time.time() + 3600)


def test_a_call_under_way_when_its_lease_was_taken_over_is_recorded_as_maybe_done(
    tmp_path: Path,
) -> None:
    """An owner that stops renewing (paused, partitioned) loses the run to the next; the call
    it had started is not run again there, and its own late record is refused."""
    started, release = threading.Event(), threading.Event()

    pay = blocking_pay(started, release)

    db = tmp_path / "runs.sqlite"
    first = ReactiveRunner(flow(pay), StateManager(AgentState), checkpointer=SQLiteCheckpointer(db))
    outcome: list[object] = []
    thread = threading.Thread(target=lambda: outcome.append(_run(first)))
    thread.start()
    try:
        assert started.wait(60)
        later = Later.store(db)
        second = ReactiveRunner.restore(flow(pay), later, first.run_id,
                                        state_manager=StateManager(AgentState))
        result = second.run_sync(timeout=60)
        assert result.ok, result.error
        (observation,) = [m for m in result.messages if m.role == "tool"]
        assert "whether it did its work is unknown; it was not run again" in observation.content
        assert second.state.get("completed_call_ids") == ["c1"]
        assert not second.state.get("calls_under_way")
    finally:
        release.set()
        thread.join(60)
    assert PAID == ["paid 40"]
    assert isinstance(outcome[0], RunClaimedError)  # the first owner's record came too late


def _run(runner: ReactiveRunner) -> object:
    try:
        return runner.run_sync(timeout=60)
    except RunClaimedError as exc:
        return exc


@pytest.fixture(autouse=True)
def _no_payments() -> None:
    PAID.clear()


async def test_a_call_stopped_after_it_began_is_not_run_again_after_a_restore(
    tmp_path: Path,
) -> None:
    """An async call that the run's cancel stopped after it began may have taken effect: it is
    recorded as maybe done (its mark goes with that record), and the restored run does not
    run it again."""
    import asyncio

    started = asyncio.Event()

    @tool(category="write")
    async def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: how much.
        """
        PAID.append(f"try {amount}")
        started.set()
        await asyncio.Event().wait()  # until cancelled
        return f"paid {amount}"

    db = tmp_path / "runs.sqlite"
    store = SQLiteCheckpointer(db)
    runner = ReactiveRunner(flow(pay), StateManager(AgentState), checkpointer=store)
    task = asyncio.ensure_future(runner.run(timeout=60))
    await started.wait()
    runner.cancel()
    assert (await task).status is RunStatus.CANCELLED
    assert not runner.state.get("calls_under_way")
    again = ReactiveRunner.restore(flow(pay), store, runner.run_id,
                                   state_manager=StateManager(AgentState))
    assert (await again.run(timeout=60)).ok
    assert PAID == ["try 40"]
    assert "may or may not have taken effect" in again.state.get("messages")[-1].content


def test_an_idempotent_call_is_not_marked_and_a_fork_runs_the_call(tmp_path: Path) -> None:
    """Only a call that may not run twice is saved before it starts; a fork of a point where
    a call was under way is a new run, which runs it."""

    @tool(category="read")
    def look(amount: int) -> str:
        """Look.

        Args:
            amount: how much.
        """
        return f"saw {amount}"

    @tool(category="write")
    def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: how much.
        """
        PAID.append(f"paid {amount}")
        return f"paid {amount}"

    store = SQLiteCheckpointer(tmp_path / "runs.sqlite")
    reading = ReactiveRunner(flow(look, name="look"), StateManager(AgentState), checkpointer=store)
    assert reading.run_sync(timeout=60).ok
    assert not any(_under_way(point) for point in _points(store, reading.run_id))

    paying = ReactiveRunner(flow(pay), StateManager(AgentState), checkpointer=store)
    assert paying.run_sync(timeout=60).ok and PAID == ["paid 40"]
    under_way = [n for n, point in enumerate(_points(store, paying.run_id)) if _under_way(point)]
    assert under_way, "the payment was saved as under way before it started"
    fork = fork_run(store, paying.run_id, under_way[0])
    forked = ReactiveRunner.restore(flow(pay), store, fork, state_manager=StateManager(AgentState))
    assert forked.run_sync(timeout=60).ok
    assert PAID == ["paid 40", "paid 40"]


def _under_way(point: object) -> object:
    return point.state["root"].get("calls_under_way")  # type: ignore[attr-defined]


def _points(store: SQLiteCheckpointer, run_id: str) -> list:  # type: ignore[type-arg]
    history = store.history
    last = history.last_point(run_id)
    assert last is not None
    return [history.frame(run_id, n) for n in range(last + 1)]


def test_a_sub_agents_call_under_way_when_its_lease_was_taken_over_is_not_run_again(
    tmp_path: Path,
) -> None:
    """The same one level down: the sub-agent's call is marked in its namespace, which the
    restored run resumes rather than starts anew."""
    from jianmu.llm import ScriptedLLM
    from jianmu.nodes import agent_tool, create_react_node

    started, release = threading.Event(), threading.Event()

    def build() -> py_trees.behaviour.Behaviour:
        pay = blocking_pay(started, release)

        def answered(messages: list) -> list:  # type: ignore[type-arg]
            return [m for m in messages if m.role == "tool"]

        def helper(messages: list) -> object:  # type: ignore[type-arg]
            done = answered(messages)
            return f"helper: {done[-1].content}" if done else [
                {"id": "s1", "name": "pay", "arguments": {"amount": 3}}]

        def lead(messages: list) -> object:  # type: ignore[type-arg]
            done = answered(messages)
            return f"lead: {done[-1].content}" if done else [
                {"id": "l1", "name": "helper", "arguments": {"input": "pay 3"}}]

        sub = agent_tool(lambda: create_react_node(ScriptedLLM([helper] * 4), [pay]),
                         name="helper", description="Pays.")
        return create_react_node(ScriptedLLM([lead] * 4), [sub])

    db = tmp_path / "runs.sqlite"
    start = StateManager(AgentState, {"messages": [{"role": "user", "content": "Go."}]})
    first = ReactiveRunner(build(), start, checkpointer=SQLiteCheckpointer(db))
    outcome: list[object] = []
    thread = threading.Thread(target=lambda: outcome.append(_run(first)))
    thread.start()
    try:
        assert started.wait(60)
        second = ReactiveRunner.restore(build(), Later.store(db), first.run_id,
                                        state_manager=StateManager(AgentState))
        result = second.run_sync(timeout=60)
        assert result.ok, result.error
        assert "whether it did its work is unknown" in (second.state.get("final_answer") or "")
    finally:
        release.set()
        thread.join(60)
    assert PAID == ["paid 3"]
    assert isinstance(outcome[0], RunClaimedError)


def test_a_tool_node_under_way_when_its_lease_was_taken_over_is_not_run_again(
    tmp_path: Path,
) -> None:
    """A step the author placed (`ToolNode`) is the same: approved, started, its owner gone;
    the next owner neither asks again nor runs it, and the step fails saying why."""
    from jianmu.nodes import ToolNode

    started, release = threading.Event(), threading.Event()

    pay = blocking_pay(started, release, permission="user_confirm")

    def steps() -> py_trees.behaviour.Behaviour:
        return py_trees.composites.Sequence("steps", memory=True, children=[
            ToolNode("pay", pay, input_key="amount", output_key="receipt")])

    db = tmp_path / "runs.sqlite"
    first = ReactiveRunner(steps(), StateManager(AgentState, {"amount": {"amount": 40}}),
                           checkpointer=SQLiteCheckpointer(db))
    (request,) = first.run_sync(timeout=60).pending
    owner = ReactiveRunner.restore(steps(), SQLiteCheckpointer(db), first.run_id,
                                   state_manager=StateManager(AgentState))
    owner.approve(request.id)
    outcome: list[object] = []
    thread = threading.Thread(target=lambda: outcome.append(_run(owner)))
    thread.start()
    try:
        assert started.wait(60)
        second = ReactiveRunner.restore(steps(), Later.store(db), first.run_id,
                                        state_manager=StateManager(AgentState))
        result = second.run_sync(timeout=60)
        assert result.status is RunStatus.FAILURE
        assert "whether it did its work is unknown" in (result.error or ""), result.error
        assert not result.pending
    finally:
        release.set()
        thread.join(60)
    assert PAID == ["paid 40"]
    assert isinstance(outcome[0], RunClaimedError)


class Gate(AsyncNode):
    """Holds the run until the test opens it (from any thread), saying it got there."""

    def __init__(self, reached: threading.Event, opened: threading.Event) -> None:
        super().__init__("gate")
        self.reached, self.opened = reached, opened

    async def update_async(self) -> Status:
        import asyncio

        self.reached.set()
        await asyncio.to_thread(self.opened.wait, 60)
        return Status.SUCCESS


def test_an_owner_that_lost_its_lease_does_not_start_a_call(tmp_path: Path) -> None:
    """Paused past its lease (the next owner took the run meanwhile), an owner that goes on
    is refused when it saves the call as under way: the call never starts there."""

    @tool(category="write")
    def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: how much.
        """
        PAID.append(f"paid {amount}")
        return f"paid {amount}"

    reached, opened = threading.Event(), threading.Event()
    tree = py_trees.composites.Sequence("flow", memory=True, children=[
        Gate(reached, opened), Plan("plan", "pay"), ToolExecutor("execute", [pay])])
    db = tmp_path / "runs.sqlite"
    paused = ReactiveRunner(tree, StateManager(AgentState), checkpointer=SQLiteCheckpointer(db))
    outcome: list[object] = []
    thread = threading.Thread(target=lambda: outcome.append(_run(paused)))
    thread.start()
    try:
        assert reached.wait(60)
        Later.store(db).claim(paused.run_id, "the-next-owner")  # its lease has run out
    finally:
        opened.set()
        thread.join(60)
    assert isinstance(outcome[0], RunClaimedError), outcome
    assert PAID == []


def test_two_runners_under_one_owner_name_do_not_both_pay(tmp_path: Path) -> None:
    """Two processes that name themselves alike (``owner="billing"``) share the lease: each
    renews it as its own. The newest checkpoint each knows tells them apart: the second,
    restored before the first went on, is refused when it saves its call as under way."""
    started, release = threading.Event(), threading.Event()

    pay = blocking_pay(started, release, permission="user_confirm")

    db = tmp_path / "runs.sqlite"
    first = ReactiveRunner(flow(pay), StateManager(AgentState), checkpointer=SQLiteCheckpointer(db))
    (request,) = first.run_sync(timeout=60).pending

    def restored() -> ReactiveRunner:
        return ReactiveRunner.restore(flow(pay), SQLiteCheckpointer(db), first.run_id,
                                      state_manager=StateManager(AgentState), owner="billing")

    one, two = restored(), restored()
    one.approve(request.id)  # saved as it is made: the run moved past what two read
    with pytest.raises(RunClaimedError):
        two.approve(request.id)
    outcome: list[object] = []
    thread = threading.Thread(target=lambda: outcome.append(_run(one)))
    thread.start()
    try:
        assert started.wait(60)
        assert isinstance(_run(two), RunClaimedError)
    finally:
        release.set()
        thread.join(60)
    assert PAID == ["paid 40"]
    assert outcome[0].ok  # type: ignore[attr-defined]


KILLED_AFTER_THE_CALL = '''
import os, signal, sys
from jianmu import AgentState, ReactiveRunner, SQLiteCheckpointer, StateManager
from tests.security.test_crashed_owner import returned_then_killed

def die(ctx, result):  # the call has returned; its record is not written yet
    os.kill(os.getpid(), signal.SIGKILL)

runner = ReactiveRunner.restore(returned_then_killed(sys.argv[2], die), SQLiteCheckpointer(
    sys.argv[1]), sys.argv[3], state_manager=StateManager(AgentState))
runner.approve("c1")
runner.run_sync(timeout=60)
'''


def returned_then_killed(ledger: str, *guardrails: Any) -> py_trees.behaviour.Behaviour:
    """A payment that asks first and writes ``ledger``; ``guardrails`` read its result."""

    @tool(category="write", permission="user_confirm")
    def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: how much.
        """
        with open(ledger, "a", encoding="utf-8") as out:
            out.write(f"paid {amount}\n")
        return f"paid {amount}"

    return py_trees.composites.Sequence("flow", memory=True, children=[
        Plan("plan", "pay"),
        ToolExecutor("execute", [pay], tool_output_guardrails=guardrails),
    ])


def test_a_call_that_returned_when_its_process_was_killed_is_not_run_again(
    tmp_path: Path,
) -> None:
    """SIGKILL after the payment returned and before its result was recorded (a guardrail
    reading it kills the process): the next owner takes the run at once, does not pay again,
    and tells the model that whether it paid is unknown."""
    import subprocess
    import sys

    from tests.support.payments import REPO

    db, ledger = tmp_path / "runs.sqlite", tmp_path / "ledger.txt"
    with SQLiteCheckpointer(db) as store:
        first = ReactiveRunner(returned_then_killed(str(ledger)), StateManager(AgentState),
                               checkpointer=store)
        assert first.run_sync(timeout=60).status is RunStatus.SUSPENDED
    child = subprocess.run(
        [sys.executable, "-c", KILLED_AFTER_THE_CALL, str(db), str(ledger), first.run_id],
        env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stdout + child.stderr
    assert ledger.read_text() == "paid 40\n"
    with SQLiteCheckpointer(db) as store:
        again = ReactiveRunner.restore(returned_then_killed(str(ledger)), store, first.run_id,
                                       state_manager=StateManager(AgentState))
        assert not again.pending  # its approval was saved with the mark: not asked again
        result = again.run_sync(timeout=60)
    assert result.ok, result.error
    (told,) = [m.content for m in result.messages if m.role == "tool"]
    assert "whether it did its work is unknown; it was not run again" in told
    assert ledger.read_text() == "paid 40\n"
