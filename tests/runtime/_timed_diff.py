"""A second differential harness, in time rather than steps: leaves that sleep.

Every async leaf awaits ``asyncio.sleep(d)`` (a seeded, distinct duration per activation), then
ends SUCCESS, FAILURE or raises. The runner runs on an event loop whose clock is virtual: when
nothing is ready, the loop's clock jumps to its next timer, so a 0.7 s sleep costs no wall time
and every timer fires at its exact time (py_trees' ``Timeout`` and the runner read the same
clock). The reference is py_trees' own ``tick()`` loop on the same trees with synchronous leaves
that end once the clock passes their start plus the same duration, ticked as a loop at an
unbounded rate would be with its no-change ticks left out: a tick at every leaf's deadline and
every running Timeout's (plus the runner's slack), and again at once while a tick changes the
tree (while a Timeout runs, also every poll interval when the runner polls the tree, as such
a tick may find its deadline passed). A leaf's work (its blackboard write) lands at its
deadline, before the tick that reports it, as the task's does. Both sides log each leaf's
start, every ``terminate`` call with the status it leaves and the one it gets, and the
(virtual) time of each; the logs must be equal, times included, and so must the final status.

Other leaves: py_trees' own ``Success``, ``Failure``, ``Running`` and blackboard checks that
read what the async leaves wrote (``CheckBlackboardVariableValue``, under ``Condition`` or
``Inverter`` too), and ``EternalGuard``s whose condition reads the same writes. A run ends when
the root does, at a seeded virtual horizon (``cancel()`` on the runner, ``stop(INVALID)`` on
py_trees; every other case then runs again on the same tree, to a later horizon), or at
``max_ticks`` (py_trees is cut at the same time, after as many changing ticks
there). A tree that goes round at one instant (py_trees' loop would tick it for ever, the
runner rests) is left out, and counted.
"""

from __future__ import annotations

import asyncio
import operator
import random
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import py_trees
from py_trees.behaviour import Behaviour
from py_trees.blackboard import Blackboard
from py_trees.common import ComparisonExpression, Status

from jianmu.config import AppConfig
from jianmu.runtime.async_node import DEADLINE_SLACK, AsyncNode
from jianmu.runtime.runner import ReactiveRunner, RunStatus
from tests.runtime._async_diff import composite, decorator
from tests.support.virtual_time import T0, VirtualLoop, clock_is

RUNNING, SUCCESS, FAILURE, INVALID = Status.RUNNING, Status.SUCCESS, Status.FAILURE, Status.INVALID
POLL = 0.005
CONFIG = AppConfig.model_validate({"runtime": {"poll_interval": POLL}})
SAME_INSTANT_CAP = 60
"""Changing ticks at one instant after which py_trees' loop is taken to go round for ever."""
RUNNER_INSTANT_CAP = 200
"""Ticks of the runner at one instant after which it spins."""


# -- the world --------------------------------------------------------------------------------
@dataclass
class World:
    seed: int
    now: Callable[[], float]
    log: list[tuple[Any, ...]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)

    def at(self) -> float:
        return round(self.now() - T0, 6)

    def script(self, leaf: int, activation: int) -> tuple[float, str]:
        """Activation ``activation`` of leaf ``leaf``: how long it takes, how it ends."""
        rng = random.Random(f"timed:{self.seed}:{leaf}:{activation}")
        outcome = rng.choices(("SUCCESS", "FAILURE", "RAISE"), weights=(5, 3, 1))[0]
        return rng.uniform(0.02, 0.6), outcome

    def done(self, leaf: int) -> None:
        """A leaf's work ended: count it on the blackboard (guards and checks read it)."""
        key = f"/timed/done{leaf}"
        Blackboard.set(key, (Blackboard.storage.get(key) or 0) + 1)


class _Timed:
    idx: int
    world: World
    plan: tuple[float, str]
    activation = 0

    def begin(self) -> None:
        self.plan = self.world.script(self.idx, self.activation)
        self.activation += 1
        self.world.log.append(("start", self.idx, self.world.at()))

    def note_terminate(self, was: Status, new: Status) -> None:
        self.world.log.append(("terminate", self.idx, was.name, new.name, self.world.at()))


