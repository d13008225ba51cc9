"""The MCP SDK's client logs that are not errors of ours, said in one line or not at all.

- A stdio server's stdout line that is not JSON-RPC: the SDK logs it with
  ``logger.exception`` ("Failed to parse JSONRPC message from server" and pydantic's
  traceback); a server that prints a banner to stdout, a common slip, filled the terminal
  under the one-line error the client gives. It becomes one warning naming the server (the
  `speaking` context variable, which each session's task sets: the SDK's reader task
  inherits it) and the line.
- A line past `jianmu.mcp._transport.WholeLines`' bound (`MCPLineTooLongError`): the SDK
  logs the end of its reading with a traceback; it becomes one warning naming the server and
  the bound.
- An HTTP answer that came after its request was given up (a call that timed out or was
  cancelled, its session closed since): the SDK logs it as an ERROR with a traceback, "Error
  parsing SSE message", though nothing failed to parse (its own comment says so). It is left
  out: the call already failed with `ToolTimeoutError`, or was cancelled.
- An HTTP answer past `jianmu.mcp._transport.MAX_ANSWER_BYTES`, or compressed though we
  asked for none: the SDK logs "Error parsing JSON response" with a traceback; it becomes one
  warning naming the server (the call fails with the same words).
- The end of a session an HTTP server no longer knew (it restarted: the client starts a new
  one): the SDK warns "Session termination failed: 404" as it closes the old one, though
  ``404`` is the spec's answer for a session that is gone, which is what ending it wants. It
  is left out.

On the server's side (`quiet_served_noise`, for ``jianmu mcp serve --transport http``): a
notification whose session ended as it came (a client that gave a call up and left at once)
is logged by the SDK as "Error handling POST request" with a traceback; its session is over,
and so is the notification's purpose. It is left out (`jianmu.mcp.server.answered_once` keeps
the second answer the SDK then tries from failing too).
"""

from __future__ import annotations

import contextvars
import logging

from jianmu.errors import MCPLineTooLongError

__all__ = ("quiet_sdk_noise", "quiet_served_noise", "speaking")

speaking: contextvars.ContextVar[str | None] = contextvars.ContextVar("speaking", default=None)
"""The name of the MCP server whose session the current task serves (the warning names it)."""

_STDIO_LOGGER = "mcp.client.stdio"
_PARSE_FAILED = "Failed to parse JSONRPC message from server"
_READ_FAILED = "Reading from the MCP server's stdout failed mid-session"


_HTTP_LOGGER = "mcp.client.streamable_http"
_SSE_FAILED = "Error parsing SSE message"
_JSON_FAILED = "Error parsing JSON response"
_NOT_READ = "the server's answer is"  # how `jianmu.mcp._transport.AnswerBounds` begins
_GONE = "Session termination failed: 404"  # the SDK formats the status into the message


class _OneLine(logging.Filter):
    """Rewrites the SDK's parse failure as a warning naming the line, without a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == _READ_FAILED and record.exc_info:
            if isinstance(record.exc_info[1], MCPLineTooLongError):
                said(record, f"{who()} {record.exc_info[1]}")
            return True
        if record.msg != _PARSE_FAILED or not record.exc_info:
            return True
        error = record.exc_info[1]
        line = None
        try:  # pydantic's error keeps the line it could not read
            line = error.errors()[0].get("input")  # type: ignore[union-attr]
        except Exception:  # another error: say what it is
            pass
        shown = repr(line)[:120] if isinstance(line, str) else type(error).__name__
        said(record, f"{who()} wrote a line to stdout that is not JSON-RPC: {shown}; a stdio "
                     "server writes only protocol messages there (its logs go to stderr)")
        return True


def who() -> str:
    """The stdio server of the current session, as a warning names it."""
    server = speaking.get()
    return "an MCP stdio server" if server is None else f"MCP stdio server {server!r}"


def said(record: logging.LogRecord, message: str) -> None:
    """Make ``record`` the one-line warning ``message``, without a traceback."""
    record.msg = message
    record.args = None
    record.exc_info = record.exc_text = None
    record.levelno, record.levelname = logging.WARNING, "WARNING"


class _GivenUp(logging.Filter):
    """Leaves out the SDK's "parse error" for an answer no request waits for any more, and its
    warning for ending a session the server had forgotten; says an answer left unread in one
    line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == _GONE:  # the session was gone already: ended, as asked
            return False
        if record.msg == _JSON_FAILED and record.exc_info and \
                str(record.exc_info[1]).startswith(_NOT_READ):
            server = speaking.get()
            said(record, f"MCP server {server!r}: {record.exc_info[1]}" if server is not None
                 else f"an MCP server: {record.exc_info[1]}")
            return True
        if record.msg != _SSE_FAILED or not record.exc_info:
            return True
        import anyio

        # the session's read stream is closed: the answer has nobody to go to
        return not isinstance(
            record.exc_info[1], (anyio.BrokenResourceError, anyio.ClosedResourceError)
        )


_filters = ((_STDIO_LOGGER, _OneLine()), (_HTTP_LOGGER, _GivenUp()))


def quiet_sdk_noise() -> None:
    """Install the filters on the SDK's client loggers (once; later calls do nothing)."""
    for name, noise in _filters:
        logger = logging.getLogger(name)
        if noise not in logger.filters:
            logger.addFilter(noise)


_SERVER_LOGGER = "mcp.server.streamable_http"
_POST_FAILED = "Error handling POST request"


class _SessionOver(logging.Filter):
    """Leaves out the SDK's failure to hand a message to a session that has ended."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != _POST_FAILED or not record.exc_info:
            return True
        import anyio

        return not isinstance(
            record.exc_info[1], (anyio.BrokenResourceError, anyio.ClosedResourceError)
        )


_served = _SessionOver()


def quiet_served_noise() -> None:
    """Install the filter on the SDK's streamable-HTTP server logger (once)."""
    logger = logging.getLogger(_SERVER_LOGGER)
    if _served not in logger.filters:
        logger.addFilter(_served)
