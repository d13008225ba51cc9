"""Each py_trees decorator over async leaves under `ReactiveRunner`: when the runner ticks.

A decorator that returns RUNNING over a finished child (`Retry`, `Repeat`, `Condition`) gets
its next tick at once; a running `Timeout`'s deadline wakes the runner and cancels the child;
waiting on an async leaf costs a handful of ticks, not a busy loop.
"""

from __future__ import annotations

import asyncio
import operator
import time
from collections.abc import Sequence

import py_trees
import pytest
from py_trees.behaviour import Behaviour
from py_trees.common import OneShotPolicy, ParallelPolicy, Status

from jianmu.config import AppConfig
from jianmu.runtime import AsyncNode, ReactiveRunner, RunStatus
from jianmu.state import StateManager

pytestmark = pytest.mark.anyio

d = py_trees.decorators
S, F = Status.SUCCESS, Status.FAILURE
SLOW_POLL = AppConfig.model_validate({"runtime": {"poll_interval": 600}})
"""A poll interval that no test here outlasts."""


class Scripted(AsyncNode):
    """Each run yields to the loop, then returns the next scripted status (the last repeats)."""

    def __init__(self, name: str, outcomes: Sequence[Status]) -> None:
        super().__init__(name)
        self.outcomes = list(outcomes)
        self.runs = 0

    async def update_async(self) -> Status:
        self.runs += 1
        await asyncio.sleep(0)
        return self.outcomes[min(self.runs, len(self.outcomes)) - 1]


class Blocked(AsyncNode):
    """Waits on an event (or for ever); records whether the cancellation reached it."""

    def __init__(self, name: str, gate: asyncio.Event | None = None, seconds: float = 0) -> None:
        super().__init__(name)
        self.gate = gate or asyncio.Event()
        self.seconds = seconds
        self.started = asyncio.Event()
        self.cancelled = self.finally_ran = False

    async def update_async(self) -> Status:
        self.started.set()
        try:
            if self.seconds:
                await asyncio.sleep(self.seconds)
            else:
                await self.gate.wait()
            return Status.SUCCESS
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        finally:
            await asyncio.sleep(0)  # a finally block that itself awaits
            self.finally_ran = True


async def run(root: Behaviour) -> tuple[RunStatus, int]:
    # the timeout only bounds a broken runner: every run here ends long before it
    result = await ReactiveRunner(root, StateManager()).run(timeout=60)
    assert result.status is not RunStatus.TIMEOUT, "the runner stopped ticking"
    return result.status, result.ticks


async def test_retry_runs_another_attempt_after_an_async_failure() -> None:
    leaf = Scripted("leaf", [F, F, S])
    status, _ = await run(d.Retry("retry", leaf, num_failures=3))
    assert (status, leaf.runs) == (RunStatus.SUCCESS, 3)


async def test_retry_fails_once_its_attempts_are_used() -> None:
    leaf = Scripted("leaf", [F])
    status, _ = await run(d.Retry("retry", leaf, num_failures=2))
    assert (status, leaf.runs) == (RunStatus.FAILURE, 2)


async def test_repeat_runs_its_async_child_num_success_times() -> None:
    leaf = Scripted("leaf", [S])
    status, _ = await run(d.Repeat("repeat", leaf, num_success=4))
    assert (status, leaf.runs) == (RunStatus.SUCCESS, 4)


async def test_condition_ticks_its_async_child_until_it_has_the_status() -> None:
    leaf = Scripted("leaf", [S, S, F])
    status, _ = await run(d.Condition("condition", leaf, status=F))
    assert (status, leaf.runs) == (RunStatus.SUCCESS, 3)


async def test_timeout_cancels_its_async_child_at_the_deadline() -> None:
    leaf = Blocked("slow")  # never released: only the deadline ends it
    root = d.Timeout("timeout", leaf, duration=0.05)
    status, ticks = await run(root)
    assert status is RunStatus.FAILURE
    assert root.feedback_message == "timed out"
    assert leaf.cancelled and leaf.finally_ran  # the run waited for the finally block
    assert ticks <= 3


async def test_a_timed_out_branch_gives_way_to_the_next() -> None:
    slow, fallback = Blocked("slow"), Scripted("fallback", [S])
    root = py_trees.composites.Selector(
        "root", memory=True, children=[d.Timeout("timeout", slow, duration=0.05), fallback]
    )
    status, _ = await run(root)
    assert (status, fallback.runs) == (RunStatus.SUCCESS, 1)
    assert slow.cancelled and slow.finally_ran