class SyncTimed(_Timed, Behaviour):
    """py_trees leaf: RUNNING until the clock passes its start plus its duration."""

    def __init__(self, idx: int, world: World, polled: bool = False) -> None:
        Behaviour.__init__(self, f"T{idx}")
        self.idx, self.world = idx, world
        self.polled = polled
        """A plain py_trees leaf under the runner too: it learns its end when ticked."""
        self.deadline = 0.0
        self.worked = True

    def initialise(self) -> None:
        self.begin()
        self.deadline = self.world.now() + self.plan[0]
        self.worked = False

    def update(self) -> Status:
        if self.world.now() < self.deadline:
            return RUNNING
        if self.polled and not self.worked:  # its work is its own: done when it sees it
            self.worked = True
            self.world.done(self.idx)
        outcome = self.plan[1]
        return FAILURE if outcome == "RAISE" else Status[outcome]

    def terminate(self, new_status: Status) -> None:
        self.note_terminate(self.status, new_status)


class AsyncTimed(_Timed, AsyncNode):
    """The same leaf as an `AsyncNode`: sleeps its duration, writes, ends or raises."""

    def __init__(self, idx: int, world: World) -> None:
        AsyncNode.__init__(self, f"T{idx}")
        self.idx, self.world = idx, world
        self.saw_cancel = False

    def initialise(self) -> None:
        self.begin()
        self.saw_cancel = False
        super().initialise()

    async def update_async(self) -> Status:
        seconds, outcome = self.plan
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            self.saw_cancel = True
            raise
        self.world.done(self.idx)
        if outcome == "RAISE":
            raise RuntimeError(f"T{self.idx} raised")
        return Status[outcome]

    def terminate(self, new_status: Status) -> None:
        was = self.status
        in_flight = self.in_flight is not None
        super().terminate(new_status)
        if new_status is INVALID and in_flight and not self.saw_cancel:
            self.world.violations.append(f"T{self.idx}: stopped, its coroutine saw no cancel")
        self.note_terminate(was, new_status)


# -- trees ------------------------------------------------------------------------------------
DECORATORS = (
    "inverter", "running_is_failure", "running_is_success", "failure_is_success",
    "failure_is_running", "success_is_failure", "success_is_running", "passthrough", "count",
    "status_to_bb", "condition_s", "condition_f", "oneshot_s", "oneshot_c", "repeat", "retry",
    "timeout", "guard",
)
PLAIN = ("success", "failure", "running", "check")


def random_spec(rng: random.Random, depth: int = 0, max_depth: int = 4,
                plain: tuple[str, ...] = PLAIN) -> Any:
    """("timed",) | ("plain", kind, n) | ("seq"|"sel", memory, kids) |
    ("par", policy, sync, picks, kids) | ("dec", kind, param, kid)."""
    roll = rng.random()
    if depth >= max_depth or (depth > 0 and roll < 0.3):
        if rng.random() < 0.2:
            return ("plain", rng.choice(plain), rng.randint(0, 5))
        return ("timed",)
    if roll < 0.65:
        kids = [random_spec(rng, depth + 1, max_depth, plain) for _ in range(rng.randint(2, 4))]
        shape = rng.choice(("seq", "sel", "par"))
        if shape == "par":
            policy = rng.choice(("all", "one", "selected"))
            picks = sorted(rng.sample(range(len(kids)), rng.randint(1, len(kids))))
            return ("par", policy, rng.random() < 0.5, picks, kids)
        return (shape, rng.random() < 0.5, kids)
    kind = rng.choice(DECORATORS)
    param: Any = {"repeat": rng.randint(1, 3), "retry": rng.randint(1, 3),
                  "timeout": rng.uniform(0.05, 1.2), "guard": (rng.randint(0, 5), rng.random())
                  }.get(kind, 0)
    return ("dec", kind, param, random_spec(rng, depth + 1, max_depth, plain))


