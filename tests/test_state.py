"""StateManager: reducers, atomic updates, namespaces, snapshots, subscriptions."""

from __future__ import annotations

import json
import operator
import threading
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from jianmu.errors import StateValidationError
from jianmu.nodes import AgentState
from jianmu.state import StateManager, merge_counts


class Item(BaseModel):
    role: str
    content: str


class S(BaseModel):
    messages: Annotated[list[Item], operator.add] = Field(default_factory=list)
    count: int = 0
    effects: Annotated[dict[str, int], merge_counts] = Field(default_factory=dict)
    note: str | None = None


def test_reducers_append_and_merge() -> None:
    state = StateManager(S)
    state.append_port_messages({"role": "user", "content": "hi"})
    state.append_port_messages([Item(role="assistant", content="yo")])
    state.update({"effects": {"http": 1}})
    state.update({"effects": {"http": 2, "file_write": 1}})
    assert [m.content for m in state.get("messages")] == ["hi", "yo"]
    assert isinstance(state.get("messages")[0], Item)
    assert state.get("effects") == {"http": 3, "file_write": 1}
    state.replace({"effects": {}})
    assert state.get("effects") == {}


def test_a_value_shaped_like_an_append_is_stored_as_given() -> None:
    state = StateManager()
    state.update({"pair": ("extend", [1])})
    assert state.get("pair") == ("extend", [1])


def test_any_two_argument_callable_is_a_reducer() -> None:
    class M(BaseModel):
        best: Annotated[int, max] = 0

    state = StateManager(M)
    for value in (3, 1, 7, 2):
        state.write_port("best", value)
    assert state.get("best") == 7


def test_update_is_atomic() -> None:
    state = StateManager(S, {"count": 1, "note": "keep"})
    with pytest.raises(StateValidationError) as info:
        state.update({"note": "changed", "count": "many"})
    message = str(info.value)
    assert "'count'" in message and "str" in message and "int" in message
    assert state.get("note") == "keep" and state.get("count") == 1
    with pytest.raises(StateValidationError, match="not a field"):
        state.update({"nope": 1})


def test_append_validates_only_new_items_and_reports_bad_ones() -> None:
    state = StateManager(S)
    with pytest.raises(StateValidationError, match="messages"):
        state.append_port_messages([{"role": "user"}])
    assert state.get("messages") == []


def test_checking_messages_refuses_what_appending_would_and_writes_nothing() -> None:
    class Plain(BaseModel):
        messages: list[Item] = Field(default_factory=list)

    for state in (StateManager(S), StateManager(Plain)):
        state.root.check_port_messages({"role": "user", "content": "hi"})
        state.root.check_port_messages([Item(role="assistant", content="yo")])
        with pytest.raises(StateValidationError, match="messages"):
            state.root.check_port_messages([{"role": "user"}])
        with pytest.raises(StateValidationError, match="not a field"):
            state.root.check_port_messages({"role": "user", "content": "hi"}, key="nope")
        assert state.get("messages") == []
    free = StateManager()
    free.root.check_port_messages({"role": "user", "content": "hi"})
    with pytest.raises(StateValidationError, match="JSON"):
        free.root.check_port_messages(object())
    assert free.get("messages") is None


def test_lax_validation_coerces() -> None:
    state = StateManager(S)
    state.write_port("count", "3")
    assert state.get("count") == 3


def test_free_form_state_accepts_json_values_only() -> None:
    state = StateManager()
    state.update({"a": {"b": [1, 2]}, "c": None})
    state.append_port_messages({"role": "user", "content": "x"})
    assert state.get("a") == {"b": [1, 2]} and state.get("missing", 5) == 5
    with pytest.raises(StateValidationError, match="JSON"):
        state.write_port("bad", object())
    assert "bad" not in state.to_dict()


def test_namespaces_are_isolated_and_clearable() -> None:
    state = StateManager(S)
    a = state.scope("skill_runtime.Research_2_1_0")
    b = state.scope("skill_runtime.Research_2_1_1")
    a.write_port("count", 5)
    a.append_port_messages({"role": "user", "content": "in a"})
    assert b.get("count") == 0 and b.get("messages") == []
    assert state.get("count") == 0
    assert a.scope("inner").namespace == "skill_runtime.Research_2_1_0.inner"
    a.scope("inner").write_port("count", 9)
    assert state.namespaces() == [
        "skill_runtime.Research_2_1_0",
        "skill_runtime.Research_2_1_0.inner",
    ]
    state.clear_namespace("skill_runtime.Research_2_1_0")
    assert state.namespaces() == []
    assert a.get("count") == 0  # a cleared namespace reads as defaults


def test_snapshot_restore_round_trip() -> None:
    state = StateManager(S)
    state.append_port_messages({"role": "user", "content": "hello"})
    state.update({"count": 2, "effects": {"http": 1}})
    state.scope("ns.one").update({"note": "scoped"})
    snap = state.snapshot()
    text = json.dumps(snap)
    other = StateManager(S)
    other.restore(json.loads(text))
    assert other.snapshot() == snap
    assert isinstance(other.get("messages")[0], Item)
    assert other.scope("ns.one").get("note") == "scoped"
    with pytest.raises(StateValidationError):
        other.restore({"version": 1, "root": {"count": "x"}})
    assert other.get("count") == 2  # a failed restore changes nothing


