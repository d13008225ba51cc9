"""py_trees' ``tick`` and ``stop`` for the runtime's own nodes, without their per-tick waste.

The same steps in the same order as `py_trees.behaviour.Behaviour`,
`py_trees.decorators.Decorator` and `py_trees.composites.Sequence`, minus what nobody reads:
the debug-log strings (formatted on every tick and stop, enum statuses and all, though
py_trees prints them only at its debug level), the list of every status built to check each
one, and the fresh ``tick()`` generator a stop leaves in ``iterator`` (py_trees never reads
it). At py_trees' debug level the nodes use py_trees' own methods, so their logs are as
before.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import py_trees
from py_trees.behaviour import Behaviour
from py_trees.common import Status

__all__ = (
    "STATUSES",
    "behaviour_tick",
    "checked",
    "composite_stop",
    "decorator_stop",
    "logs_debug",
    "sequence_tick",
)

STATUSES = tuple(Status)
"""The valid results of ``update()`` (a tuple: membership must not hash what it is given)."""


def logs_debug() -> bool:
    """Whether py_trees logs at its debug level (then the nodes keep py_trees' own methods)."""
    return bool(py_trees.logging.level < py_trees.logging.Level.INFO)


def checked(node: Behaviour, status: Status) -> Status:
    """``status``, or INVALID (logged as py_trees logs it) when it is not a status."""
    if status in STATUSES:
        return status
    node.logger.error(
        f"A behaviour returned an invalid status, setting to INVALID [{status}][{node.name}]"
    )
    return Status.INVALID


def behaviour_tick(node: Behaviour) -> Iterator[Behaviour]:
    """`Behaviour.tick`: initialise when not running, update, stop when done, yield the node."""
    if node.status is not Status.RUNNING:
        node.initialise()
    new_status = checked(node, node.update())
    if new_status is not Status.RUNNING:
        node.stop(new_status)
    node.status = new_status
    yield node


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
