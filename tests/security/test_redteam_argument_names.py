"""Red team, argument names: URL and path rules held only for arguments named like one.

A tool whose URL argument has another name (``link``, ``endpoint``, an MCP server's
``href``) was matched as plain text: ``HTTPS://EVIL.COM/x``, ``https://u@evil.com/x`` and
``https://evil.com.:443/x`` passed ``open_page(link:https://evil.com/*): deny``. A value that
is a URL is now matched in every spelling the HTTP client would send, whatever its name.
Likewise a path argument named ``to``: ``./secrets/x``, ``docs/../secrets/x``, the absolute
path and a link into ``secrets`` passed ``save_note(to:secrets/*): deny``; a value spelt like
a path is now matched in every form a path rule reads, whatever its name.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu.guard import ToolPolicyChecker
from jianmu.tools import tool
from jianmu.tools.calls import ToolCall


@tool
def open_page(link: str) -> str:
    """Open a page."""
    return link


@pytest.mark.parametrize(
    "url",
    ["https://evil.com/x", "HTTPS://EVIL.COM/x", "https://u@evil.com/x",
     "https://evil.com.:443/x", "https://%65vil.com/x", " https://evil.com/x"],
)  # fmt: skip
@pytest.mark.parametrize("rule", ["open_page(link:https://evil.com/*)", "open_page(https://evil.com/*)"])
def test_a_url_is_matched_in_every_spelling_whatever_its_argument_is_called(
    url: str, rule: str
) -> None:
    checker = ToolPolicyChecker({"open_page": "allow", rule: "deny"})
    call = ToolCall(name="open_page", arguments={"link": url})
    assert checker.resolve(call, open_page.tool_spec)[0] == "deny"


@pytest.mark.parametrize("link", ["https://good.com/x", "notes/evil.com", "evil.com"])
def test_other_values_are_not_caught(link: str) -> None:
    policy = {"open_page": "allow", "open_page(link:https://evil.com/*)": "deny"}
    checker = ToolPolicyChecker(policy)
    call = ToolCall(name="open_page", arguments={"link": link})
    assert checker.resolve(call, open_page.tool_spec)[0] == "allow"


@tool
def save_note(to: str, text: str) -> str:
    """Save a note to a file of the workspace."""
    return to


@pytest.mark.parametrize(
    "where", ["secrets/x", "./secrets/x", "docs/../secrets/x", "{ws}/secrets/x", "docs/l/x"]
)
def test_a_path_is_matched_in_every_form_whatever_its_argument_is_called(
    tmp_path: Path, where: str
) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "l").symlink_to(tmp_path / "secrets", target_is_directory=True)
    policy = {"save_note": "allow", "save_note(to:secrets/*)": "deny"}
    checker = ToolPolicyChecker(policy, workspace=tmp_path)
    call = ToolCall(name="save_note", arguments={"to": where.format(ws=tmp_path), "text": "t"})
    assert checker.resolve(call, save_note.tool_spec)[0] == "deny"
    other = ToolCall(name="save_note", arguments={"to": "docs/x", "text": "t"})
    assert checker.resolve(other, save_note.tool_spec)[0] == "allow"
