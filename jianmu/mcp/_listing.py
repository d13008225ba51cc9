"""A server's ``tools/list`` read tool by tool: a broken tool is left out and named.

The SDK checks a whole listing page against its models at once, so one tool with a broken
definition (an input schema that is not an object, no name, a number for a description) made
every tool of the server unusable. `ToolListings` sits between the transport and the SDK's
session: it notes which requests are ``tools/list`` (and the protocol version the handshake
agreed), and checks each page with the SDK's own checks (the version's protocol model, then
its `ListToolsResult`); when they refuse tools, those tools (pydantic names each by its place)
are left out, the rest checked again, and why each was left out goes in the page's ``_meta``
under `SKIPPED_KEY` (taken from the server's own ``_meta``: only this reader writes it). A
page wrong as a whole (no list of tools, a cursor that is not a string) is passed on as it
came, for the SDK to refuse. Paging (``nextCursor``) is untouched.
"""
from __future__ import annotations

from typing import Any

__all__ = ("SKIPPED_KEY", "NotingStream", "ToolListings", "skipped_on")

SKIPPED_KEY = "jianmu/skippedTools"
"""The key of a page's ``_meta`` listing why each of its tools was left out."""
_DEFAULT_VERSION = "2025-11-25"  # the SDK's own fallback before a version is agreed
_NAME_CHARS = 80
_ROUNDS = 4  # checks of one page: the SDK's two checks, each naming its broken tools


def skipped_on(result: Any) -> list[str]:
    """Why each tool of a listing page (the SDK's ``ListToolsResult``) was left out."""
    meta = getattr(result, "meta", None)
    said = meta.get(SKIPPED_KEY) if isinstance(meta, dict) else None
    return [str(s) for s in said] if isinstance(said, list) else []


class ToolListings:
    """Watches one session's messages and reads its ``tools/list`` pages leniently."""

    __slots__ = ("_pending", "_server", "_version")

    def __init__(self, server: str) -> None:
        self._server = server
        self._pending: dict[Any, str] = {}  # id of a request we sent -> its method
        self._version = _DEFAULT_VERSION

    def sent(self, message: Any) -> None:
        """Note a message the client sends (a ``SessionMessage``)."""
        from mcp.types import JSONRPCRequest

        inner = getattr(message, "message", None)
        if isinstance(inner, JSONRPCRequest) and inner.method in ("tools/list", "initialize"):
            self._pending[inner.id] = inner.method

    def received(self, message: Any) -> Any:
        """The message the server sent, its ``tools/list`` page made readable if need be."""
        from mcp.types import JSONRPCError, JSONRPCResponse

        inner = getattr(message, "message", None)
        if not isinstance(inner, (JSONRPCResponse, JSONRPCError)):
            return message
        method = self._pending.pop(inner.id, None)
        if method is None or not isinstance(inner, JSONRPCResponse):
            return message
        if method == "initialize":
            version = inner.result.get("protocolVersion")
            if isinstance(version, str):
                self._version = version
            return message
        page = self._readable(inner.result)
        if page is inner.result:
            return message
        return type(message)(
            message=inner.model_copy(update={"result": page}),
            metadata=getattr(message, "metadata", None),
        )

    def _readable(self, page: dict[str, Any]) -> dict[str, Any]:
        """``page`` as is when the SDK reads it whole; else without the tools it refuses."""
        meta = page.get("_meta")
        if isinstance(meta, dict) and SKIPPED_KEY in meta:  # only we say what was left out
            page = {**page, "_meta": {k: v for k, v in meta.items() if k != SKIPPED_KEY}}
        tools = page.get("tools")
        if not isinstance(tools, list):
            return page  # a page with no list of tools fails as a whole, as before
        # Whole pages are checked (pydantic's errors name each tool by its place), never one
        # tool at a time: a hostile page of thousands would hold the event loop for seconds.
        # Each round leaves out the tools the last check named; the SDK's two checks run one
        # after the other, so a few rounds settle it.
        kept = list(enumerate(tools))
        said: dict[int, list[str]] = {}
        for _round in range(_ROUNDS):
            errors = self._errors({**page, "tools": [tool for _, tool in kept]})
            if not errors:
                break
            named: dict[int, list[str]] = {}
            for error in errors:
                where = error.get("loc", ())
                if len(where) > 1 and where[0] == "tools" and isinstance(where[1], int):
                    named.setdefault(kept[where[1]][0], []).append(_said(error))
            if not named:  # the page itself is wrong: the SDK refuses it whole, as before
                return page
            said.update(named)
            kept = [(index, tool) for index, tool in kept if index not in named]
        if not said:
            return page
        skipped = [
            f"MCP tool {self._named(tools[index], index)} of server {self._server!r} is not a "
            f"valid MCP tool ({'; '.join(problems[:3])})"
            for index, problems in sorted(said.items())
        ]
        meta = page.get("_meta")
        meta = {**meta} if isinstance(meta, dict) else {}
        return {**page, "tools": [tool for _, tool in kept],
                "_meta": {**meta, SKIPPED_KEY: skipped}}

    def _errors(self, page: dict[str, Any]) -> list[Any]:
        """Why the SDK would refuse ``page`` (its checks, in its order): pydantic's errors."""
        from mcp.types import ListToolsResult
        from mcp_types import methods
        from pydantic import ValidationError

        try:
            try:
                methods.validate_server_result("tools/list", self._version, page)
            except KeyError:  # the SDK skips this check for a version it has no model of
                pass
            ListToolsResult.model_validate(page, by_name=False)
        except ValidationError as exc:
            return list(exc.errors(include_input=False, include_url=False))
        except ValueError as exc:  # not a tool's fault (an unknown version): the page's
            return [{"loc": (), "msg": str(exc)[:200]}]
        return []

    @staticmethod
    def _named(tool: Any, index: int) -> str:
        """The tool's name (cut), or its place on the page when it has none."""
        name = tool.get("name") if isinstance(tool, dict) else None
        if isinstance(name, str) and name:
            return repr(name[:_NAME_CHARS] + ("…" if len(name) > _NAME_CHARS else ""))
        kind = "with no name" if isinstance(tool, dict) else "that is not an object"
        return f"#{index + 1} of its page ({kind})"


def _said(error: Any) -> str:
    """One pydantic error as ``where: what`` (never the value sent: it may be huge)."""
    where = [str(p) for p in error.get("loc", ())][2:]  # past ("tools", its place)
    return f"{'.'.join(where) or 'the tool'}: {error.get('msg', 'invalid')}"


class NotingStream:
    """The SDK's write stream of a session, showing each message to ``noted`` as it is sent
    (the SDK's `WriteStream` protocol: what its session writes to)."""

    __slots__ = ("_noted", "_stream")

    def __init__(self, stream: Any, noted: Any) -> None:
        self._stream, self._noted = stream, noted

    async def send(self, message: Any) -> None:
        """Note ``message``, then send it."""
        self._noted(message)
        await self._stream.send(message)

    async def aclose(self) -> None:
        """Close the stream."""
        await self._stream.aclose()

    async def __aenter__(self) -> NotingStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
