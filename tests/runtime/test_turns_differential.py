"""py_trees' semantics with async leaves whose tasks end by themselves, soon: seeded random trees
under `ReactiveRunner` against the same trees under py_trees' own loop, and no spin.

A leaf's activation ends at once (no await), after one turn of the loop (``asyncio.sleep(0)``),
after a few turns, after a thread's hop (``asyncio.to_thread``), or never (a long action, ended
only by a cancel); some leaves are py_trees' own (RUNNING for k ticks, the runner polls them).
When a task ends depends on the loop, so py_trees' loop replays the runner's: each of its ticks
is one of the runner's, and a py_trees leaf ends at the tick where the runner's task was found
ended (`_tick`). Compared: the leaf starts, ends and cancellations tick by tick, and the final
status. Where the runner slept until woken, py_trees' tick in between must change nothing (no
tick missed). No spin: the runner may not bring the tree back to the same state `SPIN` times
without a poll's sleep running out between (py_trees' loop would go round at its rate; the
runner went round at the loop's speed, a full core). Ticks are counted, time is not.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from py_trees.behaviour import Behaviour
from py_trees.common import Status
from py_trees.decorators import Repeat

from jianmu.config import AppConfig
from jianmu.runtime.async_node import AsyncNode, Ticker, TickPlan
from jianmu.runtime.runner import ReactiveRunner
from tests.runtime._async_diff import Clock, World, _Leaf, build, random_spec, virtual_time

RUNNING, INVALID = Status.RUNNING, Status.INVALID
CONFIG = AppConfig.model_validate({"runtime": {"poll_interval": 0.001}})
KINDS = ("now", "turn", "turns", "hop", "long")
SEEDS = range(300)
SPIN = 8
"""Times the same state may come back with no poll run out between: the ticks that find a
rest, a task started the tick before a rest still waking the runner, a leaf moving on unseen
between rounds (a spin comes back dozens of times)."""


class TurnWorld(World):
    """Scripts of leaves whose tasks end by themselves; which activations the runner found
    ended before each tick (``done``, filled as py_trees' loop replays the ticks)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.done: set[tuple[int, int]] = set()

    def script(self, leaf: int, activation: int) -> tuple[str, str, int]:
        # most leaves do the same at every activation: a check that fails again, round
        # after round, an action that never ends; the others draw anew each time
        steady = random.Random(f"steady:{self.seed}:{leaf}").random() < 0.6
        rng = random.Random(f"{self.seed}:{leaf}" if steady else f"{self.seed}:{leaf}:{activation}")
        kind = rng.choices(KINDS, weights=(3, 5, 2, 2, 2))[0]
        outcome = rng.choices(("SUCCESS", "FAILURE", "RAISE"), weights=(5, 4, 1))[0]
        return kind, outcome, rng.randint(2, 4)


def _outcome(outcome: str) -> Status:
    return Status.FAILURE if outcome == "RAISE" else Status[outcome]


class TurnLeaf(_Leaf, AsyncNode):
    """An async leaf: its task ends as its script says."""

    def __init__(self, idx: int, world: World) -> None:
        AsyncNode.__init__(self, f"L{idx}")
        self.idx, self.world = idx, world

    def initialise(self) -> None:
        self.begin()
        super().initialise()

    async def update_async(self) -> Status:
        kind, outcome, k = self.plan
        if kind == "turn":
            await asyncio.sleep(0)
        elif kind == "turns":
            for _ in range(k):
                await asyncio.sleep(0)
        elif kind == "hop":
            await asyncio.to_thread(lambda: None)
        elif kind == "long":
            await asyncio.Event().wait()
        if outcome == "RAISE":
            raise RuntimeError(f"L{self.idx} raised")
        return Status[outcome]

    def terminate(self, new_status: Status) -> None:
        was_running = self.status is RUNNING
        super().terminate(new_status)
        self.ended(was_running, new_status)


class ReplayLeaf(_Leaf, Behaviour):
    """The same script as a py_trees leaf: RUNNING until the tick where the runner found its
    task ended."""

    world: TurnWorld

    def __init__(self, idx: int, world: TurnWorld) -> None:
        Behaviour.__init__(self, f"L{idx}")
        self.idx, self.world = idx, world

    def initialise(self) -> None:
        self.begin()

    def update(self) -> Status:
        kind, outcome, _ = self.plan
        if kind == "now" or (self.idx, self.activation) in self.world.done:
            return _outcome(outcome)
        return RUNNING

    def terminate(self, new_status: Status) -> None:
        self.ended(self.status is RUNNING, new_status)


class PlainLeaf(_Leaf, Behaviour):
    """A py_trees leaf on both sides: RUNNING for k ticks, then its outcome."""

    def __init__(self, idx: int, world: World) -> None:
        Behaviour.__init__(self, f"L{idx}")
        self.idx, self.world = idx, world

    def initialise(self) -> None:
        self.begin()

    def update(self) -> Status:
        self.calls += 1
        _, outcome, k = self.plan
        return RUNNING if self.calls <= k else _outcome(outcome)

    def terminate(self, new_status: Status) -> None:
        self.ended(self.status is RUNNING, new_status)


def _plain(seed: int, i: int) -> bool:
    return random.Random(f"plain:{seed}:{i}").random() < 0.15


def _spec(seed: int) -> Any:
    """A random tree without a Repeat without end (it goes round at once on purpose: no rest
    to find); its Timeouts never fire (the virtual clock does not move), their deadlines
    kept through the rests."""
    def strip(spec: Any) -> Any:
        if spec[0] == "dec":
            kind, param = spec[1], spec[2]
            if kind == "repeat" and param < 1:
                param = 3
            return ("dec", kind, param, strip(spec[3]))
        if spec[0] in ("seq", "sel"):
            return (spec[0], spec[1], [strip(k) for k in spec[2]])
        if spec[0] == "par":
            return (*spec[:4], [strip(k) for k in spec[4]])
        return spec

    rng = random.Random(f"turns:{seed}")
    return strip(random_spec(rng, max_depth=rng.choice((2, 3, 4))))


def _state(root: Behaviour) -> tuple[Any, ...]:
    """What a tick may change, but the leaves' activation numbers (they count the rounds):
    with what the leaves do this time, as a leaf's script may differ from the last."""
    parts: list[Any] = []
    for node in root.iterate():
        current = getattr(node, "current_child", None)
        parts.append((
            node.status,
            None if current is None else node.children.index(current),
            getattr(node, "success", None) if isinstance(node, Repeat) else None,
            getattr(node, "failures", None), getattr(node, "final_status", None),
            node.calls if isinstance(node, PlainLeaf) else None,
            getattr(node, "plan", None),  # a leaf doing otherwise this time moves on
        ))
    return tuple(parts)


async def _run_async(spec: Any, seed: int, max_ticks: int) -> tuple[
        TurnWorld, Status, list[set[tuple[int, int]]], list[TickPlan], list[str]]:
    """The runner: its log, final status, what each tick found ended, its plans, and spins;
    cancelled where it rests with only long actions left (py_trees' loop then stops too)."""
    world = TurnWorld(seed)
    root = build(spec, lambda i: PlainLeaf(i, world) if _plain(seed, i) else TurnLeaf(i, world),
                 world)
    runner = ReactiveRunner(root, config=CONFIG)
    found: list[set[tuple[int, int]]] = []
    plans: list[TickPlan] = []
    spins: list[str] = []
    seen: dict[tuple[Any, ...], int] = {}
    ticker_tick, waiter = runner._ticker.tick, runner._wait_for_wake

    def tick(r: Behaviour, woken: Any) -> TickPlan:
        found.append({
            (node.idx, node.activation) for node in root.iterate()
            if isinstance(node, TurnLeaf) and node.status is RUNNING
            and node.in_flight is None and node._task is not None})
        plan = ticker_tick(r, woken)
        plans.append(plan)
        world.log.append(("tick",))
        state = _state(root)
        seen[state] = seen.get(state, 0) + 1
        if seen[state] == SPIN and root.status is RUNNING:
            spins.append(f"tick {len(plans)}: the same state {SPIN} times, no poll ran out between")
        return plan

    async def wait_for_wake(wait: float | None) -> bool:
        # a running Timeout's deadline is seconds away on a clock that does not move here
        if (wait is None or wait > 1) and not any(
                isinstance(node, TurnLeaf) and node.in_flight is not None
                and node.plan[0] != "long" for node in root.iterate()):
            runner.cancel()  # at rest, nothing but long actions left: nothing more happens
        woken = await waiter(wait)
        if not woken:
            seen.clear()  # a poll's sleep ran out: the runner went round at its rate
        return woken

    runner._ticker.tick = tick  # type: ignore[method-assign]
    runner._wait_for_wake = wait_for_wake  # type: ignore[method-assign,assignment]
    await runner.run(max_ticks=max_ticks)
    for node in root.iterate():
        if isinstance(node, TurnLeaf) and node.in_flight is not None:
            spins.append(f"L{node.idx}: task left running after the run")
    return world, root.status, found, plans, spins


def _replay(spec: Any, seed: int, found: list[set[tuple[int, int]]],
            plans: list[TickPlan]) -> tuple[TurnWorld, Status, list[str]]:
    """py_trees' loop ticking where the runner did, each leaf ending where the runner found
    its task ended; where the runner slept until woken, one more tick must change nothing."""
    world = TurnWorld(seed)
    root = build(spec, lambda i: PlainLeaf(i, world) if _plain(seed, i) else ReplayLeaf(i, world),
                 world)
    root.setup_with_descendants()
    missed: list[str] = []
    for i, ended in enumerate(found):
        last = plans[i - 1] if i else None
        if last is not None and not (last.again or last.poll or last.due is not None):
            before, log = _state(root), len(world.log)
            for _ in root.tick():
                pass
            if _state(root) != before or len(world.log) != log:
                missed.append(f"tick {i}: the runner slept, py_trees' tick changed the tree")
        world.done |= ended
        for _ in root.tick():
            pass
        world.log.append(("tick",))
        if root.status is not RUNNING:
            break
    if root.status is RUNNING:
        root.stop(INVALID)  # max_ticks: the runner stops the tree
    return world, root.status, missed


def check(seed: int) -> str | None:
    """None when the runner and py_trees' replay of it agree and the runner did not spin."""
    spec = _spec(seed)
    max_ticks = random.Random(f"ticks:{seed}").randint(20, 80)
    with virtual_time(Clock()):
        try:
            got, status, found, plans, spins = asyncio.run(
                asyncio.wait_for(_run_async(spec, seed, max_ticks), 20))
        except TimeoutError:
            return f"{spec}: the run hung"
        want, want_status, missed = _replay(spec, seed, found, plans)
    problems = [*spins[:2], *missed[:2]]
    if got.log != want.log:
        at = next((i for i, (a, b) in enumerate(zip(got.log, want.log, strict=False)) if a != b),
                  min(len(got.log), len(want.log)))
        problems.append(f"logs differ at {at}: runner {got.log[max(0, at - 6):at + 4]} "
                        f"py_trees {want.log[max(0, at - 6):at + 4]}")
    if status is not want_status:
        problems.append(f"root: runner {status.name}, py_trees {want_status.name}")
    return f"{spec}: " + "; ".join(problems) if problems else None


def test_leaves_ending_after_turns_and_hops_tick_as_pytrees_leaves_do() -> None:
    """Same starts, ends and cancellations tick by tick, the same final status, no tick
    missed, and no tree brought back to where it was, round after round, at the loop's speed."""
    problems = [(seed, problem) for seed in SEEDS if (problem := check(seed)) is not None]
    assert not problems, f"{len(problems)} trees differ, first: {problems[:3]}"


def test_the_harness_sees_a_spin(monkeypatch: pytest.MonkeyPatch) -> None:
    """A runner that takes a tree going round at once, never resting it, is caught."""
    monkeypatch.setattr(Ticker, "_rest", lambda self, visited, due: TickPlan(True, True, due))
    assert any("times, no poll" in (check(seed) or "") for seed in range(40))


def test_the_harness_sees_a_missed_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    """A runner that forgets to tick an ended child again is caught (the replay bites)."""
    import jianmu.runtime.async_node as async_node_module

    monkeypatch.setattr(async_node_module, "ticked_again", lambda node: False)
    assert any("slept" in (check(seed) or "") for seed in range(60))