def build(spec: Any, make_leaf: Callable[[int], Behaviour], world: World) -> Behaviour:
    """The tree of ``spec``, its timed leaves made by ``make_leaf`` (numbered in order)."""
    numbers = iter(range(10_000))
    dec = py_trees.decorators

    def done(leaf: int) -> int:
        return int(Blackboard.storage.get(f"/timed/done{leaf}") or 0)

    def make(node: Any) -> Behaviour:
        n = next(numbers)
        if node[0] == "timed":
            return make_leaf(n)
        if node[0] == "plain":
            kind, other = node[1], node[2]
            if kind == "success":
                return py_trees.behaviours.Success(f"ok{n}")
            if kind == "failure":
                return py_trees.behaviours.Failure(f"no{n}")
            if kind == "running":
                return py_trees.behaviours.Running(f"run{n}")
            if kind == "periodic":
                return py_trees.behaviours.Periodic(f"periodic{n}", n=other % 3 + 1)
            if kind == "ticks":
                return py_trees.behaviours.TickCounter(
                    f"ticks{n}", duration=other % 3 + 1,
                    completion_status=SUCCESS if other % 2 else FAILURE)
            if kind == "queue":
                return py_trees.behaviours.StatusQueue(
                    f"queue{n}", queue=[RUNNING, FAILURE, RUNNING, SUCCESS][other % 3:],
                    eventually=SUCCESS if other % 2 else FAILURE)
            if kind == "every":
                return py_trees.behaviours.SuccessEveryN(f"every{n}", n=other % 2 + 2)
            return py_trees.behaviours.CheckBlackboardVariableValue(
                f"check{n}", ComparisonExpression(f"/timed/done{other}", 1, operator.ge))
        made = composite(node, n, make)
        if made is not None:
            return made
        _, kind, param, kid_spec = node
        kid = make(kid_spec)
        name = f"{kind}{n}"
        made = decorator(kind, name, kid, param)
        if made is not None:
            return made
        if kind == "guard":
            leaf, flavour = param
            # open while leaf ``leaf`` has not ended yet, or once it has
            if flavour < 0.5:
                return dec.EternalGuard(name, kid, condition=lambda: done(leaf) == 0)
            return dec.EternalGuard(name, kid, condition=lambda: done(leaf) > 0)
        assert kind == "status_to_bb", kind
        return dec.StatusToBlackboard(name, kid, variable_name=f"/timed/status{n}")

    return make(spec)


def fingerprint(root: Behaviour, world: World) -> tuple[Any, ...]:
    """What a tick may change that shows: statuses, current children, a Retry's or a Repeat's
    count, a OneShot's outcome, the log."""
    return (len(world.log), *(
        (node.status, None if getattr(node, "current_child", None) is None
         else node.children.index(node.current_child), getattr(node, "failures", None),
         getattr(node, "success", None), getattr(node, "final_status", None))
        for node in root.iterate()))


@dataclass
class Outcome:
    log: list[tuple[Any, ...]]
    status: Status
    violations: list[str]


class GoesRound(Exception):
    """py_trees' loop changes the tree at one instant for ever: no reference to compare."""


# -- py_trees' loop, in time -------------------------------------------------------------------
Make = Callable[[Callable[[int], Behaviour], World], Behaviour]
"""Builds a tree from a maker of timed leaves (by number) and the world."""


def spec_tree(spec: Any) -> Make:
    return lambda leaf, world: build(spec, leaf, world)


def plain_leaves(seed: int, share: float) -> Callable[[int], bool]:
    """Which timed leaves stay py_trees leaves under the runner (polled), by number."""
    return lambda i: random.Random(f"plain:{seed}:{i}").random() < share


