"""What a run tells the outside world: named events on the run's bus, each with the run id, node
path and timestamp; and its OpenTelemetry spans — the GenAI attribute names, the tracer, and a
span helper.

Jianmu never sets the global tracer provider: a run uses the provider passed to it, else the
global API's once the application configured one, else the provider of a `jianmu.telemetry`
scope (``telemetry.exporter``: the CLI's commands that run trees open one), else none.
"""

from __future__ import annotations

import fnmatch
import functools
import threading
import time
from asyncio import CancelledError
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from opentelemetry.trace import Span, SpanContext, Tracer, TracerProvider


__all__ = (
    "CONTENT_CHARS",
    "ERROR_TYPE",
    "GEN_AI_AGENT_NAME",
    "GEN_AI_OPERATION_NAME",
    "GEN_AI_PROVIDER_NAME",
    "GEN_AI_REQUEST_MODEL",
    "GEN_AI_RESPONSE_FINISH_REASONS",
    "GEN_AI_RESPONSE_ID",
    "GEN_AI_RESPONSE_MODEL",
    "GEN_AI_SYSTEM",
    "GEN_AI_TOOL_CALL_ARGUMENTS",
    "GEN_AI_TOOL_CALL_ID",
    "GEN_AI_TOOL_CALL_RESULT",
    "GEN_AI_TOOL_NAME",
    "GEN_AI_TOOL_TYPE",
    "GEN_AI_USAGE_INPUT_TOKENS",
    "GEN_AI_USAGE_OUTPUT_TOKENS",
    "JIANMU_GUARD_DECISION",
    "JIANMU_REPLAYED",
    "JIANMU_RUN_ID",
    "SERVER_ADDRESS",
    "SERVER_PORT",
    "Event",
    "EventBus",
    "EventHandler",
    "EventSink",
    "chat_attributes",
    "clipped",
    "failed",
    "get_tracer",
    "record_answer",
    "replayed",
    "run_ended",
    "run_span",
    "span",
    "span_ids",
    "use_provider",
)


@dataclass(frozen=True, kw_only=True, slots=True)
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


class _Making:
    """An `Event` while `EventBus._publish` fills it: the same slots, without the frozen
    ``__setattr__`` (each field set through ``object.__setattr__`` costs a call and a name
    look-up); its class becomes `Event` once it is full. A third of the constructor's cost:
    a streamed run makes one per step and per piece of the model's text."""

    # Event's fields exactly: the class of an object may only change to one of the same layout
    __slots__ = ("fields", "name", "node", "run_id", "timestamp")


_now = time.time


_ROUTES_KEPT = 512
"""Event names a bus keeps its matching handlers for (`EventBus._matching`)."""


@functools.lru_cache(maxsize=4096)
def _glob_matches(name: str, pattern: str) -> bool:
    """``fnmatch.fnmatchcase``, remembered: a run's bus is new, its names and patterns not."""
    return fnmatch.fnmatchcase(name, pattern)


