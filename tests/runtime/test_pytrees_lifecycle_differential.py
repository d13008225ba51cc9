"""A third differential probe of py_trees' semantics, built apart from the others: every call
py_trees makes on a leaf is logged (each ``initialise``, each end ``update`` reports, each
``terminate`` with the status it is given and the one the leaf had), so a leaf initialised or
terminated once too often, or terminated with another status, shows as a difference.

Trees hold what the other generators do not: `StatusToBlackboard` (its blackboard value is
compared), `EternalGuard` over a blackboard condition (bool or status) whose key the driver
flips, py_trees' idioms (``pick_up_where_you_left_off``, ``either_or``, ``oneshot``) among
composites, and leaves that count their own ticks. py_trees' loop picks the events (a leaf
completes, a guard's flag or blackboard key flips, a cancel, a run again after its end);
`ReactiveRunner` replays them on the same tree whose leaves are async (eager or not) or plain.

More trees: ``JIANMU_LIFECYCLE_SEEDS=2000 pytest <this file>`` (the suite runs `SEEDS`, a
quarter per shape).
"""

from __future__ import annotations

import asyncio
import operator
import os
import random
from collections.abc import Iterator
from typing import Any

import py_trees
import pytest
from py_trees.behaviour import Behaviour
from py_trees.blackboard import Blackboard
from py_trees.common import ComparisonExpression, OneShotPolicy, ParallelPolicy, Status

from jianmu.config import AppConfig
from jianmu.runtime import AsyncNode, ReactiveRunner, RunStatus

pytestmark = pytest.mark.anyio

S, F = Status.SUCCESS, Status.FAILURE
POLL = AppConfig.model_validate({"runtime": {"poll_interval": 0.001}})
SPIN = 150
"""py_trees ticks without settling after which a tree spins (nothing to compare past it)."""
MAX_TICKS = 3000
MAX_EVENTS = 24
SEEDS = int(os.environ.get("JIANMU_LIFECYCLE_SEEDS", "0")) or 128
FIRST_SEED = 7_000_000
DECORATORS = (
    "Retry", "Repeat", "Timeout", "OneShot", "Condition", "EternalGuard", "BoardGuard",
    "Inverter", "Count", "PassThrough", "RunningIsFailure", "RunningIsSuccess",
    "FailureIsSuccess", "FailureIsRunning", "SuccessIsFailure", "SuccessIsRunning",
    "StatusToBlackboard",
)
IDIOMS = ("pick_up", "either_or", "oneshot")
STOCK = ("Success", "Failure", "Running", "TickCounter", "StatusQueue", "SuccessEveryN",
         "Periodic", "WaitForBlackboardVariableValue", "CheckBlackboardVariableValue")
"""py_trees' own leaves, the same in both worlds (plain leaves under the runner)."""