def test_subscribe_and_unsubscribe() -> None:
    state = StateManager(S)
    seen: list[frozenset[str]] = []
    unsubscribe = state.subscribe(seen.append)
    state.update({"count": 1, "note": "x"})
    state.scope("ns").write_port("count", 2)
    with pytest.raises(StateValidationError):
        state.update({"count": "bad"})
    unsubscribe()
    state.write_port("count", 3)
    assert seen == [frozenset({"count", "note"}), frozenset({"ns/count"})]


def test_updates_from_many_threads() -> None:
    state = StateManager(S)

    def work() -> None:
        for _ in range(200):
            state.append_port_messages({"role": "user", "content": "x"})
            state.update({"effects": {"n": 1}})

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(state.get("messages")) == 800
    assert state.get("effects") == {"n": 800}


def test_initial_values_are_validated() -> None:
    with pytest.raises(StateValidationError):
        StateManager(S, {"count": "x"})


def test_replace_touches_only_the_given_keys() -> None:
    state = StateManager(S, {"count": 4})
    state.append_port_messages({"role": "user", "content": "keep me"})
    state.replace({"note": "x"})
    assert state.get("count") == 4 and len(state.get("messages")) == 1


def test_mutable_defaults_are_fresh_per_state_and_immutable_ones_shared() -> None:
    from dataclasses import dataclass, field

    from jianmu.llm.messages import Usage

    @dataclass(frozen=True)
    class Frozen:
        n: int = 0

    @dataclass(frozen=True)
    class Holder:
        items: list[int] = field(default_factory=list)

    @dataclass
    class Loose:
        n: int = 0

    class D(BaseModel):
        usage: Annotated[Usage, operator.add] = Field(default_factory=Usage)
        frozen: Frozen = Field(default_factory=Frozen)
        holder: Holder = Field(default_factory=Holder)
        loose: Loose = Field(default_factory=Loose)
        items: list[int] = Field(default_factory=list)
        note: str = "x"

    one, two = StateManager(D), StateManager(D)
    # an object no one can change serves every state, as a scalar default does
    assert one.get("usage") is two.get("usage") and one.get("usage") == Usage()
    assert one.get("frozen") is two.get("frozen")
    # anything that holds or is a mutable value is made for each state
    assert one.get("holder") is not two.get("holder")
    assert one.get("loose") is not two.get("loose")
    assert one.get("items") is not two.get("items")
    assert list(one.to_dict()) == ["usage", "frozen", "holder", "loose", "items", "note"]
    one.update({"usage": Usage(input_tokens=3)})
    assert one.get("usage").input_tokens == 3 and two.get("usage") == Usage()
    assert one.scope("ns").get("items") is not two.scope("ns").get("items")


def test_update_takes_any_mapping_and_keeps_no_reference_to_it() -> None:
    from types import MappingProxyType

    state = StateManager(S)
    seen: list[frozenset[str]] = []
    state.subscribe(seen.append)
    values = {"count": 2, "note": "a"}
    state.update(values)
    values["count"] = 9  # the caller's dict is read once, never kept
    state.scope("ns").update(MappingProxyType({"note": "b"}))
    state.replace(MappingProxyType({"count": 5}))
    assert state.get("count") == 5 and state.get("note") == "a"
    assert state.scope("ns").get("note") == "b"
    assert seen == [frozenset({"count", "note"}), frozenset({"ns/note"}), frozenset({"count"})]


def test_a_subscriber_removed_while_notified_misses_no_other_and_later_writes() -> None:
    state = StateManager(S)
    seen: list[str] = []

    def first(keys: frozenset[str]) -> None:
        seen.append("first")
        state.unsubscribe(first)  # from inside a notification
        state.unsubscribe(first)  # twice: nothing left to remove, no error

    state.subscribe(first)
    state.subscribe(lambda keys: seen.append("second"))
    twice = seen.append
    state.subscribe(twice)
    state.subscribe(twice)
    state.update({"count": 1})
    assert seen[:2] == ["first", "second"] and seen.count(frozenset({"count"})) == 2
    seen.clear()
    state.unsubscribe(twice)  # one subscription of it goes, the other stays
    state.update({"count": 2})
    assert seen == ["second", frozenset({"count"})]


@pytest.mark.parametrize("schema", [{"messages": []}, AgentState(), "AgentState"])
def test_a_schema_that_is_not_a_model_class_is_refused_saying_what_goes_where(
    schema: Any,
) -> None:
    # StateManager({"messages": [...]}) failed with "cannot create weak reference to 'dict'
    # object": the initial values given where the schema goes
    with pytest.raises(TypeError, match=r"schema must be a pydantic model class .* or None, "
                       r"got .*; initial values go second: StateManager\(AgentState, \{"):
        StateManager(schema)


@pytest.mark.parametrize("given", ["x", None, 3, ["x"]])
def test_update_replace_and_initial_refuse_what_is_no_mapping_saying_what_they_take(
        given: Any) -> None:
    state = StateManager(S, {"count": 1})
    for write, where in ((state.update, "update"), (state.replace, "replace")):
        with pytest.raises(TypeError, match=rf"^{where}\(\) takes a mapping of state keys to "
                                            r"values, e\.g\. \{'key': value\}, got "):
            write(given)
    assert state.get("count") == 1  # nothing written
    if given is not None:  # None is no initial values
        with pytest.raises(TypeError, match=r"^StateManager\(schema, initial\) takes a mapping"):
            StateManager(S, given)