_NOBODY: tuple[tuple[Any, ...], tuple[Any, ...]] = ((None,), ())
"""`EventBus._all` when some pattern is not "*": a tuple no bus's handlers ever are."""

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
        self._everything = False  # whether a handler takes every event ("*"): `wants` at once
        # per event name, the handlers whose patterns match it, with the `_handlers` tuple they
        # were picked from: a pattern is matched once per name, not on every emit and `wants`
        # (a glob match costs ~2 µs here), and an entry picked before a (un)subscribe is told
        # by that tuple, so a thread emitting meanwhile never leaves a stale one behind
        self._routes: dict[str, tuple[tuple[tuple[str, EventHandler], ...],
                                      tuple[EventHandler, ...]]] = {}
        self._all: tuple[tuple[tuple[str, EventHandler], ...], tuple[EventHandler, ...]] = (
            _NOBODY)
        self.readers = 0
        """Streams reading every event (`ReactiveRunner.stream`), which `asked_for` counts."""

    def subscribe(self, pattern: str, handler: EventHandler) -> Callable[[], None]:
        """Call ``handler`` for every event whose name matches ``pattern``; return unsubscribe."""
        entry = (pattern, handler)
        with _SUBSCRIBING:
            self._listen((*self._handlers, entry))

        def unsubscribe() -> None:
            with _SUBSCRIBING:
                handlers = list(self._handlers)
                if entry in handlers:
                    handlers.remove(entry)
                    self._listen(tuple(handlers))

        return unsubscribe

    def _listen(self, handlers: tuple[tuple[str, EventHandler], ...]) -> None:
        """Take ``handlers`` as the bus's (under `_SUBSCRIBING`)."""
        self._everything = any(p == "*" for p, _ in handlers)
        # when every pattern is "*" (a stream, a recorder), each event goes to all of them:
        # nothing to match, not even once per name
        self._all = (handlers, tuple(h for _, h in handlers)) if all(
            p == "*" for p, _ in handlers) else _NOBODY
        self._handlers = handlers  # last: an emit that sees it finds the rest set

    def wants(self, name: str) -> bool:
        """Whether any handler listens for ``name`` (skip building costly fields if not)."""
        if self._everything:
            return True
        handlers = self._handlers
        if not handlers:
            return False
        return bool(self._matching(handlers, name))

    def _matching(
        self, handlers: tuple[tuple[str, EventHandler], ...], name: str
    ) -> tuple[EventHandler, ...]:
        """The handlers of ``handlers`` whose patterns match ``name``, in subscription order."""
        every = self._all
        if every[0] is handlers:
            return every[1]
        routes = self._routes
        hit = routes.get(name)
        if hit is not None and hit[0] is handlers:
            return hit[1]
        matched = tuple(h for p, h in handlers if p == "*" or _glob_matches(name, p))
        if len(routes) >= _ROUTES_KEPT:  # names made up at run time: the cache stays small
            routes.clear()
        routes[name] = (handlers, matched)
        return matched

    def asked_for(self, name: str) -> bool:
        """Whether someone reads ``name`` in particular: a stream of the run, or a handler
        subscribed to exactly ``name`` (a recorder of everything, or of ``llm.call.*``, asks
        for no kind). What a costly way of making an event (the model streaming its text)
        waits for."""
        return bool(self.readers) or any(p == name for p, _ in self._handlers)

    def emit(self, name: str, *, node: str | None = None, **fields: Any) -> Event | None:
        """Publish an event to every matching handler and return it (None if nobody listens)."""
        handlers = self._handlers
        if not handlers:
            return None
        return self._publish(handlers, name, node, fields)

    def _publish(
        self, handlers: tuple[tuple[str, EventHandler], ...], name: str, node: str | None,
        fields: dict[str, Any],
    ) -> Event | None:
        """Make the event and hand it to every matching handler (None, and no event made,
        when no handler's pattern matches it)."""
        every = self._all  # (what `_matching` does first, without a call per event)
        matched = every[1] if every[0] is handlers else self._matching(handlers, name)
        if not matched:
            return None
        event: Any = _Making()  # the event made here, not in a function of its own: every event
        event.name = name
        event.run_id = self.run_id
        event.node = node
        event.timestamp = _now()
        event.fields = fields
        event.__class__ = Event
        for handler in matched:
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
        bus = self.bus
        if type(bus) is not EventBus:  # a bus with an emit of its own (a sub-agent's)
            return bus.emit(name, node=self.node, **fields)
        handlers = bus._handlers
        if not handlers:
            return None
        # the fields as packed here, not unpacked into `EventBus.emit` to be packed again
        return bus._publish(handlers, name, self.node, fields)

    def emit_each(self, name: str, key: str, values: Iterable[Any]) -> None:
        """Publish one ``name`` event per value, its fields ``{key: value}``, in order: what
        as many `emit` calls do (each event made and handed over before the next), without
        a call and a keyword dict per event (a model's streamed text is one per word)."""
        bus = self.bus
        if type(bus) is not EventBus:
            for value in values:
                bus.emit(name, node=self.node, **{key: value})
            return
        node, publish = self.node, bus._publish
        for value in values:
            handlers = bus._handlers  # read per event, as `emit` does: a handler may leave
            if handlers:
                publish(handlers, name, node, {key: value})

    def wants(self, name: str) -> bool:
        """Whether any handler listens for ``name``."""
        return self.bus.wants(name)

    def asked_for(self, name: str) -> bool:
        """Whether someone reads ``name`` in particular (`EventBus.asked_for`)."""
        return self.bus.asked_for(name)

    def subscribe(self, pattern: str, handler: EventHandler) -> Callable[[], None]:
        """Subscribe on the underlying bus."""
        return self.bus.subscribe(pattern, handler)


