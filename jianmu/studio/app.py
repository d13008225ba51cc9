"""The studio's Starlette app: the runs list, a run's page, its live stream (server-sent
events), a run at one of its points, and the Approve / Reject / Fork endpoints; and its door
(`TokenGuard`): a ``Host:`` the studio serves (no DNS-rebinding page reaches it), a random token
on every request (then an HttpOnly, SameSite=Strict cookie), a CSRF token on every POST, and
headers that keep the page to its own scripts."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import getpass
import hashlib
import hmac
import ipaddress
import json
import os
import socket
import threading
import time
from collections.abc import AsyncIterator, Hashable
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jianmu._json import json_text
from jianmu._secrets import is_loopback, same_token
from jianmu._text import json_visible
from jianmu.errors import CheckpointError, JianmuError, RunNotFoundError
from jianmu.studio.pages import STATUSES, error_page, run_href, run_page, runs_page
from jianmu.studio.patch import diff
from jianmu.studio.runs import FINISHED

__all__ = ("COOKIE", "CSRF_HEADER", "POLL_S", "RECONNECT_MS", "SETTLE_S", "RunSource",
           "TokenGuard", "cookie_name", "create_app")

POLL_S = 0.5
"""How often a live page's stream looks at the run again."""
RECONNECT_MS = 1000
"""How soon a page tries its stream again once the connection dropped (a studio stopped and
started again): sent with the stream's first message, as on Ctrl-C (the browser's own wait is
3 s)."""
SETTLE_S = 10.0
"""How long a stream waits for the last events of a run that ended (its checkpoint comes a
moment before them) before it sends the run as it is."""
_STATIC = Path(__file__).parent / "static"


class _Json(JSONResponse):
    """starlette's `JSONResponse`, whose body a lone surrogate in a run's text (a model's
    ``"\\ud800"``) cannot break: it is written as ``\\ud800`` (`json_text`)."""

    def render(self, content: Any) -> bytes:
        return json_text(content, allow_nan=False, separators=(",", ":")).encode("utf-8")


class _Html(HTMLResponse):
    """starlette's `HTMLResponse`, with a lone surrogate in a run's text (which UTF-8 cannot
    encode) shown as its escape, ``\\ud800``: text, never markup."""

    def render(self, content: Any) -> bytes:
        return str(content).encode("utf-8", "backslashreplace")


class RunSource(Protocol):
    """Where runs come from: `CheckpointRuns` or `DurableRuns`."""

    kind: str

    def runs(self, status: str | None = None) -> list[dict[str, Any]]: ...

    def view(self, run_id: str) -> dict[str, Any]: ...

    def point(self, run_id: str, number: int) -> dict[str, Any]: ...

    def version(self, run_id: str) -> Hashable | None:
        """A cheap mark that changes whenever the run's view may; None: look at the view."""

    def fork(self, run_id: str, point: int, state: dict[str, Any] | None, by: str) -> str: ...

    def decide(self, run_id: str, call_id: str, approved: bool, text: str | None,
               by: str, *, arguments: dict[str, Any] | None = None,
               answer: str | None = None) -> str: ...

    def close(self) -> None: ...


