"""Tests for jianmu/tools/builtin/web_search.py: missing extra, no network, formatting."""

from __future__ import annotations

import sys
import types
from typing import Any

import anyio
import pytest

from jianmu.errors import MissingExtraError, ToolInputError
from jianmu.tools.builtin import DuckDuckGoSearchTool
from jianmu.tools.calls import ToolResult

pytestmark = pytest.mark.anyio


def _fake_ddgs(monkeypatch: pytest.MonkeyPatch, behaviour: Any) -> list[dict[str, Any]]:
    """Install a stand-in ``ddgs`` module whose ``DDGS().text`` runs ``behaviour``."""
    calls: list[dict[str, Any]] = []

    class DDGS:
        def __init__(self, timeout: int | None = None) -> None:
            self.timeout = timeout

        def text(self, query: str, **kwargs: Any) -> list[dict[str, Any]]:
            calls.append({"query": query, "timeout": self.timeout, **kwargs})
            return behaviour()  # type: ignore[no-any-return]

    module = types.ModuleType("ddgs")
    module.DDGS = DDGS  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ddgs", module)
    return calls


async def test_missing_extra_names_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ddgs", None)  # makes `import ddgs` fail
    with pytest.raises(MissingExtraError, match=r"pip install 'jianmu\[search\]'"):
        await DuckDuckGoSearchTool().execute({"query": "jianmu"})


async def test_no_network_fails_fast_with_a_clear_message() -> None:
    tool = DuckDuckGoSearchTool(search_timeout=3)
    with anyio.fail_after(30):
        result = await tool.execute({"query": "behaviour trees for LLM agents"})
    assert isinstance(result, ToolResult) and not result.ok
    assert result.error is not None
    assert result.error.startswith("web search failed: ")
    assert "network connection" in result.error


async def test_results_are_numbered(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_ddgs(
        monkeypatch,
        lambda: [
            {"title": "Jianmu", "href": "https://example.org/jianmu", "body": "A tree engine."},
            {"title": "", "href": "https://example.org/2", "body": ""},
        ],
    )
    out = await DuckDuckGoSearchTool().execute({"query": "jianmu", "max_results": 2})
    assert out == (
        "1. Jianmu\n   https://example.org/jianmu\n   A tree engine.\n"
        "2. (no title)\n   https://example.org/2"
    )
    assert calls == [
        {"query": "jianmu", "timeout": 10, "max_results": 2, "backend": "duckduckgo"}
    ]


async def test_no_results(monkeypatch: pytest.MonkeyPatch) -> None:
    def raise_no_results() -> list[dict[str, Any]]:
        raise RuntimeError("No results found.")

    _fake_ddgs(monkeypatch, raise_no_results)
    assert await DuckDuckGoSearchTool().execute({"query": "zzzz"}) == "No results for 'zzzz'."
    _fake_ddgs(monkeypatch, list)
    assert await DuckDuckGoSearchTool().execute({"query": "zzzz"}) == "No results for 'zzzz'."


async def test_a_hanging_backend_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    release = threading.Event()
    _fake_ddgs(monkeypatch, lambda: release.wait(30) and [])
    tool = DuckDuckGoSearchTool(search_timeout=0.2)
    try:
        with anyio.fail_after(20):
            result = await tool.execute({"query": "slow"})
    finally:
        release.set()
    assert isinstance(result, ToolResult) and not result.ok
    assert "timed out after 0.2s" in (result.error or "")


async def test_bad_inputs() -> None:
    with pytest.raises(ToolInputError):
        await DuckDuckGoSearchTool().execute({"query": "x", "max_results": 0})
    with pytest.raises(ToolInputError):
        await DuckDuckGoSearchTool().execute({"query": "x", "max_results": 21})
    with pytest.raises(ToolInputError, match="query is empty"):
        await DuckDuckGoSearchTool().execute({"query": "  "})


async def test_metadata_matches_the_issue() -> None:
    tool = DuckDuckGoSearchTool()
    assert tool.category == "read" and tool.effect_tags == ("http",) and tool.parallel_safe
    tool.check_definition(require_parameter_descriptions=True)
