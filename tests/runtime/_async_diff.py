"""A differential harness: random py_trees trees with `AsyncNode` leaves under `ReactiveRunner`
against the same trees with synchronous leaves under py_trees' own ``tick()`` loop.

Time is steps, not seconds. Every leaf activation follows a seeded script: it ends at once, it
waits for a gate that the driver opens, or it returns RUNNING for k ticks first (an async leaf
whose ``update_async`` returns RUNNING, polled). The driver acts only when the tree is at rest:
opens one waiting leaf's gate, moves a virtual clock past the earliest running `Timeout`'s
deadline (py_trees' ``time.monotonic`` and the ticker's are patched to it), or flips an
`EternalGuard`'s flag; it picks the action with a seeded generator from a list built from the
tree, so both sides take the same actions while they agree.

py_trees' loop ticks at a fixed rate; the runner skips ticks that would change nothing. So a
tick is logged only when it changes the tree (statuses, current children, counters, leaf
progress, the log): with both sides deterministic, the changed ticks must match one for one,
with the same leaf starts, ends and cancellations between them, and the same final status.
After each action py_trees ticks until a tick changes nothing; a run is cut (the root stopped,
as `cancel()` stops it) after too many changing ticks in a row or in all, or when no action is
left.

An async leaf logs its cancel where py_trees' leaf does (in ``terminate(INVALID)``), and the
harness checks that its coroutine saw the ``CancelledError`` by then when its task was still
going; it checks too that the runner, at rest with a `Timeout` running, sleeps no later than
its deadline, that it does not spin (ticks that change nothing, with no sleep between), that
no task is left running after the run and that ``run()`` waited for the cleanups that await.
Some runs are cancelled mid-way and run again on the same tree; some mix py_trees' own leaves
in; some open two gates at once.

`check_counted` counts ticks instead: with no outside event (leaves that end at once or after
polls), the runner's ticks are py_trees' one for one, cut by ``max_ticks`` or where the runner
rests (then py_trees' further ticks start and end nothing).
"""

from __future__ import annotations

import asyncio
import random
import types
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import py_trees
from py_trees.behaviour import Behaviour
from py_trees.common import OneShotPolicy, ParallelPolicy, Status
from py_trees.composites import Parallel, Selector, Sequence
from py_trees.decorators import OneShot, Repeat, Retry, Timeout

from jianmu.config import AppConfig
from jianmu.runtime.async_node import DEADLINE_SLACK, AsyncNode
from jianmu.runtime.runner import ReactiveRunner
from tests.support.virtual_time import clock_is

RUNNING, SUCCESS, FAILURE, INVALID = Status.RUNNING, Status.SUCCESS, Status.FAILURE, Status.INVALID
SEGMENT_CAP = 25
"""Changing ticks in a row (no action between) after which a run is cut."""
SYNC_SAFETY = 400
SPIN_LIMIT = 6
"""Ticks in a row that change nothing, with no sleep between, before it counts as a spin."""
CONFIG = AppConfig.model_validate({"runtime": {"poll_interval": 0.001}})

DECORATORS = (
    "retry", "repeat", "timeout", "oneshot_s", "oneshot_c", "condition_s", "condition_f",
    "guard", "inverter", "running_is_failure", "running_is_success", "failure_is_success",
    "failure_is_running", "success_is_failure", "success_is_running", "count", "passthrough",
    "status_to_bb",
)


# -- the virtual clock ------------------------------------------------------------------------
class Clock:
    """Virtual ``time.monotonic``: moves only when the driver moves it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def virtual_time(clock: Clock) -> AbstractContextManager[None]:
    """Patch py_trees' decorators' and the ticker's ``time`` to ``clock``."""
    return clock_is(clock.monotonic)


