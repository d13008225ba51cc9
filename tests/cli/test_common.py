"""What every command shares (jianmu/_cli/common.py): `--input` parsing, exit codes, and how
approval requests are shown: full arguments, made visible."""

from __future__ import annotations

import io
import json
import tomllib
from pathlib import Path

import pytest
from rich.console import Console

from jianmu._cli.common import (
    EXTRAS,
    LONG_ARGUMENTS,
    CLIError,
    ExitCode,
    heading,
    make_console,
    missing_extra,
    parse_inputs,
    pretty_json,
    print_request,
    visible,
)
from jianmu.runtime import ApprovalRequest


def test_strings_and_json_values() -> None:
    got = parse_inputs(["folder=src", "n:=3", "tags:=[\"a\", \"b\"]", "eq=a=b", "empty="])
    assert got == {"folder": "src", "n": 3, "tags": ["a", "b"], "eq": "a=b", "empty": ""}


@pytest.mark.parametrize(("pair", "message"), [
    ("novalue", "write key=value"),
    ("=x", "the key before '=' is empty"),
    ("n:={oops", "the value after ':=' is not JSON"),
])
def test_bad_pairs_say_what_to_write(pair: str, message: str) -> None:
    with pytest.raises(CLIError, match=message) as info:
        parse_inputs([pair])
    assert info.value.code is ExitCode.USAGE


def test_exit_codes_are_stable() -> None:
    assert [int(c) for c in ExitCode] == [0, 1, 2, 3, 4]



def test_every_extra_the_commands_name_is_one_pip_can_install() -> None:
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    assert set(EXTRAS.values()) <= set(extras)
    assert missing_extra(ModuleNotFoundError("no", name="uvicorn.config")).extra == "studio"
    assert missing_extra(ModuleNotFoundError("no", name="yaml")) is None


# -- approval requests -------------------------------------------------------------------------

HIDDEN = "echo 'listing files for you'" + " " * 300 + "; echo PWNED > pwned.txt"


def _request(arguments: object, **payload: object) -> ApprovalRequest:
    shown = json.dumps(arguments)
    return ApprovalRequest(
        id="call_1", summary=f"bash({shown[:200]}…)",
        payload={"tool": "bash", "arguments": arguments, "reason": "bash asks first",
                 "rule": None, "fingerprint": "abc123", "asked_by": "guard", **payload},
    )


def _printed(request: ApprovalRequest, *, terminal: bool = False) -> str:
    out = io.StringIO()
    console = Console(file=out, width=80, force_terminal=terminal, color_system=None,
                      highlight=False, emoji=False)
    print_request(console, heading("approval needed ", request), request)
    return out.getvalue()


def test_the_part_after_the_summary_cut_is_shown() -> None:
    request = _request({"command": HIDDEN})
    assert "PWNED" not in request.summary
    text = _printed(request)
    assert text.splitlines()[0].startswith("approval needed call_1: bash(")
    assert "  tool: bash\n" in text
    assert f'"command": {json.dumps(HIDDEN)}' in text  # the whole value, spaces kept
    assert "  reason: bash asks first\n" in text
    assert "abc123" not in text and "asked_by" not in text  # the guard's bookkeeping
    assert "rule" not in text  # unset


def test_soft_wrap_keeps_long_lines_whole_even_in_a_terminal() -> None:
    text = _printed(_request({"command": HIDDEN}), terminal=True)
    assert json.dumps(HIDDEN) in text


def test_control_characters_and_markup_are_shown_not_obeyed() -> None:
    value = "ok\x1b[2K\x1b[1A\r\u202e\u200bgone\x9b[31m [bold]loud[/bold] [red] :smile: 中文"
    text = _printed(_request({"command": value, "[b]key[/b]": "\x07"}))
    assert "\x1b" not in text and "\u202e" not in text and "\x9b" not in text
    assert "\\u001b[2K\\u001b[1A\\r\\u202e\\u200bgone\\u009b[31m" in text
    assert "[bold]loud[/bold] [red] :smile: 中文" in text  # literal, not restyled or emoji
    assert '"[b]key[/b]": "\\u0007"' in text


def test_markup_in_the_summary_and_id_is_literal() -> None:
    request = ApprovalRequest(id="call_[red]x", summary="run([bold]\x1b[0m)", payload={})
    text = _printed(request)
    assert text == "approval needed call_[red]x: run([bold]\\u001b[0m)\n"


def test_very_long_arguments_are_shown_in_full_with_their_length() -> None:
    value = "x" * (LONG_ARGUMENTS + 500) + " THE END"
    shown = pretty_json({"data": value})
    text = _printed(_request({"data": value}))
    assert f"arguments ({len(shown)} characters, shown in full):" in text
    assert value in text
    assert "characters, shown in full" not in _printed(_request({"data": "short"}))


def test_other_payload_keys_are_listed_as_details() -> None:
    request = ApprovalRequest(id="r1", kind="deploy", summary="deploy v2",
                              payload={"target": "prod", "steps": ["build", "push\x1b"]})
    text = _printed(request)
    assert "  details:\n" in text
    assert '"target": "prod"' in text and '"push\\u001b"' in text


def test_pretty_json_keeps_unicode_and_escapes_invisible_characters() -> None:
    assert pretty_json({"a": "中文\u2028\x7f"}) == '{\n  "a": "中文\\u2028\\u007f"\n}'
    loop: list[object] = []
    loop.append(loop)
    assert pretty_json(loop) == "[[...]]"  # a circular value still prints


def test_visible_leaves_printable_text_alone() -> None:
    assert visible("plain text, 中文 ✓") == "plain text, 中文 ✓"
    assert visible("a\tb\nc\U000e0041") == "a\\tb\\nc\\U000e0041"


def test_the_cli_console_does_not_replace_emoji_codes() -> None:
    console = make_console()
    with console.capture() as captured:
        console.print(":smile:")
    assert captured.get() == ":smile:\n"