def _who() -> str:
    try:
        user = getpass.getuser()
    except Exception:  # no user name in this environment
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def create_app(sources: list[RunSource], token: str, *, by: str | None = None,
               project: str | None = None, host: str = "127.0.0.1",
               port: int | None = None) -> Starlette:
    """The studio app over ``sources``, behind ``token``; ``by`` names who answers (the
    person who started the studio and holds its token: ``user@host`` by default). The runs
    list shows the runs started in ``project`` (default: the working folder) unless asked
    for all. ``host`` and ``port`` are where it is served: a request naming another
    ``Host:`` is refused (``port=None`` accepts any port). Setting the app's
    ``state.closing`` (a `threading.Event`) as its server stops ends the pages' streams."""
    _need_token(token)  # here, not at the first request (when the middleware is built)
    by_name = by or _who()
    folder = os.path.realpath(project or os.getcwd())
    found = {s.kind: s for s in sources}
    closing = threading.Event()  # `app.state.closing`: set, each page's stream says so and ends

    def source(request: Request) -> RunSource:
        kind = request.path_params["source"]
        if kind not in found:
            raise RunNotFoundError(f"no run source {kind!r}")
        return found[kind]

    async def index(request: Request) -> Response:
        status = request.query_params.get("status")
        if status not in STATUSES:
            status = None
        everywhere = request.query_params.get("scope") == "all"
        runs: list[dict[str, Any]] = []
        for each in sources:
            found = await run_in_threadpool(each.runs, status)
            if not everywhere and each.kind == "cp":  # a durable app is a project of its own
                found = [r for r in found if _inside(r.get("cwd"), folder)]
            runs += found
        runs.sort(key=lambda r: r["started"] or 0, reverse=True)
        names = [str(getattr(s, "path", None) or getattr(getattr(s, "engine", None), "name",
                                                          s.kind)) for s in sources]
        return _Html(runs_page(runs, status, request.scope["state"]["csrf"], names,
                               project=folder, everywhere=everywhere))

    async def run(request: Request) -> Response:
        view = await run_in_threadpool(source(request).view, request.path_params["run_id"])
        return _Html(run_page(view, request.scope["state"]["csrf"]))

    async def api_run(request: Request) -> Response:
        view = await run_in_threadpool(source(request).view, request.path_params["run_id"])
        return _Json(_jsonable(view))

    async def api_point(request: Request) -> Response:
        where, run_id = source(request), request.path_params["run_id"]
        view = await run_in_threadpool(where.point, run_id, request.path_params["number"])
        return _Json(_jsonable(view))

    async def api_point_state(request: Request) -> Response:
        # the state at a point as the fork box shows it: JSON text written here, so a whole
        # number past 2**53 reaches the box as it is (JavaScript's numbers would round it), and
        # a hidden character as its escape (the same value read back; raw, a bidi override
        # makes a tool's result read as other text to the person editing the state)
        where, run_id = source(request), request.path_params["run_id"]
        view = await run_in_threadpool(where.point, run_id, request.path_params["number"])
        return Response(json_visible(json_text(view["state"], indent=2)),
                        media_type="application/json")

    async def stream(request: Request) -> Response:
        where, run_id = source(request), request.path_params["run_id"]
        await run_in_threadpool(where.view, run_id)  # an unknown run is a 404, not a stream

        async def events() -> AsyncIterator[str]:
            last: dict[str, Any] | None = None
            quiet, seen, unsettled = 0, None, 0.0
            while not await request.is_disconnected():
                if closing.is_set():
                    # the studio is stopping: an open stream would hold it up until it is cut
                    # (a traceback on Ctrl-C); the page is told, and tries again once it is back
                    yield f"retry: {RECONNECT_MS}\nevent: closing\ndata: {{}}\n\n"
                    return
                # the view of a long run costs the server much: it is built again only when
                # the run's mark says something changed
                mark = await run_in_threadpool(where.version, run_id)
                view, change = None, None
                if mark is None or mark != seen:
                    seen = mark
                    try:
                        view = _jsonable(await run_in_threadpool(where.view, run_id))
                    except RunNotFoundError as exc:
                        # deleted under the page: said, and the stream ends (an error here
                        # would cut it, and the browser, asking again, be refused: "why?")
                        yield f"event: gone\ndata: {json_text({'error': str(exc)})}\n\n"
                        return
                if last is not None and last["status"] in FINISHED and not _settled(last):
                    # ended, but its last events are not written yet: followed until they
                    # are, or for SETTLE_S (its process died in between): then as it is
                    unsettled = unsettled or _clock()
                    if _clock() - unsettled >= SETTLE_S:
                        view = {**(view or last), "settled": True}
                if view is not None and last is not None:
                    change = diff(last, view)
                if view is not None and (last is None or change is not None):
                    # the whole view first and last (the run ended: a reader of the last
                    # message has it all), what changed in between: sent whole on each
                    # update, a run of many turns would cost the square of its length
                    ended = view["status"] in FINISHED and _settled(view)
                    out = (f"data: {json_text(view)}" if last is None or ended else
                           "event: patch\ndata: " + json_text(
                               {"run_id": view["run_id"], "status": view["status"],
                                "patch": change}))
                    if last is None:
                        out = f"retry: {RECONNECT_MS}\n{out}"
                    last, quiet = view, 0
                    yield out + "\n\n"
                    if ended:
                        return  # nothing more will change; the page closes its source
                else:
                    quiet += 1
                    if quiet % 30 == 0:
                        yield ": still here\n\n"
                await asyncio.sleep(POLL_S)

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"x-accel-buffering": "no"})

    async def decide(request: Request) -> Response:
        decision = request.path_params["decision"]
        if decision not in ("approve", "reject", "answer"):
            return _Json({"error": f"no action {decision!r}"}, 404)
        approved = decision != "reject"
        body = await _json_object(request)
        if body is None:
            return _Json({"error": "send a JSON object"}, 400)
        call_id, text = body.get("call_id"), body.get("message") or None
        if not isinstance(call_id, str) or not (text is None or isinstance(text, str)):
            return _Json({"error": "call_id (text) is required"}, 400)
        # an edit of the call's arguments (approve), or the answer to a question (answer); the
        # edit box's text is read here, so a whole number past 2**53 is the one the person read
        answer = body.get("answer")
        arguments, problem = _as_sent(body, "arguments")
        if problem is not None:
            return problem
        if (decision != "approve" and arguments is not None) or not (
                arguments is None or isinstance(arguments, dict)):
            return _Json({"error": "arguments (a JSON object) go with approve"}, 400)
        if (decision == "answer") != isinstance(answer, str):
            return _Json({"error": "answer (text) goes with answer, and only there"}, 400)
        try:
            done = await run_in_threadpool(functools.partial(
                source(request).decide, request.path_params["run_id"], call_id, approved, text,
                by_name, arguments=arguments, answer=answer))
        except JianmuError as exc:
            return _Json({"error": str(exc)}, 409)
        return _Json({"ok": True, "message": done, "by": by_name})

    async def fork(request: Request) -> Response:
        body = await _json_object(request)
        if body is None:
            return _Json({"error": "send a JSON object"}, 400)
        point = body.get("point")
        if not isinstance(point, int) or isinstance(point, bool) or point < 0:
            return _Json({"error": "point (a number from the time slider) is required"}, 400)
        state, problem = _as_sent(body, "state")  # the fork box's text, read here
        if problem is not None:
            return problem
        if state is not None and not isinstance(state, dict):
            return _Json({"error": "state must be a JSON object (a state snapshot)"}, 400)
        where, run_id = source(request), request.path_params["run_id"]
        try:
            made = await run_in_threadpool(where.fork, run_id, point, state, by_name)
        except CheckpointError as exc:  # no such point, a state that does not fit
            return _Json({"error": str(exc)}, 400)
        return _Json({"ok": True, "run_id": made, "url": run_href(where.kind, made),
                      "message": f"forked run {made} from {run_id} at point {point}"})

    def _error(request: Request, title: str, message: str, status: int) -> Response:
        # a person who followed a link (a browser asks for HTML) gets a page, a script JSON
        if request.method == "GET" and "text/html" in request.headers.get("accept", "") and (
                not request.url.path.startswith(("/api/", "/stream/"))):
            csrf = request.scope.get("state", {}).get("csrf", "")
            return _Html(error_page(title, message, csrf), status)
        return _Json({"error": message}, status)

    async def not_found(request: Request, exc: Exception) -> Response:
        return _error(request, "No such run", str(exc), 404)

    async def no_page(request: Request, exc: Exception) -> Response:
        # an address the studio has no page for (mistyped, cut short): said as a page with
        # the way back, not a bare "Not Found"
        return _error(request, "No such page", f"the studio has no page at "
                      f"{request.url.path!r}: its pages are the runs list (/) and each run's "
                      "(/run/...)", 404)

    async def failed(request: Request, exc: Exception) -> Response:
        # anything else (a bug): said as a page or JSON, not a bare "Internal Server Error";
        # the traceback still goes to the studio's log
        # (answered outside the door's middleware: its headers are set here)
        return _secured(_error(request, "The studio failed", f"{type(exc).__name__}: {exc} "
                               "(the studio's output has the details)", 500))

    async def damaged(request: Request, exc: Exception) -> Response:
        # a checkpoint that cannot be read (a damaged row): said, not a bare 500
        return _error(request, "This run cannot be read", str(exc), 500)

    # a run id is any text, a slash included (its links say %2F, which the server reads back
    # as "/"): it is the rest of the path, the routes with a suffix first
    routes = [
        Route("/", index),
        Route("/api/run/{source}/{run_id:path}/point/{number:int}/state", api_point_state),
        Route("/api/run/{source}/{run_id:path}/point/{number:int}", api_point),
        Route("/run/{source}/{run_id:path}/fork", fork, methods=["POST"]),
        Route("/run/{source}/{run_id:path}/{decision:str}", decide, methods=["POST"]),
        Route("/run/{source}/{run_id:path}", run),
        Route("/api/run/{source}/{run_id:path}", api_run),
        Route("/stream/run/{source}/{run_id:path}", stream),
        Mount("/static", StaticFiles(directory=_STATIC), name="static"),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            for each in sources:
                await run_in_threadpool(each.close)

    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={
        RunNotFoundError: not_found, CheckpointError: damaged, 404: no_page,
        Exception: failed})
    app.add_middleware(TokenGuard, token=token, host=host, port=port)
    app.state.closing = closing
    return app


