"""py_trees' semantics in time: leaves that sleep distinct durations under `ReactiveRunner`, on
a virtual-time loop, against py_trees' own loop on the same trees with leaves that end when
the clock passes their duration (`tests/runtime/_timed_diff.py` says what is compared: every
start and every ``terminate`` call with its statuses and time, and the final status)."""

from __future__ import annotations

from typing import Any

import py_trees
import pytest
from py_trees.behaviour import Behaviour

import jianmu.runtime.async_node as async_node_module
from tests.runtime._timed_diff import (
    ROUND,
    World,
    compare,
    compare_spec,
    compare_trees,
    run_runner,
    spec_tree,
)

SEEDS = range(600)


def test_sleeping_leaves_start_and_stop_when_pytrees_loop_does() -> None:
    """Random trees of every composite and decorator, py_trees' own leaves and blackboard
    checks beside sleeping async leaves (every third case with polled py_trees leaves too),
    some cut by ``max_ticks``, some cancelled at a horizon: the same log, times included."""
    found = {seed: compare(seed) for seed in SEEDS}
    problems = [(seed, p) for seed, p in found.items() if p is not None and p != ROUND]
    assert not problems, f"{len(problems)} trees differ, first: {problems[:2]}"
    assert sum(p == ROUND for p in found.values()) < len(SEEDS) // 10  # most are compared


def test_the_timed_harness_sees_a_missed_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    """A runner that forgets to tick an ended child again is caught (the comparison bites)."""
    monkeypatch.setattr(async_node_module, "ticked_again", lambda node: False)
    assert sum(compare(seed) not in (None, ROUND) for seed in range(100)) >= 5


def _starts(spec: Any, horizon: float, seed: int) -> list[float]:
    got, _ = run_runner(spec_tree(spec), seed, horizon)
    return [entry[2] for entry in got.log if entry[0] == "start"]


def _ends(spec: Any, horizon: float, seed: int) -> list[float]:
    got, _ = run_runner(spec_tree(spec), seed, horizon)
    return [entry[4] for entry in got.log if entry[0] == "terminate" and entry[3] != "INVALID"]


def test_a_leaf_under_success_is_running_starts_again_the_instant_it_ends() -> None:
    """SuccessIsRunning over a leaf that sleeps: RUNNING with no running child, ticked again
    at once, every time. From its second end on, it was taken for a round through tasks
    (back where it was, a task waited for between) and started a poll interval late."""
    spec = ("dec", "success_is_running", 0, ("timed",))
    assert compare_spec(spec, 1.5, seed=9) is None
    starts, ends = _starts(spec, 1.5, 9), _ends(spec, 1.5, 9)
    assert len(ends) >= 3
    assert starts[1:len(ends) + 1] == ends[:len(starts) - 1]


def test_a_selector_re_enters_its_first_child_the_instant_an_action_ends_again() -> None:
    """A selector without memory over [py_trees' Failure, a leaf, a leaf]: when the first leaf
    fails, the second starts and the next tick, at once, re-enters the first and stops the
    second. The second time round the tree was as at the first (two ticks back, with polls of
    the re-entered Failure between), taken for a cycle of ticks and left a poll interval."""
    spec = ("sel", False, [("plain", "failure", 0), ("timed",), ("timed",)])
    assert compare_spec(spec, 2.0, seed=173) is None
    got, _ = run_runner(spec_tree(spec), 173, 2.0)
    fails = [e[4] for e in got.log if e[:4] == ("terminate", 2, "RUNNING", "FAILURE")]
    restarts = [e[2] for e in got.log if e[:2] == ("start", 2)]
    assert len(fails) >= 3 and restarts[1:len(fails) + 1] == fails[:len(restarts) - 1]


# -- py_trees' idioms, decorators and leaves beside sleeping leaves -----------------------------
def _done(leaf: int) -> py_trees.common.ComparisonExpression:
    import operator
    return py_trees.common.ComparisonExpression(f"/timed/done{leaf}", 1, operator.ge)


