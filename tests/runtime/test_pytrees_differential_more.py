"""A second differential check of py_trees' semantics, built apart from
`test_pytrees_semantics.py`: py_trees' own loop drives a tree of plain leaves and records
what it did to the outside (which leaf completes, which guard flag flips, which running
`Timeout` expires, a cancel, a run again after the end); `ReactiveRunner` replays the same
events on the same tree whose leaves are mixed, per leaf, async (eager or not) or plain
py_trees ones. After every event each world is ticked until quiet, and the two logs of leaf
starts, ends, cancellations and resets, node statuses and decorator counts must be the same.

Leaves here also end at once or after awaits before and after what they wait on, raise,
swallow their cancel, or return RUNNING to be polled; trees are wider and deeper, built
with templates the other generator rarely makes (a parallel in a selector with memory, a
Timeout around a parallel, decorators over composites over decorators, nested Retry and
Repeat, a OneShot under a Repeat, guards whose flag flips while their child runs). A run
cut by ``max_ticks`` stops the tree as py_trees' ``stop`` would at the same point.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any

import py_trees
import pytest
from py_trees.behaviour import Behaviour
from py_trees.common import OneShotPolicy, ParallelPolicy, Status

from jianmu.config import AppConfig
from jianmu.runtime import AsyncNode, ReactiveRunner, RunStatus

pytestmark = pytest.mark.anyio

S, F = Status.SUCCESS, Status.FAILURE
POLL = AppConfig.model_validate({"runtime": {"poll_interval": 0.001}})
SPIN_TICKS = 200
"""py_trees ticks without settling after which a tree is taken to spin (it restarts leaves
for ever with no outside event)."""
MAX_TICKS = 4000
"""The runner's cap: a runner that spins where py_trees settles reaches it."""
MAX_EVENTS = 30
GRACE = 0.02
"""Seconds an idle runner is given to tick after an event that wakes nothing (a guard flag
flipped while no guard runs): it stays idle whatever the wait, the wait only lets it show
a tick it would take."""

# a leaf's run: (how, status, awaits before its gate, awaits after it)
#   now: ends in the tick that starts it; gate: waits for the driver; raise_now / raise_gate:
#   the same, raising (FAILURE); swallow: waits, and ends with the status if cancelled;
#   poll: an async leaf's update_async returns RUNNING until the driver completes it
Run = tuple[str, Status, int, int]
DECORATORS = (
    "Retry", "Repeat", "Timeout", "OneShot", "Condition", "EternalGuard", "Inverter",
    "SuccessIsFailure", "FailureIsSuccess", "RunningIsFailure", "RunningIsSuccess",
    "FailureIsRunning", "SuccessIsRunning", "PassThrough", "Count",
)