async def _json_object(request: Request) -> dict[str, Any] | None:
    """The request's JSON body when it is an object; None for anything else."""
    try:
        body = _read_json(await request.body())
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _read_json(text: str | bytes) -> Any:
    """JSON text read; a `ValueError` for text that is not JSON, and for JSON nested past what
    Python's reader takes (its RecursionError was a bare server error)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deep to read") from None


def _as_sent(body: dict[str, Any], key: str) -> tuple[Any, Response | None]:
    """``body[key]``, or ``body[key + "_text"]`` read as JSON text here (a page's JSON numbers
    are doubles: only the text keeps a whole number past 2**53 as the person read it); or the
    400 that says why neither can be used."""
    value, text = body.get(key), body.get(f"{key}_text")
    if text is None:
        return value, None
    if value is not None or not isinstance(text, str):
        return None, _Json({"error": f"send {key} (JSON) or {key}_text (text), not both"}, 400)
    try:
        return _read_json(text), None
    except ValueError as exc:
        return None, _Json({"error": f"{key}_text is not valid JSON: {exc}"}, 400)


def _clock() -> float:
    """Seconds, for how long a stream has waited (a test moves it on)."""
    return time.monotonic()


def _settled(view: dict[str, Any]) -> bool:
    """Whether a view is the run's last: it ended, and all of it is recorded."""
    return view["status"] in FINISHED and view.get("settled", True) is not False


