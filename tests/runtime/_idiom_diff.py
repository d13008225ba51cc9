"""A differential harness for py_trees' idioms, its stock leaves and decorators, and the ways a
run ends early, against py_trees' own ``tick_once()`` loop.

A seeded random tree mixes py_trees' idioms (``either_or``, ``oneshot``,
``pick_up_where_you_left_off``, a task under an ``EternalGuard`` whose condition reads what
a leaf wrote: the guarded-task shape), every stock leaf of ``py_trees.behaviours`` (but the
random one), every decorator, every parallel policy, and work leaves that write the blackboard
when they start and end. The same tree is built twice: once all of plain py_trees leaves under
py_trees' loop, once with some work leaves made `AsyncNode`s under `ReactiveRunner`.

A work leaf runs ``n`` updates (an async one: ``update_async`` returns RUNNING ``n`` times, so
the runner polls it and ticks one for one with py_trees' loop) or hangs (an async one awaits a
future nobody sets, so the runner rests on it; its coroutine must see ``CancelledError`` when
stopped). Every node logs its ``initialise`` and ``terminate`` with its statuses, and every
leaf but a hanging one its ``update``; the logs, the root's status, every node's status and the
blackboard must be equal.

A run ends by itself, or is interrupted after its N-th tick: ``cancel()``, the task that awaits
``run()`` cancelled, ``max_ticks=N``, or the run's ``timeout`` (py_trees' loop is then cut
after as many ticks as the runner took); py_trees' side stops its root with ``stop(INVALID)``
there, as ``BehaviourTree.interrupt()`` does. A tree whose last tick changed nothing and
visited nothing the runner polls is at rest: py_trees' loop stops it there, and the runner's
``timeout`` ends its run. Then the same runner runs the tree again: after an interruption at
once; after its end, a ``run()`` must return the end unchanged with no tick, and a write to
the state (new input) lets the next run tick the ended tree again, as py_trees' loop would.
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
from py_trees.common import ComparisonExpression, OneShotPolicy, ParallelPolicy, Status

import jianmu.runtime.runner as runner_module
from jianmu.config import AppConfig
from jianmu.runtime.async_node import AsyncNode
from jianmu.runtime.runner import ReactiveRunner, RunStatus
from jianmu.state import StateManager
from tests.support.virtual_time import VirtualLoop

POLL = 0.001
CONFIG = AppConfig.model_validate({"runtime": {"poll_interval": POLL}})
CAP = 50
"""Ticks after which a run that does not end is cut (``max_ticks``), both ways."""
REST = 1.0
"""A run's timeout (virtual seconds, far more than CAP polls): it ends a run at rest."""
KEYS = ("/k0", "/k1", "/k2")
MODES = ("end", "cancel", "task", "max_ticks", "timeout", "cancel_at", "task_at")
"""How a first run ends: by itself, ``cancel()`` or its task cancelled after the N-th tick,
``max_ticks=N``, the run's timeout, ``cancel()`` or its task cancelled at a time (at rest
too, waiting on a hanging leaf)."""
COUNTING = ("dummy", "periodic", "every", "queue", "counter")
"""Stock leaves whose outcome counts ticks (``Dummy`` stands for a `Timer` in time)."""
BY_TIME = ("timeout", "cancel_at", "task_at")
"""Modes whose cut py_trees' loop takes from the ticks the runner took."""

RUNNING, SUCCESS, FAILURE, INVALID = Status.RUNNING, Status.SUCCESS, Status.FAILURE, Status.INVALID
Log = list[tuple[Any, ...]]


@dataclass
class World:
    log: Log = field(default_factory=list)
    violations: list[str] = field(default_factory=list)


_logged: dict[type, type] = {}


def logged(cls: type) -> type:
    """``cls`` with its lifecycle written to the world's log (its instances get ``world``)."""
    if cls in _logged:
        return _logged[cls]

    class Logged(cls):  # type: ignore[valid-type, misc]
        world: World
        quiet = False  # a hanging leaf: its updates are not logged (the runner rests on it)

        def initialise(self) -> None:
            self.world.log.append(("init", self.name))
            super().initialise()

        def update(self) -> Status:
            status = super().update()
            if not self.children and not self.quiet:
                self.world.log.append(("update", self.name, status.name))
            return status

        def terminate(self, new_status: Status) -> None:
            self.world.log.append(("term", self.name, self.status.name, new_status.name))
            super().terminate(new_status)

    Logged.__name__ = Logged.__qualname__ = f"Logged{cls.__name__}"
    _logged[cls] = Logged
    return Logged