# -- spans -------------------------------------------------------------------------------------

GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE = "gen_ai.tool.type"
GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_SYSTEM = "gen_ai.system"
"""The provider's name under the conventions' name before 1.37, which backends still read."""
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
SERVER_ADDRESS = "server.address"
"""The host a model call went to (a CLIENT span's, as the conventions recommend)."""
SERVER_PORT = "server.port"
_DEFAULT_PORTS = {"https": 443, "http": 80}
ERROR_TYPE = "error.type"
JIANMU_RUN_ID = "jianmu.run.id"
JIANMU_GUARD_DECISION = "jianmu.guard.decision"
JIANMU_REPLAYED = "jianmu.replayed"


_scoped_provider: TracerProvider | None = None
"""The provider of the open `jianmu.telemetry.tracing` scope: a process-wide fallback (runs
are built in worker threads too), below the global provider an application set."""


def use_provider(provider: TracerProvider | None) -> TracerProvider | None:
    """Make ``provider`` the fallback of runs given none (None: no fallback); return the
    previous one, for the scope that set it to put back."""
    global _scoped_provider
    previous, _scoped_provider = _scoped_provider, provider
    return previous


def get_tracer(
    tracer_provider: TracerProvider | None = None, *, enabled: bool = True
) -> Tracer | None:
    """The tracer for Jianmu's spans: from ``tracer_provider``, else the global API's when the
    application configured one, else the open `jianmu.telemetry` scope's provider.

    Returns None (no spans, no cost) when tracing is disabled, or when there is no provider
    at all when the run is built.
    """
    if not enabled:
        return None
    if tracer_provider is not None:
        return tracer_provider.get_tracer("jianmu")
    from opentelemetry import trace

    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        scoped = _scoped_provider  # the application's own provider comes first: never replaced
        return None if scoped is None else scoped.get_tracer("jianmu")
    return trace.get_tracer("jianmu")


def chat_attributes(llm: Any, model: str, agent: str) -> dict[str, Any]:
    """A ``chat`` span's attributes before the model answers: with a provider's server, its
    ``server.address`` and ``server.port`` (host and port alone: never a password in the URL)."""
    provider = getattr(llm, "provider_name", "") or "_OTHER"  # the conventions' "none known"
    attributes: dict[str, Any] = {
        GEN_AI_OPERATION_NAME: "chat", GEN_AI_PROVIDER_NAME: provider, GEN_AI_SYSTEM: provider,
        GEN_AI_REQUEST_MODEL: model, GEN_AI_AGENT_NAME: agent,
    }
    url = getattr(llm, "base_url", None)
    if isinstance(url, str) and url:
        from urllib.parse import urlsplit

        try:
            parts = urlsplit(url)
            host, port = parts.hostname, parts.port or _DEFAULT_PORTS.get(parts.scheme)
        except ValueError:  # a port that is no number: the server is not named
            return attributes
        if host:
            attributes[SERVER_ADDRESS] = host
            if port is not None:
                attributes[SERVER_PORT] = port
    return attributes


def replayed() -> None:
    """Say on the current span, a model call's or a tool call's, that its durable step came
    back from the record of an earlier attempt of the run (recovered): nothing was sent or
    run again, and no token spent, which that attempt's span counted."""
    from opentelemetry import trace

    current = trace.get_current_span()
    attributes = getattr(current, "attributes", None) or {}
    if current.is_recording() and attributes.get(GEN_AI_OPERATION_NAME) in (
            "chat", "execute_tool"):
        current.set_attribute(JIANMU_REPLAYED, True)


def record_answer(current: Span | None, response: Any) -> None:
    """What answered, why it stopped and its tokens, on a ``chat`` span; a count the server
    did not give stays off (unknown, not 0), as does that of a replayed answer (`replayed`),
    which spent none."""
    if current is None:
        return
    if response.model:
        current.set_attribute(GEN_AI_RESPONSE_MODEL, response.model)
    if response.response_id:
        current.set_attribute(GEN_AI_RESPONSE_ID, response.response_id)
    if response.finish_reason:
        current.set_attribute(GEN_AI_RESPONSE_FINISH_REASONS, (response.finish_reason,))
    if response.usage is not None and not (
            getattr(current, "attributes", None) or {}).get(JIANMU_REPLAYED):
        current.set_attribute(GEN_AI_USAGE_INPUT_TOKENS, response.usage.input_tokens)
        current.set_attribute(GEN_AI_USAGE_OUTPUT_TOKENS, response.usage.output_tokens)


