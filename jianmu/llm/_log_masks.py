"""The HTTP client's and the SDKs' own log lines, with a provider's secrets masked.

httpx logs each request's URL at INFO (``HTTP Request: POST https://…?api-key=… "HTTP/1.1
200 OK"``), and the SDKs log request options at DEBUG. A key a provider sends in its URL's
query (a base URL pasted with ``?api-key=``, ``default_query``) or a header would reach any
log a user turned on (``logging.basicConfig(level=logging.INFO)``). Each provider's secrets
are added to one filter on those loggers, which replaces them with `MASK` in the line.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

from jianmu._secrets import MASK

__all__ = ("LOGGERS", "mask_in_logs")

LOGGERS = ("httpx", "httpx2", "openai._base_client", "anthropic._base_client")
"""The loggers whose lines may quote a request's URL, headers or options (the SDKs of this
release send through ``httpx2``, which logs under its own name)."""


class _Masking(logging.Filter):
    """Replaces each known secret in a record's message (longest first) with `MASK`."""

    def __init__(self) -> None:
        super().__init__()
        self.secrets: tuple[str, ...] = ()

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = self.secrets
        if not secrets:
            return True
        try:
            text = record.getMessage()
        except Exception:  # a record its own arguments cannot format: left to the handler
            return True
        masked = text
        for secret in secrets:
            masked = masked.replace(secret, MASK)
        if masked != text:
            record.msg, record.args = masked, None
        return True


_FILTER = _Masking()
_LOCK = threading.Lock()


def mask_in_logs(secrets: Iterable[str]) -> None:
    """Mask ``secrets`` in the lines of `LOGGERS` from now on (for the process's life)."""
    with _LOCK:
        known = set(_FILTER.secrets)
        new = {s for s in secrets if s and s not in known}
        if not new:
            return
        if not known:
            for name in LOGGERS:
                logging.getLogger(name).addFilter(_FILTER)
        _FILTER.secrets = tuple(sorted(known | new, key=len, reverse=True))
