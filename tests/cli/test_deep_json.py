"""JSON a person types, nested past what Python's reader takes (``json.loads`` raises
`RecursionError`, not a decode error): ``--arguments``, ``-i key:=JSON``, ``--inputs`` and the
edit typed at an approval's prompt ended the command with an internal error (exit 1, and at
the prompt the whole interactive run); each is now refused as JSON it cannot read, as the
studio refuses it."""

from __future__ import annotations

import argparse

import pytest

from jianmu._cli.common import CLIError, parse_edited_arguments, parse_inputs
from jianmu._cli.durable import _inputs
from tests.cli._helpers import REPO, Project

DEEP = '{"text": ' * 100_000 + "1" + "}" * 100_000


def test_edited_arguments_nested_too_deep_are_refused_as_json() -> None:
    with pytest.raises(CLIError, match="--arguments is not valid JSON: nested too deep"):
        parse_edited_arguments(DEEP)


def test_an_input_nested_too_deep_is_refused_as_json() -> None:
    with pytest.raises(CLIError, match="is not JSON"):
        parse_inputs([f"note:={DEEP}"])
    with pytest.raises(CLIError, match="--inputs is not JSON"):
        _inputs(argparse.Namespace(inputs=DEEP, input=None))


def test_an_edit_nested_too_deep_at_the_prompt_asks_again(project: Project) -> None:
    done = project.jianmu("run", str(REPO / "examples" / "approval_flow.py"), "-i", "note=hi",
                          stdin=f"e {DEEP}\ne {{\"text\": \"typed\"}}\n")
    assert done.code == 0, done.text[-2000:]
    assert "the arguments are not JSON: nested too deep" in done.out
    assert (project.root / ".jianmu" / "notes.txt").read_text() == "typed\n"
