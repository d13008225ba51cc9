"""ReactiveRunner and AsyncNode inside py_trees composites."""

from __future__ import annotations

import asyncio
import threading
import uuid

import py_trees
import pytest
from py_trees.common import ParallelPolicy, Status

from jianmu.errors import InteractionError
from jianmu.runtime import ApprovalRequest, AsyncNode, ReactiveRunner, RunStatus
from jianmu.state import StateManager

pytestmark = pytest.mark.anyio


class Wait(AsyncNode):
    """Waits on an event (or forever), recording start, cancel and finally."""

    def __init__(self, name: str, gate: asyncio.Event | None = None, write: bool = True) -> None:
        super().__init__(name)
        self.gate = gate
        self.write = write
        self.started = asyncio.Event()
        self.cancelled = False
        self.finally_ran = False

    async def update_async(self) -> Status:
        self.started.set()
        try:
            if self.gate is None:
                await asyncio.Event().wait()
            else:
                await self.gate.wait()
            if self.write:
                self.state.write_port(self.name, "done")
            return Status.SUCCESS
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        finally:
            self.finally_ran = True


class Flag(py_trees.behaviour.Behaviour):
    """Succeeds once ``flag["on"]`` is true, fails before."""

    def __init__(self, name: str, flag: dict[str, bool]) -> None:
        super().__init__(name)
        self.flag = flag

    def update(self) -> Status:
        return Status.SUCCESS if self.flag["on"] else Status.FAILURE


class Boom(AsyncNode):
    async def update_async(self) -> Status:
        raise ValueError("kaboom")


async def test_sequence_with_memory_runs_children_in_order() -> None:
    a, b = asyncio.Event(), asyncio.Event()
    first, second = Wait("first", a), Wait("second", b)
    root = py_trees.composites.Sequence("Root", memory=True, children=[first, second])
    runner = ReactiveRunner(root, StateManager())

    async def drive() -> None:
        await first.started.wait()
        assert not second.started.is_set()
        a.set()
        await second.started.wait()
        b.set()

    driver = asyncio.create_task(drive())
    result = await runner.run(timeout=10)
    await driver
    assert result.status is RunStatus.SUCCESS
    assert runner.state.get("first") == "done" and runner.state.get("second") == "done"


async def test_selector_preempts_running_async_node() -> None:
    flag = {"on": False}
    slow = Wait("slow")
    root = py_trees.composites.Selector(
        "Root", memory=False, children=[Flag("high", flag), slow]
    )
    runner = ReactiveRunner(root, StateManager())

    async def flip() -> None:
        await slow.started.wait()
        flag["on"] = True
        runner.wake()

    flipper = asyncio.create_task(flip())
    result = await runner.run(timeout=10)
    await flipper
    assert result.status is RunStatus.SUCCESS
    assert slow.cancelled and slow.finally_ran
    assert slow.status is Status.INVALID


async def test_parallel_starts_all_children_before_any_finishes() -> None:
    gate = asyncio.Event()
    kids = [Wait(f"k{i}", gate) for i in range(3)]
    root = py_trees.composites.Parallel(
        "Root", policy=ParallelPolicy.SuccessOnAll(synchronise=True), children=kids
    )
    runner = ReactiveRunner(root, StateManager())

    async def release() -> None:
        for kid in kids:
            await kid.started.wait()
        assert not any(runner.state.get(k.name) for k in kids)
        gate.set()

    releaser = asyncio.create_task(release())
    result = await runner.run(timeout=10)
    await releaser
    assert result.status is RunStatus.SUCCESS
    assert [runner.state.get(k.name) for k in kids] == ["done"] * 3


async def test_exception_in_update_async_is_failure_and_event() -> None:
    node = Boom("boom")
    runner = ReactiveRunner(node, StateManager())
    events = []
    runner.ctx.events.subscribe("node.failed", events.append)
    result = await runner.run(timeout=10)
    assert result.status is RunStatus.FAILURE
    assert isinstance(node.error, ValueError)
    assert "kaboom" in (result.error or "")
    assert len(events) == 1 and events[0].node == "boom" and events[0].run_id == runner.run_id
    assert "ValueError" in events[0].fields["error"]


async def test_state_write_from_another_thread_wakes_the_runner() -> None:
    state = StateManager()

    class WaitForKey(py_trees.behaviour.Behaviour):
        """A synchronous node: only a wake-up can make the runner tick it again."""

        def update(self) -> Status:
            return Status.SUCCESS if state.get("go") else Status.RUNNING

    runner = ReactiveRunner(WaitForKey("waiter"), state)

    async def drive() -> None:
        while runner.ticks < 1:
            await asyncio.sleep(0)
        threading.Thread(target=state.write_port, args=("go", True)).start()

    driver = asyncio.create_task(drive())
    result = await runner.run(timeout=10)
    await driver
    assert result.status is RunStatus.SUCCESS
    assert result.ticks == 2


async def test_single_wait_ticks_exactly_twice() -> None:
    class Sleep(AsyncNode):
        async def update_async(self) -> Status:
            await asyncio.sleep(2)
            return Status.SUCCESS

    result = await ReactiveRunner(Sleep("sleep")).run(timeout=30)
    assert result.status is RunStatus.SUCCESS
    assert result.ticks == 2