async def test_timeout_not_reached_passes_the_childs_status_through() -> None:
    leaf = Scripted("leaf", [F])
    status, _ = await run(d.Timeout("timeout", leaf, duration=60))
    assert status is RunStatus.FAILURE and leaf.runs == 1


async def test_retry_over_a_timeout_tries_again_after_each_deadline() -> None:
    leaves = [Blocked(f"slow{i}") for i in range(2)]
    root = d.Retry(
        "retry",
        py_trees.composites.Parallel(
            "both",
            policy=ParallelPolicy.SuccessOnAll(),
            children=[d.Timeout(f"timeout{i}", leaf, duration=0.02) for i, leaf in
                      enumerate(leaves)],
        ),
        num_failures=3,
    )
    status, _ = await run(root)
    assert status is RunStatus.FAILURE
    assert all(leaf.cancelled and leaf.finally_ran for leaf in leaves)


@pytest.mark.parametrize(
    ("policy", "outcomes", "runs", "final"),
    [
        (OneShotPolicy.ON_COMPLETION, [F, S], 1, F),
        (OneShotPolicy.ON_SUCCESSFUL_COMPLETION, [S, F], 1, S),
        (OneShotPolicy.ON_SUCCESSFUL_COMPLETION, [F, S], 2, S),
    ],
)
async def test_oneshot_runs_its_async_child_until_done_then_bounces(
    policy: OneShotPolicy, outcomes: list[Status], runs: int, final: Status
) -> None:
    leaf = Scripted("leaf", outcomes)
    once = d.OneShot("once", leaf, policy=policy)
    # FailureIsSuccess keeps the repeat going when the one shot's result was a failure
    root = d.Repeat("repeat", d.FailureIsSuccess("ok", once), num_success=3)
    assert (await run(root))[0] is RunStatus.SUCCESS
    assert (leaf.runs, once.final_status) == (runs, final)


async def test_eternal_guard_preempts_its_async_child_when_the_state_changes() -> None:
    guarded, gate = Blocked("guarded"), asyncio.Event()
    state = StateManager()

    class Flip(AsyncNode):
        async def update_async(self) -> Status:
            await guarded.started.wait()
            self.state.write_port("stop", True)  # the write wakes the runner
            await gate.wait()
            return Status.SUCCESS

    guard = d.EternalGuard(
        "guard", guarded, condition=lambda: not state.root.get("stop")
    )
    root = py_trees.composites.Parallel(
        "root", policy=ParallelPolicy.SuccessOnOne(), children=[guard, Flip("flip")]
    )
    result = await ReactiveRunner(root, state).run(timeout=60)
    assert result.status is RunStatus.FAILURE
    assert guarded.cancelled and guarded.finally_ran


@pytest.mark.parametrize(
    ("decorator", "child", "expected"),
    [
        (d.Inverter, S, RunStatus.FAILURE),
        (d.Inverter, F, RunStatus.SUCCESS),
        (d.SuccessIsFailure, S, RunStatus.FAILURE),
        (d.FailureIsSuccess, F, RunStatus.SUCCESS),
        (d.PassThrough, F, RunStatus.FAILURE),
        (d.RunningIsFailure, None, RunStatus.FAILURE),
        (d.RunningIsSuccess, None, RunStatus.SUCCESS),
    ],
)
async def test_status_converters_over_async_leaves(
    decorator: type[d.Decorator], child: Status | None, expected: RunStatus
) -> None:
    leaf: AsyncNode = Blocked("leaf") if child is None else Scripted("leaf", [child])
    status, _ = await run(decorator(name="converter", child=leaf))
    assert status is expected
    if child is None:  # the running child was stopped, its coroutine cancelled
        assert leaf.status is Status.INVALID


async def test_running_converters_restart_their_async_child() -> None:
    """FailureIsRunning and SuccessIsRunning keep the child going, as py_trees ticks it."""
    failing, succeeding = Scripted("f", [F, F, S]), Scripted("s", [S, S, F])
    status, _ = await run(
        py_trees.composites.Sequence("root", memory=True, children=[
            d.Condition("until f", d.FailureIsRunning("f running", failing), status=S),
            d.Condition("until s", d.SuccessIsRunning("s running", succeeding), status=F),
        ])
    )
    assert (status, failing.runs, succeeding.runs) == (RunStatus.SUCCESS, 3, 3)


