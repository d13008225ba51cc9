"""`duckduckgo_search`: web search through the `ddgs` package (the ``search`` extra)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import anyio
import anyio.to_thread
from pydantic import Field

from jianmu.errors import MissingExtraError, ToolInputError
from jianmu.tools.base import FunctionTool
from jianmu.tools.calls import ToolResult

__all__ = ("DuckDuckGoSearchTool", "duckduckgo_search", "duckduckgo_search_tool")

_NO_RESULTS = "No results found."
_NAME = "duckduckgo_search"


def _load_ddgs() -> Any:
    """Import ``ddgs`` on first use; a missing package names the extra to install."""
    try:
        import ddgs
    except ImportError:
        raise MissingExtraError("ddgs", "search") from None
    return ddgs


def _failed(reason: str) -> ToolResult:
    return ToolResult(
        tool=_NAME,
        ok=False,
        error=f"web search failed: {reason}. Check the network connection (this "
        "machine may have no internet access) and try again later",
    )


@dataclass(frozen=True)
class _DuckDuckGoSearch:
    """The `duckduckgo_search` function, with its settings."""

    search_timeout: float = 10.0
    """Seconds ddgs may spend on the request before the search fails."""
    backend: str = "duckduckgo"
    """The ddgs backend to ask."""

    async def __call__(
        self, query: str, max_results: Annotated[int, Field(ge=1, le=20)] = 5
    ) -> str | ToolResult:
        """Search the web with DuckDuckGo and return the top results.

        Use it to find current information, documentation or URLs you do not know; fetch a
        page afterwards with http_request. Returns a numbered list with each result's title,
        URL and snippet. Needs network access and the 'search' extra (pip install
        'jianmu[search]').

        Args:
            query: The search terms.
            max_results: How many results to return.

        Raises:
            MissingExtraError: ``ddgs`` is not installed.
            ToolInputError: an empty query or ``max_results`` out of range.
        """
        if not isinstance(query, str) or not query.strip():
            raise ToolInputError("query is empty; give the words to search for")
        if not 1 <= max_results <= 20:
            raise ToolInputError(f"max_results must be between 1 and 20, got {max_results!r}")
        ddgs = _load_ddgs()
        timeout = self.search_timeout

        def search() -> list[dict[str, Any]]:
            client = ddgs.DDGS(timeout=max(1, int(timeout)))
            return list(client.text(query, max_results=max_results, backend=self.backend))

        try:
            # ddgs is synchronous: run it in a thread, and stop waiting past the timeout.
            with anyio.fail_after(timeout + 2):
                results = await anyio.to_thread.run_sync(search, abandon_on_cancel=True)
        except TimeoutError:
            return _failed(f"the search timed out after {timeout:g}s")
        except Exception as exc:
            if str(exc) == _NO_RESULTS:
                return f"No results for {query!r}."
            return _failed(f"{type(exc).__name__}: {exc}")
        if not results:
            return f"No results for {query!r}."
        lines = []
        for i, item in enumerate(results[:max_results], 1):
            title = item.get("title") or "(no title)"
            url = item.get("href") or item.get("url") or ""
            snippet = (item.get("body") or "").strip()
            lines.append(f"{i}. {title}\n   {url}" + (f"\n   {snippet}" if snippet else ""))
        return "\n".join(lines)


def duckduckgo_search_tool(
    *, search_timeout: float = 10.0, backend: str = "duckduckgo"
) -> FunctionTool:
    """A fresh `duckduckgo_search` tool asking ``backend``, giving up after ``search_timeout``."""
    return FunctionTool(
        _DuckDuckGoSearch(search_timeout, backend),
        name=_NAME,
        output_schema={"type": "string", "description": "Numbered results: title, URL, snippet."},
        category="read",
        effect_tags=("http",),
        timeout_seconds=30.0,
        max_result_length=10_000,
        # what `jianmu tools list` checks: the import name of each package it needs, and the
        # pip extra that installs it
        metadata={"requires": {"ddgs": "search"}},
    )


duckduckgo_search = duckduckgo_search_tool()
"""The `duckduckgo_search` tool with the default settings."""
DuckDuckGoSearchTool = duckduckgo_search_tool
"""The name the tool had as a class: ``DuckDuckGoSearchTool(search_timeout=...)``."""
