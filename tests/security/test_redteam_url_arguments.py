"""Red team, URL arguments: a URL rule held only for an argument whose name says ``url``.

A tool whose URL argument has another name (``link``, ``endpoint``, an MCP server's
``href``) was matched as plain text: ``HTTPS://EVIL.COM/x``, ``https://u@evil.com/x`` and
``https://evil.com.:443/x`` passed ``open_page(link:https://evil.com/*): deny``. A value that
is a URL is now matched in every spelling the HTTP client would send, whatever its name.
"""

from __future__ import annotations

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