# -- the trees ---------------------------------------------------------------------------------
class Gen:
    """Random tree specs, every leaf named uniquely; ``keys`` blackboard keys, ``flags`` flags."""

    def __init__(self, rng: random.Random, *, leaves: str, keys: int = 2, flags: int = 2,
                 stock: float = 0.15) -> None:
        self.rng, self.leaves, self.keys, self.flags, self.n = rng, leaves, keys, flags, 0
        self.stock = stock

    def uid(self) -> int:
        self.n += 1
        return self.n

    def leaf(self) -> tuple[Any, ...]:
        rng = self.rng
        if rng.random() < self.stock:
            return ("stock", rng.choice(STOCK), rng.randrange(1 << 12), self.uid())
        runs = []
        for _ in range(rng.randint(1, 3)):
            how = rng.choices(("now", "gate", "raise", "raise_gate", "ticks", "sleep"),
                              (3, 6, 1, 1, 1, 1))[0]
            runs.append((how, rng.choice((S, F)), rng.randint(1, 3)))
        kind = self.leaves if self.leaves != "mixed" else rng.choices(
            ("async", "lazy", "plain"), (5, 1, 3))[0]
        if kind == "lazy":  # its task starts a loop step later: it never ends in its first tick
            runs = [r if r[0] in ("gate", "raise_gate", "sleep") else ("gate", r[1], 1)
                    for r in runs]
        return ("leaf", f"L{self.uid()}", kind, tuple(runs))

    def node(self, depth: int) -> tuple[Any, ...]:
        rng = self.rng
        if depth <= 0 or rng.random() < 0.25:
            return self.leaf()
        pick = rng.random()
        if pick < 0.4:
            name = rng.choice(DECORATORS)
            param = rng.randrange(1 << 12)
            return ("dec", name, param, self.uid(), self.node(depth - 1))
        if pick < 0.5:
            idiom = rng.choice(IDIOMS)
            count = 2 if idiom == "either_or" else rng.randint(1, 3)
            return ("idiom", idiom, rng.randrange(1 << 12), self.uid(),
                    tuple(self.node(depth - 2) for _ in range(count)))
        kind = rng.choice(("seq", "sel", "par"))
        # now and then none: py_trees' composites end at once then, each its own way
        children = tuple(self.node(depth - 1) for _ in range(rng.choices((0, 1, 2, 3, 4),
                                                                         (1, 6, 6, 6, 6))[0]))
        if kind == "par":  # SuccessOnSelected needs a child to select
            policy = rng.choice(("all", "one", "selected") if children else ("all", "one"))
            return ("par", (policy, rng.random() < 0.5, rng.getrandbits(4)), self.uid(), children)
        return (kind, rng.random() < 0.5, self.uid(), children)


class World:
    """What one tree's leaves share: the log, the gated leaves running, the flags."""

    def __init__(self, flags: int, keys: int) -> None:
        self.log: list[tuple[Any, ...]] = []
        self.running: dict[str, Any] = {}
        self.leaves: dict[str, Any] = {}
        self.flags = [True] * flags
        self.keys = [f"probe_key_{i}" for i in range(keys)]
        self.board = py_trees.blackboard.Client(name="probe-driver")
        for key in self.keys:
            self.board.register_key(key=key, access=py_trees.common.Access.WRITE)
            self.board.set(key, True)

    def flip_key(self, i: int) -> None:
        key = self.keys[i]
        self.board.set(key, not self.board.get(key))


class _Life:
    """What a leaf of either kind logs: every initialise, end and terminate."""

    name: str
    status: Status
    world: World
    runs: tuple[tuple[str, Status, int], ...]
    kind: str = "plain"
    """What the leaf is under the runner (plain, async, lazy), in either world."""

    def _setup_leaf(self, runs: Any, world: World) -> None:
        self.runs, self.world, self.n, self.done, self.count = runs, world, 0, False, 0
        self.run = runs[0]
        world.leaves[self.name] = self

    def _begin(self) -> None:
        self.run = self.runs[self.n % len(self.runs)]
        self.n += 1
        self.count = 0
        self.done = self.run[0] in ("now", "raise")
        self.world.log.append(("init", self.name, self.n))
        if self.run[0] in ("gate", "raise_gate", "sleep"):
            self.world.running[self.name] = self

    def complete(self) -> None:
        self.done = True
        self.world.running.pop(self.name, None)

    def _scripted(self) -> Status:
        how, status, _ = self.run
        return F if how.startswith("raise") else status

    def _terminated(self, new_status: Status) -> None:
        self.world.log.append(("term", self.name, self.status.name, new_status.name))
        if new_status is Status.INVALID:
            self.world.running.pop(self.name, None)


class Plain(_Life, Behaviour):
    """A plain py_trees leaf playing its runs."""

    def __init__(self, name: str, runs: Any, world: World) -> None:
        Behaviour.__init__(self, name)
        self._setup_leaf(runs, world)

    def initialise(self) -> None:
        self._begin()

    def update(self) -> Status:
        if self.run[0] == "ticks":
            self.count += 1
            if self.count <= self.run[2]:
                return Status.RUNNING
            self.done = True
        if not self.done:
            return Status.RUNNING
        status = self._scripted()
        self.world.log.append(("end", self.name, status.name))
        return status

    def terminate(self, new_status: Status) -> None:
        self._terminated(new_status)