@pytest.mark.parametrize(
    "wrap",
    [
        lambda leaf: leaf,
        lambda leaf: d.Retry("retry", leaf, num_failures=3),
        lambda leaf: d.Repeat("repeat", leaf, num_success=1),
        lambda leaf: d.Condition("condition", leaf, status=S),
        lambda leaf: d.Timeout("timeout", leaf, duration=60),
        lambda leaf: d.EternalGuard("guard", leaf, condition=lambda: True),
        lambda leaf: py_trees.composites.Parallel(
            "parallel", policy=ParallelPolicy.SuccessOnAll(synchronise=False),
            children=[leaf],
        ),
        # a reactive guard: the failed branch is re-entered on every tick, plain leaves only
        lambda leaf: py_trees.composites.Selector("reactive", memory=False, children=[
            py_trees.composites.Sequence("guard", memory=True, children=[
                py_trees.behaviours.Success("ok"), py_trees.behaviours.Failure("shut"),
            ]),
            leaf,
        ]),
    ],
)
async def test_waiting_on_an_async_leaf_is_not_a_busy_loop(wrap: object) -> None:
    """A tree waiting on an async leaf sleeps: it ticks when the leaf starts and ends (and
    once more to see a re-entered branch change nothing). A re-entered branch of plain
    py_trees leaves is polled as well (`test_a_reactive_guard_of_plain_leaves_is_polled`):
    here the poll interval outlasts the leaf, so that no poll falls in the count."""
    leaf = Blocked("sleeper", seconds=0.2)
    result = await ReactiveRunner(wrap(leaf), StateManager(), config=SLOW_POLL).run(  # type: ignore[operator]
        timeout=60)
    assert result.status is RunStatus.SUCCESS, result.error
    assert result.ticks <= 3


class Flag(Behaviour):
    """A plain py_trees condition on something outside the run's state (a device, a file)."""

    def __init__(self) -> None:
        super().__init__("stop requested?")
        self.raised = False

    def update(self) -> Status:
        return S if self.raised else F


async def test_a_reactive_guard_of_plain_leaves_is_polled() -> None:
    """py_trees' loop re-checks a priority selector's plain condition at every tick, so it
    pre-empts the running action once what it reads changes, with no state write to wake
    the runner: the runner polls such a tree (it rested until the action ended)."""
    flag, action = Flag(), Blocked("action")
    root = py_trees.composites.Selector("reactive", memory=False, children=[flag, action])
    run = asyncio.ensure_future(ReactiveRunner(root, StateManager()).run(timeout=60))
    await action.started.wait()
    flag.raised = True
    result = await run
    assert result.status is RunStatus.SUCCESS, result.error
    assert action.cancelled  # pre-empted, as in py_trees


async def test_a_decorator_looping_on_a_closed_guard_is_polled_not_spun() -> None:
    """FailureIsRunning over a guard that stays shut changes nothing from tick to tick: the
    runner ticks it again once and sees the tree at rest. Its condition may read anything,
    so it is polled (`test_a_shut_guard_re_entered_opens_with_no_state_write`), not spun:
    the poll interval here outlasts the leaf, so the count holds the start, the tick that
    finds the tree at rest, and the end."""
    leaf = Blocked("sleeper", seconds=0.2)
    shut = d.EternalGuard("shut", Scripted("never", [S]), condition=lambda: False)
    root = py_trees.composites.Parallel(
        "root", policy=ParallelPolicy.SuccessOnSelected([leaf]),
        children=[leaf, d.FailureIsRunning("spin", shut)],
    )
    result = await ReactiveRunner(root, StateManager(), config=SLOW_POLL).run(timeout=60)
    assert result.status is RunStatus.SUCCESS, result.error
    assert result.ticks <= 5


