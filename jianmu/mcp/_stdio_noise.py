"""A stdio server's stdout that is not JSON-RPC, said in one line instead of a traceback.

The MCP SDK logs each such line with ``logger.exception`` ("Failed to parse JSONRPC message
from server" and pydantic's traceback): a server that prints a banner to stdout, a common
slip, filled the terminal under the one-line error the client gives.
"""

from __future__ import annotations

import logging

__all__ = ("quiet_parse_errors",)

_SDK_LOGGER = "mcp.client.stdio"
_PARSE_FAILED = "Failed to parse JSONRPC message from server"


class _OneLine(logging.Filter):
    """Rewrites the SDK's parse failure as a warning naming the line, without a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != _PARSE_FAILED or not record.exc_info:
            return True
        error = record.exc_info[1]
        line = None
        try:  # pydantic's error keeps the line it could not read
            line = error.errors()[0].get("input")  # type: ignore[union-attr]
        except Exception:  # another error: say what it is
            pass
        shown = repr(line)[:120] if isinstance(line, str) else type(error).__name__
        record.msg = (f"an MCP stdio server wrote a line to stdout that is not JSON-RPC: "
                      f"{shown}; a stdio server writes only protocol messages there (its logs "
                      "go to stderr)")
        record.args = None
        record.exc_info = record.exc_text = None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


_filter = _OneLine()


def quiet_parse_errors() -> None:
    """Install the filter on the SDK's stdio logger (once; later calls do nothing)."""
    logger = logging.getLogger(_SDK_LOGGER)
    if _filter not in logger.filters:
        logger.addFilter(_filter)