def _either_or(leaf: Any, world: World) -> Behaviour:
    """Whichever of two racing leaves ends first picks the branch (`idioms.either_or`)."""
    race = py_trees.composites.Parallel(
        "race", policy=py_trees.common.ParallelPolicy.SuccessOnOne(), children=[leaf(0), leaf(1)])
    first = py_trees.composites.Sequence("first", memory=True, children=[leaf(2), leaf(3)])
    pick = py_trees.idioms.either_or([_done(0), _done(1)], [first, leaf(4)], namespace="/eo")
    return py_trees.composites.Sequence("root", memory=True, children=[
        py_trees.decorators.FailureIsSuccess("race ok", race), pick])


def _oneshot(leaf: Any, world: World) -> Behaviour:
    """A `idioms.oneshot` of two leaves, run again by a Repeat beside a third leaf."""
    once = py_trees.idioms.oneshot(
        py_trees.composites.Sequence("once", memory=True, children=[leaf(0), leaf(1)]),
        variable_name="/timed/oneshot", policy=py_trees.common.OneShotPolicy.ON_COMPLETION)
    body = py_trees.composites.Sequence("body", memory=False, children=[once, leaf(2)])
    return py_trees.decorators.Repeat("again", py_trees.decorators.FailureIsSuccess("ok", body),
                                      num_success=4)


def _pick_up(leaf: Any, world: World) -> Behaviour:
    """`idioms.pick_up_where_you_left_off` under a selector whose first branch, a leaf's end
    (a blackboard check), pre-empts it, then lets it go on where it was."""
    tasks = [py_trees.composites.Sequence(f"task{i}", memory=True,
                                          children=[leaf(2 * i), leaf(2 * i + 1)])
             for i in range(2)]
    work = py_trees.idioms.pick_up_where_you_left_off("pick up", tasks)
    interrupt = py_trees.composites.Sequence("interrupt", memory=False, children=[
        py_trees.behaviours.CheckBlackboardVariableValue("due?", _done(4)), leaf(5)])
    root = py_trees.composites.Selector("root", memory=False, children=[interrupt, work])
    timer = py_trees.decorators.FailureIsSuccess("timer ok", leaf(4))
    return py_trees.composites.Parallel(
        "all", policy=py_trees.common.ParallelPolicy.SuccessOnAll(synchronise=True),
        children=[timer, root])


def _for_each(leaf: Any, world: World) -> Behaviour:
    """`decorators.ForEach` over three items, a leaf per item, beside a racing leaf."""
    py_trees.blackboard.Blackboard.set("/timed/items", [1, 2, 3])
    each = py_trees.decorators.ForEach(
        "each", py_trees.decorators.FailureIsSuccess("ok", leaf(0)),
        source_key="/timed/items", target_key="/timed/item")
    return py_trees.composites.Parallel(
        "race", policy=py_trees.common.ParallelPolicy.SuccessOnSelected([each]),
        children=[each, leaf(1)])


def _guarded(leaf: Any, world: World) -> Behaviour:
    """An `EternalGuard` and a `Condition` over a check of what a leaf wrote."""
    check = py_trees.behaviours.CheckBlackboardVariableValue("done0?", _done(0))
    waits = py_trees.decorators.Condition("wait", check, py_trees.common.Status.SUCCESS)
    guard = py_trees.decorators.EternalGuard(
        "while 1 not done", py_trees.composites.Sequence("work", memory=True, children=[
            leaf(2), leaf(3), leaf(4)]),
        condition=lambda: not py_trees.blackboard.Blackboard.storage.get("/timed/done1"))
    return py_trees.composites.Parallel(
        "all", policy=py_trees.common.ParallelPolicy.SuccessOnAll(synchronise=False),
        children=[leaf(0), leaf(1), py_trees.composites.Sequence(
            "then", memory=True, children=[waits, py_trees.decorators.FailureIsSuccess(
                "ok", guard)])])


def _timers(leaf: Any, world: World) -> Behaviour:
    """Nested Timeouts, a Retry and py_trees' Running under RunningIsSuccess."""
    inner = py_trees.decorators.Timeout("inner", py_trees.composites.Sequence(
        "two", memory=True, children=[leaf(0), leaf(1)]), duration=0.45)
    retry = py_trees.decorators.Retry("retry", inner, num_failures=3)
    spin = py_trees.decorators.RunningIsSuccess("running ok", py_trees.behaviours.Running("r"))
    return py_trees.decorators.Timeout("outer", py_trees.composites.Sequence(
        "all", memory=False, children=[spin, retry, leaf(2)]), duration=1.6)