@pytest.mark.parametrize("loop", [
    lambda guard: d.FailureIsRunning("until open", guard),
    lambda guard: py_trees.composites.Selector("priority", memory=False, children=[
        guard, Blocked("idle")]),
])
async def test_a_shut_guard_re_entered_opens_with_no_state_write(loop: object) -> None:
    """py_trees' loop checks a shut EternalGuard's condition at every tick that re-enters it
    (a decorator returning RUNNING over it, a priority selector), whatever the condition
    reads: once it opens, the child starts, with no state write to wake the runner. The
    runner took the tree for at rest and slept for good (the child never started)."""
    flag = Flag()
    child = Blocked("guarded")
    guard = d.EternalGuard("guard", child, condition=lambda: flag.raised)
    runner = ReactiveRunner(loop(guard), StateManager())  # type: ignore[operator]
    run = asyncio.ensure_future(runner.run(timeout=60))
    while runner.ticks < 2:  # the guard re-entered shut, and the tree seen at rest
        await asyncio.sleep(0.01)
    assert not child.started.is_set()
    flag.raised = True
    await asyncio.wait_for(child.started.wait(), 10)
    child.gate.set()
    result = await run
    assert result.status is RunStatus.SUCCESS, result.error


class Shut(AsyncNode):
    """A condition that fails at once: its coroutine ends in the tick that starts it."""

    async def update_async(self) -> Status:
        return F


async def test_a_blackboard_condition_pre_empts_the_action_as_in_py_trees() -> None:
    """A tree ported from py_trees as it is: a priority selector whose condition reads
    py_trees' own blackboard, written by someone else while the action runs."""
    writer = py_trees.blackboard.Client(name="operator")
    key = "jianmu_test_stop_requested"
    writer.register_key(key, access=py_trees.common.Access.WRITE)
    writer.set(key, False)
    try:
        stop = py_trees.behaviours.CheckBlackboardVariableValue(
            "stop requested?", check=py_trees.common.ComparisonExpression(key, True, operator.eq))
        action = Blocked("action")
        root = py_trees.composites.Selector("reactive", memory=False, children=[stop, action])
        run = asyncio.ensure_future(ReactiveRunner(root, StateManager()).run(timeout=60))
        await action.started.wait()
        writer.set(key, True)
        result = await run
    finally:
        writer.unset(key)
    assert result.status is RunStatus.SUCCESS, result.error
    assert action.cancelled


async def test_an_eternal_guard_on_something_outside_the_state_is_polled() -> None:
    """py_trees' loop checks an EternalGuard's condition at every tick, whatever it reads: a
    condition on something no state write announces still stops the running child once it
    turns (the runner slept until the child ended)."""
    flag, action = Flag(), Blocked("action")
    await _stopped_once_raised(
        d.EternalGuard("guard", action, condition=lambda: not flag.raised), flag, action)


async def _stopped_once_raised(root: Behaviour, flag: Flag, action: Blocked) -> None:
    """``root`` run until ``action`` starts, then ``flag`` raised: the run fails, the action
    cancelled."""
    run = asyncio.ensure_future(ReactiveRunner(root, StateManager()).run(timeout=60))
    await action.started.wait()
    flag.raised = True
    result = await run
    assert result.status is RunStatus.FAILURE, result.error
    assert action.cancelled


class AbortIf(d.Decorator):
    """A user's own decorator: fails, stopping its child, once ``flag`` is raised."""

    def __init__(self, name: str, child: Behaviour, flag: Flag) -> None:
        super().__init__(name, child)
        self.flag = flag

    def update(self) -> Status:
        return Status.FAILURE if self.flag.raised else self.decorated.status


class Named(py_trees.composites.Sequence):
    """A user's sequence that only names itself: py_trees' own tick, nothing more to poll."""

    def __init__(self, children: list[Behaviour]) -> None:
        super().__init__("named", memory=True, children=children)


async def test_a_users_own_decorator_on_something_outside_the_state_is_polled() -> None:
    """A decorator of the user's own whose ``update`` reads a flag no state write announces:
    py_trees' loop ticks it at its rate and sees the flag; the runner slept until the child
    ended. Polled as an EternalGuard is, it stops the child once the flag turns."""
    from jianmu.runtime.async_node import _GUARD, _kind

    flag, action = Flag(), Blocked("action")
    await _stopped_once_raised(AbortIf("mine", action, flag), flag, action)
    # one whose tick and update are py_trees' own is not polled (nor py_trees' own classes)
    assert not _kind(Named) & _GUARD and not _kind(d.Inverter) & _GUARD
    assert _kind(AbortIf) & _GUARD


