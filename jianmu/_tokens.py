"""Access tokens for the servers Jianmu starts (``jianmu studio``, ``jianmu mcp serve``)."""

from __future__ import annotations

import hmac
import ipaddress
import secrets

__all__ = ("is_loopback", "new_token", "same_token")


def new_token() -> str:
    """A fresh random token (as Jupyter prints one): 192 bits, URL-safe."""
    return secrets.token_urlsafe(24)


def same_token(given: str | None, expected: str) -> bool:
    """Whether ``given`` is ``expected``, compared in constant time (no timing hint)."""
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def is_loopback(host: str) -> bool:
    """Whether ``host`` is only reachable from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