# -- the trees -------------------------------------------------------------------------------
class Gen:
    """Random tree specs (nested tuples, every node named uniquely)."""

    def __init__(self, rng: random.Random, *, leaves: str = "mixed", flags: int = 3,
                 width: int = 5) -> None:
        self.rng, self.leaves, self.flags, self.count = rng, leaves, flags, 0
        self.width = width

    def name(self, kind: str) -> str:
        self.count += 1
        return f"{kind}#{self.count}"

    def leaf(self) -> tuple[Any, ...]:
        rng = self.rng
        runs: list[Run] = []
        for _ in range(rng.randint(1, 4)):
            how = rng.choices(("now", "gate", "raise_now", "raise_gate", "swallow", "poll"),
                              (3, 6, 1, 1, 1, 1))[0]
            waits = how in ("gate", "raise_gate", "swallow")
            runs.append((how, rng.choice((S, F)), rng.randint(0, 2) if waits else 0,
                         rng.randint(0, 2) if waits else 0))
        if self.leaves == "mixed":
            kind = rng.choices(("async", "lazy", "plain"), (5, 2, 2))[0]
        else:
            kind = self.leaves
        if kind == "lazy" and all(r[0] in ("now", "raise_now") for r in runs):
            kind = "async"  # a lazy leaf is RUNNING a tick before it ends: not py_trees'
        if kind == "lazy":  # the same: a lazy leaf's runs all wait for the driver
            runs = [r if r[0] not in ("now", "raise_now")
                    else ("gate" if r[0] == "now" else "raise_gate", r[1], 0, 0) for r in runs]
        return ("leaf", self.name("L"), kind, tuple(runs))

    def composite(self, depth: int) -> tuple[Any, ...]:
        rng = self.rng
        kind = rng.choice(("seq", "sel", "par"))
        children = tuple(self.node(depth - 1) for _ in range(rng.randint(1, self.width)))
        if kind == "par":
            policy = rng.choice(("all", "one", "selected"))
            return ("par", self.name("Par"), (policy, rng.random() < 0.5,
                                              rng.getrandbits(5)), children)
        return (kind, self.name(kind.title()), rng.random() < 0.5, children)

    def decorator(self, name: str, child: tuple[Any, ...]) -> tuple[Any, ...]:
        param = self.rng.randint(0, 1 << 10)
        if name == "EternalGuard":
            param %= self.flags
        return ("dec", self.name(name), name, param, child)

    def template(self, depth: int) -> tuple[Any, ...]:
        rng = self.rng
        pick = rng.randrange(7)
        if pick == 0:  # a parallel inside a selector with memory
            kids = [self.node(depth - 1) for _ in range(rng.randint(0, 2))]
            kids.insert(rng.randint(0, len(kids)), ("par", self.name("Par"), (
                rng.choice(("all", "one", "selected")), rng.random() < 0.5, rng.getrandbits(5),
            ), tuple(self.node(depth - 2) for _ in range(rng.randint(2, 3)))))
            return ("sel", self.name("Sel"), True, tuple(kids))
        if pick == 1:  # a Timeout around a parallel
            return self.decorator("Timeout", ("par", self.name("Par"), (
                rng.choice(("all", "one", "selected")), rng.random() < 0.5, rng.getrandbits(5),
            ), tuple(self.node(depth - 2) for _ in range(rng.randint(2, 3)))))
        if pick == 2:  # decorator over composite over decorator
            inner = self.decorator(rng.choice(DECORATORS), self.node(depth - 3))
            kids = [self.node(depth - 2) for _ in range(rng.randint(0, 2))]
            kids.insert(rng.randint(0, len(kids)), inner)
            kind = rng.choice(("seq", "sel"))
            return self.decorator(rng.choice(DECORATORS), (
                kind, self.name(kind.title()), rng.random() < 0.5, tuple(kids)))
        if pick == 3:  # nested Retry and Repeat
            outer, inner = rng.sample(("Retry", "Repeat"), 2)
            return self.decorator(outer, self.decorator(inner, self.node(depth - 2)))
        if pick == 4:  # a OneShot re-ticked under a Repeat or a Retry
            return self.decorator(rng.choice(("Repeat", "Retry")),
                                  self.decorator("OneShot", self.node(depth - 2)))
        if pick == 5:  # a guard over a running composite, its flag flipped meanwhile
            return self.decorator("EternalGuard", self.composite(depth - 1))
        # a priority selector: conditions re-entered before a running action
        return ("sel", self.name("Sel"), False, (
            self.decorator(rng.choice(("Inverter", "EternalGuard", "SuccessIsFailure")),
                           self.leaf()),
            self.node(depth - 1)))

    def node(self, depth: int) -> tuple[Any, ...]:
        rng = self.rng
        if depth <= 0 or rng.random() < 0.25:
            return self.leaf()
        roll = rng.random()
        if roll < 0.2:
            return self.template(depth)
        if roll < 0.55:
            return self.decorator(rng.choice(DECORATORS), self.node(depth - 1))
        return self.composite(depth)


@dataclass
class World:
    """What a tree's leaves share: the log, the gated leaves running, the guards' flags."""

    flags: list[bool]
    log: list[tuple[Any, ...]] = field(default_factory=list)
    running: dict[str, Any] = field(default_factory=dict)
    leaves: dict[str, Any] = field(default_factory=dict)