class Work(Behaviour):
    """RUNNING for ``n`` updates (for ever when ``n`` is None), then ``end``; writes ``key``
    True as it starts and its new status as it ends."""

    def __init__(self, name: str, n: int | None, end: Status, key: str | None) -> None:
        super().__init__(name)
        self.n, self.end, self.key, self.count = n, end, key, 0
        self.quiet = n is None

    def initialise(self) -> None:
        self.count = 0
        if self.key:
            Blackboard.set(self.key, True)

    def update(self) -> Status:
        self.count += 1
        if self.n is None or self.count <= self.n:
            return RUNNING
        return self.end

    def terminate(self, new_status: Status) -> None:
        if self.key:
            Blackboard.set(self.key, new_status.name)


class AsyncWork(AsyncNode):
    """`Work` as an async leaf: RUNNING ``n`` times (polled), or hangs on a future nobody sets
    (``n`` None), noting the ``CancelledError`` its stop must bring."""

    def __init__(self, name: str, n: int | None, end: Status, key: str | None) -> None:
        super().__init__(name)
        self.n, self.end, self.key, self.count = n, end, key, 0
        self.quiet = n is None
        self.activations: list[dict[str, bool]] = []

    def initialise(self) -> None:
        self.count = 0
        if self.key:
            Blackboard.set(self.key, True)
        self.activations.append({"began": False, "cancelled": False, "stopped": False})
        super().initialise()

    async def update_async(self) -> Status:
        if self.n is None:
            self.activations[-1]["began"] = True
            try:
                await asyncio.get_running_loop().create_future()
            except asyncio.CancelledError:
                self.activations[-1]["cancelled"] = True
                raise
        self.count += 1
        if self.n is None or self.count <= self.n:
            return RUNNING
        return self.end

    def terminate(self, new_status: Status) -> None:
        if new_status is INVALID and self.in_flight is not None:
            self.activations[-1]["stopped"] = True
        super().terminate(new_status)
        if self.key:
            Blackboard.set(self.key, new_status.name)


