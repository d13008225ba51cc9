"""A run id UTF-8 cannot encode (a byte of another encoding in the command line, which Python
reads as a lone surrogate): ``jianmu resume``, ``runs show`` and ``runs fork`` ended with an
internal error (``UnicodeEncodeError`` from the checkpoint store, exit 1) where an unknown id
says so; no run has such an id, and the command now says that, before it opens anything."""

from __future__ import annotations

import os

import pytest

from tests.cli._helpers import Project

ODD = os.fsdecode(b"ab\xff")  # what Python's argv holds for it


@pytest.mark.parametrize("command", [
    ("resume", ODD, "--approve", "call_0"),
    ("runs", "show", ODD),
    ("runs", "fork", ODD, "--at", "0"),
    ("runs", "approve", ODD, "call_0"),
])
def test_a_run_id_utf8_cannot_encode_is_refused_as_no_run(
    project: Project, command: tuple[str, ...]
) -> None:
    done = project.jianmu(*command)
    assert done.code == 2, done.text
    assert "Traceback" not in done.text and "UnicodeEncodeError" not in done.text, done.text
    assert "no run has it" in done.err, done.err
