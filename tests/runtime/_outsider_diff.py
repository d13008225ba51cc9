"""An outsider's differential harness: one seeded random tree built twice, once with plain
py_trees leaves under py_trees' own ``tick_once()`` loop, once with some leaves made `AsyncNode`s
under `ReactiveRunner`, compared on what py_trees' documentation promises a user can see.

Written apart from `_async_diff.py` and `_timed_diff.py`, from py_trees' docs and source only.
Every node (composites, decorators, stock leaves and the test's own) is a subclass that logs its
``initialise``, ``update`` (leaves) and ``terminate`` calls with their statuses; the two logs must
be equal, so must the root's status, every node's status and steady feedback after the run, the
tip, and the number of ticks. Leaves end after a number of ticks counted by their own updates (an
async leaf's ``update_async`` returns RUNNING until then, and is polled), so the runner has no
tick it may leave out: it must tick as py_trees' loop does, one for one. Leaves also write the
blackboard in ``initialise`` and ``terminate``, which checks beside them read, and the stock
leaves of ``py_trees.behaviours`` sit beside them.
"""

from __future__ import annotations

import asyncio
import operator
import random
import re
from collections.abc import Callable
from typing import Any

import py_trees
from py_trees.behaviour import Behaviour
from py_trees.common import Access, ComparisonExpression, OneShotPolicy, Status

from jianmu.config import AppConfig
from jianmu.runtime.async_node import AsyncNode
from jianmu.runtime.runner import ReactiveRunner
from tests.support.virtual_time import VirtualLoop

CONFIG = AppConfig.model_validate({"runtime": {"poll_interval": 0.0005}})
CAP = 60
"""Ticks before a run that does not end is cut, both ways."""
REST = 0.25
"""Seconds after which a run py_trees' loop cut at CAP is taken to rest for good (no
wall-clock check: a slow run cut there still has to be py_trees' up to its cut)."""

KEYS = ("k0", "k1", "k2")
AWAITS = 0.5
"""The share of one-tick async leaves that await a loop step rather than return RUNNING once:
their task ends in the turn of the loop the runner lets pass before a tick taken at once, as
py_trees' second update ends the sync leaf (it once yielded that step twice: none were here)."""

Log = list[tuple[Any, ...]]
_classes: dict[type, type] = {}


def logged(cls: type[Behaviour]) -> type[Behaviour]:
    """``cls`` with its lifecycle calls written to ``self.log``."""
    if cls in _classes:
        return _classes[cls]

    class Logged(cls):  # type: ignore[valid-type, misc]
        log: Log

        def initialise(self) -> None:
            self.log.append(("init", self.name))
            super().initialise()

        def update(self) -> Status:
            status = super().update()
            if not self.children:
                self.log.append(("update", self.name, status.value))
            return status

        def terminate(self, new_status: Status) -> None:
            self.log.append(("term", self.name, self.status.value, new_status.value))
            super().terminate(new_status)

    Logged.__name__ = Logged.__qualname__ = f"Logged{cls.__name__}"
    _classes[cls] = Logged
    return Logged


class _Writes:
    """A blackboard client that may write ``key`` (None: no writes)."""

    def writer(self: Any, key: str | None) -> None:
        self.key = key
        if key is not None:
            self.bb = self.attach_blackboard_client(name=self.name)
            self.bb.register_key(key, access=Access.WRITE)

    def write(self: Any, value: Any) -> None:
        if self.key is not None:
            self.bb.set(self.key, value)


class SyncAct(_Writes, Behaviour):
    """RUNNING for ``n`` updates, then ``end`` (or FAILURE as a raising async leaf reports)."""

    def __init__(self, name: str, n: int, end: Status, key: str | None, raises: bool) -> None:
        super().__init__(name)
        self.n, self.end, self.raises, self.count = n, end, raises, 0
        self.writer(key)

    def initialise(self) -> None:
        self.count = 0
        self.write(True)

    def update(self) -> Status:
        self.count += 1
        if self.count <= self.n:
            return Status.RUNNING
        if self.raises:
            self.feedback_message = "ValueError: boom"
            return Status.FAILURE
        return self.end

    def terminate(self, new_status: Status) -> None:
        self.write(new_status.value)