class Async(_Life, AsyncNode):
    """An async leaf playing its runs; its coroutine logs the CancelledError it sees."""

    def __init__(self, name: str, runs: Any, world: World) -> None:
        AsyncNode.__init__(self, name)
        self._setup_leaf(runs, world)
        self.gate: asyncio.Future[None] | None = None
        self.blocked = False
        self.begun: set[int] = set()
        self.ended: set[int] = set()
        self.stopped: set[int] = set()
        """Gates whose run was stopped while its coroutine had begun and not ended."""
        self.reached: set[int] = set()
        """Gates whose coroutine saw its CancelledError."""

    @property
    def busy(self) -> bool:
        """Whether its task goes on by itself (or ended unread): the tree is not yet quiet."""
        task, gate = self._task, self.gate
        if task is None:
            return False
        return task.done() or not (self.blocked and gate is not None and not gate.done())

    def initialise(self) -> None:
        self.gate = asyncio.get_running_loop().create_future()
        self._begin()
        super().initialise()

    def complete(self) -> None:
        super().complete()
        assert self.gate is not None
        self.gate.set_result(None)

    async def update_async(self) -> Status:
        how, status, k = self.run
        gate = self.gate
        assert gate is not None
        if how == "now":
            return status
        if how == "raise":
            raise ValueError(f"{self.name} raised")
        if how == "ticks":  # called anew at each tick while it says RUNNING: polled
            self.count += 1
            return Status.RUNNING if self.count <= k else status
        self.begun.add(id(gate))
        try:
            self.blocked = True
            try:
                await asyncio.shield(gate)
            finally:
                self.blocked = False
            if how == "sleep":  # a delay after the driver's event, on the loop's clock
                await asyncio.sleep(0.0005 * k)
        except asyncio.CancelledError:
            self.reached.add(id(gate))
            raise
        finally:
            self.ended.add(id(gate))
        if how == "raise_gate":
            raise ValueError(f"{self.name} raised")
        return status

    def update(self) -> Status:
        status = super().update()
        if status is not Status.RUNNING:
            self.world.log.append(("end", self.name, status.name))
        return status

    def terminate(self, new_status: Status) -> None:
        gate = self.gate
        if (new_status is Status.INVALID and self.status is Status.RUNNING and gate is not None
                and id(gate) in self.begun and id(gate) not in self.ended):
            self.stopped.add(id(gate))
        self._terminated(new_status)
        super().terminate(new_status)


class Lazy(Async):
    """An async leaf whose task starts on the loop's next step."""

    eager_start = False


def _condition(world: World, param: int) -> Any:
    flags, flag = world.flags, param % len(world.flags)
    if param & 1:
        return lambda: flags[flag]
    return lambda: S if flags[flag] else F


def _board_condition(key: str, param: int) -> Any:
    if param & 1:
        def check(blackboard: Any) -> bool:
            return bool(blackboard.get(key))
    else:
        def check(blackboard: Any) -> Status:
            return S if blackboard.get(key) else F
    return check


