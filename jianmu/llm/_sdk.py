"""What the providers built on a vendor SDK share: argument checks, the SDK client's URL and
closing, building from the ``llm:`` section, and reading a server's error text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self

from jianmu.llm.provider import BaseLLMProvider

if TYPE_CHECKING:
    from jianmu.config import LLMConfig

__all__ = ("REQUEST_OPTIONS", "TRANSIENT_STATUSES", "SDKProvider", "check_common", "server_message")

TRANSIENT_STATUSES = frozenset({408, 409, 429})
"""Statuses worth retrying, as the SDKs themselves treat them: timeout, lock conflict, rate
limit (5xx are transient too)."""
REQUEST_OPTIONS = ("extra_headers", "extra_query", "timeout")
"""Per-request options of the SDKs; every other parameter goes into the JSON body."""


def check_common(model: Any, max_retries: Any, timeout: Any) -> None:
    """Refuse a model name, retry count or timeout that no provider can use."""
    if not isinstance(model, str) or not model.strip():
        raise ValueError(f"model must be a non-empty model name, got {model!r}")
    if not isinstance(max_retries, int) or max_retries < 0:
        raise ValueError(f"max_retries must be an integer >= 0, got {max_retries!r}")
    if not timeout or timeout <= 0:
        raise ValueError(f"timeout must be a number of seconds > 0, got {timeout!r}")


def server_message(exc: Any) -> str:
    """The error text a server put in its body, else the SDK's message."""
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        error = body.get("error", body)
        if isinstance(error, Mapping):
            for key in ("message", "detail", "msg"):
                if error.get(key):
                    return str(error[key])
        elif isinstance(error, str) and error:
            return error
        if body.get("detail"):
            return str(body["detail"])
    elif isinstance(body, str) and body:
        return body
    return str(getattr(exc, "message", None) or exc)


class SDKProvider(BaseLLMProvider):
    """A provider whose requests go through a vendor SDK client kept in ``_client``."""

    _client: Any

    @classmethod
    def _from_llm(cls, llm: LLMConfig, params: dict[str, Any], **extra: Any) -> Self:
        """The provider for ``llm``: its model, URL, key, retries and timeout, plus ``extra``
        settings and ``params`` sent with every request."""
        return cls(  # type: ignore[call-arg]
            llm.model,
            base_url=llm.base_url,
            api_key=llm.api_key,
            max_retries=llm.max_retries,
            timeout=llm.timeout,
            **extra,
            **params,
        )

    @property
    def base_url(self) -> str:
        """The server URL requests go to."""
        return str(self._client.base_url)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    async def close(self) -> None:
        """Close the HTTP client."""
        await self._client.close()