class Plain(Behaviour):
    """A plain py_trees leaf playing its runs: RUNNING until the driver completes it."""

    def __init__(self, name: str, runs: tuple[Run, ...], world: World) -> None:
        super().__init__(name)
        self.runs, self.world, self.n = runs, world, 0
        self.run: Run = runs[0]
        self.done = False
        world.leaves[name] = self

    def initialise(self) -> None:
        self.run = self.runs[self.n % len(self.runs)]
        self.n += 1
        self.done = self.run[0] in ("now", "raise_now")
        self.world.log.append(("start", self.name))
        if not self.done:
            self.world.running[self.name] = self

    def complete(self) -> None:
        self.done = True
        self.world.running.pop(self.name, None)

    def update(self) -> Status:
        if not self.done:
            return Status.RUNNING
        self.world.log.append(("end", self.name))
        return F if self.run[0].startswith("raise") else self.run[1]

    def terminate(self, new_status: Status) -> None:
        if new_status is Status.INVALID:
            running = self.status is Status.RUNNING
            self.world.running.pop(self.name, None)
            self.world.log.append(("cancel" if running else "reset", self.name))


class Async(AsyncNode):
    """An async leaf playing its runs: its coroutine awaits a gate the driver completes."""

    logs_own_cancel = True

    def __init__(self, name: str, runs: tuple[Run, ...], world: World) -> None:
        super().__init__(name)
        self.runs, self.world, self.n = runs, world, 0
        self.run: Run = runs[0]
        self.gate: asyncio.Future[None] | None = None
        self.cancels: list[asyncio.Future[None]] = []
        """Gates whose run was cancelled while its coroutine had begun and not ended."""
        self.reached: list[asyncio.Future[None]] = []
        """Gates whose coroutine saw its CancelledError."""
        self.begun: set[int] = set()
        self.ended: set[int] = set()
        self.blocked = False
        """Whether its coroutine waits on a gate the driver has not completed."""
        world.leaves[name] = self

    @property
    def busy(self) -> bool:
        """Whether its task runs on by itself (to its gate, or to its end, which wakes the
        runner to read it), or has ended unread: the tree is not quiet."""
        task, gate = self._task, self.gate
        if task is None or (self.run[0] == "poll" and gate is not None and not gate.done()):
            return False  # a poll that will say RUNNING again changes nothing
        return task.done() or not (self.blocked and gate is not None and not gate.done())

    def initialise(self) -> None:
        self.run = self.runs[self.n % len(self.runs)]
        self.n += 1
        self.gate = asyncio.get_running_loop().create_future()
        self.world.log.append(("start", self.name))
        if self.run[0] not in ("now", "raise_now"):
            self.world.running[self.name] = self
        super().initialise()

    def complete(self) -> None:
        self.world.running.pop(self.name, None)
        assert self.gate is not None
        self.gate.set_result(None)

    async def update_async(self) -> Status:
        how, status, before, after = self.run
        gate = self.gate
        assert gate is not None
        self.begun.add(id(gate))
        try:
            if how == "now":
                return status
            if how == "raise_now":
                raise ValueError(f"{self.name} raised")
            if how == "poll":  # called again at every tick: the runner polls it
                return status if gate.done() else Status.RUNNING
            try:
                for _ in range(before):
                    await asyncio.sleep(0)
                self.blocked = True
                try:
                    await asyncio.shield(gate)
                finally:
                    self.blocked = False
                for _ in range(after):
                    await asyncio.sleep(0)
            except asyncio.CancelledError:
                self.reached.append(gate)
                if self.logs_own_cancel:  # logged where the cancel reaches the coroutine
                    self.world.log.append(("cancel", self.name))
                if how == "swallow":
                    return status
                raise
            if how == "raise_gate":
                raise ValueError(f"{self.name} raised")
            return status
        finally:
            self.ended.add(id(gate))

    def update(self) -> Status:
        status = super().update()
        if status is not Status.RUNNING:
            self.world.log.append(("end", self.name))
        return status

    def terminate(self, new_status: Status) -> None:
        if new_status is not Status.INVALID:
            super().terminate(new_status)
            return
        running = self.status is Status.RUNNING
        self.world.running.pop(self.name, None)
        gate = self.gate
        live = (running and gate is not None and id(gate) in self.begun
                and id(gate) not in self.ended)
        if live:
            assert gate is not None
            self.cancels.append(gate)
        logged = len(self.world.log)
        if not running:
            self.world.log.append(("reset", self.name))
        elif not self.logs_own_cancel:
            self.world.log.append(("cancel", self.name))
        super().terminate(new_status)
        if running and self.logs_own_cancel and len(self.world.log) == logged:
            self.world.log.append(("cancel", self.name))  # its coroutine never saw it