def _inside(cwd: str | None, folder: str) -> bool:
    """Whether a run started in ``cwd`` belongs to the project in ``folder``."""
    if not cwd:
        return False
    where = os.path.realpath(cwd)
    return where == folder or where.startswith(folder.rstrip(os.sep) + os.sep)


def _jsonable(view: dict[str, Any]) -> dict[str, Any]:
    # a model's NaN or Infinity (Python's JSON reads them) is shown as its name: JSON has no
    # such number, and a browser's JSON.parse refuses the page that holds one
    return json.loads(json.dumps(view, ensure_ascii=False, default=str), parse_constant=str)


# -- the door ----------------------------------------------------------------------------------

COOKIE = "jianmu_studio"
"""The start of the studio's cookie's name; the rest is its token's (`cookie_name`)."""
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


def _need_token(token: str) -> None:
    if not token:  # "/?token=" (or an empty cookie) would match it: a door open to anyone
        raise ValueError("the studio needs a token (jianmu._secrets.new_token() makes one)")


def cookie_name(token: str) -> str:
    """The name of the cookie that holds ``token``: a browser keeps one cookie jar per host,
    whatever the port, so two studios open in one browser (two projects, two ports) each need
    their own name, or the second would lock the first out."""
    return f"{COOKIE}_{hmac.new(token.encode(), b'cookie', hashlib.sha256).hexdigest()[:16]}"


