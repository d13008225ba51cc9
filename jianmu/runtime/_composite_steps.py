"""py_trees' own steps for the engine's composites and decorators (`jianmu.nodes.react`), in
py_trees' order, minus the debug-log strings nobody reads (`jianmu.runtime.async_node` says
which): `sequence_tick` follows `py_trees.composites.Sequence.tick`, `composite_stop`
`Composite.stop` and `decorator_stop` `Decorator.stop`. Off a plain call's path: a lone leaf
needs none of them."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import py_trees
from py_trees.behaviour import Behaviour
from py_trees.common import Status

__all__ = ("composite_stop", "decorator_stop", "sequence_tick")


def decorator_stop(node: py_trees.decorators.Decorator, new_status: Status) -> None:
    """`Decorator.stop`: terminate, then stop the child when invalidated or left running."""
    node.terminate(new_status)
    if new_status is Status.INVALID:
        node.decorated.stop(new_status)
    if node.decorated.status is Status.RUNNING:
        node.decorated.stop(Status.INVALID)
    node.status = new_status


def sequence_tick(node: py_trees.composites.Sequence) -> Iterator[Behaviour]:
    """`Sequence.tick`: the children in turn while they succeed (from the running one, with
    memory); the first that does not succeed decides; all succeeded is SUCCESS."""
    index = 0
    children = node.children
    if node.status is not Status.RUNNING:
        node.current_child = children[0] if children else None
        for child in children:
            if child.status is not Status.INVALID:
                child.stop(Status.INVALID)
        node.initialise()
    elif node.memory and node.current_child is not None:
        index = children.index(node.current_child)
    else:
        node.current_child = children[0] if children else None
    if not children:
        node.current_child = None
        node.stop(Status.SUCCESS)
        yield node
        return
    for child in itertools.islice(children, index, None):
        for found in child.tick():
            yield found
            if found is child and found.status is not Status.SUCCESS:
                if not node.memory:  # invalidate the rest: kill dangling runners
                    for later in itertools.islice(children, index + 1, None):
                        if later.status is not Status.INVALID:
                            later.stop(Status.INVALID)
                if found.status is not Status.RUNNING:
                    node.stop(found.status)
                else:
                    node.status = found.status
                yield node
                return
        if index + 1 < len(children):  # advance to the next sibling, if there is one
            index += 1
            node.current_child = children[index]
    node.stop(Status.SUCCESS)
    yield node


def composite_stop(node: py_trees.composites.Composite, new_status: Status) -> None:
    """`Composite.stop`: on INVALID forget the current child and stop every child not yet
    invalid; then terminate and take the status."""
    if new_status is Status.INVALID:
        node.current_child = None
        for child in node.children:
            if child.status is not Status.INVALID:
                child.stop(new_status)
    node.terminate(new_status)
    node.status = new_status