@pytest.mark.parametrize("quoting", [d.SuccessIsFailure, d.FailureIsSuccess, d.Inverter])
async def test_a_decorator_quoting_a_running_timeout_does_not_spin(
    quoting: type[d.Decorator],
) -> None:
    """A priority selector re-ticks its failed condition while a Timeout runs under a
    decorator that quotes its child's feedback, which holds the time left and so changes on
    every tick: the tree is still at rest, and the runner sleeps (it ticked thousands of times
    a second until the leaf ended, and a run with ``max_ticks`` failed). The re-entered
    condition is polled; the poll interval here outlasts the leaf, so that the count holds
    the start, the tick that finds the tree at rest, and the end."""
    leaf = Blocked("sleeper", seconds=0.2)
    root = py_trees.composites.Selector("priority", memory=False, children=[
        Shut("check"), quoting(name="quoting", child=d.Timeout("deadline", leaf, duration=60)),
    ])
    result = await ReactiveRunner(root, StateManager(), config=SLOW_POLL).run(timeout=60)
    expected = RunStatus.SUCCESS if quoting is d.FailureIsSuccess else RunStatus.FAILURE
    assert result.status is expected, result.error
    assert result.ticks <= 3


class Instant(AsyncNode):
    """Succeeds at once: its coroutine ends in the tick that starts it."""

    async def update_async(self) -> Status:
        return S


@pytest.mark.parametrize(
    "counting",
    [
        # a priority selector re-enters a failed condition under a Count, whose feedback is
        # the tally of its ticks (it changed at every tick, so the tree never rested)
        lambda leaf: py_trees.composites.Selector("priority", memory=False, children=[
            d.Count("count", Shut("check")), leaf]),
        lambda leaf: py_trees.composites.Selector("priority", memory=False, children=[
            d.Inverter("quoting", d.Count("count", Instant("check"))), leaf]),
        # a Repeat without end beside the leaf: its count of successes bounds nothing
        lambda leaf: py_trees.composites.Parallel(
            "first wins", policy=ParallelPolicy.SuccessOnOne(),
            children=[leaf, d.Repeat("forever", Instant("again"), num_success=-1)]),
    ],
)
async def test_a_count_that_bounds_nothing_does_not_spin(counting: object) -> None:
    """Feedback that changes at every tick by itself is no change of the tree: a `Count`'s
    tallies, a `Repeat` without end's successes (as a running `Timeout`'s time left). With
    an async leaf restarted at every tick, the tree at rest is polled as py_trees' loop would
    tick it, not spun (thousands of ticks a second until the sleeper ended). The poll
    interval outlasts the sleeper: the count holds its start, the tick that finds the tree
    at rest, and its end."""
    leaf = Blocked("sleeper", seconds=0.2)
    result = await ReactiveRunner(
        counting(leaf), StateManager(), config=SLOW_POLL,  # type: ignore[operator]
    ).run(timeout=60)
    assert result.status is RunStatus.SUCCESS, result.error
    assert result.ticks <= 3


class Records(AsyncNode):
    """A condition that records each check in the state (a write in the tick that starts it)
    and fails: re-entered by a priority selector on every tick."""

    async def update_async(self) -> Status:
        self.state.write_port("checks", (self.state.get("checks") or 0) + 1)
        return F


async def test_a_node_writing_the_state_in_every_tick_does_not_starve_the_loop() -> None:
    """A write made by the tick itself asks for the next tick at once, and the runner lets
    the loop run first: it ticked again without yielding, so no task ran and no timer fired,
    and the action beside a condition that records its checks never ended (the run timed
    out). py_trees' loop ticks such a tree at its rate, the action going on meanwhile."""
    leaf = Blocked("sleeper", seconds=0.05)
    root = py_trees.composites.Selector("priority", memory=False, children=[
        Records("check"), leaf])
    result = await ReactiveRunner(root, StateManager()).run(timeout=10)
    assert result.status is RunStatus.SUCCESS, result.error


class Stopwatch(Behaviour):
    """A plain py_trees leaf that runs for 50 ms from its first tick, its feedback the time."""

    def __init__(self) -> None:
        super().__init__("stopwatch")
        self.gate = asyncio.Event()
        self.ticks = 0

    def update(self) -> Status:
        self.ticks += 1
        if self.ticks == 1:
            asyncio.get_running_loop().call_later(0.05, self.gate.set)
        self.feedback_message = f"running at {time.monotonic():.9f}"
        return S if self.gate.is_set() else Status.RUNNING