@pytest.mark.parametrize("make", [_either_or, _oneshot, _pick_up, _for_each, _guarded, _timers])
def test_pytrees_idioms_over_sleeping_leaves_match_its_loop(make: Any) -> None:
    """py_trees' idioms and decorators over sleeping leaves, 40 scripts each, with and
    without some leaves kept as polled py_trees leaves: the same log and final status."""
    problems = []
    for seed in range(40):
        plain = (lambda i, s=seed: (i + s) % 3 == 0) if seed % 2 else (lambda i: False)
        problem = compare_trees(make, 2.9937, seed=seed, plain=plain)  # off the poll grid
        if problem is not None:
            problems.append((seed, problem))
    assert not problems, problems[:2]


# -- py_trees' leaves that count their ticks ------------------------------------------------------
def _pytrees_at_its_rate(make: Any, ticks: int) -> tuple[list[Any], Any]:
    """py_trees' loop at a fixed rate (a poll interval a tick), ``ticks`` ticks at most."""
    import types

    from tests.runtime._timed_diff import POLL, T0, SyncTimed, clock_is

    py_trees.blackboard.Blackboard.clear()
    clock = types.SimpleNamespace(now=T0)
    world = World(0, lambda: clock.now)
    root = make(lambda i: SyncTimed(i, world), world)
    with clock_is(lambda: clock.now):
        root.setup_with_descendants()
        for _ in range(ticks):
            root.tick_once()
            if root.status is not py_trees.common.Status.RUNNING:
                break
            clock.now += POLL
        else:
            world.log.append(("cut", 0.0))
            root.stop(py_trees.common.Status.INVALID)
    return world.log, root.status


COUNTING = {
    "ticks": lambda: py_trees.behaviours.TickCounter("ticks", 3, py_trees.common.Status.SUCCESS),
    "ticks-fail": lambda: py_trees.behaviours.TickCounter(
        "ticks", 2, py_trees.common.Status.FAILURE),
    "queue": lambda: py_trees.behaviours.StatusQueue("queue", [
        py_trees.common.Status.RUNNING, py_trees.common.Status.FAILURE,
        py_trees.common.Status.FAILURE], eventually=py_trees.common.Status.SUCCESS),
    "periodic": lambda: py_trees.behaviours.Periodic("periodic", 2),
    "every": lambda: py_trees.behaviours.SuccessEveryN("every", 3),
    "count": lambda: py_trees.decorators.Count("count", py_trees.behaviours.TickCounter(
        "ticks", 2, py_trees.common.Status.SUCCESS)),
}


@pytest.mark.parametrize("kind", sorted(COUNTING))
@pytest.mark.parametrize("shape", ["parallel", "selector", "sequence"])
def test_pytrees_counting_leaves_beside_a_long_leaf_match_its_loop(kind: str, shape: str,
                                                                   monkeypatch: Any) -> None:
    """py_trees' leaves that count their ticks (polled by the runner, as py_trees' loop ticks
    them) beside a leaf that sleeps 10 s: they move on, decide the tree, and the long leaf's
    start and cancel come where py_trees' loop has them; the runner neither stalls nor spins."""
    from tests.runtime import _timed_diff

    monkeypatch.setattr(World, "script", lambda self, leaf, n: (10.0, "SUCCESS"))

    def make(leaf: Any, world: World) -> Behaviour:
        counting = COUNTING[kind]()
        if shape == "parallel":
            return py_trees.composites.Parallel(
                "race", policy=py_trees.common.ParallelPolicy.SuccessOnOne(),
                children=[counting, leaf(0)])
        if shape == "selector":
            return py_trees.composites.Selector("first", memory=False,
                                                children=[counting, leaf(0)])
        return py_trees.composites.Sequence("both", memory=False, children=[
            py_trees.decorators.FailureIsSuccess("ok", counting), leaf(0)])

    want, want_status = _pytrees_at_its_rate(make, 100)
    got, _ = _timed_diff.run_runner(make, 0, 0.5013)  # as long as py_trees' 100 ticks
    assert not got.violations
    untimed = [entry[:-1] for entry in got.log]
    wanted = [entry[:-1] for entry in want]
    if ("cut",) in wanted:  # a tree that goes on for ever (a leaf re-entered): as far as both go
        assert ("cut",) in untimed
        n = min(untimed.index(("cut",)), wanted.index(("cut",)))
        untimed, wanted = untimed[:n], wanted[:n]
    else:
        assert got.status is want_status
    assert untimed == wanted, (got.log, want)


