"""A third outsider's differential harness, in virtual time, written apart from the others
(`_async_diff.py`, `_timed_diff.py`, `_outsider_diff.py`) to reach shapes they leave out.

Trees lean to chains: decorators over decorators, a Parallel in a memory Sequence under a
`Retry` or `Repeat`, a `Timeout` around a Parallel, an `EternalGuard` around a composite. Each
activation of a leaf follows a seeded script: it ends at once (in the tick that starts it),
after work that takes no time (``asyncio.sleep(0)``, or a gather of such steps), or after a
duration on a grid of 1/8 s, some writing the state halfway; it succeeds, fails or raises.
Checks read what leaves wrote, as py_trees leaves or as async leaves that end at once; guards
read it too, and may raise, as may a py_trees leaf (a run that fails with the error).

The reference is py_trees' own ``tick_once()`` on the same tree with synchronous leaves, ticked
as a loop at an unbounded rate would tick it with its no-change ticks left out: at each instant
a leaf's work lands or a running `Timeout` expires (its ``finish_time`` and the runner's slack),
again while a tick changes the tree; a leaf whose work takes no time is RUNNING for one tick.
The runner runs on a loop whose clock jumps to its next timer, cancelled at a horizon (or
timed out there), then run again on the same tree (the same runner, told of new input, or a new
one). Both sides log each leaf's start and every ``terminate`` with the statuses and the
(virtual) time; the logs' order and the runs' statuses must be equal. A runner that went on
later than py_trees' loop (a round through instant leaves whose outcome changes from one run
to the next rests a poll interval: docs/design.md) is `Verdict.shifted`, compared no further.
"""

from __future__ import annotations

import asyncio
import random
import time
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import py_trees
from py_trees import composites, decorators
from py_trees.behaviour import Behaviour
from py_trees.common import OneShotPolicy, ParallelPolicy, Status

import jianmu.runtime.failures as failures_module
import jianmu.runtime.runner as runner_module
from jianmu.config import AppConfig
from jianmu.runtime.async_node import DEADLINE_SLACK, AsyncNode
from jianmu.runtime.runner import ReactiveRunner
from jianmu.state import StateManager
from tests.support.virtual_time import T0, VirtualLoop, clock_is

RUNNING, SUCCESS, FAILURE, INVALID = Status.RUNNING, Status.SUCCESS, Status.FAILURE, Status.INVALID
POLL = 0.004
CONFIG = AppConfig.model_validate({"runtime": {"poll_interval": POLL}})
INSTANT_CAP = 80
"""Changing ticks at one instant after which py_trees' loop is taken to go round for ever."""
MAX_TICKS = 50_000
DECORATORS = ("inverter", "s_is_f", "f_is_s", "f_is_r", "s_is_r", "r_is_f", "r_is_s", "pass",
              "oneshot_s", "oneshot_c", "cond_s", "cond_f", "repeat", "retry", "timeout", "guard")
SIMPLE = {"inverter": decorators.Inverter, "s_is_f": decorators.SuccessIsFailure,
          "f_is_s": decorators.FailureIsSuccess, "f_is_r": decorators.FailureIsRunning,
          "s_is_r": decorators.SuccessIsRunning, "r_is_f": decorators.RunningIsFailure,
          "r_is_s": decorators.RunningIsSuccess, "pass": decorators.PassThrough}


class GoesRound(Exception):
    """py_trees' loop goes round at one instant (or a Timeout and a leaf end too close)."""


@dataclass(frozen=True)
class Options:
    gather: bool = False
    """Work that takes no time is, half the time, a gather of two ``sleep(0)``s, which takes
    more turns of the loop (else one ``sleep(0)``)."""
    bombs: bool = False
    """Some py_trees leaves and guards raise once a leaf's work is done."""


# -- the world: what leaves wrote, the log --------------------------------------------------
class DictStore:
    """The reference's store."""

    def __init__(self) -> None:
        self.values: dict[str, int] = {}

    def get(self, key: str) -> int:
        return self.values.get(key, 0)

    def add(self, key: str) -> None:
        self.values[key] = self.get(key) + 1


class StateStore:
    """The runner's: the run's state, whose writes wake it."""

    def __init__(self, manager: StateManager) -> None:
        self.manager = manager

    def get(self, key: str) -> int:
        return int(self.manager.get(key) or 0)

    def add(self, key: str) -> None:
        self.manager.update({key: self.get(key) + 1})


