"""`duckduckgo_search`: web search through the `ddgs` package (the ``search`` extra)."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.to_thread

from jianmu.errors import MissingExtraError, ToolInputError
from jianmu.tools.base import Tool
from jianmu.tools.calls import ToolResult

__all__ = ("DuckDuckGoSearchTool",)

_NO_RESULTS = "No results found."


def _load_ddgs() -> Any:
    """Import ``ddgs`` on first use; a missing package names the extra to install."""
    try:
        import ddgs
    except ImportError:
        raise MissingExtraError("ddgs", "search") from None
    return ddgs


class DuckDuckGoSearchTool(Tool):
    """Search the web with DuckDuckGo."""

    name = "duckduckgo_search"
    description = (
        "Search the web with DuckDuckGo and return the top results. Use it to find current "
        "information, documentation or URLs you do not know; fetch a page afterwards with "
        "http_request. Args: query (the search terms), max_results (how many results, "
        "default 5, at most 20). Returns a numbered list with each result's title, URL and "
        "snippet. Needs network access and the 'search' extra (pip install 'jianmu[search]')."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "The search terms."},
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "maximum": 20,
                "default": 5,
                "description": "How many results to return.",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    output_schema = {"type": "string", "description": "Numbered results: title, URL, snippet."}
    category = "read"
    permission = "auto"
    effect_tags = ("http",)
    parallel_safe = True
    timeout_seconds = 30.0
    max_result_length = 10_000
    search_timeout: float = 10.0
    """Seconds ddgs may spend on the request before the search fails."""
    backend: str = "duckduckgo"
    """The ddgs backend to ask."""

    async def run(self, query: str, max_results: int = 5) -> str | ToolResult:
        """Search; a network failure comes back as a failed `ToolResult`.

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
            return self._failed(f"the search timed out after {timeout:g}s")
        except Exception as exc:
            if str(exc) == _NO_RESULTS:
                return f"No results for {query!r}."
            return self._failed(f"{type(exc).__name__}: {exc}")
        if not results:
            return f"No results for {query!r}."
        lines = []
        for i, item in enumerate(results[:max_results], 1):
            title = item.get("title") or "(no title)"
            url = item.get("href") or item.get("url") or ""
            snippet = (item.get("body") or "").strip()
            lines.append(f"{i}. {title}\n   {url}" + (f"\n   {snippet}" if snippet else ""))
        return "\n".join(lines)

    def _failed(self, reason: str) -> ToolResult:
        return ToolResult(
            tool=self.name,
            ok=False,
            error=f"web search failed: {reason}. Check the network connection (this "
            "machine may have no internet access) and try again later",
        )
