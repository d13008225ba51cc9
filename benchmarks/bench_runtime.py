"""Runtime costs: tick overhead vs raw py_trees, state appends, idle CPU while waiting."""

from __future__ import annotations

import asyncio
import operator
import time
from typing import Annotated

import py_trees
from py_trees.common import Status
from pydantic import BaseModel, Field

from benchmarks._util import best_of, table, verdict
from jianmu import AsyncNode, ReactiveRunner, StateManager

LEAVES = 100
TICKS = 200


class Countdown(py_trees.behaviour.Behaviour):
    """RUNNING for ``n`` ticks, then SUCCESS; asks the runner (if any) for another tick."""

    def __init__(self, n: int, wake: object = None) -> None:
        super().__init__("countdown")
        self.n = n
        self.left = n
        self.wake = wake

    def initialise(self) -> None:
        self.left = self.n

    def update(self) -> Status:
        self.left -= 1
        if self.left <= 0:
            return Status.SUCCESS
        if self.wake is not None:
            self.wake()
        return Status.RUNNING


def build(n_ticks: int) -> tuple[py_trees.behaviour.Behaviour, Countdown]:
    leaves = [py_trees.behaviours.Success(f"leaf{i}") for i in range(LEAVES - 1)]
    countdown = Countdown(n_ticks)
    root = py_trees.composites.Sequence("Root", memory=False, children=[*leaves, countdown])
    return root, countdown


def raw_ticks() -> float:
    root, _ = build(TICKS)
    root.setup_with_descendants()

    def go() -> None:
        for _ in range(TICKS):
            root.tick_once()

    return best_of(go, repeat=7) / TICKS


def runner_ticks(repeat: int = 7) -> float:
    """Best time per tick of a fresh runner over the same tree shape: a finished run is final
    (running it again returns its result), so each round builds its tree and runner, untimed."""
    best = float("inf")
    for _ in range(repeat):
        root, countdown = build(TICKS)
        runner = ReactiveRunner(root, StateManager())
        countdown.wake = runner.wake

        async def go(runner: ReactiveRunner = runner) -> None:
            result = await runner.run()
            assert result.ticks == TICKS, result

        start = time.perf_counter()
        asyncio.run(go())
        best = min(best, time.perf_counter() - start)
    return best / TICKS


class Msg(BaseModel):
    role: str
    content: str


class Chat(BaseModel):
    messages: Annotated[list[Msg], operator.add] = Field(default_factory=list)


def append_cost(size: int, batch: int = 200) -> float:
    state = StateManager(Chat)
    state.append_port_messages([{"role": "user", "content": "x"}] * size)
    start = time.perf_counter()
    for i in range(batch):
        state.append_port_messages({"role": "user", "content": f"message {i}"})
    return (time.perf_counter() - start) / batch


def idle_cpu(wait: float = 2.0) -> float:
    class Sleep(AsyncNode):
        async def update_async(self) -> Status:
            await asyncio.sleep(wait)
            return Status.SUCCESS

    cpu, wall = time.process_time(), time.perf_counter()
    result = asyncio.run(ReactiveRunner(Sleep("sleep")).run())
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    assert result.ticks == 2
    return cpu / wall


def main() -> None:
    """Print the three runtime figures and their targets."""
    raw, ours = raw_ticks(), runner_ticks()
    small = min(append_cost(100) for _ in range(5))
    large = min(append_cost(10_000) for _ in range(5))
    idle = idle_cpu()
    rows = [
        ("tick, 100 leaves", f"raw py_trees {raw * 1e6:.0f} µs",
         f"ReactiveRunner {ours * 1e6:.0f} µs",
         f"{ours / raw:.3f}x", "<= 1.10x", verdict(ours / raw <= 1.10)),
        ("append message", f"at 100: {small * 1e6:.1f} µs", f"at 10,000: {large * 1e6:.1f} µs",
         f"{large / small:.2f}x", "<= 1.5x", verdict(large / small <= 1.5)),
        ("idle CPU, 2 s wait", "", f"{idle * 100:.2f}% of wall", f"{idle * 100:.2f}%", "< 2%",
         verdict(idle < 0.02)),
    ]
    table(rows, ("measure", "baseline", "jianmu", "ratio", "target", ""))


if __name__ == "__main__":
    main()
