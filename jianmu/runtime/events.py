"""The runtime event bus: named events with the run id, node path and timestamp."""

from __future__ import annotations

import fnmatch
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ("Event", "EventBus", "EventHandler", "EventSink")


@dataclass(frozen=True, kw_only=True)
class Event:
    """One runtime event."""

    name: str
    """Dotted name such as ``tool.call.started``."""
    run_id: str
    """The run that emitted it."""
    node: str | None = None
    """Path of the emitting node in the tree (``/Root/Sequence/Step``), if any."""
    timestamp: float = field(default_factory=time.time)
    """Seconds since the epoch."""
    fields: dict[str, Any] = field(default_factory=dict)
    """Whatever the emitter attached."""


_SUBSCRIBING = threading.Lock()
"""Orders the (rare) subscriptions of every bus; emitting takes no lock."""

EventHandler = Callable[[Event], None]
"""Receives events; exceptions it raises are swallowed so they never break a run."""


class EventSink(Protocol):
    """Where a component emits events: the `EventBus`, or one node's `NodeEvents`."""

    def emit(self, name: str, **fields: Any) -> Event | None:
        """Publish one event."""


class EventBus:
    """Publishes events to handlers subscribed by glob pattern (``tool.*``, ``*``)."""

    def __init__(self, run_id: str = "") -> None:
        self.run_id = run_id
        # a tuple replaced whole on (un)subscribe: `emit` reads it without a lock or a copy,
        # and a bus nobody listens to (most runs') holds no list and no lock of its own
        self._handlers: tuple[tuple[str, EventHandler], ...] = ()

    def subscribe(self, pattern: str, handler: EventHandler) -> Callable[[], None]:
        """Call ``handler`` for every event whose name matches ``pattern``; return unsubscribe."""
        entry = (pattern, handler)
        with _SUBSCRIBING:
            self._handlers = (*self._handlers, entry)

        def unsubscribe() -> None:
            with _SUBSCRIBING:
                handlers = list(self._handlers)
                if entry in handlers:
                    handlers.remove(entry)
                    self._handlers = tuple(handlers)

        return unsubscribe

    def wants(self, name: str) -> bool:
        """Whether any handler listens for ``name`` (skip building costly fields if not)."""
        handlers = self._handlers
        if not handlers:
            return False
        return any(p == "*" or fnmatch.fnmatchcase(name, p) for p, _ in handlers)

    def emit(self, name: str, *, node: str | None = None, **fields: Any) -> Event | None:
        """Publish an event to every matching handler and return it (None if nobody listens)."""
        handlers = self._handlers
        if not handlers:
            return None
        event = Event(name=name, run_id=self.run_id, node=node, fields=fields)
        for pattern, handler in handlers:
            if pattern == "*" or fnmatch.fnmatchcase(name, pattern):
                try:
                    handler(event)
                except Exception:  # a broken observer must never break the run
                    pass
        return event

    def bind(self, node: str) -> NodeEvents:
        """Return an emitter that stamps every event with ``node``."""
        return NodeEvents(self, node)


class NodeEvents:
    """The event bus as one node sees it: events carry the node's path."""

    def __init__(self, bus: EventBus, node: str) -> None:
        self.bus = bus
        self.node = node

    def emit(self, name: str, **fields: Any) -> Event | None:
        """Publish an event stamped with this node's path."""
        return self.bus.emit(name, node=self.node, **fields)

    def wants(self, name: str) -> bool:
        """Whether any handler listens for ``name``."""
        return self.bus.wants(name)

    def subscribe(self, pattern: str, handler: EventHandler) -> Callable[[], None]:
        """Subscribe on the underlying bus."""
        return self.bus.subscribe(pattern, handler)