async def test_timeout_cancels_running_tasks() -> None:
    node = Wait("forever")
    result = await ReactiveRunner(node).run(timeout=0.2)
    assert result.status is RunStatus.TIMEOUT
    assert node.cancelled and node.finally_ran


async def test_max_ticks_stops_with_failure() -> None:
    class Again(AsyncNode):
        async def update_async(self) -> Status:
            self.state.write_port("n", (self.state.get("n") or 0) + 1)
            return Status.RUNNING

    result = await ReactiveRunner(Again("again")).run(max_ticks=5, timeout=10)
    assert result.status is RunStatus.FAILURE
    assert result.ticks == 5
    assert "max_ticks" in (result.error or "")


async def test_cancel_from_outside() -> None:
    node = Wait("forever")
    runner = ReactiveRunner(node)

    async def stop() -> None:
        await node.started.wait()
        runner.cancel()

    stopper = asyncio.create_task(stop())
    result = await runner.run(timeout=10)
    await stopper
    assert result.status is RunStatus.CANCELLED and node.finally_ran


class AskOnce(AsyncNode):
    """Suspends for approval, then records the decision."""

    async def update_async(self) -> Status:
        decision = self.ctx.interaction.decision("req-1") if self.ctx.interaction else None
        if decision is None:
            self.ctx.interaction.suspend(
                ApprovalRequest(id="req-1", summary="do the thing", node=self.path)
            )
            return Status.RUNNING
        self.state.write_port("decision", "approved" if decision.approved else "rejected")
        return Status.SUCCESS if decision.approved else Status.FAILURE


async def test_suspend_approve_continue() -> None:
    runner = ReactiveRunner(AskOnce("ask"), StateManager())
    first = await runner.run(timeout=10)
    assert first.status is RunStatus.SUSPENDED
    assert [r.id for r in first.pending] == ["req-1"]
    again = await runner.run(timeout=10)  # nothing decided: still suspended
    assert again.status is RunStatus.SUSPENDED and again.ticks == 0
    runner.approve("req-1")
    done = await runner.run(timeout=10)
    assert done.status is RunStatus.SUCCESS
    assert runner.state.get("decision") == "approved"


async def test_suspend_reject() -> None:
    runner = ReactiveRunner(AskOnce("ask"), StateManager())
    await runner.run(timeout=10)
    runner.reject("req-1", "no")
    done = await runner.run(timeout=10)
    assert done.status is RunStatus.FAILURE
    assert runner.state.get("decision") == "rejected"


async def test_unknown_request_id_is_refused() -> None:
    runner = ReactiveRunner(AskOnce("ask"), StateManager())
    await runner.run(timeout=10)
    with pytest.raises(InteractionError, match="nope"):
        runner.approve("nope")
    runner.approve("req-1")
    with pytest.raises(InteractionError, match="already approved; the first decision stands"):
        runner.reject("req-1")


def test_run_sync_refuses_inside_a_loop() -> None:
    async def inner() -> None:
        with pytest.raises(RuntimeError, match="await run"):
            ReactiveRunner(AskOnce("a")).run_sync()

    asyncio.run(inner())
    assert ReactiveRunner(Boom("b")).run_sync().status is RunStatus.FAILURE


async def test_plain_py_trees_timer_is_polled() -> None:
    timer = py_trees.timers.Timer("timer", duration=0.2)
    result = await ReactiveRunner(timer).run(timeout=10)
    assert result.status is RunStatus.SUCCESS
    # polled (the first tick cannot end it: without a poll the run would time out), and not
    # in a busy loop; as few as two ticks when a loaded machine's poll comes late
    assert 2 <= result.ticks < 100


async def test_async_node_returning_running_is_polled_not_spun() -> None:
    class Counter(AsyncNode):
        runs = 0

        async def update_async(self) -> Status:
            Counter.runs += 1
            return Status.SUCCESS if Counter.runs >= 3 else Status.RUNNING

    result = await ReactiveRunner(Counter("counter")).run(timeout=10)
    assert result.status is RunStatus.SUCCESS and Counter.runs == 3


def test_consumed_approvals_survive_a_snapshot() -> None:
    from jianmu.runtime import Interaction

    first = Interaction()
    first.suspend(ApprovalRequest(id="a"))
    first.approve("a")
    first.consume("a")
    second = Interaction()
    second.restore(first.snapshot())
    assert second.consumed("a") and second.decision("a") is not None
    assert not second.consumed("b")


def test_run_status_says_whether_the_tree_ran_to_its_end() -> None:
    from jianmu.runtime.runner import RunStatus

    assert [s.value for s in RunStatus if s.finished] == ["success", "failure"]


class _Settled(AsyncNode):
    def __init__(self) -> None:
        super().__init__("settled")
        self.ran = 0

    def settled(self) -> Status | None:
        return Status.SUCCESS

    async def update_async(self) -> Status:
        self.ran += 1
        return Status.FAILURE