class Lazy(Async):
    """An async leaf whose task starts on the loop's next step (``eager_start = False``):
    its coroutine sees a cancel a step later too, so the stop logs it, as py_trees would."""

    eager_start = False
    logs_own_cancel = False


def build(spec: tuple[Any, ...], world: World, plain: bool) -> Behaviour:
    """The tree of ``spec``: plain leaves only (py_trees' world), or each leaf its kind."""
    kind, name = spec[0], spec[1]
    if kind == "leaf":
        cls = Plain if plain else {"async": Async, "lazy": Lazy, "plain": Plain}[spec[2]]
        return cls(name, spec[3], world)
    if kind in ("seq", "sel"):
        composite = py_trees.composites.Sequence if kind == "seq" else py_trees.composites.Selector
        return composite(name, memory=spec[2], children=[build(c, world, plain) for c in spec[3]])
    if kind == "par":
        (policy, synchronise, mask), children = spec[2], [build(c, world, plain) for c in spec[3]]
        chosen: ParallelPolicy.Base
        if policy == "all":
            chosen = ParallelPolicy.SuccessOnAll(synchronise=synchronise)
        elif policy == "one":
            chosen = ParallelPolicy.SuccessOnOne()
        else:
            picked = [c for i, c in enumerate(children) if mask >> i & 1] or children[-1:]
            chosen = ParallelPolicy.SuccessOnSelected(picked, synchronise=synchronise)
        return py_trees.composites.Parallel(name, policy=chosen, children=children)
    which, param, child = spec[2], spec[3], build(spec[4], world, plain)
    d = py_trees.decorators
    if which == "Retry":
        return d.Retry(name, child, num_failures=1 + param % 3)
    if which == "Repeat":
        return d.Repeat(name, child, num_success=(-1, 1, 2, 3)[param % 4])
    if which == "Timeout":
        return d.Timeout(name, child, duration=1e6)  # expired by the driver
    if which == "OneShot":
        policy = (OneShotPolicy.ON_COMPLETION, OneShotPolicy.ON_SUCCESSFUL_COMPLETION)[param % 2]
        return d.OneShot(name, child, policy=policy)
    if which == "Condition":
        return d.Condition(name, child, status=(S, F)[param % 2])
    if which == "EternalGuard":
        flags = world.flags
        return d.EternalGuard(name, child, condition=lambda: flags[param])
    return getattr(d, which)(name, child)


def snapshot(root: Behaviour) -> tuple[Any, ...]:
    """Every node's status and what the decorators keep (not a `Count`'s tick tallies: the
    runner takes fewer ticks than py_trees' loop)."""
    return ("tree", tuple(
        (n.name, n.status.name, getattr(n, "success", None), getattr(n, "failures", None),
         getattr(n, "final_status", None), getattr(n, "success_count", None),
         getattr(n, "failure_count", None), getattr(n, "interrupt_count", None))
        for n in root.iterate()))


# -- py_trees' world: it chooses the events ----------------------------------------------------
def running_timeouts(root: Behaviour) -> list[Any]:
    return [n for n in root.iterate()
            if isinstance(n, py_trees.decorators.Timeout) and n.status is Status.RUNNING]