async def test_a_running_leaf_whose_feedback_changes_is_polled_not_spun() -> None:
    """A running plain leaf only tells what it does when ticked, so it is polled; a feedback
    that changes on every tick (a time) is no change of the tree, also when a decorator
    above quotes it, and a re-entered branch beside it does not make the runner spin."""
    watch = Stopwatch()
    root = py_trees.composites.Selector("priority", memory=False, children=[
        Shut("check"), d.SuccessIsFailure("quoting", watch),
    ])
    config = AppConfig.model_validate({"runtime": {"poll_interval": 0.02}})
    result = await ReactiveRunner(root, StateManager(), config=config).run(timeout=60)
    assert result.status is RunStatus.FAILURE, result.error
    # polled every 20 ms for 50 ms: a few ticks (fewer on a busy machine, never more); a
    # spinning runner ticks it hundreds of times
    assert watch.ticks <= 10


@pytest.mark.parametrize(
    ("root", "expected"),
    [
        (lambda: d.Retry("retry", py_trees.behaviours.Failure("f"), num_failures=3),
         RunStatus.FAILURE),
        (lambda: d.Repeat("repeat", py_trees.behaviours.Success("s"), num_success=3),
         RunStatus.SUCCESS),
    ],
)
async def test_decorators_over_plain_leaves_finish(root: object, expected: RunStatus) -> None:
    """Plain py_trees leaves are re-evaluated by polling once ticks stop changing statuses:
    the counts still go on, as in py_trees' loop."""
    status, _ = await run(root())  # type: ignore[operator]
    assert status is expected


class Alternating(AsyncNode):
    """Succeeds and fails in turn, at once: its coroutine ends in the tick that starts it."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.runs = 0

    async def update_async(self) -> Status:
        self.runs += 1
        return S if self.runs % 2 else F


async def test_a_tree_cycling_through_the_same_ticks_is_polled_not_spun() -> None:
    """A branch whose ticks come round to the same statuses every second tick (a leaf that
    succeeds and fails in turn under decorators that turn both into RUNNING) is at rest as
    one repeating every tick is: polled, as py_trees' loop ticks it at its rate, not spun
    (thousands of ticks a second, for as long as the tree lived). The poll interval outlasts
    the sleeper: the count holds its start, the ticks that find the cycle, and its end."""
    leaf = Blocked("sleeper", seconds=0.2)
    cycling = Alternating("in turn")
    root = py_trees.composites.Parallel(
        "root", policy=ParallelPolicy.SuccessOnSelected([leaf]),
        children=[leaf, d.FailureIsRunning("f", d.SuccessIsRunning("s", cycling))],
    )
    result = await ReactiveRunner(root, StateManager(), config=SLOW_POLL).run(timeout=60)
    assert result.status is RunStatus.SUCCESS, result.error
    assert result.ticks <= 6
    assert cycling.runs <= 6


class ThirdTimeFails(AsyncNode):
    """Waits for ever on its first two runs; its third fails at once."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.runs = 0

    async def update_async(self) -> Status:
        self.runs += 1
        if self.runs < 3:
            await asyncio.Event().wait()
        return F


async def test_a_count_come_round_again_is_no_rest_while_the_rest_of_the_tree_moved() -> None:
    """A sequence without memory re-enters a Repeat over a finished OneShot: its count goes
    1, 2, 3 and the sequence on to its next child, restarted each time round. The ticks that
    touch the Repeat alone look alike every four ticks, but the child beyond them moved on
    between: no rest for good (the runner slept for ever instead of ending FAILURE on the
    child's third run, as py_trees' loop does). Polled, as py_trees' loop ticks it at its rate
    (ticked at once, such a tree whose child never failed spun at a full core)."""
    later = ThirdTimeFails("later")
    root = py_trees.composites.Sequence("root", memory=False, children=[
        d.Repeat("count", d.OneShot("once", Scripted("first", [S]),
                                    policy=OneShotPolicy.ON_SUCCESSFUL_COMPLETION),
                 num_success=3),
        later,
    ])
    poll = AppConfig.model_validate({"runtime": {"poll_interval": 0.01}})
    result = await ReactiveRunner(root, StateManager(), config=poll).run(timeout=30)
    assert result.status is RunStatus.FAILURE, result.error
    assert later.runs == 3