# -- terminate(): its order and the status it gets, py_trees' and the runner's -----------------
DURATIONS = {0: 0.8, 1: 0.25, 2: 0.4, 3: 0.6}


def _stops(make: Any, horizon: float, max_ticks: int | None = None) -> list[Any]:
    """The runner's terminate calls (leaf, status left, status given), once checked equal to
    py_trees' loop's, times included."""
    problem = compare_trees(make, horizon, max_ticks)
    assert problem is None, problem
    got, _ = run_runner(make, 0, horizon, max_ticks)
    return [entry[1:4] if entry[0] == "terminate" else entry[:1] for entry in got.log
            if entry[0] != "start"]


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(World, "script", lambda self, leaf, n: (DURATIONS[leaf], "SUCCESS"))


def _pre_empting(leaf: Any, world: World) -> Behaviour:
    """Leaf 1's end opens the higher-priority branch, which pre-empts leaf 0."""
    urgent = py_trees.composites.Sequence("urgent", memory=False, children=[
        py_trees.behaviours.CheckBlackboardVariableValue("due?", _done(1)), leaf(2)])
    chooser = py_trees.composites.Selector("chooser", memory=False, children=[urgent, leaf(0)])
    return py_trees.composites.Parallel(
        "both", policy=py_trees.common.ParallelPolicy.SuccessOnAll(synchronise=True),
        children=[leaf(1), chooser])


def _racing(leaf: Any, world: World) -> Behaviour:
    return py_trees.composites.Parallel(
        "race", policy=py_trees.common.ParallelPolicy.SuccessOnOne(),
        children=[leaf(0), leaf(1), leaf(3)])


@pytest.mark.usefixtures("scripted")
def test_a_pre_empted_async_leaf_is_terminated_invalid_where_pytrees_does() -> None:
    """Leaf 2 starts first, then the selector stops leaf 0 (py_trees' order)."""
    got, _ = run_runner(_pre_empting, 0, 2.9937)
    assert [e[:2] for e in got.log if e[0] == "start"] == [("start", 1), ("start", 0),
                                                           ("start", 2)]
    assert _stops(_pre_empting, 2.9937) == [
        (1, "RUNNING", "SUCCESS"), (0, "RUNNING", "INVALID"), (2, "RUNNING", "SUCCESS")]


@pytest.mark.usefixtures("scripted")
def test_a_parallel_that_ends_terminates_its_running_leaves_in_order() -> None:
    """The first to succeed ends the race; the others, still running, are stopped in order
    (the winner, already ended, gets no second terminate)."""
    assert _stops(_racing, 2.9937) == [
        (1, "RUNNING", "SUCCESS"), (0, "RUNNING", "INVALID"), (3, "RUNNING", "INVALID")]


@pytest.mark.usefixtures("scripted")
def test_a_cancelled_run_terminates_its_running_leaves_as_pytrees_stop_does() -> None:
    """``cancel()`` at 0.1013 s: py_trees' ``stop(INVALID)`` of the root, child by child."""
    assert _stops(_racing, 0.1013) == [
        ("cut",), (0, "RUNNING", "INVALID"), (1, "RUNNING", "INVALID"), (3, "RUNNING", "INVALID")]


@pytest.mark.usefixtures("scripted")
def test_a_run_cut_by_max_ticks_terminates_as_pytrees_stop_does() -> None:
    """Cut after the pre-emption (the re-entered check is polled: a tick a poll interval):
    the running leaf, then the parallel's succeeded one (synchronised, so not re-entered)."""
    assert _stops(_pre_empting, 2.9937, max_ticks=60) == [
        (1, "RUNNING", "SUCCESS"), (0, "RUNNING", "INVALID"), ("max_ticks",),
        (2, "RUNNING", "INVALID"), (1, "SUCCESS", "INVALID")]