def play_py_trees(
    spec: tuple[Any, ...], seed: int, flags: int, *, reruns: int = 2,
    cancel_at: int | None = None, cut: int | None = None, script: list[Any] | None = None,
) -> tuple[str, list[Any], list[Any]]:
    """Plain leaves under py_trees' loop, ticked until quiet after every event it draws.
    Returns how it ended, the log and the events (for the runner to replay). With
    ``cancel_at``, the tree is stopped once that many events were met, after at most
    ``cut`` ticks of the last settling (a run cut by ``max_ticks`` midway). With
    ``script``, its events are met in turn instead of random ones."""
    rng = random.Random(seed)
    world = World(flags=[True] * flags)
    root = build(spec, world, plain=True)
    root.setup_with_descendants()
    events: list[Any] = []

    def inside() -> tuple[Any, ...]:
        return len(world.log), snapshot(root)

    def settle() -> bool:
        last = cancel_at is not None and cut is not None and len(events) == cancel_at
        for _ in range(cut if last and cut is not None else SPIN_TICKS):
            before = inside()
            root.tick_once()
            if root.status is not Status.RUNNING or inside() == before:
                return True
        return last

    if not settle():
        return "spins", world.log, events
    world.log.append(snapshot(root))
    left = reruns
    while len(events) < MAX_EVENTS:
        if root.status is not Status.RUNNING:
            world.log.append(("ended", root.status.name))
            if left and rng.random() < 0.5:
                left -= 1
                events.append(("rerun",))
            else:
                return root.status.name, world.log, events
        elif cancel_at is not None and len(events) >= cancel_at:
            events.append(("cancel",))
            root.stop(Status.INVALID)
            world.log.append(snapshot(root))
            return "cancelled", world.log, events
        elif script is not None and not script:
            break
        else:
            options: list[Any] = [[("complete", n) for n in sorted(world.running)],
                                  [("expire", t.name) for t in running_timeouts(root)],
                                  [("flip", i) for i in range(flags)], [("cancel",)]]
            weights = [6 * bool(options[0]), 2 * bool(options[1]), 1.5, 0.1]
            event = rng.choice(rng.choices(options, weights)[0]) if script is None else (
                script.pop(0))
            events.append(event)
            if event[0] == "complete":
                world.leaves[event[1]].complete()
            elif event[0] == "flip":
                world.flags[event[1]] = not world.flags[event[1]]
            elif event[0] == "expire":
                next(t for t in running_timeouts(root) if t.name == event[1]).finish_time = (
                    time.monotonic() - 1)
            else:
                root.stop(Status.INVALID)
                world.log.append(snapshot(root))
                return "cancelled", world.log, events
        if not settle():
            return "spins", world.log, events
        world.log.append(snapshot(root))
    if root.status is not Status.RUNNING:
        world.log.append(("ended", root.status.name))
        return root.status.name, world.log, events
    root.stop(Status.INVALID)
    return "unfinished", world.log, events


# -- the runner's world: it replays them -------------------------------------------------------
class Watched(ReactiveRunner):
    """Tells when it goes to sleep and how long for: the driver reads a quiet tree from it."""

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