def build(spec: tuple[Any, ...], world: World, plain: bool) -> Behaviour:
    """The tree of ``spec``: plain leaves only (py_trees' world), or each leaf of its kind."""
    kind = spec[0]
    if kind == "leaf":
        cls = Plain if plain else {"async": Async, "lazy": Lazy, "plain": Plain}[spec[2]]
        leaf = cls(spec[1], spec[3], world)
        leaf.kind = spec[2]  # what it is under the runner, whichever world this is
        return leaf
    if kind in ("seq", "sel"):
        composite = py_trees.composites.Sequence if kind == "seq" else py_trees.composites.Selector
        return composite(f"{kind}{spec[2]}", memory=spec[1],
                         children=[build(c, world, plain) for c in spec[3]])
    if kind == "par":
        (policy, synchronise, mask), children = spec[1], [build(c, world, plain) for c in spec[3]]
        chosen: ParallelPolicy.Base
        if policy == "all":
            chosen = ParallelPolicy.SuccessOnAll(synchronise=synchronise)
        elif policy == "one":
            chosen = ParallelPolicy.SuccessOnOne()
        else:
            picked = [c for i, c in enumerate(children) if mask >> i & 1] or children[:1]
            chosen = ParallelPolicy.SuccessOnSelected(picked, synchronise=synchronise)
        return py_trees.composites.Parallel(f"par{spec[2]}", policy=chosen, children=children)
    if kind == "idiom":
        return _idiom(spec, world, plain)
    if kind == "stock":
        return _stock(spec, world)
    which, param, uid = spec[1], spec[2], spec[3]
    child = build(spec[4], world, plain)
    name, d = f"{which}{uid}", py_trees.decorators
    if which == "Retry":
        return d.Retry(name, child, num_failures=1 + param % 3)
    if which == "Repeat":
        return d.Repeat(name, child, num_success=(-1, 1, 2, 3)[param % 4])
    if which == "Timeout":  # never, or at once: driver steps are not seconds
        return d.Timeout(name, child, duration=1e6 if param % 3 else -1.0)
    if which == "OneShot":
        policy = (OneShotPolicy.ON_COMPLETION, OneShotPolicy.ON_SUCCESSFUL_COMPLETION)[param % 2]
        return d.OneShot(name, child, policy=policy)
    if which == "Condition":
        return d.Condition(name, child, status=(S, F)[param % 2])
    if which == "EternalGuard":
        return d.EternalGuard(name, child, condition=_condition(world, param))
    if which == "BoardGuard":
        key = world.keys[(param >> 1) % len(world.keys)]
        return d.EternalGuard(name, child, condition=_board_condition(key, param),
                              blackboard_keys={key})
    if which == "StatusToBlackboard":
        return d.StatusToBlackboard(name, child, variable_name=f"probe_status_{uid}")
    return getattr(d, which)(name, child)


def _stock(spec: tuple[Any, ...], world: World) -> Behaviour:
    which, param, uid = spec[1], spec[2], spec[3]
    name, b = f"{which}{uid}", py_trees.behaviours
    status, k = (S, F)[param & 1], 1 + (param >> 1) % 3
    if which in ("Success", "Failure", "Running"):
        return getattr(b, which)(name)
    if which == "TickCounter":
        return b.TickCounter(name, duration=k, completion_status=status)
    if which == "StatusQueue":
        return b.StatusQueue(name, queue=[Status.RUNNING] * k + [status], eventually=status)
    if which in ("SuccessEveryN", "Periodic"):
        return getattr(b, which)(name, n=k + 1)
    check = ComparisonExpression(world.keys[k % len(world.keys)], param & 2 == 0, operator.eq)
    return getattr(b, which)(name, check=check)


def _idiom(spec: tuple[Any, ...], world: World, plain: bool) -> Behaviour:
    idiom, param, uid, kids = spec[1], spec[2], spec[3], spec[4]
    children = [build(c, world, plain) for c in kids]
    if idiom == "pick_up":
        # the idiom keys its blackboard variables by its tasks' names: one per idiom here
        tasks = [py_trees.decorators.PassThrough(f"task {uid} {i}", child)
                 for i, child in enumerate(children)]
        return py_trees.idioms.pick_up_where_you_left_off(f"pick{uid}", tasks)
    if idiom == "either_or":
        keys = world.keys
        conditions = [ComparisonExpression(keys[0], True, operator.eq),
                      ComparisonExpression(keys[1 % len(keys)], param % 2 == 0, operator.eq)]
        return py_trees.idioms.either_or(conditions, children, name=f"either{uid}",
                                         namespace=f"/probe_either_{uid}")
    body = (children[0] if len(children) == 1
            else py_trees.composites.Sequence(f"once{uid}", memory=True, children=children))
    policy = (OneShotPolicy.ON_COMPLETION, OneShotPolicy.ON_SUCCESSFUL_COMPLETION)[param % 2]
    return py_trees.idioms.oneshot(body, name=f"oneshot{uid}",
                                   variable_name=f"probe_oneshot_{uid}", policy=policy)


def _board() -> tuple[Any, ...]:
    return tuple(sorted((k, repr(v)) for k, v in Blackboard.storage.items() if "probe" in k))


