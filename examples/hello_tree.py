"""Hello, tree: async nodes that wait, write and read state, ticked by a ReactiveRunner.

Run it with ``python examples/hello_tree.py``.
"""

from __future__ import annotations

import asyncio

import py_trees
from py_trees.common import Status

from jianmu import AsyncNode, ReactiveRunner, StateManager


class Fetch(AsyncNode):
    """Pretends to fetch a greeting (waits without blocking), then writes it to the state."""

    async def update_async(self) -> Status:
        await asyncio.sleep(0.2)
        self.state.write_port("greeting", "hello")
        return Status.SUCCESS


class Shout(AsyncNode):
    """Reads the greeting and writes it back louder."""

    async def update_async(self) -> Status:
        greeting = self.state.read_port("greeting")
        if not greeting:
            return Status.FAILURE
        self.state.write_port("shout", greeting.upper() + "!")
        return Status.SUCCESS


def build_tree() -> py_trees.behaviour.Behaviour:
    """A Sequence of the two nodes; the runner resumes it where it left off."""
    children = [Fetch("fetch"), Shout("shout")]
    return py_trees.composites.Sequence("Hello", memory=True, children=children)


async def main() -> None:
    tree = build_tree()
    runner = ReactiveRunner(tree, StateManager())
    result = await runner.run(timeout=10)
    print(py_trees.display.unicode_tree(tree, show_status=True))
    print(f"state: {runner.state.to_dict()}")
    print(f"result: {result.status.value} in {result.ticks} ticks ({result.duration:.2f} s)")


if __name__ == "__main__":
    asyncio.run(main())
