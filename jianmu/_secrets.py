"""Secrets: the access tokens of the servers Jianmu starts, and secrets kept out of messages.

The servers (``jianmu studio``, ``jianmu mcp serve``) want a random token on every request:
`new_token` makes one, `same_token` compares in constant time, and `is_loopback` says whether
a host is only reachable from this machine.

Out of messages go passwords in URLs, ``key=value`` secrets, and known secret values. A
database URL carries its password in the user-info (``postgresql://user:PASSWORD@host/db``)
or as a query parameter (``?password=...``), and a driver quotes the URL, or a piece of it, in
its errors (psycopg: ``invalid percent-encoded token: "PASSWORD%zz"``). Every message, log line
and ``repr`` that may carry such a URL goes through here:

- `redact_url` writes a URL with its password and secret query values as ``***``;
- `url_secrets` finds those values in a URL, even a malformed one, so that they can be taken
  out of any text, whatever a driver did with them;
- `redact_text` replaces known secrets, then the user-info of any URL and any ``key=value``
  (or ``key: value``) whose key names a secret.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import re
import threading
from collections.abc import Iterable
from secrets import token_urlsafe
from urllib.parse import unquote

__all__ = (
    "MASK",
    "SecretFilter",
    "filter_logs",
    "is_loopback",
    "new_token",
    "redact_text",
    "redact_url",
    "same_token",
    "url_secrets",
)

MASK = "***"

_SECRET_KEY = (
    r"(?:ssl)?pass(?:word|wd)?|pwd|secret|client_secret|(?:access_|refresh_|auth_|id_)?token"
    r"|api[_-]?key|apikey|private_key|authorization|auth|credentials?|sig|signature"
)
_KEY_VALUE = re.compile(
    rf"""(?ix)
    (?P<key>(?<![\w-])["']?(?:{_SECRET_KEY})["']?\s*[=:]\s*)
    (?P<value>(?:bearer|basic|token)\s+[^\s&;,'"<>)\]}}]+|'[^']*'|"[^"]*"|[^\s&;,'"<>)\]}}]+)
    """
)
# a scheme's length bounded (RFC 3986 sets none; registered ones are short): unbounded, every
# word boundary of ``a.a.a...`` scanned to the text's end for a ``://``, quadratic in a log line
_URL = re.compile(r"(?P<scheme>\b[a-zA-Z][\w+.-]{0,62}://)(?P<rest>[^\s'\"<>]+)")
_QUERY_KEY = re.compile(rf"(?i)^(?:{_SECRET_KEY})$")
_TOKEN_SCHEMES = frozenset({"http", "https", "ws", "wss"})
"""Schemes whose lone user-info (``https://TOKEN@host``) is a secret; elsewhere
(``postgresql://user@host``) it is a user name."""
_SHORTEST_SECRET = 3
"""Known secrets shorter than this are not replaced everywhere (they would mangle the text);
the patterns still mask them where they stand as a password or a ``key=value``."""


def _split_userinfo(rest: str) -> tuple[str, str] | None:
    """``(userinfo, remainder)`` of what follows ``scheme://``, erring towards a password:
    the user-info ends at the last ``@`` before the query."""
    head = re.split(r"[?#]", rest, maxsplit=1)[0]
    if "@" not in head:
        return None
    userinfo, _, _host = head.rpartition("@")
    return userinfo, rest[len(userinfo) + 1:]


def url_secrets(url: str) -> list[str]:
    """The secret values of ``url`` (its password, secret query values), raw and decoded.

    Works on malformed URLs too: it looks for the parts, never parses the whole.
    """
    found: list[str] = []
    scheme, sep, rest = url.partition("://")
    if sep:
        split = _split_userinfo(rest)
        if split is not None:
            user, colon, password = split[0].partition(":")
            if colon:
                found.append(password)
            elif scheme.lower() in _TOKEN_SCHEMES:
                found.append(user)
    query = url.partition("?")[2]
    for pair in re.split(r"[&;]", query):
        key, eq, value = pair.partition("=")
        if eq and _QUERY_KEY.match(unquote(key).strip()):
            found.append(value)
    for match in _KEY_VALUE.finditer(url if not sep else ""):  # a libpq conninfo string
        found.append(match.group("value").strip("'\""))
    values: list[str] = []
    for value in found:
        for form in (value, _unquoted(value)):
            if form and form not in values:
                values.append(form)
    return values


def _unquoted(value: str) -> str:
    try:
        return unquote(value, errors="strict")
    except UnicodeDecodeError:
        return value


def _mask_url(match: re.Match[str]) -> str:
    scheme, rest = match.group("scheme"), match.group("rest")
    split = _split_userinfo(rest)
    if split is not None:
        userinfo, remainder = split
        user, colon, _password = userinfo.partition(":")
        if colon:
            rest = f"{user}:{MASK}@{remainder}"
        elif scheme[:-3].lower() in _TOKEN_SCHEMES:
            rest = f"{MASK}@{remainder}"
    return scheme + _KEY_VALUE.sub(_mask_value, rest)


def _mask_value(match: re.Match[str]) -> str:
    value = match.group("value")
    quote = value[0] if value[:1] in ("'", '"') and value[-1:] == value[:1] else ""
    return f"{match.group('key')}{quote}{MASK}{quote}"


def redact_url(url: str) -> str:
    """``url`` with the password of its user-info and its secret query values as ``***``."""
    return redact_text(url, *url_secrets(url))


def redact_text(text: str, *secrets: str) -> str:
    """``text`` without ``secrets`` (each replaced by ``***``), the passwords of the URLs in
    it, and the values of ``key=value`` pairs whose key names a secret (``password=``,
    ``token:``...)."""
    for secret in sorted(set(secrets), key=len, reverse=True):
        if len(secret) >= _SHORTEST_SECRET:
            text = text.replace(secret, MASK)
    text = _URL.sub(_mask_url, text)
    return _KEY_VALUE.sub(_mask_value, text)


class SecretFilter(logging.Filter):
    """A logging filter that takes ``secrets`` (and URL passwords, ``key=value`` secrets)
    out of every record it sees: a driver's log line quoting the database URL included."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self.secrets = tuple(secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: leave it to logging's own error path
            return True
        cleaned = redact_text(message, *self.secrets)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and record.exc_info[1] is not None:
            shown = str(record.exc_info[1])
            if redact_text(shown, *self.secrets) != shown:
                # the traceback would quote it again: keep the cleaned message only
                record.exc_info, record.exc_text = None, None
        return True


_FILTERS: dict[str, SecretFilter] = {}
_FILTERS_LOCK = threading.Lock()


def filter_logs(loggers: Iterable[str], secrets: Iterable[str]) -> None:
    """Keep ``secrets`` out of the records of each named logger from now on (one
    `SecretFilter` per logger, for the process's life, its secrets added to)."""
    secrets = tuple(s for s in secrets if s)
    if not secrets:
        return
    with _FILTERS_LOCK:
        for name in loggers:
            found = _FILTERS.get(name)
            if found is None:
                found = _FILTERS[name] = SecretFilter()
                logging.getLogger(name).addFilter(found)
            found.secrets = tuple(dict.fromkeys((*found.secrets, *secrets)))


# -- access tokens -----------------------------------------------------------------------------


def new_token() -> str:
    """A fresh random token (as Jupyter prints one): 192 bits, URL-safe."""
    return token_urlsafe(24)


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