async def play_jianmu(
    spec: tuple[Any, ...], events: list[Any], flags: int, *, max_ticks: int = MAX_TICKS,
) -> tuple[str, list[Any], list[int]]:
    """The spec's leaves, each of its kind, under `ReactiveRunner`, the events replayed.
    Returns how it ended, the log, and the ticks of the first run at each quiet point."""
    world = World(flags=[True] * flags)
    root = build(spec, world, plain=False)
    runner = Watched(root, config=POLL)
    run: asyncio.Future[Any] = asyncio.ensure_future(runner.run(max_ticks=max_ticks))
    quiet_ticks: list[int] = []
    first_run = [True]

    async def settle(ticks_before: int, *, may_sleep: bool = False) -> None:
        """Until the runner sleeps with the tree quiet. ``may_sleep``: the event may wake
        nothing (a flag flipped), so a runner that has not ticked since is given `GRACE`."""
        last: Any = None
        busy = False
        while True:
            runner.slept.clear()
            slept = asyncio.ensure_future(runner.slept.wait())
            idle = runner.wait is None or runner.wait > 60  # else a poll or a deadline comes
            grace = GRACE if may_sleep and idle and runner.ticks == ticks_before else None
            done, _ = await asyncio.wait({run, slept}, timeout=0.001 if busy else grace,
                                         return_when=asyncio.FIRST_COMPLETED)
            slept.cancel()
            if run.done():
                return
            if not done and not busy:
                return  # no tick since the event, and the runner sleeps for good
            if not runner.asleep:
                continue  # it ticked since: wait for its next sleep
            if any(t.finish_time < time.monotonic() + 60 for t in running_timeouts(root)):
                continue  # a deadline is due: the runner wakes for it
            busy = any(isinstance(n, Async) and n.busy for n in world.leaves.values())
            if busy:
                continue
            polled = runner.wait is not None and runner.wait <= 10 * POLL.runtime.poll_interval
            now = (len(world.log), snapshot(root))
            if runner.ticks > ticks_before and (not polled or now == last):
                return
            last = now

    def mark() -> None:
        world.log.append(snapshot(root))
        if first_run[0] and not run.done():
            quiet_ticks.append(runner.ticks)

    await settle(-1)
    mark()
    for event in events:
        if run.done():
            result = run.result()
            if result.status.finished:
                world.log.append(("ended", root.status.name))
            if event[0] != "rerun" or not result.status.finished:
                break
            first_run[0] = False
            runner.state.update({"again": len(world.log)})
            ticks = runner.ticks
            run = asyncio.ensure_future(runner.run(max_ticks=max_ticks))
            await settle(ticks)
            mark()
            continue
        ticks = runner.ticks
        if event[0] == "complete":
            leaf = world.running.get(event[1])
            if leaf is None:
                world.log.append(("not running", event[1]))
                break
            leaf.complete()
        elif event[0] == "flip":
            world.flags[event[1]] = not world.flags[event[1]]
        elif event[0] == "expire":
            timeout = next((t for t in running_timeouts(root) if t.name == event[1]), None)
            if timeout is None:
                world.log.append(("not running", event[1]))
                break
            timeout.finish_time = time.monotonic() + 0.002  # the runner wakes at the deadline
            runner.wake()  # to plan it: the deadline it slept for was another's
        elif event[0] == "cancel":
            runner.cancel()
            await asyncio.wait({run})
            world.log.append(snapshot(root))
            break
        await settle(ticks, may_sleep=event[0] == "flip")
        mark()
    if not run.done():
        runner.cancel()
    result = await run
    if result.error and "max_ticks" in result.error and max_ticks == MAX_TICKS:
        return "spins", world.log, quiet_ticks
    if result.status.finished and (not world.log or world.log[-1][0] != "ended"):
        world.log.append(("ended", root.status.name))
    for leaf in world.leaves.values():
        if isinstance(leaf, Async):
            assert leaf.in_flight is None, f"{leaf.name}'s task still runs"
            # every cancel of a begun coroutine reached it (a lazy one's a step later)
            assert set(map(id, leaf.cancels)) <= set(map(id, leaf.reached)), leaf.name
    if result.status is RunStatus.CANCELLED:
        return "cancelled", world.log, quiet_ticks
    if result.error and "max_ticks" in result.error:
        return "max_ticks", world.log, quiet_ticks
    return ("unfinished" if root.status is Status.RUNNING else root.status.name), world.log, \
        quiet_ticks


async def compare(
    seed: int, *, depth: int = 5, leaves: str = "mixed", width: int = 5,
) -> str | None:
    """One random tree both ways: None when they agree, else what differs."""
    rng = random.Random(seed)
    flags = 3
    spec = Gen(rng, leaves=leaves, flags=flags, width=width).node(depth)
    how, log, events = play_py_trees(spec, seed, flags)
    if how == "spins":
        return None  # py_trees' loop never settles: nothing to compare past its start
    got_how, got_log, _ = await play_jianmu(spec, events, flags)
    expected_how = how if how != "unfinished" else "cancelled"
    if (got_how, got_log) != (expected_how, log):
        return describe(spec, events, (how, log), (got_how, got_log))
    return None


async def compare_max_ticks(seed: int, *, depth: int = 4) -> str | None:
    """A run cut by ``max_ticks`` stops the tree as py_trees' ``stop`` does at the same
    point (async leaves only). The ticks to a point may differ from run to run (a poll more
    or less, a deadline's tick merged with a wake-up's), so the cut run must match py_trees
    stopped after one of its ticks: the quiet point aimed at, or one near it."""
    rng = random.Random(seed)
    spec = Gen(rng, leaves="async", flags=1).node(depth)
    how, _, events = play_py_trees(spec, seed, 1, reruns=0)
    if how == "spins":
        return None
    _, _, quiet = await play_jianmu(spec, events, 1)
    if not quiet:
        return None
    at = rng.randrange(len(quiet))
    _, aimed, cut_events = play_py_trees(spec, seed, 1, reruns=0, cancel_at=at)
    got_how, got_log, _ = await play_jianmu(spec, cut_events[:-1], 1, max_ticks=quiet[at])
    got = [e for e in got_log if e[0] not in ("tree", "ended")]
    if got_how in ("max_ticks", "cancelled"):
        for point in sorted(range(len(quiet)), key=lambda k: abs(k - at)):
            for ticks in (None, *range(1, 8)):
                _, cut_log, _ = play_py_trees(spec, seed, 1, reruns=0, cancel_at=point,
                                              cut=ticks)
                if got == [e for e in cut_log if e[0] != "tree"]:
                    return None
    expected = [e for e in aimed if e[0] != "tree"]
    return describe(spec, cut_events, ("max_ticks", expected), (got_how, got))