# -- trees ------------------------------------------------------------------------------------
class Builder:
    """The seed's tree; ``use_async`` makes some work leaves async (the same draws either way)."""

    def __init__(self, seed: int, use_async: bool, world: World,
                 timed: Callable[[int], Behaviour] | None = None) -> None:
        self.rng = random.Random(f"idiom:{seed}")
        self.use_async, self.world = use_async, world
        self.count = 0
        self.timed = timed  # a maker of `_timed_diff`'s sleeping leaves, by number
        self.leaves = 0

    def name(self, kind: str) -> str:
        self.count += 1
        return f"{kind}{self.count}"

    def check(self) -> ComparisonExpression:
        rng = self.rng
        if self.timed is not None and rng.random() < 0.5:  # a sleeping leaf's end
            return ComparisonExpression(f"/timed/done{rng.randint(0, 4)}", 1, operator.ge)
        value = rng.choice((True, "SUCCESS", "FAILURE", "INVALID"))
        return ComparisonExpression(rng.choice(KEYS), value, rng.choice((operator.eq,
                                                                          operator.ne)))

    def work(self) -> Behaviour:
        rng = self.rng
        n = rng.choice((0, 1, 1, 2, 3, 5, 8, None)) if rng.random() < 0.9 else None
        end = rng.choice((SUCCESS, FAILURE))
        key = rng.choice((None, *KEYS))
        made_async = rng.random() < 0.6
        name = self.name("work")
        if self.timed is not None:
            self.leaves += 1
            return self.timed(self.leaves - 1)
        lazy = rng.random() < 0.5  # a hanging leaf whose task starts after the tick
        if made_async and self.use_async:
            made = AsyncWork(name, n, end, key)
            if n is None and lazy:
                made.eager_start = False  # type: ignore[misc]
            return made
        return Work(name, n, end, key)

    def stock(self) -> Behaviour:
        rng, b, name = self.rng, py_trees.behaviours, self.name("stock")
        key = rng.choice(KEYS)
        kind = rng.choice((
            "success", "failure", "running", "dummy", "periodic", "every", "queue", "counter",
            "check", "checks", "compare", "exists", "wait", "wait_value", "set", "unset",
            "to_status",
        ))
        if self.timed is not None and kind in COUNTING:
            # in time, a Timer (its clock the world's) where a leaf counts its ticks: how
            # often the runner ticks is not py_trees' loop's (it counts polls), so what such
            # a leaf does is compared by ticks (`first_difference`), not in time
            return py_trees.timers.Timer(name, rng.uniform(0.02, 0.5))
        if kind in ("success", "failure", "running", "dummy"):
            return {"success": b.Success, "failure": b.Failure, "running": b.Running,
                    "dummy": b.Dummy}[kind](name)
        if kind == "periodic":
            return b.Periodic(name, rng.randint(1, 3))
        if kind == "every":
            return b.SuccessEveryN(name, rng.randint(1, 3))
        if kind == "queue":
            queue = [rng.choice((RUNNING, SUCCESS, FAILURE)) for _ in range(rng.randint(1, 4))]
            return b.StatusQueue(name, queue, rng.choice((SUCCESS, FAILURE)))
        if kind == "counter":
            return b.TickCounter(name, rng.randint(0, 3), rng.choice((SUCCESS, FAILURE)))
        if kind == "check":
            return b.CheckBlackboardVariableValue(name, self.check())
        if kind == "checks":
            return b.CheckBlackboardVariableValues(
                name, [self.check(), self.check()],
                rng.choice((operator.and_, operator.or_, operator.xor)))
        if kind == "compare":
            return b.CompareBlackboardVariables(name, key, rng.choice(KEYS),
                                                rng.choice((operator.eq, operator.ne)))
        if kind == "exists":
            return b.CheckBlackboardVariableExists(name, key)
        if kind == "wait":
            return b.WaitForBlackboardVariable(name, key)
        if kind == "wait_value":
            return b.WaitForBlackboardVariableValue(name, self.check())
        if kind == "set":
            return b.SetBlackboardVariable(name, key, rng.choice((True, "SUCCESS", "FAILURE")),
                                           overwrite=rng.random() < 0.6)
        if kind == "unset":
            return b.UnsetBlackboardVariable(name, key)
        return b.BlackboardToStatus(name, "/status")

    def leaf(self) -> Behaviour:
        return self.stock() if self.rng.random() < 0.4 else self.work()

    def idiom(self, depth: int) -> Behaviour:
        rng, idioms = self.rng, py_trees.idioms
        kind = rng.choice(("either_or", "oneshot", "pick_up", "guarded"))
        if kind == "either_or":
            count = rng.randint(2, 3)
            conditions = [self.check() for _ in range(count)]
            subtrees = [self.node(depth - 1) for _ in range(count)]
            return idioms.either_or(conditions, subtrees, name=self.name("eitheror"),
                                    namespace=f"/either{self.count}")
        if kind == "oneshot":
            return idioms.oneshot(self.node(depth - 1), name=self.name("oneshot"),
                                  variable_name=f"/oneshot{self.count}",
                                  policy=rng.choice(list(OneShotPolicy)))
        if kind == "pick_up":
            tasks = [self.node(depth - 1) for _ in range(rng.randint(1, 3))]
            for task in tasks:  # its marks are named after its tasks: unique names
                task.name = self.name("task")
            return idioms.pick_up_where_you_left_off(self.name("pickup"), tasks)
        check = self.check()  # a task run while what a leaf wrote says so (guarded task)
        task = self.node(depth - 1)

        def condition() -> bool:
            try:
                return bool(check.operator(Blackboard.get(check.variable), check.value_generator()))
            except KeyError:
                return rng_open
        rng_open = rng.random() < 0.5
        guard = py_trees.decorators.EternalGuard(self.name("guard"), task, condition=condition)
        if rng.random() < 0.5:  # its usual place: the first of a selector's priorities
            return py_trees.composites.Selector(self.name("sel"), memory=False,
                                                children=[guard, self.node(depth - 1)])
        return guard

    def decorate(self, child: Behaviour) -> Behaviour:
        rng, d, name = self.rng, py_trees.decorators, self.name("dec")
        kind = rng.choice((
            "inverter", "count", "f_running", "f_success", "oneshot", "pass", "repeat",
            "retry", "r_failure", "r_success", "s_failure", "s_running", "to_bb", "condition",
            "timeout",
        ))
        simple = {"inverter": d.Inverter, "count": d.Count, "f_running": d.FailureIsRunning,
                  "f_success": d.FailureIsSuccess, "pass": d.PassThrough,
                  "r_failure": d.RunningIsFailure, "r_success": d.RunningIsSuccess,
                  "s_failure": d.SuccessIsFailure, "s_running": d.SuccessIsRunning}
        if kind in simple:
            return simple[kind](name=name, child=child)
        if kind == "oneshot":
            return d.OneShot(name=name, child=child, policy=rng.choice(list(OneShotPolicy)))
        if kind == "repeat":
            return d.Repeat(name=name, child=child, num_success=rng.randint(1, 3))
        if kind == "retry":
            return d.Retry(name=name, child=child, num_failures=rng.randint(1, 3))
        if kind == "to_bb":
            return d.StatusToBlackboard(name=name, child=child, variable_name="/status")
        if kind == "condition":
            return d.Condition(name=name, child=child, status=rng.choice((SUCCESS, FAILURE)))
        return d.Timeout(name=name, child=child, duration=3600.0)  # never due

    def node(self, depth: int) -> Behaviour:
        rng = self.rng
        roll = rng.random()
        if depth <= 0 or roll < 0.25:
            made = self.leaf()
        elif roll < 0.45:
            made = self.idiom(depth)
        else:
            kind = rng.choice(("seq", "sel", "par"))
            children = [self.node(depth - 1) for _ in range(rng.randint(1, 3))]
            name, memory = self.name(kind), rng.random() < 0.5
            if kind == "seq":
                made = py_trees.composites.Sequence(name, memory=memory, children=children)
            elif kind == "sel":
                made = py_trees.composites.Selector(name, memory=memory, children=children)
            else:
                picks = rng.sample(children, rng.randint(1, len(children)))
                policy = rng.choice((
                    ParallelPolicy.SuccessOnAll(synchronise=True),
                    ParallelPolicy.SuccessOnAll(synchronise=False),
                    ParallelPolicy.SuccessOnOne(),
                    ParallelPolicy.SuccessOnSelected(picks, synchronise=True),
                    ParallelPolicy.SuccessOnSelected(picks, synchronise=False),
                ))
                made = py_trees.composites.Parallel(name, policy=policy, children=children)
        while rng.random() < 0.25:
            made = self.decorate(made)
        return made


