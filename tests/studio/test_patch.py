"""The stream's patches (`jianmu.studio.patch`): applied to the view a page has, each gives the
view the server has, whatever changed in it (a type too: 1, 1.0 and True are equal in Python,
not in the page)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from jianmu.studio.patch import apply_patch, diff

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner,
                                                                 max_size=4),
    max_leaves=20)


def _typed(value: Any) -> str:
    """The value as JSON text: what the page reads (``1`` and ``true`` differ there)."""
    return json.dumps(value, sort_keys=True)


@settings(max_examples=300, deadline=None)
@given(_json, _json)
def test_a_patch_turns_the_old_view_into_the_new(old: Any, new: Any) -> None:
    before = json.loads(json.dumps(old))
    patch = diff(old, new)
    if patch is None:
        assert _typed(old) == _typed(new)
        return
    json.dumps(patch)  # sent as JSON
    assert _typed(apply_patch(old, patch)) == _typed(new)
    assert old == before  # the page's old view is left as it was


def test_a_list_that_grew_is_sent_its_new_items_only() -> None:
    old = {"timeline": [{"n": i} for i in range(100)], "status": "running"}
    new = {"timeline": [*old["timeline"], {"n": 100}], "status": "success"}
    assert diff(old, new) == {"o": {"timeline": {"n": 101, "a": {"100": {"=": {"n": 100}}}},
                                    "status": {"=": "success"}}}
    assert diff(new, new) is None
    assert diff({"a": 1}, {"a": True}) == {"o": {"a": {"=": True}}}
    assert diff({"a": 1, "b": 2}, {"a": 1}) == {"o": {}, "d": ["b"]}
    assert diff({"a": 0.0}, {"a": -0.0}) == {"o": {"a": {"=": -0.0}}}
