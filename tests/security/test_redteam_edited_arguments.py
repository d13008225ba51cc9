"""Red team: a person's edit of a call, checked against a hostile tool's schema.

`Interaction.approve(id, arguments=...)` checks the edited arguments against the input schema
the guard kept in the request. The schema may be an MCP server's: its ``pattern`` was matched
with Python's ``re`` (``^(a+)+$`` on ``'a' * 40 + '!'``, a value the model proposed and the
person kept, took years, in the studio's or the CLI's process), and a ``$ref`` went through
jsonschema's default registry, which fetches URLs. Patterns are matched by RE2 now, and
nothing is ever fetched.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from jianmu.errors import ApprovalEditError
from jianmu.runtime import ApprovalRequest, Interaction
from tests.support.counting_server import counting_server


@pytest.fixture
def schema_url() -> Iterator[tuple[str, list[str]]]:
    with counting_server(b'{"type": "integer"}') as (port, hits):
        yield f"http://127.0.0.1:{port}/x.json", hits


def _asked(parameters: dict[str, Any]) -> Interaction:
    interaction = Interaction()
    interaction.suspend(ApprovalRequest(
        id="a", payload={"tool": "t", "fingerprint": "f", "parameters": parameters}))
    return interaction


@pytest.mark.timeout(30)
def test_a_backtracking_pattern_in_the_kept_schema_decides_at_once() -> None:
    interaction = _asked({"type": "object", "properties": {
        "word": {"type": "string", "pattern": "^(a+)+$"}, "note": {"type": "string"}}})
    with pytest.raises(ApprovalEditError, match="does not match"):
        interaction.approve("a", arguments={"word": "a" * 40 + "!", "note": "edited"})
    interaction.approve("a", arguments={"word": "aaa", "note": "edited"})
    assert interaction.decision("a").arguments == {"word": "aaa", "note": "edited"}  # type: ignore[union-attr]


def test_a_remote_ref_in_the_kept_schema_is_never_fetched(
    schema_url: tuple[str, list[str]],
) -> None:
    url, hits = schema_url
    interaction = _asked({"type": "object", "properties": {"x": {"$ref": url}}})
    interaction.approve("a", arguments={"x": "not an integer"})  # the tool's own check runs
    assert hits == []