def build(seed: int, use_async: bool, world: World) -> Behaviour:
    """The seed's tree on a fresh blackboard, every node logging to ``world`` under a unique
    name (the idioms name theirs alike)."""
    Blackboard.clear()
    Blackboard.set("/status", SUCCESS)  # BlackboardToStatus reads it before a write
    root = Builder(seed, use_async, world).node(random.Random(f"depth:{seed}").randint(1, 5))
    for index, node in enumerate(root.iterate()):
        node.name = f"{node.name}#{index}"
        node.__class__ = logged(type(node))
        node.world = world  # type: ignore[attr-defined]
    return root


# -- the same trees in time -------------------------------------------------------------------
_timed_logged: dict[type, type] = {}


def timed_logged(cls: type) -> type:
    """``cls`` with its starts and ends written to a `_timed_diff` world's log, with times."""
    if cls in _timed_logged:
        return _timed_logged[cls]

    class Logged(cls):  # type: ignore[valid-type, misc]
        timed_world: Any

        def initialise(self) -> None:
            self.timed_world.log.append(("init", self.name, self.timed_world.at()))
            super().initialise()

        def terminate(self, new_status: Status) -> None:
            self.timed_world.log.append(("term", self.name, self.status.name, new_status.name,
                                         self.timed_world.at()))
            super().terminate(new_status)

    Logged.__name__ = Logged.__qualname__ = f"TimedLogged{cls.__name__}"
    _timed_logged[cls] = Logged
    return Logged