class AsyncAct(_Writes, AsyncNode):
    """`SyncAct` as an async leaf: ``update_async`` returns RUNNING ``n`` times (polled), or
    (``awaits``, n=1) awaits a loop step and ends: its task's end wakes the runner, whose next
    tick is its second, as the sync leaf's second update."""

    def __init__(self, name: str, n: int, end: Status, key: str | None, raises: bool,
                 awaits: bool = False) -> None:
        super().__init__(name)
        self.n, self.end, self.raises, self.count = n, end, raises, 0
        self.awaits = awaits
        self.writer(key)

    def initialise(self) -> None:
        self.log.append(("init", self.name))
        self.count = 0
        self.write(True)
        super().initialise()

    def update(self) -> Status:
        status = super().update()
        self.log.append(("update", self.name, status.value))
        return status

    async def update_async(self) -> Status:
        self.count += 1
        if self.awaits:
            self.count += 1
            await asyncio.sleep(0)
        if self.count <= self.n:
            return Status.RUNNING
        if self.raises:
            raise ValueError("boom")
        return self.end

    def terminate(self, new_status: Status) -> None:
        self.log.append(("term", self.name, self.status.value, new_status.value))
        self.write(new_status.value)
        super().terminate(new_status)

    log: Log


def _stock_leaf(rng: random.Random, name: str) -> Behaviour:
    b = py_trees.behaviours
    key = rng.choice(KEYS)
    kind = rng.choice((
        "success", "failure", "periodic", "every", "queue", "counter", "check", "checks",
        "wait", "set", "unset", "to_status", "exists", "wait_value",
    ))
    if kind == "success":
        return logged(b.Success)(name)
    if kind == "failure":
        return logged(b.Failure)(name)
    if kind == "periodic":
        return logged(b.Periodic)(name, rng.randint(1, 3))
    if kind == "every":
        return logged(b.SuccessEveryN)(name, rng.randint(1, 3))
    if kind == "queue":
        queue = [rng.choice(list(Status)[:3]) for _ in range(rng.randint(1, 4))]
        return logged(b.StatusQueue)(name, queue, rng.choice((Status.SUCCESS, Status.FAILURE)))
    if kind == "counter":
        return logged(b.TickCounter)(name, rng.randint(0, 3),
                                     rng.choice((Status.SUCCESS, Status.FAILURE)))
    if kind == "check":
        return logged(b.CheckBlackboardVariableValue)(
            name, ComparisonExpression(key, True, operator.eq))
    if kind == "checks":
        other = rng.choice(KEYS)
        return logged(b.CheckBlackboardVariableValues)(
            name, [ComparisonExpression(key, True, operator.eq),
                   ComparisonExpression(other, "INVALID", operator.eq)],
            rng.choice((operator.and_, operator.or_)))
    if kind == "wait":
        return logged(b.WaitForBlackboardVariable)(name, key)
    if kind == "wait_value":
        return logged(b.WaitForBlackboardVariableValue)(
            name, ComparisonExpression(key, "SUCCESS", operator.eq))
    if kind == "set":
        return logged(b.SetBlackboardVariable)(name, key, rng.choice((True, "SUCCESS")),
                                               overwrite=rng.random() < 0.7)
    if kind == "unset":
        return logged(b.UnsetBlackboardVariable)(name, key)
    if kind == "exists":
        return logged(b.CheckBlackboardVariableExists)(name, key)
    return logged(b.BlackboardToStatus)(name, "status")


