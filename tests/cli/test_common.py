"""`--input` parsing (jianmu/_cli/common.py)."""

from __future__ import annotations

import pytest

from jianmu._cli.common import CLIError, ExitCode, parse_inputs


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