class WorldClock:
    """What `py_trees.timers.Timer` reads as ``time.time()``: the clock of the world being run
    (`timed_tree` sets it; install it with ``py_trees.timers.time = WORLD_CLOCK``)."""

    now: Callable[[], float] = staticmethod(lambda: 0.0)

    def time(self) -> float:
        return self.now()


WORLD_CLOCK = WorldClock()


def timed_tree(seed: int) -> Callable[[Callable[[int], Behaviour], Any], Behaviour]:
    """The seed's tree of idioms, stock leaves and decorators over `_timed_diff`'s sleeping
    leaves (a `_timed_diff.Make`): its other nodes log their starts and ends with times."""

    def make(leaf: Callable[[int], Behaviour], world: Any) -> Behaviour:
        WorldClock.now = staticmethod(world.now)  # type: ignore[assignment]
        Blackboard.set("/status", SUCCESS)
        root = Builder(seed, False, World(), timed=leaf).node(
            random.Random(f"depth:{seed}").randint(1, 5))
        for index, node in enumerate(root.iterate()):
            node.name = f"{node.name}#{index}"
            if type(node).__name__ not in ("SyncTimed", "AsyncTimed"):
                node.__class__ = timed_logged(type(node))
                node.timed_world = world  # type: ignore[attr-defined]
        return root

    return make


def interruption(seed: int) -> tuple[str, int]:
    """How the seed's first run ends (`MODES`) and after which tick."""
    rng = random.Random(f"interrupt:{seed}")
    return rng.choice(MODES), rng.randint(1, 25)


# -- py_trees' loop --------------------------------------------------------------------------
def _polled(node: Behaviour) -> bool:
    """Whether the runner polls a tree whose last tick visited ``node`` (a leaf but one that
    hangs, or a guard)."""
    if isinstance(node, py_trees.decorators.EternalGuard):
        return True
    return not node.children and not getattr(node, "quiet", False)


def _snapshot(root: Behaviour, world: World) -> tuple[Any, ...]:
    return (len(world.log), *(node.status for node in root.iterate()))


def pytrees_run(root: Behaviour, world: World, cut: int | None) -> tuple[int, bool]:
    """Tick until the root ends, ``cut`` ticks (then ``stop(INVALID)``), CAP, or rest (then
    stopped too); the ticks taken, and whether it rested."""
    ticks = 0
    while True:
        if ticks >= (CAP if cut is None else min(cut, CAP)):
            root.stop(INVALID)
            return ticks, False
        before = _snapshot(root, world)
        visited = list(root.tick())
        ticks += 1
        if root.status is not RUNNING:
            return ticks, False
        if _snapshot(root, world) == before and not any(_polled(n) for n in visited):
            root.stop(INVALID)
            return ticks, True


# -- the runner ------------------------------------------------------------------------------
@dataclass
class Seen:
    log: Log
    status: Status
    nodes: list[tuple[str, str]]
    board: dict[str, Any]
    ticks: int
    run: RunStatus | None


def _seen(root: Behaviour, world: World, ticks: int, run: RunStatus | None) -> Seen:
    return Seen(list(world.log), root.status,
                [(n.name, n.status.name) for n in root.iterate()],
                dict(Blackboard.storage), ticks, run)