def describe(spec: Any, events: Any, expected: Any, got: Any) -> str:
    exp_log, got_log = expected[1], got[1]
    at = next((i for i, (a, b) in enumerate(zip(exp_log, got_log, strict=False)) if a != b),
              min(len(exp_log), len(got_log)))
    return (f"spec={spec!r}\nevents={events!r}\nexpected={expected[0]} got={got[0]}\n"
            f"first difference at {at}:\n  py_trees: {exp_log[at - 1:at + 3]!r}\n"
            f"  runner:   {got_log[at - 1:at + 3]!r}")


# -- the tests ---------------------------------------------------------------------------------
SEED = 20261206
TREES = 120


@pytest.mark.parametrize(("offset", "depth", "leaves"), [
    (0, 4, "mixed"), (1, 6, "mixed"), (2, 5, "async"), (3, 5, "plain"),
])
async def test_random_trees_replayed_under_the_runner_match_py_trees(
    offset: int, depth: int, leaves: str,
) -> None:
    """Trees of every composite and decorator, leaves async (eager or not) or plain, each
    run ending at once, after awaits, raising or swallowing its cancel; guards flipped,
    Timeouts expired, runs cancelled and run again after their end."""
    found = []
    for index in range(TREES // 4):
        diff = await compare(SEED + 1000 * offset + index, depth=depth, leaves=leaves)
        if diff:
            found.append(diff)
    assert not found, f"{len(found)} differ; first:\n{found[0]}"


async def test_runs_cut_by_max_ticks_stop_the_tree_as_py_trees_stop_does() -> None:
    """Cut at one of its quiet points, a run stops the tree there as ``stop(INVALID)`` of
    py_trees does: the same cancellations, in the same order, each reaching its coroutine."""
    found = []
    for index in range(TREES // 4):
        diff = await compare_max_ticks(SEED + 5000 + index)
        if diff:
            found.append(diff)
    assert not found, f"{len(found)} differ; first:\n{found[0]}"


def _guarded(name: str, flag: int, leaf: str) -> tuple[Any, ...]:
    return ("dec", name, "EternalGuard", flag, ("leaf", leaf, "async", (("gate", S, 0, 0),)))


@pytest.mark.parametrize(("spec", "script"), [
    (("dec", "loop", "FailureIsRunning", 0, _guarded("guard", 0, "L")),
     [("flip", 0), ("flip", 0), ("complete", "L")]),
    (("dec", "until", "Condition", 0, _guarded("guard", 0, "L")),
     [("flip", 0), ("flip", 0), ("complete", "L")]),
    (("sel", "priority", False, (_guarded("guard", 0, "L"), ("leaf", "idle", "async", (
        ("gate", S, 0, 0),)))), [("flip", 0), ("flip", 0), ("complete", "L")]),
    (("par", "both", ("selected", False, 1), (("leaf", "L", "async", (("gate", S, 0, 0),)), (
        "dec", "loop", "FailureIsRunning", 0, _guarded("guard", 0, "G")))),
     [("flip", 0), ("flip", 0), ("complete", "L")]),
])
async def test_a_shut_guard_re_entered_sees_its_flag_open(
    spec: tuple[Any, ...], script: list[Any],
) -> None:
    """An EternalGuard that failed its check, re-entered at every tick (under a decorator
    returning RUNNING, in a priority selector), its flag flipped open with no state write:
    py_trees' next tick runs its child. The runner took the tree for at rest and slept for
    good (the random trees found it: a Condition over such a guard, a priority selector)."""
    how, log, events = play_py_trees(spec, 0, 1, reruns=0, script=list(script))
    guarded = "G" if spec[0] == "par" else "L"
    assert how == "SUCCESS" and log.count(("start", guarded)) == 2  # open, shut, open again
    got_how, got_log, _ = await play_jianmu(spec, events, 1)
    assert (got_how, got_log) == (how if how != "unfinished" else "cancelled", log)


class Raises(Behaviour):
    """A plain py_trees leaf whose ``update`` raises at its ``at``-th tick."""

    def __init__(self, name: str, at: int) -> None:
        super().__init__(name)
        self.at, self.ticks = at, 0

    def update(self) -> Status:
        self.ticks += 1
        if self.ticks >= self.at:
            raise RuntimeError(f"{self.name} broke")
        return Status.RUNNING


@pytest.mark.parametrize("seed", range(8))
async def test_a_plain_leaf_raising_mid_tick_stops_every_running_node(seed: int) -> None:
    """py_trees lets the exception out of the tick, leaving the statuses above the raise
    as they were; the runner fails the run with it, and every async leaf running anywhere
    (beside the raise, above it, below a composite the raise cut short) is cancelled, its
    coroutine seeing the CancelledError, and no node is left RUNNING."""
    rng = random.Random(SEED + 9000 + seed)
    world = World(flags=[True] * 3)
    spec = Gen(rng, leaves="async", flags=3).node(4)
    broken = Raises("broken", at=rng.randint(1, 3))
    d = py_trees.decorators  # the random branch never ends the run: the raise does
    tree = d.FailureIsRunning("keep", d.SuccessIsRunning("going", build(spec, world, False)))
    root = py_trees.composites.Parallel(
        "root", policy=ParallelPolicy.SuccessOnAll(synchronise=False),
        children=[build(("leaf", "waits", "async", (("gate", S, 1, 0),)), world, plain=False),
                  tree, broken][:: 1 if seed % 2 else -1],
    )
    runner = Watched(root, config=POLL)
    run = asyncio.ensure_future(runner.run(max_ticks=MAX_TICKS))
    while not run.done():  # complete what runs, in order, until the leaf breaks the tick
        await asyncio.wait({run, asyncio.ensure_future(runner.slept.wait())},
                           return_when=asyncio.FIRST_COMPLETED)
        runner.slept.clear()
        for name in sorted(world.running)[:1]:
            if name != "waits":
                world.running[name].complete()
    result = await run
    assert result.status is RunStatus.FAILURE
    assert isinstance(result.exception, RuntimeError), result.error
    assert all(n.status is not Status.RUNNING for n in root.iterate())
    for leaf in world.leaves.values():
        assert leaf.in_flight is None
        assert set(map(id, leaf.cancels)) <= set(map(id, leaf.reached)), leaf.name
    waits = world.leaves["waits"]
    assert waits.cancels or not waits.n  # the leaf beside the raise was stopped, if started


@pytest.mark.parametrize("around", ["parallel", "retry of a parallel"])
async def test_a_timeouts_deadline_cancels_a_running_parallel(around: str) -> None:
    """A running Timeout's own deadline (no driver here) wakes the runner, which stops the
    parallel under it: each of its running leaves sees the CancelledError; a Retry above
    starts it anew, and its Timeout again."""
    world = World(flags=[])
    forever = (("gate", S, 1, 0),)
    parallel = py_trees.composites.Parallel(
        "both", policy=ParallelPolicy.SuccessOnAll(synchronise=True),
        children=[Async("a", forever, world), Async("b", forever, world),
                  Async("c", (("now", S, 0, 0),), world)])
    root: Behaviour = py_trees.decorators.Timeout("deadline", parallel, duration=0.02)
    attempts = 1
    if around != "parallel":
        attempts = 3
        root = py_trees.decorators.Retry("retry", root, num_failures=attempts)
    result = await ReactiveRunner(root).run(timeout=60)
    assert result.status is RunStatus.FAILURE, result.error
    for name in ("a", "b"):
        leaf = world.leaves[name]
        assert leaf.n == attempts and len(leaf.reached) == attempts
        assert world.log.count(("cancel", name)) == attempts
    assert world.log.count(("start", "c")) == attempts
    assert result.ticks <= 3 * attempts + 1  # started, deadline, retried: no busy loop