def run_pytrees(make: Make, seed: int, horizon: float, cut: tuple[float, int] | None = None,
                plain: Callable[[int], bool] = lambda i: False,
                rerun: float | None = None) -> Outcome:
    """py_trees' loop on ``make``'s tree until the root ends, ``horizon`` seconds pass (then,
    with ``rerun``, on for that many more, as a run again after a cancel), or ``cut`` (a time
    and a count of changing ticks at it) says where the runner's max_ticks was."""
    Blackboard.clear()
    clock = types.SimpleNamespace(now=T0)
    world = World(seed, lambda: clock.now)
    root = make(lambda i: SyncTimed(i, world, plain(i)), world)
    end = T0 + horizon

    def stop(why: str) -> None:
        if root.status is RUNNING:
            world.log.append((why, world.at()))
            root.stop(INVALID)

    with clock_is(lambda: clock.now):
        root.setup_with_descendants()
        at_instant = 0
        while True:
            if cut is not None and abs(clock.now - cut[0]) < 1e-9 and at_instant >= cut[1]:
                stop("max_ticks")
                break
            before = fingerprint(root, world)
            visited = list(root.tick())
            if root.status is not RUNNING:
                break
            if fingerprint(root, world) != before:
                at_instant += 1
                if at_instant > SAME_INSTANT_CAP:
                    raise GoesRound
                continue
            nodes = list(root.iterate())
            times = [n.deadline for n in nodes
                     if isinstance(n, SyncTimed) and n.status is RUNNING and not n.polled]
            times += [n.finish_time + DEADLINE_SLACK for n in nodes
                      if isinstance(n, py_trees.decorators.Timeout) and n.status is RUNNING]
            if any(_polled(n) for n in visited):
                # the runner polls a tree that runs or re-enters py_trees' own leaves or runs
                # a guard, as py_trees' loop ticks it: such a tick may see a Timeout's deadline
                # passed, a counting leaf move on
                times.append(clock.now + POLL)
            upcoming = min((t for t in times if t > clock.now), default=None)
            if cut is not None and (upcoming is None or upcoming > cut[0]):
                clock.now = cut[0]
                stop("max_ticks")
                break
            if upcoming is None or upcoming >= end:
                clock.now = end
                stop("cut")
                if rerun is None or root.status is not INVALID:
                    break
                world.log.append(("rerun", world.at()))  # ticked again, from its root
                end, rerun, at_instant = end + rerun, None, 0
                continue
            clock.now, at_instant = upcoming, 0
            for node in nodes:  # the work that ends now lands before the tick that reports it
                if isinstance(node, SyncTimed) and node.status is RUNNING and not node.worked \
                        and not node.polled and node.deadline <= clock.now:
                    node.worked = True
                    world.done(node.idx)
    return Outcome(world.log, root.status, world.violations)


def _polled(node: Behaviour) -> bool:
    """Whether the runner polls a tree whose last tick visited ``node``."""
    if isinstance(node, py_trees.decorators.EternalGuard):
        return node.status is RUNNING
    return not node.children and not (isinstance(node, SyncTimed) and not node.polled)


# -- the runner, in time -----------------------------------------------------------------------
async def _run_runner(make: Make, seed: int, horizon: float, max_ticks: int | None,
                      plain: Callable[[int], bool], rerun: float | None,
                      ) -> tuple[Outcome, tuple[float, int] | None]:
    loop = asyncio.get_running_loop()
    assert isinstance(loop, VirtualLoop)
    Blackboard.clear()
    world = World(seed, loop.time)

    def leaf(i: int) -> Behaviour:
        return SyncTimed(i, world, polled=True) if plain(i) else AsyncTimed(i, world)

    root = make(leaf, world)
    runner = ReactiveRunner(root, config=CONFIG)
    ticker_tick = runner._ticker.tick
    seen = types.SimpleNamespace(instant=None, ticks=0, changing=0)

    def tick(r: Behaviour, woken: Any) -> Any:
        before = fingerprint(root, world)
        plan = ticker_tick(r, woken)
        if seen.instant != loop.now:
            seen.instant, seen.ticks, seen.changing = loop.now, 0, 0
        seen.ticks += 1
        seen.changing += fingerprint(root, world) != before
        if seen.ticks % RUNNER_INSTANT_CAP == 0:
            world.violations.append(f"spin: {seen.ticks} ticks at {world.at()}")
            runner.cancel()
        return plan

    def at_horizon() -> None:
        if root.status is RUNNING:
            world.log.append(("cut", world.at()))
        runner.cancel()

    stop_tree = runner._stop_tree

    def stopping() -> None:  # a max_ticks cut (a cancel logs its own)
        if root.status is RUNNING and not runner._cancel_requested:
            world.log.append(("max_ticks", world.at()))
        stop_tree()

    runner._ticker.tick = tick  # type: ignore[method-assign]
    runner._stop_tree = stopping  # type: ignore[method-assign]
    timer = loop.call_at(T0 + horizon, at_horizon)
    with clock_is(loop.time):
        result = await runner.run(max_ticks=max_ticks)
        timer.cancel()
        if rerun is not None and result.status is RunStatus.CANCELLED:
            world.log.append(("rerun", world.at()))  # run() again on the same tree
            timer = loop.call_at(T0 + horizon + rerun, at_horizon)
            result = await runner.run(max_ticks=max_ticks)
            timer.cancel()
    cut = None
    if max_ticks is not None and result.error and "max_ticks" in result.error:
        cut = (seen.instant, seen.changing)
    for node in root.iterate():
        if isinstance(node, AsyncTimed) and node.in_flight is not None:
            world.violations.append(f"T{node.idx}: task left running after the run")
    return Outcome(world.log, root.status, world.violations), cut