def _decorate(rng: random.Random, name: str, child: Behaviour) -> Behaviour:
    d = py_trees.decorators
    kind = rng.choice((
        "inverter", "count", "f_running", "f_success", "oneshot", "pass", "repeat", "retry",
        "r_failure", "r_success", "s_failure", "s_running", "to_bb", "condition", "guard",
        "timeout", "for_each",
    ))
    simple = {"inverter": d.Inverter, "count": d.Count, "f_running": d.FailureIsRunning,
              "f_success": d.FailureIsSuccess, "pass": d.PassThrough,
              "r_failure": d.RunningIsFailure, "r_success": d.RunningIsSuccess,
              "s_failure": d.SuccessIsFailure, "s_running": d.SuccessIsRunning}
    if kind in simple:
        return logged(simple[kind])(name=name, child=child)
    if kind == "oneshot":
        policy = rng.choice(list(OneShotPolicy))
        return logged(d.OneShot)(name=name, child=child, policy=policy)
    if kind == "repeat":
        return logged(d.Repeat)(name=name, child=child, num_success=rng.randint(1, 3))
    if kind == "retry":
        return logged(d.Retry)(name=name, child=child, num_failures=rng.randint(1, 3))
    if kind == "to_bb":
        return logged(d.StatusToBlackboard)(name=name, child=child, variable_name="status")
    if kind == "condition":
        return logged(d.Condition)(name=name, child=child,
                                   status=rng.choice((Status.SUCCESS, Status.FAILURE)))
    if kind == "guard":
        key = rng.choice(KEYS)

        def condition(blackboard: Any) -> bool:
            try:
                return blackboard.get(key) != "INVALID"
            except KeyError:  # unset, or not yet written
                return True

        return logged(d.EternalGuard)(name=name, child=child, condition=condition,
                                      blackboard_keys=[key])
    if kind == "for_each":  # each item in turn to a key the checks read
        return logged(d.ForEach)(name=name, child=child, source_key="items",
                                 target_key=rng.choice(KEYS))
    return logged(d.Timeout)(name=name, child=child, duration=3600.0)  # never due


class _Builder:
    def __init__(self, seed: int, use_async: bool, log: Log) -> None:
        self.rng = random.Random(seed)
        self.use_async = use_async
        self.log = log
        self.count = 0

    def name(self, kind: str) -> str:
        self.count += 1
        return f"{kind}{self.count}"

    def leaf(self) -> Behaviour:
        rng = self.rng
        if rng.random() < 0.35:
            return _stock_leaf(rng, self.name("stock"))
        n = rng.choice((0, 0, 1, 2, 3))
        end = rng.choice((Status.SUCCESS, Status.FAILURE))
        key = rng.choice((None, *KEYS))
        raises = rng.random() < 0.1
        made_async = rng.random() < 0.6
        awaits = n == 1 and rng.random() < AWAITS
        name = self.name("act")
        if made_async and self.use_async:
            return AsyncAct(name, n, end, key, raises, awaits)
        return logged(SyncAct)(name, n, end, key, raises)

    def node(self, depth: int) -> Behaviour:
        rng = self.rng
        if depth <= 0 or rng.random() < 0.25:
            made = self.leaf()
        else:
            kind = rng.choice(("seq", "seq", "sel", "sel", "par"))
            children = [self.node(depth - 1) for _ in range(rng.randint(1, 3))]
            name = self.name(kind)
            memory = rng.random() < 0.5
            if kind == "seq":
                made = logged(py_trees.composites.Sequence)(name, memory=memory,
                                                            children=children)
            elif kind == "sel":
                made = logged(py_trees.composites.Selector)(name, memory=memory,
                                                            children=children)
            else:
                policy = rng.choice((
                    py_trees.common.ParallelPolicy.SuccessOnAll(synchronise=rng.random() < 0.5),
                    py_trees.common.ParallelPolicy.SuccessOnOne(),
                    py_trees.common.ParallelPolicy.SuccessOnSelected(
                        [children[0]], synchronise=rng.random() < 0.5),
                ))
                made = logged(py_trees.composites.Parallel)(name, policy=policy,
                                                            children=children)
        while rng.random() < 0.3:
            made = _decorate(rng, self.name("dec"), made)
        return made


def build(seed: int, use_async: bool, log: Log) -> Behaviour:
    """The seed's tree, on a fresh blackboard; every node logs to ``log``."""
    py_trees.blackboard.Blackboard.clear()
    py_trees.blackboard.Blackboard.set("/status", Status.SUCCESS)  # BlackboardToStatus reads it
    py_trees.blackboard.Blackboard.set("/items", [True, "SUCCESS", "INVALID"])  # ForEach's
    root = _Builder(seed, use_async, log).node(random.Random(seed * 7 + 1).randint(1, 6))
    for node in root.iterate():
        node.log = log
    return root


_REMAINING = re.compile(r"remaining: [0-9.e-]+s")
"""A running Timeout's time left, which decorators above it quote."""