async def _runner_side(seed: int) -> list[Seen]:
    world = World()
    root = build(seed, True, world)
    state = StateManager()
    runner = ReactiveRunner(root, state, config=CONFIG)
    mode, at = interruption(seed)
    ticker_tick = runner._ticker.tick
    counted = {"ticks": 0}
    task = asyncio.current_task()
    assert task is not None

    def tick(r: Behaviour, woken: Any) -> Any:
        plan = ticker_tick(r, woken)
        counted["ticks"] += 1
        if counted["ticks"] == at and root.status is RUNNING:
            if mode == "cancel":
                runner.cancel()
            elif mode == "task":
                runner_task.cancel()
        return plan

    runner._ticker.tick = tick  # type: ignore[method-assign]
    seen = []
    max_ticks = at if mode == "max_ticks" else CAP
    timeout = (at - 0.5) * POLL if mode == "timeout" else REST
    runner_task = asyncio.ensure_future(runner.run(max_ticks=max_ticks, timeout=timeout))
    timer = None
    if mode in ("cancel_at", "task_at"):  # off the poll grid
        loop = asyncio.get_running_loop()
        timer = loop.call_later((at + 0.37) * POLL,
                        runner.cancel if mode == "cancel_at" else runner_task.cancel)
    try:
        result = await runner_task
        status: RunStatus | None = result.status
    except asyncio.CancelledError:
        if task.cancelling():  # not ours
            raise
        status = None
    if timer is not None:
        timer.cancel()
    seen.append(_seen(root, world, counted["ticks"], status))
    _check_cancels(root, world)
    if status is not None and status.finished:  # its end stands: no tick, the same result
        again = await runner.run(max_ticks=CAP, timeout=REST)
        if again.status is not status or again.ticks != 0 or world.log != seen[-1].log:
            world.violations.append(f"a finished run ran again: {again.status} {again.ticks}")
        state.update({"new_input": seed})  # new input: the next run ticks the ended tree again
    counted["ticks"], at = 0, -1
    result = await runner.run(max_ticks=CAP, timeout=REST)
    seen.append(_seen(root, world, counted["ticks"], result.status))
    _check_cancels(root, world)
    for node in root.iterate():
        if isinstance(node, AsyncWork) and node.in_flight is not None:
            world.violations.append(f"{node.name}: its task left running after the run")
    if world.violations:
        seen[-1].log.append(("violations", *world.violations))
    return seen


def _check_cancels(root: Behaviour, world: World) -> None:
    for node in root.iterate():
        if isinstance(node, AsyncWork) and node.n is None:
            for i, activation in enumerate(node.activations):
                if activation["stopped"] and activation["began"] and not activation["cancelled"]:
                    world.violations.append(f"{node.name} #{i}: stopped, saw no CancelledError")


def runner_side(seed: int) -> list[Seen]:
    """The runner's runs of the seed's tree, on virtual time (its timeout's clock too)."""
    with asyncio.Runner(loop_factory=VirtualLoop) as loop:
        saved = runner_module.time
        runner_module.time = types.SimpleNamespace(  # type: ignore[assignment]
            monotonic=loop.get_loop().time)
        try:
            return loop.run(_runner_side(seed))
        finally:
            runner_module.time = saved


def reference(seed: int, got: list[Seen]) -> list[Seen]:
    """py_trees' loop on the seed's tree, cut where the runner's runs were interrupted."""
    world = World()
    root = build(seed, False, world)
    root.setup_with_descendants()
    mode, at = interruption(seed)
    cut = got[0].ticks if mode in BY_TIME else None if mode == "end" else at
    ticks, _ = pytrees_run(root, world, cut)
    seen = [_seen(root, world, ticks, None)]
    ticks, _ = pytrees_run(root, world, None)
    seen.append(_seen(root, world, ticks, None))
    return seen


def first_difference(seed: int) -> str | None:
    """None when both sides agree on the seed's tree, else what differs first."""
    got = runner_side(seed)
    want = reference(seed, got)
    for run, (g, w) in enumerate(zip(got, want, strict=True)):
        for key in ("log", "status", "nodes", "board"):
            a, b = getattr(w, key), getattr(g, key)
            if a != b:
                if key == "log":
                    at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                              min(len(a), len(b)))
                    near = slice(max(0, at - 4), at + 4)
                    return (f"seed {seed} run {run} {interruption(seed)}: log differs at {at}: "
                            f"py_trees {a[near]} runner {b[near]}")
                if key == "nodes":
                    a = [(x, y) for x, y in zip(a, b, strict=True) if x != y][:4]
                return f"seed {seed} run {run} {interruption(seed)}: {key}: py_trees {a} runner {b}"
    return None


Check = Callable[[int], str | None]

if __name__ == "__main__":
    import sys

    first, count = int(sys.argv[1]), int(sys.argv[2])
    bad = 0
    for s in range(first, first + count):
        problem = first_difference(s)
        if problem:
            bad += 1
            print(problem[:2000], flush=True)
    print("bad", bad, "of", count)