def run_runner(make: Make, seed: int, horizon: float, max_ticks: int | None = None,
               plain: Callable[[int], bool] = lambda i: False, rerun: float | None = None,
               ) -> tuple[Outcome, tuple[float, int] | None]:
    """The runner on a virtual-time loop (the wall clock bounds a hang)."""
    with asyncio.Runner(loop_factory=VirtualLoop) as runner:
        return runner.run(_run_runner(make, seed, horizon, max_ticks, plain, rerun))


# -- the comparison ---------------------------------------------------------------------------
def case(seed: int) -> tuple[Any, float, int | None]:
    rng = random.Random(f"timed-case:{seed}")
    spec = random_spec(rng, max_depth=rng.choice((2, 3, 4, 5)))
    if rng.random() < 0.4:  # runs again and again, so later activations meet more states
        spec = ("dec", rng.choice(("repeat", "retry")), rng.randint(2, 5), spec)
    horizon = rng.uniform(0.8, 3.0)
    max_ticks = rng.randint(1, 12) if rng.random() < 0.2 else None
    return spec, horizon, max_ticks


def rerun_of(seed: int) -> float | None:
    """How long case ``seed`` runs again after its cancel (every other case)."""
    rng = random.Random(f"timed-rerun:{seed}")
    return rng.uniform(0.3, 1.5) if seed % 2 == 0 else None


def compare(seed: int) -> str | None:
    """None when both sides agree on case ``seed`` (or py_trees' loop goes round); every
    third case keeps some timed leaves py_trees leaves under the runner (polled)."""
    spec, horizon, max_ticks = case(seed)
    plain = plain_leaves(seed, 0.3 if seed % 3 == 0 else 0.0)
    rerun = rerun_of(seed) if max_ticks is None else None  # a second run's cut is not mirrored
    return compare_trees(spec_tree(spec), horizon, max_ticks, seed, plain, rerun)


def compare_spec(spec: Any, horizon: float, max_ticks: int | None = None, seed: int = 0,
                 ) -> str | None:
    """`compare_trees` on the tree of ``spec``."""
    return compare_trees(spec_tree(spec), horizon, max_ticks, seed)


ROUND = "py_trees' loop goes round at one instant"


def compare_trees(make: Make, horizon: float, max_ticks: int | None = None, seed: int = 0,
                  plain: Callable[[int], bool] = lambda i: False,
                  rerun: float | None = None) -> str | None:
    """None when both sides agree on ``make``'s tree, `ROUND` when there is no reference,
    else what differs."""
    got, cut = run_runner(make, seed, horizon, max_ticks, plain, rerun)
    try:
        want = run_pytrees(make, seed, horizon, cut, plain, None if cut else rerun)
    except GoesRound:  # nothing to compare with; the runner must still neither spin nor leak
        return f"violations: {got.violations[:4]}" if got.violations else ROUND
    problems = []
    if got.violations:
        problems.append(f"violations: {got.violations[:4]}")
    if got.log != want.log:
        at = next((i for i, (a, b) in enumerate(zip(got.log, want.log, strict=False)) if a != b),
                  min(len(got.log), len(want.log)))
        problems.append(f"logs differ at {at}: runner {got.log[max(0, at - 4):at + 4]} "
                        f"py_trees {want.log[max(0, at - 4):at + 4]}")
    if got.status is not want.status:
        problems.append(f"root: runner {got.status.name}, py_trees {want.status.name}")
    return "; ".join(problems) or None


if __name__ == "__main__":
    import sys
    import time

    first, count = int(sys.argv[1]), int(sys.argv[2])
    began, bad = time.monotonic(), 0
    for s in range(first, first + count):
        problem = compare(s)
        if problem and problem != ROUND:
            bad += 1
            print(s, case(s), problem[:1600], sep="\n  ", flush=True)
    print("bad", bad, "in", round(time.monotonic() - began, 1), "s")