class TokenGuard:
    """ASGI middleware: refuses every request naming a ``Host:`` the studio is not served at,
    or without the token, and POSTs without the CSRF token (derived from the token, so it is
    only in pages served to the token's holder)."""

    def __init__(self, app: ASGIApp, token: str, *, host: str = "127.0.0.1",
                 port: int | None = None) -> None:
        _need_token(token)
        self.app = app
        self.token = token
        self.csrf = hmac.new(token.encode(), b"csrf", hashlib.sha256).hexdigest()
        self.cookie = cookie_name(token)
        self.host = host
        self.port = port

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
        if not _served_host(headers.get("host"), self.host, self.port):
            # a DNS-rebinding page reaches the port under its own name: refuse it before the
            # token is even looked at
            response = PlainTextResponse("421: this studio is not served at that Host", 421)
        elif self._same(query.get("token"), self.token):
            # swap the token in the URL for a cookie, and drop it from the address bar
            rest = urlencode({k: v for k, v in query.items() if k != "token"})
            response = RedirectResponse(_sent_path(scope) + (f"?{rest}" if rest else ""), 303)
            response.set_cookie(self.cookie, self.token, httponly=True, samesite="strict")
        elif not self._same(_cookie(headers, self.cookie), self.token):
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


def _sent_path(scope: Scope) -> str:
    """The request's path as it was sent (``%3F`` in a run's id is not a query), as a path of
    this host: ``//evil.example/`` (or ``/\\evil.example``), which a browser reads as another
    host, becomes ``/evil.example/`` (``/%5Cevil.example``)."""
    sent = scope.get("raw_path") or scope["path"]  # bytes are escaped as they are
    return "/" + quote(sent, safe=_PATH_SAFE).lstrip("/")


_PATH_SAFE = "/%:@!$&'()*+,;=-._~"
"""What a path keeps as it is (RFC 3986's characters of a path, its escapes with them)."""


def _secured(response: Response) -> Response:
    for key, value in _HEADERS.items():
        response.headers[key] = value
    return response


def _cookie(headers: Headers, wanted: str) -> str | None:
    for part in headers.get("cookie", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == wanted:
            return value
    return None


_WILDCARDS = ("", "0.0.0.0", "::")
_LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def _served_host(value: str | None, host: str, port: int | None) -> bool:
    """Whether a request's ``Host:`` names where the studio is served: its own address, or
    this machine's loopback names when it serves there; on every interface (``0.0.0.0``),
    any IP address, since a rebinding page comes under a DNS name."""
    if not value:
        return False
    try:
        parts = urlsplit(f"//{value}")
        name, given = (parts.hostname or ""), parts.port
    except ValueError:  # a port that is not a number, an unclosed bracket
        return False
    if parts.username is not None or parts.password is not None or parts.path:
        return False
    if port is not None and (given or 80) != port:
        return False
    served = host.strip("[]").lower()
    local = is_loopback(served) or served in _WILDCARDS
    if name == served or (local and name in _LOCAL_NAMES):
        return True
    if served not in _WILDCARDS:
        return False
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _same_origin(headers: Headers) -> bool:
    """A POST from a page of another site carries its Origin: refuse it."""
    origin = headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    return urlsplit(origin).netloc == headers.get("host")
