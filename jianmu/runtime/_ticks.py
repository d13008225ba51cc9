"""py_trees' ``tick`` and ``stop`` for the runtime's own nodes, without their per-tick waste.

The same steps in the same order as `py_trees.behaviour.Behaviour` and
`py_trees.decorators.Decorator`, minus what nobody reads: the debug-log strings (formatted on
every tick and stop, enum statuses and all, though py_trees prints them only at its debug
level), the list of every status built to check each one, and the fresh ``tick()`` generator
a stop leaves in ``iterator`` (py_trees never reads it). At py_trees' debug level the nodes
use py_trees' own methods, so their logs are as before.
"""

from __future__ import annotations

from collections.abc import Iterator

import py_trees
from py_trees.behaviour import Behaviour
from py_trees.common import Status

__all__ = ("STATUSES", "behaviour_tick", "checked", "decorator_stop", "logs_debug")

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