def snapshot(root: Behaviour) -> list[tuple[str, str, str]]:
    """Every node's status and feedback (a Count's and a Timeout's tallies left out)."""
    steady = []
    for node in root.iterate():
        volatile = isinstance(node, (py_trees.decorators.Count, py_trees.decorators.Timeout))
        message = "" if volatile else _REMAINING.sub("", node.feedback_message)
        steady.append((node.name, node.status.value, message))
    return steady


def _pytrees_loop(root: Behaviour) -> int:
    """``tick_once`` until the root ends or CAP ticks (then stopped); the ticks taken."""
    ticks = 0
    while ticks < CAP:
        root.tick_once()
        ticks += 1
        if root.status is not Status.RUNNING:
            return ticks
    root.stop(Status.INVALID)
    return ticks


def _seen(root: Behaviour, log: Log, ticks: int) -> dict[str, Any]:
    tip = root.tip()
    return {"status": root.status.value, "log": list(log), "nodes": snapshot(root),
            "ticks": ticks, "tip": None if tip is None else tip.name, "bb": _board()}


def reference(seed: int, runs: int = 1) -> list[dict[str, Any]]:
    """py_trees' own loop, ``runs`` times over the same tree (a run again after its end)."""
    log: Log = []
    root = build(seed, False, log)
    root.setup_with_descendants()
    return [_seen(root, log, _pytrees_loop(root)) for _ in range(runs)]


async def jianmu(seed: int, capped: list[bool], use_async: bool = True) -> list[dict[str, Any]]:
    """The same tree under `ReactiveRunner` (``max_ticks=CAP``), each run by a new runner;
    ``capped`` says which runs py_trees' loop cut at CAP ticks."""
    log: Log = []
    root = build(seed, use_async, log)
    seen = []
    for cut in capped:
        # a tree that can no longer change (a Condition over a finished OneShot) rests, and a
        # run at rest takes no tick towards max_ticks: the timeout ends it (docs/design.md);
        # a run that ends has a timeout no run here comes near, so a slow machine passes
        timeout = REST if cut else 30.0
        result = await ReactiveRunner(root, config=CONFIG).run(max_ticks=CAP, timeout=timeout)
        seen.append({**_seen(root, log, result.ticks), "result": result})
        if result.status.value == "timeout":
            break
    return seen


def _board() -> dict[str, Any]:
    return {k: v for k, v in py_trees.blackboard.Blackboard.storage.items()}


def first_difference(seed: int, runs: int = 1) -> str | None:
    """None if both ways agree, else what differs first."""
    wants = reference(seed, runs)
    # on virtual time: the runner's polls of its leaves and a rested run's REST cost no wall
    # time (the runner's timeout is its wait's, timed by the loop too)
    with asyncio.Runner(loop_factory=VirtualLoop) as runner:
        gots = runner.run(jianmu(seed, [want["ticks"] >= CAP for want in wants]))
    for run, (want, got) in enumerate(zip(wants, gots, strict=False)):
        problem = _difference(want, got)
        if problem is not None:
            return f"seed {seed} run {run}: {problem}"
        if got["result"].status.value == "timeout":
            return None
    return None


def _difference(want: dict[str, Any], got: dict[str, Any]) -> str | None:
    if got["result"].status.value == "timeout":  # rested for good, or slow: a prefix, capped
        ran = list(got["log"])
        while ran and ran[-1][0] == "term" and ran[-1][-1] == "INVALID":  # the timeout's stop
            ran.pop()
        if want["ticks"] < CAP or want["log"][:len(ran)] != ran:
            return f"rested where py_trees went on: {got['log'][-6:]}"
        return None
    for key in ("log", "status", "nodes", "tip", "ticks", "bb"):
        if want[key] != got[key]:
            if key == "log":
                at = next((i for i, (a, b) in enumerate(zip(want["log"], got["log"], strict=False))
                           if a != b), min(len(want["log"]), len(got["log"])))
                return (f"log differs at {at}: py_trees {want['log'][max(0, at - 3):at + 3]} "
                        f"jianmu {got['log'][max(0, at - 3):at + 3]}")
            if key == "nodes":
                pairs = [(a, b) for a, b in zip(want[key], got[key], strict=True) if a != b]
                return f"nodes (py_trees, jianmu): {pairs[:4]}"
            return f"{key}: py_trees {want[key]} jianmu {got[key]}"
    return None


Check = Callable[[int], str | None]