def snapshot(root: Behaviour) -> tuple[Any, ...]:
    """Every node's status (in tree order: idioms repeat names), what the decorators keep
    (not a `Count`'s tick tallies: the runner takes fewer ticks) and the blackboard."""
    return ("tree", tuple(
        (n.name, n.status.name, getattr(n, "success", None), getattr(n, "failures", None),
         getattr(n, "final_status", None), getattr(n, "success_count", None),
         getattr(n, "failure_count", None), getattr(n, "interrupt_count", None),
         getattr(n, "count", None), getattr(n, "counter", None),
         len(getattr(n, "current_queue", ())))
        for n in root.iterate()), _board())


@pytest.fixture(autouse=True)
def clean_blackboard() -> Iterator[None]:
    Blackboard.clear()
    yield
    Blackboard.clear()


# -- py_trees' world: it picks the events ------------------------------------------------------
def play_py_trees(spec: tuple[Any, ...], seed: int, world: World,
                  ) -> tuple[str, list[Any], list[Any]]:
    """Plain leaves under py_trees' loop, ticked until quiet after every event it draws."""
    rng = random.Random(seed)
    root = build(spec, world, plain=True)
    root.setup_with_descendants()
    events: list[Any] = []

    def settle() -> bool:
        for _ in range(SPIN):
            before = (len(world.log), snapshot(root))
            root.tick_once()
            if root.status is not Status.RUNNING or (len(world.log), snapshot(root)) == before:
                return True
        return False

    again = 3  # runs again after an end, or after a cancel
    while True:
        if not settle():
            return "spins", world.log, events
        world.log.append(snapshot(root))
        if len(events) >= MAX_EVENTS:
            break
        if root.status is not Status.RUNNING:
            world.log.append(("ended", root.status.name))
            if not again or rng.random() < 0.4:
                return root.status.name, world.log, events
            again -= 1
            events.append(("rerun",))
            continue
        running = sorted(world.running)
        # two at once: not a leaf that sleeps after its gate (it ends later on the loop)
        gated = [n for n in running if world.leaves[n].run[0] != "sleep"]
        # nor a plain leaf with an async one: the plain one is done at once, the async one's
        # task a loop step later, and a poll falling between (a loaded machine's late timer)
        # rightly sees only the first
        apart = {n: world.leaves[n].kind == "plain" for n in gated}
        options: list[list[Any]] = [
            [("complete", n) for n in running],
            [("complete", a, b) for a in gated for b in gated if a < b and apart[a] == apart[b]],
            [("flip", i) for i in range(len(world.flags))],
            [("key", i) for i in range(len(world.keys))],
            [("cancel",)],
        ]
        weights = (8 * bool(options[0]), 1.5 * bool(options[1]), 1, 1, 0.3)
        event = rng.choice(rng.choices(options, weights)[0])
        events.append(event)
        if event[0] == "complete":  # one leaf, or two whose tasks end in the same loop step
            for name in event[1:]:
                world.leaves[name].complete()
        elif event[0] == "flip":
            world.flags[event[1]] = not world.flags[event[1]]
        elif event[0] == "key":
            world.flip_key(event[1])
        else:
            root.stop(Status.INVALID)
            world.log.append(snapshot(root))
            if not again or rng.random() < 0.5:
                return "cancelled", world.log, events
            again -= 1
            events.append(("resume",))  # a cancelled run is no end: run() goes on
    if root.status is not Status.RUNNING:
        world.log.append(("ended", root.status.name))
        return root.status.name, world.log, events
    events.append(("cancel",))
    root.stop(Status.INVALID)
    world.log.append(snapshot(root))
    return "cancelled", world.log, events


