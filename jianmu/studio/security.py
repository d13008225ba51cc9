"""The studio's door: a random token on every request (then an HttpOnly, SameSite=Strict
cookie), a CSRF token on every POST, and headers that keep the page to its own scripts."""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import parse_qsl, urlencode, urlsplit

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jianmu._secrets import is_loopback, new_token, same_token

__all__ = ("COOKIE", "CSRF_HEADER", "TokenGuard", "is_loopback", "new_token")

COOKIE = "jianmu_studio"
CSRF_HEADER = "x-csrf-token"
_HEADERS = {
    # the page runs its own script only; run data never becomes markup or code
    "content-security-policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
                               "img-src 'self' data:; connect-src 'self'; object-src 'none'; "
                               "base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",  # the token is in the first URL
    "cache-control": "no-store",
}


class TokenGuard:
    """ASGI middleware: refuses every request without the token, and POSTs without the CSRF
    token (derived from the token, so it is only in pages served to the token's holder)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token
        self.csrf = hmac.new(token.encode(), b"csrf", hashlib.sha256).hexdigest()

    def _same(self, given: str | None, expected: str) -> bool:
        return same_token(given, expected)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope.setdefault("state", {})["csrf"] = self.csrf
        headers = Headers(scope=scope)
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        response: Response | None = None
        if self._same(query.get("token"), self.token):
            # swap the token in the URL for a cookie, and drop it from the address bar
            rest = urlencode({k: v for k, v in query.items() if k != "token"})
            response = RedirectResponse(scope["path"] + (f"?{rest}" if rest else ""), 303)
            response.set_cookie(COOKIE, self.token, httponly=True, samesite="strict")
        elif not self._same(_cookie(headers), self.token):
            response = PlainTextResponse(
                "403: open the studio with the URL it printed at start (?token=...)", 403)
        elif scope["method"] not in ("GET", "HEAD"):
            if not self._same(headers.get(CSRF_HEADER), self.csrf):
                response = PlainTextResponse("403: missing or wrong CSRF token", 403)
            elif not _same_origin(headers):
                response = PlainTextResponse("403: cross-origin request", 403)
        if response is not None:
            await _secured(response)(scope, receive, send)
            return

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                raw = [(k, v) for k, v in message.get("headers", [])
                       if k.decode("latin-1").lower() not in _HEADERS]
                raw += [(k.encode(), v.encode()) for k, v in _HEADERS.items()]
                message = {**message, "headers": raw}
            await send(message)

        await self.app(scope, receive, send_secured)


def _secured(response: Response) -> Response:
    for key, value in _HEADERS.items():
        response.headers[key] = value
    return response


def _cookie(headers: Headers) -> str | None:
    for part in headers.get("cookie", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE:
            return value
    return None


def _same_origin(headers: Headers) -> bool:
    """A POST from a page of another site carries its Origin: refuse it."""
    origin = headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    return urlsplit(origin).netloc == headers.get("host")
