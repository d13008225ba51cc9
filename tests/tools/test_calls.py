"""`ToolCall` and `ToolResult`: every provider shape, and arbitrary JSON never raises."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from jianmu.tools import ToolCall, ToolResult
from jianmu.tools.calls import new_call_id, render_output, truncate_text

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=12), children, max_size=5),
    max_leaves=20,
)
# Dicts that look like calls, so the interesting branches are reached, not only the fallback.
CALL_LIKE = st.fixed_dictionaries(
    {},
    optional={
        "id": JSON, "type": JSON, "name": JSON, "tool": JSON, "arguments": JSON | st.text(),
        "args": JSON, "input": JSON, "function": st.fixed_dictionaries(
            {}, optional={"name": JSON, "arguments": JSON | st.text()}
        ) | JSON,
    },
)


@settings(max_examples=200, deadline=None)
@given(JSON | CALL_LIKE)
def test_tool_call_from_dict_never_raises(data: Any) -> None:
    call = ToolCall.from_dict(data)
    # the name is kept as sent (never folded): the executor resolves it to a tool or refuses it
    assert isinstance(call.name, str)
    assert call.id
    call.arguments_json()
    assert ToolCall.from_list([call]) == [call]


@settings(max_examples=100, deadline=None)
@given(st.lists(JSON | CALL_LIKE, max_size=5))
def test_tool_call_from_list_never_raises_and_is_idempotent(items: list[Any]) -> None:
    calls = ToolCall.from_list(items)
    assert ToolCall.from_list(calls) == calls


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=20), JSON | CALL_LIKE, st.none() | st.text(max_size=10))
def test_tool_result_from_raw_never_raises(tool: str, raw: Any, error: str | None) -> None:
    result = ToolResult.from_raw(tool, raw, error=error, call_id="c1")
    assert result.is_error is (not result.ok)
    assert isinstance(result.text, str)
    message = result.to_message()
    assert message["role"] == "tool" and message["tool_call_id"] == "c1"
    result.truncate(5)


def test_openai_shape() -> None:
    call = ToolCall.from_dict({
        "id": "call_1", "type": "function",
        "function": {"name": "Calculator", "arguments": '{"expression": "2+3"}'},
    })
    # kept as sent: the executor resolves "Calculator" to the registered "calculator"
    assert call == ToolCall(name="Calculator", arguments={"expression": "2+3"}, id="call_1")
    assert call.to_openai() == {
        "id": "call_1", "type": "function",
        "function": {"name": "Calculator", "arguments": '{"expression": "2+3"}'},
    }


def test_anthropic_tool_use_block() -> None:
    call = ToolCall.from_dict(
        {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "x"}}
    )
    assert (call.name, call.arguments, call.id) == ("search", {"q": "x"}, "toolu_1")


def test_flat_shapes() -> None:
    a = ToolCall.from_dict({"name": "a", "arguments": {"x": 1}})
    b = ToolCall.from_dict({"tool": "b", "args": '{"y": 2}'})
    assert (a.name, a.arguments) == ("a", {"x": 1})
    assert (b.name, b.arguments) == ("b", {"y": 2})


def test_invalid_json_arguments_are_kept_raw() -> None:
    call = ToolCall.from_dict({"name": "calc", "arguments": "2+3"})
    assert call.arguments == "2+3"
    assert call.arguments_json() == "2+3"


def test_missing_ids_are_unique_and_empty_arguments_are_a_dict() -> None:
    ids = {ToolCall.from_dict({"name": "x"}).id for _ in range(50)}
    assert len(ids) == 50 and all(i.startswith("call_") for i in ids)
    assert ToolCall.from_dict({"name": "x", "arguments": ""}).arguments == {}
    assert ToolCall(name="x", id="").id.startswith("call_")
    assert new_call_id() != new_call_id()


def test_non_mapping_becomes_a_nameless_call() -> None:
    assert ToolCall.from_dict(["not", "a", "call"]).name == ""
    assert ToolCall.from_list(None) == []
    assert len(ToolCall.from_list({"name": "one"})) == 1


def test_with_id_and_from_list_keeps_instances() -> None:
    call = ToolCall(name="a", id="1")
    assert call.with_id("2").id == "2"
    assert ToolCall.from_list([call, {"name": "b"}])[0] is call


def test_from_raw_shapes() -> None:
    given_result = ToolResult(tool="t", ok=True, output=1)
    passed = ToolResult.from_raw("t", given_result, call_id="c", duration_ms=2.0)
    assert (passed.call_id, passed.duration_ms, passed.output) == ("c", 2.0, 1)
    explicit = ToolResult.from_raw("t", "partial", error="boom")
    assert (explicit.ok, explicit.error, explicit.output) == (False, "boom", "partial")
    exc = ToolResult.from_raw("t", ValueError("bad value"))
    assert (exc.ok, exc.error) == (False, "ValueError: bad value")
    ok_dict = ToolResult.from_raw("t", {"ok": True, "result": 5})
    assert (ok_dict.ok, ok_dict.output) == (True, 5)
    failed_dict = ToolResult.from_raw("t", {"ok": False})
    assert (failed_dict.ok, failed_dict.error) == (False, "the tool reported a failure")
    error_text = ToolResult.from_raw("t", "Error: file not found")
    assert (error_text.ok, error_text.error) == (False, "file not found")
    plain = ToolResult.from_raw("t", {"data": [1]})
    assert (plain.ok, plain.output) == (True, {"data": [1]})


def test_a_dict_with_an_ok_flag_and_data_of_its_own_keeps_its_data() -> None:
    """Slack's Web API answers ``{"ok": true, "channels": [...]}``: not a status envelope
    (no ``output`` or ``result``), so the model reads all of it, not an empty result."""
    listed = ToolResult.from_raw("t", {"ok": True, "channels": [{"id": "C1"}]})
    assert (listed.ok, listed.text) == (True, '{"ok": true, "channels": [{"id": "C1"}]}')
    refused = ToolResult.from_raw("t", {"ok": False, "error": "missing_scope",
                                        "needed": "chat:write"})
    assert (refused.ok, refused.text) == (False, 'Error: missing_scope {"needed": "chat:write"}')
    enveloped = ToolResult.from_raw("t", {"ok": False, "error": "nope", "result": None})
    assert (enveloped.ok, enveloped.text) == (False, "Error: nope")


def test_text_message_and_is_error() -> None:
    ok = ToolResult(tool="t", ok=True, output={"a": "é"}, call_id="c")
    assert ok.text == '{"a": "é"}' and not ok.is_error
    bad = ToolResult(tool="t", ok=False, error="nope", call_id="c")
    assert bad.text == "Error: nope" and bad.is_error
    assert bad.to_message() == {"role": "tool", "tool_call_id": "c", "name": "t",
                                "content": "Error: nope"}


def test_truncate_marks_the_cut() -> None:
    long = ToolResult(tool="t", ok=True, output="x" * 50)
    cut = long.truncate(10)
    assert cut.truncated and cut.output.startswith("x" * 10)
    assert "40 more characters" in cut.output
    assert long.truncate(100) is long
    assert long.truncate(None) is long
    failed = ToolResult(tool="t", ok=False, error="e" * 50)
    cut_failure = failed.truncate(10)  # a failure is bounded too (issue 34)
    assert cut_failure.truncated and not cut_failure.ok
    assert cut_failure.error.startswith("e" * 10) and "40 more characters" in cut_failure.error
    assert failed.truncate(100) is failed


def test_render_and_truncate_helpers() -> None:
    assert render_output(None) == ""
    assert render_output(b"\xffa") == "\ufffda"
    assert json.loads(render_output({"k": [1]})) == {"k": [1]}
    assert render_output({1, 2}) in ("[1, 2]", '"{1, 2}"', "{1, 2}")
    assert truncate_text("abc", 0) == ("abc", 0)
    assert truncate_text("abcdef", 2)[1] == 4


def test_a_result_whose_dict_keys_json_has_not_is_still_json() -> None:
    """A tool returning ``{(1, 2): date(...)}`` or a dict keyed by dates or enum members was
    shown as Python's repr (``{datetime.date(2020, 1, 1): 1}``); the keys are text now, the
    values as JSON writes them, and an iterator inside is still never drawn."""
    import datetime as dt
    import enum

    class Size(enum.Enum):
        SMALL = "s"

    assert json.loads(render_output({(1, 2): dt.date(2020, 1, 2)})) == {"(1, 2)": "2020-01-02"}
    assert json.loads(render_output({Size.SMALL: [{dt.date(2020, 1, 2): 3}], 4: None})) == {
        "s": [{"2020-01-02": 3}], "4": None}
    endless = (i for i in iter(int, 1))
    shown = json.loads(render_output({dt.date(2020, 1, 2): endless}))
    assert shown["2020-01-02"].startswith("<generator object")


def test_the_bytes_of_an_image_a_tool_returns_are_an_image_the_model_sees() -> None:
    # a tool's PNG bytes reached the model as text decoded with U+FFFD for each bad byte
    # ('\ufffdPNG\r\n\x1a\n...'): the image was lost and the model read noise as if it were text
    import base64

    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    image = ToolResult.from_raw("chart", png)
    assert image.ok and [(m.kind, m.mime_type) for m in image.media] == [("image", "image/png")]
    assert base64.b64decode(image.media[0].data) == png and "\ufffd" not in image.text
    jpeg = ToolResult.from_raw("photo", bytearray(b"\xff\xd8\xff\xe0" + bytes(64)))
    assert [m.mime_type for m in jpeg.media] == ["image/jpeg"]
    assert ToolResult.from_raw("t", "héllo".encode()).text == "héllo"  # UTF-8 text stays text
    webp = ToolResult.from_raw("t", b"RIFF\x00\x00\x00\x00WEBPVP8 ")
    assert [m.mime_type for m in webp.media] == ["image/webp"]
    assert not ToolResult.from_raw("t", b"RIFF\x00\x00\x00\x00WAVEfmt ").media  # audio, no