# -- the runner's world: it replays them -------------------------------------------------------
class Watched(ReactiveRunner):
    """Tells when it goes to sleep, and for how long."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.asleep = False
        self.wait: float | None = None
        self.slept = asyncio.Event()

    async def _wait_for_wake(self, wait: float | None) -> bool:
        assert self._wake_event is not None
        if not self._wake_event.is_set():
            self.wait = wait
            self.slept.set()
        self.asleep = True
        try:
            return await super()._wait_for_wake(wait)
        finally:
            self.asleep = False


async def play_jianmu(spec: tuple[Any, ...], events: list[Any], world: World,
                      ) -> tuple[str, list[Any]]:
    """The spec's leaves, each of its kind, under `ReactiveRunner`, the events replayed."""
    root = build(spec, world, plain=False)
    runner = Watched(root, config=POLL)
    run: asyncio.Future[Any] = asyncio.ensure_future(runner.run(max_ticks=MAX_TICKS))

    def busy() -> bool:
        return any(isinstance(leaf, Async) and leaf.busy for leaf in world.leaves.values())

    async def settle(ticks_before: int) -> None:
        """Until the runner sleeps on a quiet tree: no task that goes on by itself, and
        when it is polled, a poll that changed nothing."""
        last: Any = None
        while True:
            runner.slept.clear()
            slept = asyncio.ensure_future(runner.slept.wait())
            # a task going on by itself is looked at again soon; an event that wakes nothing
            # (a flag no running node reads) leaves the runner asleep: it is given a while
            was_busy = busy()
            wait = 0.001 if was_busy else (
                0.02 if runner.asleep and runner.ticks == ticks_before else None)
            done, _ = await asyncio.wait({run, slept}, timeout=wait,
                                         return_when=asyncio.FIRST_COMPLETED)
            slept.cancel()
            if run.done() or (not done and not was_busy and not busy()
                              and runner.ticks == ticks_before):
                return  # (on a loaded loop a poll may come with the grace's end: not then)
            if not runner.asleep or busy():
                continue
            now = (len(world.log), snapshot(root))
            polled = runner.wait is not None and runner.wait <= 0.05
            if not polled or now == last:
                return
            last = now

    def mark() -> None:
        world.log.append(snapshot(root))
        if run.done() and run.result().status.finished:
            world.log.append(("ended", root.status.name))

    await settle(-1)
    mark()
    for event in events:
        if event[0] in ("rerun", "resume"):
            if not run.done():
                world.log.append(("not ended", event[0]))
                break
            result = run.result()
            if event[0] == "rerun":  # new input: a new turn
                if not result.status.finished:
                    break
                runner.state.update({"again": len(world.log)})
            elif result.status is not RunStatus.CANCELLED:
                break
            ticks = runner.ticks
            run = asyncio.ensure_future(runner.run(max_ticks=MAX_TICKS))
            await settle(ticks)
            mark()
            continue
        if run.done():
            break
        ticks = runner.ticks
        if event[0] == "complete":
            leaves = [world.running.get(name) for name in event[1:]]
            if None in leaves:
                world.log.append(("not running", event[1:]))
                break
            for leaf in leaves:
                leaf.complete()
        elif event[0] == "flip":
            world.flags[event[1]] = not world.flags[event[1]]
        elif event[0] == "key":
            world.flip_key(event[1])
        else:
            runner.cancel()
            await asyncio.wait({run})
            world.log.append(snapshot(root))
            continue
        await settle(ticks)
        mark()
    if not run.done():
        runner.cancel()
    result = await run
    if result.status.finished and world.log[-1][0] != "ended":
        world.log.append(("ended", root.status.name))
    for leaf in world.leaves.values():
        if isinstance(leaf, Async):
            assert leaf.in_flight is None, f"{leaf.name}'s task still runs"
            assert leaf.stopped <= leaf.reached, f"{leaf.name}: a cancel never reached it"
    if result.error and "max_ticks" in result.error:
        return "spins", world.log
    if result.status is RunStatus.CANCELLED:
        return "cancelled", world.log
    return root.status.name, world.log


def describe(spec: Any, events: Any, expected: Any, got: Any) -> str:
    exp_log, got_log = expected[1], got[1]
    at = next((i for i, (a, b) in enumerate(zip(exp_log, got_log, strict=False)) if a != b),
              min(len(exp_log), len(got_log)))
    return (f"spec={spec!r}\nevents={events!r}\nexpected={expected[0]} got={got[0]}\n"
            f"first difference at {at}:\n  py_trees: {exp_log[max(at - 3, 0):at + 3]!r}\n"
            f"  runner:   {got_log[max(at - 3, 0):at + 3]!r}")