# -- the world a run lives in -----------------------------------------------------------------
@dataclass
class World:
    seed: int
    budget: int = 120
    """Changing ticks in all after which a run is cut (a run ticked a fixed number of ticks)."""
    log: list[tuple[Any, ...]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    guards: list[bool] = field(default_factory=list)
    flips_left: int = 3
    clock: Clock = field(default_factory=Clock)

    def __post_init__(self) -> None:
        self.rng = random.Random(f"actions:{self.seed}")

    def script(self, leaf: int, activation: int) -> tuple[str, str, int]:
        """What activation ``activation`` of leaf ``leaf`` does: (kind, outcome, k)."""
        rng = random.Random(f"{self.seed}:{leaf}:{activation}")
        kind = rng.choices(("now", "gate", "poll"), weights=(4, 5, 1))[0]
        outcome = rng.choices(("SUCCESS", "FAILURE", "RAISE"), weights=(5, 3, 1))[0]
        return kind, outcome, rng.randint(1, 2)


class _Leaf:
    """What both kinds of leaf share: the script, the progress, the log."""

    idx: int
    world: World
    plan: tuple[str, str, int]
    activation = 0
    calls = 0
    released = False

    def begin(self) -> None:
        self.plan = self.world.script(self.idx, self.activation)
        self.activation += 1
        self.calls = 0
        self.released = False
        self.world.log.append(("start", self.idx))

    def ended(self, was_running: bool, new_status: Status) -> None:
        if new_status is INVALID:
            if was_running:
                self.world.log.append(("cancel", self.idx))
        else:
            self.world.log.append(("end", self.idx, new_status.name))

    def progress(self) -> tuple[int, int, bool]:
        return self.activation, self.calls, self.released


class SyncLeaf(_Leaf, Behaviour):
    """py_trees leaf: RUNNING until its gate opens or for k ticks; RAISE is FAILURE."""

    def __init__(self, idx: int, world: World) -> None:
        Behaviour.__init__(self, f"L{idx}")
        self.idx, self.world = idx, world

    def initialise(self) -> None:
        self.begin()

    def update(self) -> Status:
        kind, outcome, k = self.plan
        if kind == "poll":
            self.calls += 1
        if kind == "gate" and not self.released:
            return RUNNING
        if kind == "poll" and self.calls <= k:
            return RUNNING
        return FAILURE if outcome == "RAISE" else Status[outcome]

    def terminate(self, new_status: Status) -> None:
        self.ended(self.status is RUNNING, new_status)

    def release(self) -> None:
        self.released = True


class AsyncLeaf(_Leaf, AsyncNode):
    """The same script as an `AsyncNode`: awaits its gate, returns RUNNING k times, raises."""

    def __init__(self, idx: int, world: World) -> None:
        AsyncNode.__init__(self, f"L{idx}")
        self.idx, self.world = idx, world
        self.gate: asyncio.Event | None = None
        self.saw_cancel = False
        self.cancels = self.cleaned = 0

    def initialise(self) -> None:
        self.begin()
        self.gate = asyncio.Event()
        self.saw_cancel = False
        super().initialise()

    async def update_async(self) -> Status:
        kind, outcome, k = self.plan
        if kind == "poll":
            self.calls += 1
        if kind == "gate":
            assert self.gate is not None
            try:
                for _ in range(k - 1):  # some go on in their task before they wait
                    await asyncio.sleep(0)
                await self.gate.wait()
                for _ in range(k - 1):  # and after
                    await asyncio.sleep(0)
            except asyncio.CancelledError:
                self.saw_cancel = True
                await asyncio.sleep(0)  # a cleanup that waits: run() waits for it
                self.cleaned += 1
                raise
        if kind == "poll" and self.calls <= k:
            return RUNNING
        if outcome == "RAISE":
            raise RuntimeError(f"L{self.idx} raised")
        return Status[outcome]

    def terminate(self, new_status: Status) -> None:
        was_running = self.status is RUNNING
        task = self._task
        in_flight = task is not None and not task.done()
        super().terminate(new_status)
        if new_status is INVALID and in_flight:
            self.cancels += 1
            if not self.saw_cancel:
                self.world.violations.append(f"L{self.idx}: stopped, its coroutine saw no cancel")
        self.ended(was_running, new_status)

    def release(self) -> None:
        self.released = True
        assert self.gate is not None
        self.gate.set()


# -- trees --------------------------------------------------------------------------------------
def random_spec(rng: random.Random, depth: int = 0, max_depth: int = 5) -> Any:
    """A random tree: ("leaf",), ("seq"|"sel", memory, kids), ("par", policy, sync, picks,
    kids), ("dec", kind, param, kid)."""
    roll = rng.random()
    if depth >= max_depth or (depth > 0 and roll < 0.25):
        return ("leaf",)
    if roll < 0.6:
        kids = [random_spec(rng, depth + 1, max_depth) for _ in range(rng.randint(1, 4))]
        shape = rng.choice(("seq", "sel", "par", "seq", "sel"))
        if shape == "par":
            policy = rng.choice(("all", "one", "selected"))
            picks = sorted(rng.sample(range(len(kids)), rng.randint(1, len(kids))))
            return ("par", policy, rng.random() < 0.5, picks, kids)
        return (shape, rng.random() < 0.5, kids)
    kind = rng.choice((*DECORATORS, "timeout", "timeout", "guard", "retry", "oneshot_c"))
    param = {"retry": rng.randint(1, 3), "repeat": rng.choice((1, 2, 3, -1)),
             "timeout": 10 * rng.randint(1, 4)}.get(kind, 0)
    return ("dec", kind, param, random_spec(rng, depth + 1, max_depth))


def composite(node: Any, n: int, make: Callable[[Any], Behaviour]) -> Behaviour | None:
    """The composite of spec ``node`` (``seq``, ``sel``, ``par``) numbered ``n``, its children
    made by ``make``; None for any other spec."""
    if node[0] in ("seq", "sel"):
        kids = [make(k) for k in node[2]]
        cls = Sequence if node[0] == "seq" else Selector
        return cls(f"{node[0]}{n}", memory=node[1], children=kids)
    if node[0] != "par":
        return None
    _, policy, sync, picks, specs = node
    kids = [make(k) for k in specs]
    chosen: ParallelPolicy.Base
    if policy == "all":
        chosen = ParallelPolicy.SuccessOnAll(synchronise=sync)
    elif policy == "one":
        chosen = ParallelPolicy.SuccessOnOne()
    else:
        chosen = ParallelPolicy.SuccessOnSelected(
            children=[kids[i] for i in picks], synchronise=sync)
    return Parallel(f"par{n}", policy=chosen, children=kids)


def decorator(kind: str, name: str, kid: Behaviour, param: Any) -> Behaviour | None:
    """The decorator ``kind`` over ``kid`` that needs nothing of a harness (not a guard nor a
    blackboard writer); None for those."""
    dec = py_trees.decorators
    if kind == "retry":
        return Retry(name, kid, num_failures=param)
    if kind == "repeat":
        return Repeat(name, kid, num_success=param)
    if kind == "timeout":
        return Timeout(name, kid, duration=float(param))
    if kind in ("oneshot_s", "oneshot_c"):
        policy = (OneShotPolicy.ON_SUCCESSFUL_COMPLETION if kind == "oneshot_s"
                  else OneShotPolicy.ON_COMPLETION)
        return OneShot(name, kid, policy=policy)
    if kind in ("condition_s", "condition_f"):
        return dec.Condition(name, kid, SUCCESS if kind == "condition_s" else FAILURE)
    classes = {
        "inverter": dec.Inverter, "running_is_failure": dec.RunningIsFailure,
        "running_is_success": dec.RunningIsSuccess,
        "failure_is_success": dec.FailureIsSuccess,
        "failure_is_running": dec.FailureIsRunning,
        "success_is_failure": dec.SuccessIsFailure,
        "success_is_running": dec.SuccessIsRunning, "count": dec.Count,
        "passthrough": dec.PassThrough,
    }
    made = classes.get(kind)
    return None if made is None else made(name=name, child=kid)  # type: ignore[no-any-return]


def build(spec: Any, make_leaf: Callable[[int], Behaviour], world: World) -> Behaviour:
    """The tree of ``spec``, leaves made by ``make_leaf`` (numbered in order)."""
    counter = iter(range(10_000))
    bb_names = iter(range(10_000))

    def make(node: Any) -> Behaviour:
        n = next(counter)
        if node[0] == "leaf":
            return make_leaf(n)
        made = composite(node, n, make)
        if made is not None:
            return made
        _, kind, param, kid_spec = node
        kid = make(kid_spec)
        name = f"{kind}{n}"
        made = decorator(kind, name, kid, param)
        if made is not None:
            return made
        dec = py_trees.decorators
        if kind == "guard":
            g = len(world.guards)
            world.guards.append(random.Random(f"guard:{world.seed}:{g}").random() < 0.7)
            return dec.EternalGuard(name, kid, condition=lambda: world.guards[g])
        assert kind == "status_to_bb", kind
        return dec.StatusToBlackboard(
            name, kid, variable_name=f"diff_{world.seed}_{next(bb_names)}")

    return make(spec)


def fingerprint(root: Behaviour, world: World) -> tuple[Any, ...]:
    """All the tree's state a tick may change (and the log's length)."""
    parts: list[Any] = [len(world.log)]
    for node in root.iterate():
        current = getattr(node, "current_child", None)
        parts.append((
            node.status,
            None if current is None else node.children.index(current),
            # a Repeat without end counts successes that nothing reads (nor does the runner)
            getattr(node, "success", None) if getattr(node, "num_success", 1) >= 1 else None,
            getattr(node, "failures", None),
            getattr(node, "final_status", None), getattr(node, "finish_time", None),
            node.progress() if isinstance(node, _Leaf) else None,
        ))
    return tuple(parts)


def actions(root: Behaviour, world: World) -> list[tuple[Any, ...]]:
    """What the driver may do now, in the tree's order."""
    found: list[tuple[Any, ...]] = []
    timeouts = False
    for node in root.iterate():
        if node.status is not RUNNING:
            continue
        if isinstance(node, _Leaf) and node.plan[0] == "gate" and not node.released:
            found.append(("release", node.idx))
        timeouts = timeouts or isinstance(node, Timeout)
    # two gates opened at once (leaves that end as soon as theirs opens): py_trees' next tick
    # sees both ended, and so must the runner's
    quick = [a[1] for a in found if _plan_of(root, a[1])[2] == 1]
    if len(quick) >= 2:
        found.append(("release", *quick[:2]))
    if timeouts:
        found.append(("expire",))
    if world.flips_left:
        found.extend(("flip", g) for g in range(len(world.guards)))
    return found


def _plan_of(root: Behaviour, idx: int) -> tuple[str, str, int]:
    return next(n.plan for n in root.iterate() if isinstance(n, _Leaf) and n.idx == idx)


def apply(action: tuple[Any, ...], root: Behaviour, world: World) -> None:
    world.log.append(("step", action))
    if action[0] == "release":
        for node in root.iterate():
            if isinstance(node, _Leaf) and node.idx in action[1:]:
                node.release()  # type: ignore[attr-defined]
    elif action[0] == "expire":
        due = min(n.finish_time for n in root.iterate()
                  if isinstance(n, Timeout) and n.status is RUNNING)
        world.clock.now = due + 0.5
    else:
        world.guards[action[1]] = not world.guards[action[1]]
        world.flips_left -= 1


@dataclass
class Outcome:
    log: list[tuple[Any, ...]]
    status: Status
    violations: list[str]


# -- py_trees' loop -------------------------------------------------------------------------------
def run_sync(spec: Any, seed: int, budget: int = 120, cut_at: tuple[int, int] | None = None,
             mirror: bool = False, rerun: bool = False) -> Outcome:
    """py_trees' own loop: tick until a tick changes nothing, act, again; cut by the caps, or
    with ``mirror`` where the runner's ``max_ticks`` cut it (``cut_at``: steps, changed ticks)."""
    world = World(seed, budget)
    root = build(spec, lambda i: SyncLeaf(i, world), world)
    with virtual_time(world.clock):
        root.setup_with_descendants()
        steps = ticks = segment = 0

        def cut() -> None:
            if root.status is RUNNING:
                world.log.append(("cut",))
                root.stop(INVALID)

        while True:
            before = fingerprint(root, world)
            for _ in root.tick():
                pass
            changed = fingerprint(root, world) != before
            if changed:
                world.log.append(("tick",))
                ticks += 1
                segment += 1
            if root.status is not RUNNING:
                break
            if cut_at == (steps, ticks) and mirror and rerun:
                cut()
                world.log.append(("rerun",))  # run() again, on the same tree
                mirror, segment = False, 0
                continue
            if cut_at == (steps, ticks) or (not mirror and (
                    segment >= SEGMENT_CAP or ticks >= budget)) or segment >= SYNC_SAFETY:
                cut()
                break
            if changed:
                continue
            found = actions(root, world)
            if not found:
                cut()
                break
            apply(world.rng.choice(found), root, world)
            steps += 1
            segment = 0
    return Outcome(world.log, root.status, world.violations)


# -- the runner -----------------------------------------------------------------------------------
async def run_async(spec: Any, seed: int, budget: int = 120, max_ticks: int | None = None,
                    world: World | None = None, rerun: bool = False,
                    mixed: bool = False) -> tuple[Outcome, tuple[int, int] | None]:
    """The runner, driven by the same actions; also where a ``max_ticks`` cut fell."""
    world = world or World(seed, budget)

    def leaf(i: int) -> Behaviour:
        # with ``mixed``, some leaves are py_trees' own (the runner polls them)
        plain = mixed and random.Random(f"plain:{seed}:{i}").random() < 0.3
        return SyncLeaf(i, world) if plain else AsyncLeaf(i, world)

    root = build(spec, leaf, world)
    runner = ReactiveRunner(root, config=CONFIG)
    st = types.SimpleNamespace(ticks=0, changed_ticks=0, segment=0, steps=0, in_wait=False,
                               wait=None, plan=None, changed=False, idle_spin=0, cut_at=None,
                               waits=0, max_ticks=max_ticks)
    world.st = st  # type: ignore[attr-defined]
    woke = asyncio.Event()
    ticker_tick = runner._ticker.tick
    waiter = runner._wait_for_wake

    def tick(r: Behaviour, woken: Any) -> Any:
        before = fingerprint(root, world)
        plan = ticker_tick(r, woken)
        st.ticks += 1
        st.changed = fingerprint(root, world) != before
        st.plan = plan
        if st.changed:
            world.log.append(("tick",))
            st.changed_ticks += 1
            st.segment += 1
            st.idle_spin = 0
        else:
            st.idle_spin += 1
            if st.idle_spin > SPIN_LIMIT:
                world.violations.append(f"spin: {st.idle_spin} ticks changed nothing, no sleep")
        if root.status is RUNNING:
            if st.max_ticks is not None and st.ticks >= st.max_ticks:
                world.log.append(("cut",))
                st.cut_at = (st.steps, st.changed_ticks)
                if rerun:  # a cut run is cancelled, to go on (a run cut by max_ticks failed)
                    runner.cancel()
            elif st.max_ticks is None and (st.segment >= SEGMENT_CAP or st.changed_ticks >= budget):
                world.log.append(("cut",))
                runner.cancel()
        return plan

    async def wait_for_wake(wait: float | None) -> bool:
        st.in_wait, st.wait, st.idle_spin = True, wait, 0
        st.waits += 1
        woke.set()
        try:
            return await waiter(wait)
        finally:
            st.in_wait = False

    runner._ticker.tick = tick  # type: ignore[method-assign]
    runner._wait_for_wake = wait_for_wake  # type: ignore[method-assign,assignment]

    async def next_wait(run: asyncio.Task[Any], since: int) -> None:
        """Until the runner sleeps again after its ``since``-th sleep (or the run ends)."""
        while st.waits <= since and not run.done():
            woke.clear()
            got = asyncio.ensure_future(woke.wait())
            await asyncio.wait({run, got}, return_when=asyncio.FIRST_COMPLETED)
            got.cancel()

    with virtual_time(world.clock):
        run = asyncio.ensure_future(runner.run(max_ticks=None if rerun else max_ticks))
        cancelled = False
        while True:
            if run.done():
                result = await run
                if not (rerun and st.max_ticks is not None and st.cut_at is not None):
                    break
                world.log.append(("rerun",))
                st.max_ticks, st.segment = None, 0
                run = asyncio.ensure_future(runner.run())
            for _ in range(8):  # what the last tick or action set going settles
                await asyncio.sleep(0)
            if run.done():
                continue
            if not st.in_wait or cancelled:
                await next_wait(run, st.waits)
                continue
            plan = st.plan
            polled = plan is not None and (
                plan.poll or (plan.due is not None and plan.due <= world.clock.now))
            if polled and st.changed:
                await next_wait(run, st.waits)  # a poll tick comes, and may change the tree
                continue
            _check_deadline(root, world, st.wait)
            found = actions(root, world)
            if not found:
                if root.status is RUNNING:
                    world.log.append(("cut",))
                cancelled = True
                runner.cancel()
                continue
            action = world.rng.choice(found)
            seen, since = st.ticks, st.waits
            apply(action, root, world)
            st.steps += 1
            st.segment = 0
            if action[0] == "expire":
                runner.wake()  # the runner's own timer is set for the real seconds left
            for _ in range(8):
                await asyncio.sleep(0)
            if st.ticks == seen and st.in_wait and action[0] == "flip" and not polled:
                continue  # nothing ticks (as nothing polls): decide again
            await next_wait(run, since)
    for node in root.iterate():
        if isinstance(node, AsyncLeaf) and node.in_flight is not None:
            world.violations.append(f"L{node.idx}: task left running after the run")
        if isinstance(node, AsyncLeaf) and node.cleaned != node.cancels:
            world.violations.append(f"L{node.idx}: run() returned before a cleanup ended")
    del result
    return Outcome(world.log, root.status, world.violations), st.cut_at


def _check_deadline(root: Behaviour, world: World, wait: float | None) -> None:
    """At rest with a Timeout running, the runner must sleep no later than its deadline."""
    finishes = [n.finish_time for n in root.iterate()
                if isinstance(n, Timeout) and n.status is RUNNING]
    if not finishes:
        return
    until = min(finishes) - world.clock.now + DEADLINE_SLACK
    if wait is None or wait > until + 1e-6:
        world.violations.append(f"at rest with a Timeout due in {until:.3f} s, sleeps {wait}")


def compare(spec: Any, seed: int, budget: int = 120, max_ticks: int | None = None,
            rerun: bool = False, mixed: bool = False) -> str | None:
    """None when both sides agree, else what differs."""
    world = World(seed, budget)
    try:
        got, cut_at = asyncio.run(
            asyncio.wait_for(run_async(spec, seed, budget, max_ticks, world, rerun, mixed), 20))
    except TimeoutError:
        return f"the run hung: {world.log[-12:]}"
    want = run_sync(spec, seed, budget, cut_at, mirror=max_ticks is not None, rerun=rerun)
    if max_ticks is not None and cut_at is None and got.status is RUNNING:
        return "the runner stopped at max_ticks but logged no cut"
    problems = []
    if got.violations:
        problems.append(f"violations: {got.violations}")
    if got.log != want.log:
        pairs = zip(got.log, want.log, strict=False)
        at = next((i for i, (a, b) in enumerate(pairs) if a != b),
                  min(len(got.log), len(want.log)))
        problems.append(f"logs differ at {at}: runner {got.log[max(0, at - 6):at + 4]} "
                        f"py_trees {want.log[max(0, at - 6):at + 4]}")
    if got.status is not want.status:
        problems.append(f"root: runner {got.status.name}, py_trees {want.status.name}")
    return "; ".join(problems) or None


def case(seed: int) -> tuple[Any, int, int | None]:
    """Tree, budget and max_ticks of case ``seed``."""
    rng = random.Random(f"case:{seed}")
    spec = random_spec(rng, max_depth=rng.choice((2, 3, 4, 5, 6)))
    mode = rng.random()
    if mode < 0.2:
        return spec, rng.randint(1, 12), None  # ticked a fixed number of changing ticks
    if mode < 0.35:
        return spec, 120, rng.randint(1, 15)  # cut by the runner's max_ticks (and run again)
    return spec, 120, None


def check(seed: int) -> str | None:
    spec, budget, max_ticks = case(seed)
    return compare(spec, seed, budget, max_ticks, rerun=seed % 2 == 0, mixed=seed % 3 == 0)


if __name__ == "__main__":
    import sys
    import time

    start, count = int(sys.argv[1]), int(sys.argv[2])
    limit = float(sys.argv[3]) if len(sys.argv) > 3 else 1e9
    began, bad = time.monotonic(), 0
    for s in range(start, start + count):
        if time.monotonic() - began > limit:
            print("time box reached at", s)
            break
        problem = check(s)
        if problem:
            bad += 1
            print(s, case(s)[0], case(s)[1:], problem[:1500], sep="\n  ", flush=True)
    print("bad", bad, "in", round(time.monotonic() - began, 1), "s")


# -- counting ticks: no outside event, so the runner's ticks are py_trees' one for one -----------
class PollWorld(World):
    """Leaves that end at once or after k polls: nothing waits for the driver."""

    def script(self, leaf: int, activation: int) -> tuple[str, str, int]:
        rng = random.Random(f"{self.seed}:{leaf}:{activation}")
        kind = rng.choices(("now", "poll"), weights=(3, 2))[0]
        outcome = rng.choices(("SUCCESS", "FAILURE", "RAISE"), weights=(5, 3, 1))[0]
        return kind, outcome, rng.randint(1, 3)


def without_events(spec: Any) -> Any:
    """``spec`` with its guards and Timeouts as PassThroughs (no flag, no clock to move)."""
    if spec[0] == "dec":
        kind = "passthrough" if spec[1] in ("guard", "timeout") else spec[1]
        return ("dec", kind, spec[2], without_events(spec[3]))
    if spec[0] in ("seq", "sel"):
        return (spec[0], spec[1], [without_events(k) for k in spec[2]])
    if spec[0] == "par":
        return (*spec[:4], [without_events(k) for k in spec[4]])
    return spec


def count_sync(spec: Any, seed: int, ticks: int) -> tuple[list[Any], Status]:
    """py_trees' loop, ``ticks`` ticks (or till the root ends), then the tree stopped."""
    world = PollWorld(seed)
    root = build(spec, lambda i: SyncLeaf(i, world), world)
    root.setup_with_descendants()
    for _ in range(ticks):
        for _ in root.tick():
            pass
        world.log.append(("tick",))
        if root.status is not RUNNING:
            return world.log, root.status
    root.stop(INVALID)
    return world.log, root.status


async def count_async(spec: Any, seed: int, ticks: int) -> tuple[list[Any], Status, bool]:
    """The runner with ``max_ticks``; cancelled (and said so) where it would sleep until woken:
    at rest, its further ticks would change nothing."""
    world = PollWorld(seed)
    root = build(spec, lambda i: AsyncLeaf(i, world), world)
    runner = ReactiveRunner(root, config=CONFIG)
    ticker_tick, waiter = runner._ticker.tick, runner._wait_for_wake
    rested = False

    def tick(r: Behaviour, woken: Any) -> Any:
        plan = ticker_tick(r, woken)
        world.log.append(("tick",))
        return plan

    def wait_for_wake(wait: float | None) -> Any:
        nonlocal rested
        if wait is None:
            rested = True
            runner.cancel()
        return waiter(wait)

    runner._ticker.tick = tick  # type: ignore[method-assign]
    runner._wait_for_wake = wait_for_wake  # type: ignore[method-assign]
    await runner.run(max_ticks=ticks)
    return world.log, root.status, rested


def check_counted(seed: int) -> str | None:
    """None when the runner's ``max_ticks`` run and py_trees' ticks agree."""
    rng = random.Random(f"counted:{seed}")
    spec = without_events(random_spec(rng, max_depth=rng.choice((2, 3, 4, 5))))
    ticks = rng.randint(1, 30)
    with virtual_time(Clock()):
        got, status, rested = asyncio.run(count_async(spec, seed, ticks))
    want, want_status = count_sync(spec, seed, ticks)
    if rested:  # py_trees' ticks from there on start and end nothing
        got = [e for e in got if e[0] in ("start", "end")]
        want = [e for e in want if e[0] in ("start", "end")]
    elif status is not want_status:
        return f"root: runner {status.name}, py_trees {want_status.name}"
    if got != want:
        at = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
                  min(len(got), len(want)))
        return f"{spec} {ticks}: at {at} runner {got[max(0, at - 5):at + 4]} " \
               f"py_trees {want[max(0, at - 5):at + 4]}"
    return None