CONTENT_CHARS = 4000
"""The most of a call's content (its arguments, its result, a reason) a span holds, with
``capture_content``: a backend stores each attribute whole, and an argument may be megabytes."""


def clipped(text: str) -> str:
    """``text`` cut to `CONTENT_CHARS`, an ellipsis saying it was cut."""
    return text if len(text) <= CONTENT_CHARS else text[: CONTENT_CHARS - 1] + "…"


def failed(current: Span | None, error_type: str) -> None:
    """Mark ``current`` as ended in an error of the low-cardinality kind ``error_type`` (an
    exception's class name, a run's status): no message, which may quote content."""
    if current is None:
        return
    from opentelemetry.trace import StatusCode

    current.set_attribute(ERROR_TYPE, error_type)
    current.set_status(StatusCode.ERROR)


def run_ended(current: Span, status: str) -> tuple[SpanContext, ...]:
    """Record how a run ended (a `RunStatus` value) on its span: a failure and a timeout are
    errors; a run that waits for a person, or was cancelled as asked, is not. Returns what
    the runner's next run links to: this span when the run suspended, else nothing."""
    current.set_attribute("jianmu.run.status", status)
    if status in ("failure", "timeout"):
        failed(current, status)
    return (current.get_span_context(),) if status == "suspended" else ()


def span_ids(current: Span) -> dict[str, str]:
    """The ids of a run's span as its checkpoint keeps them: the run restored from it, in any
    process, links to that span (`jianmu.runtime.checkpoint.links_from`)."""
    context = current.get_span_context()
    return {"trace_id": format(context.trace_id, "032x"),
            "span_id": format(context.span_id, "016x")}


@contextmanager
def run_span(
    tracer: Tracer | None, name: str, attributes: Mapping[str, Any], open_spans: dict[Any, Any],
    links: Sequence[SpanContext] = (), opened: Callable[[Span], None] | None = None,
) -> Iterator[Span | None]:
    """A run's span (`span`): the spans of its nodes still open when it ends (``open_spans``,
    an agent that waits for a person) end first, inside it. ``opened`` is told of the span as
    it opens."""
    with span(tracer, name, attributes, links=links) as current:
        if current is not None and opened is not None:
            opened(current)
        try:
            yield current
        finally:
            for left in reversed(open_spans.values()):  # the latest (innermost) first
                left.end()
            open_spans.clear()


@contextmanager
def span(
    tracer: Tracer | None, name: str, attributes: Mapping[str, Any] | None = None, *,
    client: bool = False, links: Sequence[SpanContext] = (),
    pauses: tuple[type[BaseException], ...] = (),
) -> Iterator[Span | None]:
    """Open a span (or nothing, when ``tracer`` is None); an exception raised inside makes it an
    error of ``error.type`` its class, never its message.

    ``client``: a call to another service (a model's server), which the conventions make a
    ``CLIENT`` span; ``links``: spans this one goes on from (the run a resumed run resumes);
    ``pauses``: exceptions that say the work waits for a person (``jianmu.suspended``), not
    that it failed; nor does work stopped from outside (``jianmu.stopped``), which is
    cancelled.
    """
    if tracer is None:
        yield None
        return
    from opentelemetry.trace import Link, SpanKind, Status, StatusCode

    with tracer.start_as_current_span(
        name, attributes=dict(attributes or {}), record_exception=False,
        set_status_on_exception=False, kind=SpanKind.CLIENT if client else SpanKind.INTERNAL,
        links=[Link(context) for context in links],
    ) as current:
        try:
            yield current
        except pauses:
            current.set_attribute("jianmu.suspended", True)
            raise
        except CancelledError:  # stopped from outside (a pre-empting branch, `cancel()`, the
            # run's timeout): whatever stopped it says so, on its own span; the call did not fail
            current.set_attribute("jianmu.stopped", True)
            raise
        except BaseException as exc:
            # the kind only: the words of an error may quote content (what a summary model
            # was sent, a secret), which stays off spans unless the config opts in
            current.set_attribute(ERROR_TYPE, type(exc).__name__)
            current.set_status(Status(StatusCode.ERROR))
            raise
