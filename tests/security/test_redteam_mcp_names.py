"""Red team, MCP: a server's tool taking the name of another server's tool.

An MCP tool is named ``<server>__<tool>``. With servers named ``x`` and ``x__y``, server
``x``'s tool ``y__z`` and server ``x__y``'s tool ``z`` were both ``x__y__z``: a skill naming
``x__y__z`` connected server ``x`` (the name splits at its first ``__``), and a ``tool_policy``
rule the operator wrote for one server's tool held for the other's. So were servers whose names
differ only in case, or in characters the tool name cannot hold (``my.srv`` and ``my_srv``).
A server's name is now what its tools' names start with, exactly: ASCII letters, digits, ``-``
and single ``_`` inside, unique ignoring case; anything else is a clear error when the config
is read or the provider is made.
"""

from __future__ import annotations

import pytest

from jianmu.config import parse_config
from jianmu.errors import ConfigError


def _servers(*names: str) -> str:
    return "mcp:\n  servers:\n" + "".join(
        f"    '{name}':\n      command: echo\n" for name in names
    )


@pytest.mark.parametrize("names", [
    ("x", "x__y"), ("gh", "GH"), ("my.srv",), ("gh_",), ("_gh",), ("gh srv",), ("ǵh",), ("",),
])
def test_server_names_that_would_share_or_change_tool_names_are_refused(
    names: tuple[str, ...],
) -> None:
    with pytest.raises(ConfigError, match=r"mcp\.servers") as refused:
        parse_config(_servers(*names))
    assert "letters, digits" in str(refused.value) or "ignoring case" in str(refused.value)


def test_plain_server_names_still_load() -> None:
    config = parse_config(_servers("github", "brave-search", "my_server", "fs2"))
    assert list(config.mcp.servers) == ["github", "brave-search", "my_server", "fs2"]


@pytest.mark.parametrize("name", ["x__y", "my.srv", "gh_", "ǵh"])
def test_a_provider_made_in_code_refuses_them_too(name: str) -> None:
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    from jianmu.mcp import MCPToolProvider

    with pytest.raises(ValueError, match="letters, digits"):
        MCPToolProvider(name, command="echo")