@dataclass
class World:
    seed: int
    now: Callable[[], float]
    store: Any
    options: Options
    log: list[tuple[Any, ...]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    zero_ended: list[SyncLeaf] = field(default_factory=list)
    """Leaves whose no-time work lands after this tick (the reference's)."""

    def at(self) -> float:
        return round(self.now() - T0, 6)

    def script(self, leaf: int, activation: int) -> tuple[str, str, float, bool]:
        """(how: instant, zero or timed; its end; its duration; whether it writes halfway)."""
        rng = random.Random(f"probe:{self.seed}:{leaf}:{activation}")
        weights = random.Random(f"probe:{self.seed}").choice(
            ((3, 3, 5), (1, 0, 5), (5, 5, 1), (0, 5, 2), (2, 2, 2)))
        how = rng.choices(("instant", "zero", "timed"), weights=weights)[0]
        end = rng.choices(("SUCCESS", "FAILURE", "RAISE"), weights=(5, 4, 1))[0]
        return how, end, rng.randint(1, 14) / 8, rng.random() < 0.3

    def count(self, leaf: int) -> int:
        """What the checks and guards read of ``leaf``: its ends, and twice its halfway marks."""
        return self.store.get(f"d{leaf}") + 2 * self.store.get(f"m{leaf}")


class _Leaf:
    idx: int
    world: World
    activation = 0
    plan: tuple[str, str, float, bool] = ("instant", "SUCCESS", 0.0, False)

    def begin(self) -> None:
        self.plan = self.world.script(self.idx, self.activation)
        self.activation += 1
        self.world.log.append(("start", self.idx, self.world.at()))

    def note(self, was: Status, new: Status) -> None:
        self.world.log.append(("term", self.idx, was.name, new.name, self.world.at()))


class SyncLeaf(_Leaf, Behaviour):
    """The reference's leaf: its work lands when the driver says (`Reference.land`)."""

    def __init__(self, idx: int, world: World) -> None:
        Behaviour.__init__(self, f"L{idx}")
        self.idx, self.world = idx, world
        self.deadline = 0.0
        self.halfway: float | None = None
        self.worked = False
        self.updates = 0

    def initialise(self) -> None:
        self.begin()
        now = self.world.now()
        self.deadline = now + self.plan[2]
        self.halfway = now + self.plan[2] / 2 if self.plan[3] else None
        self.worked = False
        self.updates = 0

    def update(self) -> Status:
        how, end, _, _ = self.plan
        self.updates += 1
        if how == "instant":
            self.world.store.add(f"d{self.idx}")
        elif how == "zero" and self.updates == 1:
            self.world.zero_ended.append(self)
            return RUNNING
        elif how == "timed" and not self.worked:
            return RUNNING
        return FAILURE if end == "RAISE" else Status[end]

    def terminate(self, new_status: Status) -> None:
        if new_status is INVALID and self in self.world.zero_ended:
            self.world.zero_ended.remove(self)  # stopped before its task's step
        self.note(self.status, new_status)


class AsyncLeaf(_Leaf, AsyncNode):
    """The runner's leaf: the same script as a coroutine."""

    def __init__(self, idx: int, world: World) -> None:
        AsyncNode.__init__(self, f"L{idx}")
        self.idx, self.world = idx, world
        self.saw_cancel = False
        self.cleaning = False

    def initialise(self) -> None:
        self.begin()
        self.saw_cancel = False
        super().initialise()

    async def update_async(self) -> Status:
        how, end, seconds, halfway = self.plan
        try:
            if how == "zero" and self.world.options.gather and (self.activation + self.idx) % 2:
                await asyncio.gather(asyncio.sleep(0), asyncio.sleep(0))
            elif how == "zero":
                await asyncio.sleep(0)
            elif how == "timed" and halfway:
                await asyncio.sleep(seconds / 2)
                self.world.store.add(f"m{self.idx}")
                await asyncio.sleep(seconds / 2)
            elif how == "timed":
                await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            self.saw_cancel = self.cleaning = True
            try:
                await asyncio.sleep(0)  # a cleanup that awaits: run() waits for it
            finally:
                self.cleaning = False
            raise
        self.world.store.add(f"d{self.idx}")
        if end == "RAISE":
            raise RuntimeError(f"L{self.idx} raised")
        return Status[end]

    def terminate(self, new_status: Status) -> None:
        was, going = self.status, self.in_flight is not None
        super().terminate(new_status)
        if new_status is INVALID and going and not self.saw_cancel:
            self.world.violations.append(f"L{self.idx} stopped, its coroutine saw no cancel")
        self.note(was, new_status)


class Check(Behaviour):
    """A py_trees check of what a leaf wrote."""

    def __init__(self, name: str, world: World, leaf: int, odd: bool) -> None:
        super().__init__(name)
        self.world, self.leaf, self.odd = world, leaf, odd

    def update(self) -> Status:
        return SUCCESS if (self.world.count(self.leaf) % 2 == 1) == self.odd else FAILURE


class AsyncCheck(AsyncNode):
    """The same check as an async leaf that ends at once (the runner's side only)."""

    def __init__(self, name: str, world: World, leaf: int, odd: bool) -> None:
        super().__init__(name)
        self.world, self.leaf, self.odd = world, leaf, odd

    async def update_async(self) -> Status:
        return SUCCESS if (self.world.count(self.leaf) % 2 == 1) == self.odd else FAILURE


class Bomb(Behaviour):
    """A py_trees leaf that raises once a leaf's work is done."""

    def __init__(self, name: str, world: World, leaf: int) -> None:
        super().__init__(name)
        self.world, self.leaf = world, leaf

    def update(self) -> Status:
        if self.world.store.get(f"d{self.leaf}") >= 1:
            raise RuntimeError("bomb")
        return SUCCESS if self.leaf % 2 else FAILURE


# -- trees ----------------------------------------------------------------------------------
class Specs:
    """Seeded tree specs: ("leaf",) | ("plain", kind, leaf) | ("seq"|"sel", memory, kids) |
    ("par", policy, synchronise, picks, kids) | ("dec", kind, param, kid)."""

    def __init__(self, seed: int, options: Options) -> None:
        self.rng = random.Random(seed)
        self.leaves = 0
        self.plain_share = 0.35 if options.bombs else 0.15
        self.plains = ("success", "failure", "running", "check", "odd", "acheck", "acheck",
                       "aodd") + (("bomb", "bomb") if options.bombs else ())

    def param(self, kind: str) -> Any:
        rng = self.rng
        return {"repeat": rng.randint(1, 3), "retry": rng.randint(1, 3),
                "timeout": rng.randint(1, 20) / 8 + 1 / 64,
                "guard": (rng.randint(0, 6), rng.randint(0, 3))}.get(kind, 0)

    def leaf(self) -> Any:
        if self.rng.random() < self.plain_share:
            return ("plain", self.rng.choice(self.plains), self.rng.randint(0, self.leaves))
        self.leaves += 1
        return ("leaf",)

    def parallel(self, kids: list[Any]) -> Any:
        rng = self.rng
        picks = sorted(rng.sample(range(len(kids)), rng.randint(1, len(kids))))
        return ("par", rng.choice(("all", "one", "selected")), rng.random() < 0.5, picks, kids)

    def any(self, depth: int, deepest: int) -> Any:
        """Any shape."""
        rng = self.rng
        roll = rng.random()
        if depth >= deepest or (depth > 1 and roll < 0.25):
            return self.leaf()
        if roll < 0.55:
            kids = [self.any(depth + 1, deepest) for _ in range(rng.randint(1, 3))]
            shape = rng.choice(("seq", "sel", "par", "seq", "par"))
            return self.parallel(kids) if shape == "par" else (shape, rng.random() < 0.6, kids)
        kind = rng.choice(DECORATORS)  # over a decorator as often as not: depth kept
        return ("dec", kind, self.param(kind), self.any(depth + rng.randint(0, 1), deepest))

    def chains(self, depth: int, deepest: int) -> Any:
        """Shapes the other harnesses seldom build."""
        rng = self.rng
        if depth >= deepest or (depth > 1 and rng.random() < 0.2):
            return self.leaf()
        pattern = rng.choice(("chain", "retry_seq_par", "timeout_par", "guard", "any", "any"))
        if pattern == "chain":
            node = self.chains(depth + 1, deepest)
            for _ in range(rng.randint(2, 5)):
                kind = rng.choice(DECORATORS)
                node = ("dec", kind, self.param(kind), node)
            return node
        if pattern == "retry_seq_par":
            par = self.parallel([self.chains(depth + 2, deepest) for _ in range(rng.randint(2, 3))])
            around = [self.chains(depth + 2, deepest), par, self.chains(depth + 2, deepest)]
            kind = rng.choice(("retry", "repeat"))
            return ("dec", kind, self.param(kind), ("seq", True, around[:rng.randint(2, 3)]))
        if pattern == "timeout_par":
            par = self.parallel([self.chains(depth + 1, deepest) for _ in range(rng.randint(2, 3))])
            return ("dec", "timeout", self.param("timeout"), par)
        if pattern == "guard":
            kids = [self.chains(depth + 1, deepest) for _ in range(rng.randint(1, 3))]
            shape = (rng.choice(("sel", "seq")), rng.random() < 0.5, kids)
            return ("dec", "guard", self.param("guard"), shape)
        return self.any(depth, deepest)


def build(spec: Any, world: World, runner_side: bool) -> tuple[Behaviour, list[Any]]:
    """The tree of ``spec`` and its scripted leaves, numbered in order."""
    leaves: list[Any] = []
    names = iter(range(10_000))

    def make(node: Any) -> Behaviour:
        tag, name = node[0], f"n{next(names)}"
        if tag == "leaf":
            made = (AsyncLeaf if runner_side else SyncLeaf)(len(leaves), world)
            leaves.append(made)
            return made
        if tag == "plain":
            _, kind, leaf = node
            stock = {"success": py_trees.behaviours.Success, "failure": py_trees.behaviours.Failure,
                     "running": py_trees.behaviours.Running}
            if kind in stock:
                return stock[kind](name)
            if kind == "bomb":
                return Bomb(name, world, leaf)
            check = AsyncCheck if kind.startswith("a") and runner_side else Check
            return check(name, world, leaf, kind.endswith("odd"))
        if tag in ("seq", "sel"):
            cls = composites.Sequence if tag == "seq" else composites.Selector
            return cls(name, memory=node[1], children=[make(kid) for kid in node[2]])
        if tag == "par":
            _, policy, synchronise, picks, specs = node
            kids = [make(kid) for kid in specs]
            made_policy = (
                ParallelPolicy.SuccessOnAll(synchronise=synchronise) if policy == "all"
                else ParallelPolicy.SuccessOnOne() if policy == "one"
                else ParallelPolicy.SuccessOnSelected([kids[i] for i in picks], synchronise))
            return composites.Parallel(name, policy=made_policy, children=kids)
        _, kind, param, kid_spec = node
        kid = make(kid_spec)
        if kind in SIMPLE:
            return SIMPLE[kind](name=name, child=kid)
        if kind.startswith("oneshot"):
            policy = (OneShotPolicy.ON_SUCCESSFUL_COMPLETION if kind == "oneshot_s"
                      else OneShotPolicy.ON_COMPLETION)
            return decorators.OneShot(name=name, child=kid, policy=policy)
        if kind.startswith("cond"):
            return decorators.Condition(name=name, child=kid,
                                        status=SUCCESS if kind == "cond_s" else FAILURE)
        if kind == "repeat":
            return decorators.Repeat(name=name, child=kid, num_success=param)
        if kind == "retry":
            return decorators.Retry(name=name, child=kid, num_failures=param)
        if kind == "timeout":
            return decorators.Timeout(name=name, child=kid, duration=param)
        return decorators.EternalGuard(name=name, child=kid, condition=_guard(world, *param))

    return make(spec), leaves


def _guard(world: World, leaf: int, modulus: int) -> Callable[[], bool]:
    def condition() -> bool:
        if world.options.bombs and modulus >= 2 and world.store.get(f"d{leaf}") >= 1:
            raise RuntimeError("guard bomb")
        return world.count(leaf) % (modulus + 2) != 1

    return condition


def fingerprint(root: Behaviour, world: World) -> tuple[Any, ...]:
    """What a tick may change that the next tick reads."""
    seen: list[Any] = [len(world.log)]
    for node in root.iterate():
        seen.append(node.status)
        if isinstance(node, composites.Composite) and not isinstance(node, composites.Parallel):
            current = node.current_child
            seen.append(None if current is None else node.children.index(current))
        if isinstance(node, decorators.OneShot):
            seen.append(node.final_status)
        if isinstance(node, decorators.Retry):
            seen.append(node.failures)
        if isinstance(node, decorators.Repeat):
            seen.append(node.success)
    return tuple(seen)


# -- the two sides --------------------------------------------------------------------------
class Reference:
    """py_trees' loop on the tree with synchronous leaves, instant by instant."""

    def __init__(self, spec: Any, seed: int, options: Options) -> None:
        self.t = T0
        self.world = World(seed, lambda: self.t, DictStore(), options)
        self.root, self.leaves = build(spec, self.world, runner_side=False)
        self.root.setup_with_descendants()
        self.raised: tuple[int, list[int]] | None = None

    def land(self) -> None:
        """The work of the running leaves due by now."""
        for leaf in self.leaves:
            if leaf.status is RUNNING and leaf.halfway is not None and leaf.halfway <= self.t:
                leaf.halfway = None
                self.world.store.add(f"m{leaf.idx}")
        for leaf in self.leaves:
            if (leaf.status is RUNNING and leaf.plan[0] == "timed" and not leaf.worked
                    and leaf.deadline <= self.t):
                leaf.worked = True
                self.world.store.add(f"d{leaf.idx}")

    def run(self, horizon: float) -> str:
        """Tick until the root ends or the horizon (then stopped, as cancelled)."""
        root, world = self.root, self.world
        while True:
            self.land()
            for _ in range(INSTANT_CAP):
                before = fingerprint(root, world)
                try:
                    root.tick_once()
                except RuntimeError:
                    running = sorted(leaf.idx for leaf in self.leaves if leaf.status is RUNNING)
                    self.raised = (len(world.log), running)
                    return "RAISED"
                for leaf in world.zero_ended:
                    world.store.add(f"d{leaf.idx}")
                world.zero_ended.clear()
                if root.status is not RUNNING:
                    return root.status.name
                if fingerprint(root, world) == before:
                    break
            else:
                raise GoesRound
            running = [leaf for leaf in self.leaves
                       if leaf.status is RUNNING and leaf.plan[0] == "timed" and not leaf.worked]
            dues = [leaf.deadline for leaf in running]
            dues += [leaf.halfway for leaf in running if leaf.halfway is not None]
            expiries = [node.finish_time + DEADLINE_SLACK for node in root.iterate()
                        if isinstance(node, decorators.Timeout) and node.status is RUNNING]
            if any(expiry - DEADLINE_SLACK <= due <= expiry + POLL
                   for expiry in expiries for due in dues):
                raise GoesRound  # the runner may see the expiry at a poll: too close to call
            nearest = min(dues + expiries, default=None)
            if nearest is None or nearest >= T0 + horizon:
                self.t = T0 + horizon
                root.stop(INVALID)
                return "CANCELLED"
            self.t = max(self.t, nearest)


@contextmanager
def _runner_clock(loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """py_trees' Timeout, the ticker and the runner's deadlines read the loop's clock."""
    fake = types.SimpleNamespace(**{k: getattr(time, k) for k in dir(time) if k[0] != "_"})
    fake.monotonic = loop.time
    saved = runner_module.time, failures_module.time
    runner_module.time = failures_module.time = fake  # type: ignore[assignment]
    try:
        with clock_is(loop.time):
            yield
    finally:
        runner_module.time, failures_module.time = saved


async def _run_runner(spec: Any, seed: int, options: Options, horizons: list[float],
                      how: str) -> tuple[list[str], World, list[str]]:
    loop = asyncio.get_running_loop()
    manager = StateManager()
    world = World(seed, loop.time, StateStore(manager), options)
    root, _ = build(spec, world, runner_side=True)
    errors: list[str] = []
    loop.set_exception_handler(lambda _, context: errors.append(str(context.get("message"))))
    ticks_at: dict[float, int] = {}
    tick = root.tick

    def counted() -> Any:
        ticks_at[loop.time()] = ticks_at.get(loop.time(), 0) + 1
        return tick()

    root.tick = counted  # type: ignore[method-assign]
    statuses: list[str] = []
    runner = ReactiveRunner(root, config=CONFIG, state_manager=manager)
    for horizon in horizons:
        if how == "new":
            runner = ReactiveRunner(root, config=CONFIG, state_manager=manager)
        elif statuses and statuses[-1] in ("SUCCESS", "FAILURE"):
            runner.state.update({"again": len(world.log)})  # new input: a new turn
        if how == "timeout":
            result = await runner.run(max_ticks=MAX_TICKS,
                                      timeout=max(0.001, T0 + horizon - loop.time()))
        else:
            handle = loop.call_at(T0 + horizon, runner.cancel)
            result = await runner.run(max_ticks=MAX_TICKS)
            handle.cancel()
        status = result.status.name
        if status == "FAILURE" and "bomb" in str(result.exception):
            status = "RAISED"
        statuses.append("CANCELLED" if status == "TIMEOUT" else status)
        if result.ticks >= MAX_TICKS:
            world.violations.append("max_ticks reached: a spin")
        world.violations += [f"{node.name} still cleaning after run()" for node in root.iterate()
                             if getattr(node, "cleaning", False)]
        left = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()
                and not task.done() and not getattr(task.get_coro(), "ended", False)]
        world.violations += [f"a task left running: {task.get_name()}" for task in left]
        if status == "RAISED":
            break
    if max(ticks_at.values(), default=0) > 2 * INSTANT_CAP:
        world.violations.append("the runner went round at one instant")
    return statuses, world, errors


@dataclass
class Verdict:
    problems: list[str]
    skipped: bool = False
    shifted: bool = False
    logs: tuple[list[Any], list[Any]] = ([], [])
    """py_trees' log and the runner's, to read a difference by."""


def case(seed: int, options: Options) -> tuple[Any, list[float], str]:
    """The seed's tree, its runs' horizons and how it runs again."""
    specs = Specs(seed, options)
    deepest = specs.rng.randint(2, 6)
    spec = specs.any(0, deepest) if seed % 2 else specs.chains(0, deepest)
    horizons, at = [], 0.0
    for _ in range(specs.rng.randint(1, 3)):
        at += specs.rng.randint(4, 40) / 8 + 1 / 32 + 0.0003
        horizons.append(at)
    return spec, horizons, specs.rng.choice(("same", "new", "timeout"))


def check(seed: int, options: Options = Options()) -> Verdict:
    """Run the seed's case both ways."""
    spec, horizons, how = case(seed, options)
    reference = Reference(spec, seed, options)
    wants, ends, used = [], [], []
    try:
        with clock_is(lambda: reference.t):
            for horizon in horizons:
                used.append(max(horizon, reference.t - T0 + 0.0001))
                wants.append(reference.run(used[-1]))
                ends.append(reference.t - T0)
                if wants[-1] == "RAISED":
                    break
    except GoesRound:
        return Verdict([], skipped=True)
    # a run that ended by itself gets a horizon no run reaches
    horizons = [h if want == "CANCELLED" else end + 1000
                for want, end, h in zip(wants, ends, used, strict=True)]
    with asyncio.Runner(loop_factory=VirtualLoop) as runner:
        loop = runner.get_loop()
        with _runner_clock(loop):
            gots, world, errors = runner.run(_run_runner(spec, seed, options, horizons, how))
    want_log, got_log = reference.world.log, world.log
    problems = list(world.violations) + [f"the loop logged: {error}" for error in errors]
    shifted = next((i for i, (a, b) in enumerate(zip(want_log, got_log, strict=False))
                    if abs(a[-1] - b[-1]) > 1e-5), None)
    differs = next((i for i, (a, b) in enumerate(zip(want_log, got_log, strict=False))
                    if a[:-1] != b[:-1]), None)
    if differs is None and len(want_log) != len(got_log) and wants[-1] != "RAISED":
        differs = min(len(want_log), len(got_log))
    if shifted is not None and (differs is None or shifted < differs):
        return Verdict(problems, shifted=True, logs=(want_log, got_log))
    if wants[-1] == "RAISED" and reference.raised is not None:
        at, running = reference.raised
        after = got_log[at:]
        stopped = sorted(e[1] for e in after if e[0] == "term" and e[2:4] == ("RUNNING", "INVALID"))
        if stopped != running or any(e[0] == "start" for e in after):
            problems.append(f"after the raise, py_trees' running leaves {running}, stopped {after}")
        want_log, got_log = want_log[:at], got_log[:at]
        differs = next((i for i, (a, b) in enumerate(zip(want_log, got_log, strict=True))
                        if a[:-1] != b[:-1]), None)
    if wants != gots:
        problems.append(f"statuses: py_trees {wants}, jianmu {gots}")
    if differs is not None:
        problems.append(f"log at {differs}: py_trees {want_log[max(0, differs - 3):differs + 3]}"
                        f", jianmu {got_log[max(0, differs - 3):differs + 3]}")
    return Verdict([f"seed {seed} ({how}): {problem}" for problem in problems],
                   logs=(want_log, got_log))