async def compare(seed: int, *, depth: int, leaves: str) -> str | None:
    """One random tree both ways: None when they agree, else what differs."""
    spec = Gen(random.Random(seed), leaves=leaves).node(depth)
    Blackboard.clear()
    how, log, events = play_py_trees(spec, seed, World(2, 2))
    if how == "spins":
        return None
    Blackboard.clear()
    got = await play_jianmu(spec, events, World(2, 2))
    if got != (how, log):
        return describe(spec, events, (how, log), got)
    return None


# -- the tests ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("offset", "depth", "leaves"), [
    (0, 3, "async"), (1, 4, "mixed"), (2, 6, "mixed"), (3, 4, "lazy"),
])
async def test_leaf_lifecycles_match_py_trees(offset: int, depth: int, leaves: str) -> None:
    """Every initialise, end and terminate (with its statuses) of every leaf, in order."""
    found = []
    for index in range(SEEDS // 4):
        diff = await compare(FIRST_SEED + 100_000 * offset + index, depth=depth, leaves=leaves)
        if diff:
            found.append(diff)
    assert not found, f"{len(found)} differ; first:\n{found[0]}"


class Raises(Behaviour):
    """A plain py_trees leaf whose ``update`` raises at its ``at``-th tick, after noting which
    leaves run and where the log stands."""

    def __init__(self, at: int, world: World) -> None:
        super().__init__("raises")
        self.at, self.ticks, self.world = at, 0, world
        self.mark = -1
        self.running: set[str] = set()

    def update(self) -> Status:
        self.ticks += 1
        if self.ticks < self.at:
            return Status.RUNNING
        self.mark = len(self.world.log)
        self.running = {name for name, leaf in self.world.leaves.items()
                        if leaf.status is Status.RUNNING}
        raise RuntimeError("raised mid-tick")


@pytest.mark.parametrize("seed", range(12))
async def test_a_tick_that_raises_terminates_each_running_leaf_once(seed: int) -> None:
    """A plain leaf raising mid-tick fails the run, and every leaf running then is stopped:
    its ``terminate`` runs once, with INVALID, as py_trees' ``stop`` calls it (each leaf's
    ran once more per decorator above it), and its coroutine sees the CancelledError."""
    rng = random.Random(FIRST_SEED + 900_000 + seed)
    world = World(2, 2)
    d = py_trees.decorators  # the random branch never ends the run: the raise does
    branch = d.FailureIsRunning("keep", d.SuccessIsRunning("going", build(
        Gen(rng, leaves="mixed", stock=0).node(4), world, plain=False)))
    waits = build(("leaf", "waits", "async", (("gate", S, 1),)), world, plain=False)
    children = [d.Inverter("inv", d.PassThrough("pass", waits)), branch][:: 1 if seed % 2 else -1]
    at = rng.randrange(3)  # first, the raise comes at a later tick: leaves run by then
    raises = Raises(rng.randint(2 if at == 0 else 1, 3), world)
    children.insert(at, raises)
    root = py_trees.composites.Parallel(
        "root", policy=ParallelPolicy.SuccessOnAll(synchronise=False), children=children)
    result = await ReactiveRunner(root, config=POLL).run(max_ticks=MAX_TICKS)
    assert result.status is RunStatus.FAILURE and "raised mid-tick" in str(result.error)
    assert raises.mark >= 0 and raises.running
    stops = [entry for entry in world.log[raises.mark:] if entry[0] == "term"]
    for name in raises.running:
        assert [e for e in stops if e[1] == name] == [("term", name, "RUNNING", "INVALID")]
    assert len(stops) == len({e[1] for e in stops}), stops  # no leaf terminated twice
    assert all(n.status is not Status.RUNNING for n in root.iterate())
    for leaf in world.leaves.values():
        if isinstance(leaf, Async):
            assert leaf.in_flight is None
            assert leaf.stopped <= leaf.reached, leaf.name
