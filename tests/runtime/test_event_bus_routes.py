"""The event bus matches each event name against the handlers' patterns once, and a
(un)subscribe is seen by the very next emit: from this thread or another one emitting
meanwhile."""

from __future__ import annotations

import threading

from jianmu.runtime.events import Event, EventBus, NodeEvents


def test_patterns_route_each_name_to_the_handlers_that_match_it_in_order() -> None:
    bus = EventBus("run-1")
    got: list[tuple[str, str]] = []
    bus.subscribe("tool.*", lambda e: got.append(("tools", e.name)))
    bus.subscribe("*", lambda e: got.append(("all", e.name)))
    bus.subscribe("tool.call.started", lambda e: got.append(("started", e.name)))
    for _ in range(2):  # the second time from what the first matched
        bus.emit("tool.call.started")
        bus.emit("llm.call.started")
    assert got == [("tools", "tool.call.started"), ("all", "tool.call.started"),
                   ("started", "tool.call.started"), ("all", "llm.call.started")] * 2
    assert bus.wants("tool.call.completed") and bus.wants("anything")


def test_a_name_no_pattern_matches_makes_no_event() -> None:
    bus = EventBus("run-1")
    got: list[Event] = []
    bus.subscribe("tool.*", got.append)
    assert not bus.wants("llm.call.started")
    assert bus.emit("llm.call.started", model="m") is None
    assert NodeEvents(bus, "a").emit("run.ticked", tick=1) is None
    made = NodeEvents(bus, "a").emit("tool.call.started", tool="t")
    assert got == [made] and made is not None and made.node == "a"


def test_a_subscription_after_a_name_was_routed_gets_its_next_event() -> None:
    bus = EventBus("run-1")
    first: list[str] = []
    later: list[str] = []
    bus.subscribe("tool.*", lambda e: first.append(e.name))
    bus.emit("tool.call.started")  # routed: "tool.call.started" -> the first handler
    assert not bus.wants("llm.call.started")  # routed to nobody
    leave = bus.subscribe("*", lambda e: later.append(e.name))
    assert bus.wants("llm.call.started")
    bus.emit("tool.call.started")
    bus.emit("llm.call.started")
    assert later == ["tool.call.started", "llm.call.started"]
    leave()
    bus.emit("llm.call.started")
    bus.emit("tool.call.started")
    assert later == ["tool.call.started", "llm.call.started"]
    assert first == ["tool.call.started"] * 3
    assert not bus.wants("llm.call.started")


def test_only_every_event_handlers_and_a_pattern_added_later() -> None:
    """A bus whose handlers all take every event routes nothing; one with a pattern besides
    routes again, and losing the pattern goes back."""
    bus = EventBus("run-1")
    seen: list[str] = []
    bus.subscribe("*", lambda e: seen.append("a:" + e.name))
    bus.emit("x.y")
    leave = bus.subscribe("z.*", lambda e: seen.append("z:" + e.name))
    bus.emit("x.y")
    bus.emit("z.w")
    leave()
    bus.emit("z.w")
    assert seen == ["a:x.y", "a:x.y", "a:z.w", "z:z.w", "a:z.w"]


def test_made_up_names_keep_the_routes_small() -> None:
    bus = EventBus("run-1")
    got: list[str] = []
    bus.subscribe("custom.*", lambda e: got.append(e.name))
    for i in range(3000):
        bus.emit(f"custom.{i}")
        bus.emit(f"other.{i}")
    assert len(got) == 3000 and got[-1] == "custom.2999"
    assert len(bus._routes) <= 512


def test_a_subscription_made_while_another_thread_emits_is_never_left_out() -> None:
    """A thread emitting the same name all along may route it from the handlers as they were
    a moment before a subscribe: the next emit after the subscribe still reaches the new
    handler, every time (a route kept from before would leave it out for good)."""
    bus = EventBus("run-1")
    bus.subscribe("busy.*", lambda e: None)  # a pattern: names are routed, not sent to all
    stop = threading.Event()

    def emitting() -> None:
        while not stop.is_set():
            bus.emit("busy.name")

    thread = threading.Thread(target=emitting, daemon=True)
    thread.start()
    try:
        for _ in range(300):
            got: list[Event] = []
            leave = bus.subscribe("busy.*", got.append)
            mine = bus.emit("busy.name", mine=True)
            assert mine is not None and mine in got
            leave()
            count = len(got)
            bus.emit("busy.name", after=True)
            assert all(not e.fields.get("after") for e in got[count:])
    finally:
        stop.set()
        thread.join()