async def test_a_settled_node_reports_its_status_without_running() -> None:
    node = _Settled()
    result = await ReactiveRunner(node, StateManager()).run(timeout=10)
    assert result.ok and node.ran == 0 and result.ticks == 1
    assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("jianmu:settled")]


async def test_runners_given_no_config_share_read_only_defaults() -> None:
    """A run given no configuration or constraints reads the shared defaults; no run can
    loosen them for another."""
    from jianmu.config import AppConfig, default_config
    from jianmu.constraints import Constraints
    from jianmu.errors import ConfigError

    one = ReactiveRunner(Wait("a", write=False))
    two = ReactiveRunner(Wait("b", write=False))
    assert one.config is two.config is default_config()
    assert one.ctx.constraints is two.ctx.constraints
    with pytest.raises(ConfigError, match="read-only"):
        one.ctx.constraints.guard.tool_policy["bash"] = "allow"
    with pytest.raises(ConfigError, match="read-only"):
        one.config.guard.default_policy = "allow"
    assert two.ctx.constraints.guard.tool_policy == {} and two.config == AppConfig()
    # a run with its own config or constraints gets its own, which it may change
    mine = ReactiveRunner(Wait("c", write=False), config=AppConfig(),
                          constraints=Constraints(max_iterations=3))
    mine.config.runtime.poll_interval = 0.01
    mine.ctx.constraints.guard.tool_policy["bash"] = "deny"
    assert default_config().runtime.poll_interval == AppConfig().runtime.poll_interval
    assert mine.ctx.constraints.max_iterations == 3
    assert ReactiveRunner(Wait("d", write=False)).ctx.constraints.guard.tool_policy == {}


def test_py_trees_extras_are_made_when_read() -> None:
    """A node keeps no logger, blackboard list or tick generator until one is read (its id is
    the one py_trees' ``__init__`` made); then they behave as py_trees' own."""
    from jianmu.llm.scripted import ScriptedLLM
    from jianmu.nodes import create_react_node

    loop = create_react_node(ScriptedLLM(["done"]), [])
    nodes = list(loop.iterate())
    assert all(not {"id", "logger", "blackboards", "iterator"} & set(vars(n)) for n in nodes
               if isinstance(n, (AsyncNode,)))
    leaf = Wait("leaf", write=False)
    assert isinstance(leaf.id, uuid.UUID) and leaf.id == leaf.id
    assert leaf.logger.prefix.startswith("leaf")
    leaf.blackboards.append("client")
    assert leaf.blackboards == ["client"]
    assert leaf.iterator is None
    mine = object()
    leaf.logger = mine  # type: ignore[assignment]
    assert leaf.logger is mine
    # py_trees' own readers of these still work
    assert "leaf" in py_trees.display.unicode_tree(py_trees.composites.Sequence(
        "root", memory=True, children=[Wait("leaf", write=False)]))
    root = py_trees.composites.Sequence("root", memory=True, children=[leaf])
    assert root.remove_child(leaf) == 0 and root.children == []


def test_lean_behaviour_has_every_attribute_py_trees_gives() -> None:
    """`LeanBehaviour.__init__` sets what py_trees' `Behaviour.__init__` sets (the extras made
    on read): a py_trees release that adds an attribute fails here, not in a run."""
    from jianmu.runtime.async_node import LeanBehaviour, LeanExtras

    class Ours(LeanBehaviour):
        def update(self) -> Status:
            return Status.SUCCESS

    theirs, ours = py_trees.behaviours.Success("x"), Ours("x")
    made_on_read = {name for name in vars(LeanExtras) if not name.startswith("_")}
    assert made_on_read == {"id", "logger", "blackboards", "iterator"}
    assert set(vars(theirs)) == set(vars(ours)) | made_on_read
    for name in ("name", "status", "parent", "children", "feedback_message", "blackbox_level"):
        assert getattr(ours, name) == getattr(theirs, name), name
    assert ours.qualified_name == f"{Ours.__qualname__}/x"
    with pytest.raises(TypeError):
        LeanBehaviour(3)  # type: ignore[arg-type]


def test_building_a_react_agent_makes_no_uuid(monkeypatch: pytest.MonkeyPatch) -> None:
    """No node of a ReAct tree makes its py_trees id (a uuid4: a system call) until read."""
    from jianmu.llm.scripted import ScriptedLLM
    from jianmu.nodes import create_react_node

    made: list[uuid.UUID] = []
    real = uuid.uuid4

    def counted() -> uuid.UUID:
        made.append(real())
        return made[-1]

    monkeypatch.setattr(uuid, "uuid4", counted)
    loop = create_react_node(ScriptedLLM(["done"]), [])
    assert made == []
    ids = {node.id for node in loop.iterate()}
    assert len(ids) == 4 and len(made) == 4
    assert loop.id == loop.id and len(made) == 4


def test_each_async_node_has_its_own_id() -> None:
    """The id is made on first read (`LeanExtras`): still one per node, never shared."""
    nodes = [Wait("x", write=False) for _ in range(1000)]
    assert len({n.id for n in nodes}) == 1000
    assert all(n.id == n.id for n in nodes[:3])  # made once, then kept
