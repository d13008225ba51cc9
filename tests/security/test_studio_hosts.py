"""The studio checks ``Host:`` as ``mcp serve`` does (issue 34, item 9).

A DNS-rebinding page (``evil.example`` resolving to 127.0.0.1) reaches the studio's port under
its own name, with a matching ``Origin``: only the token stood in its way. Now a request naming
a host the studio is not served at is refused before the token is looked at.
"""

# ruff: noqa: F811 - the studio's fixtures are imported by name, and the tests take them
from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from jianmu.studio import create_app
from tests.studio.conftest import TOKEN, checkpoints, run_id  # noqa: F401
from tests.studio.test_app import _csrf
from tests.support.studio import studio_sources

PORT = 8765


def _studio(checkpoints: Path, host: str = "127.0.0.1", port: int | None = PORT) -> TestClient:
    app = create_app(studio_sources(checkpoints), TOKEN, by="tester", host=host, port=port)
    return TestClient(app, base_url=f"http://127.0.0.1:{PORT}", follow_redirects=False)


def test_a_rebinding_page_is_refused_even_with_the_token(checkpoints: Path, run_id: str) -> None:
    evil = {"Host": f"evil.example:{PORT}", "Origin": f"http://evil.example:{PORT}"}
    with _studio(checkpoints) as studio:
        opened = studio.get(f"/?token={TOKEN}", headers=evil)
        assert opened.status_code == 421 and "set-cookie" not in opened.headers
        assert studio.get(f"/?token={TOKEN}").status_code == 303  # the cookie, for the next
        csrf = _csrf(studio, run_id)
        answer = studio.post(f"/run/cp/{run_id}/approve", json={"call_id": "deploy_1"},
                             headers={**evil, "X-CSRF-Token": csrf})
        assert answer.status_code == 421
        assert studio.get(f"/api/run/cp/{run_id}", headers=evil).status_code == 421
        view = studio.get(f"/api/run/cp/{run_id}").json()
        assert [t for t in view["timeline"] if t["kind"] == "decision"] == []


@pytest.mark.parametrize(
    ("served", "port", "host", "ok"),
    [("127.0.0.1", PORT, f"127.0.0.1:{PORT}", True), ("127.0.0.1", PORT, f"localhost:{PORT}", True),
     ("127.0.0.1", PORT, f"[::1]:{PORT}", True), ("localhost", PORT, f"LOCALHOST:{PORT}", True),
     ("127.0.0.1", PORT, "127.0.0.1:9999", False), ("127.0.0.1", PORT, "127.0.0.1", False),
     ("127.0.0.1", PORT, f"evil.example:{PORT}", False), ("127.0.0.1", PORT, "", False),
     ("127.0.0.1", PORT, f"127.0.0.1.evil.example:{PORT}", False),
     ("127.0.0.1", PORT, f"localhost.:{PORT}", False),
     ("127.0.0.1", PORT, f"x@127.0.0.1:{PORT}", False),
     ("127.0.0.1", PORT, f"127.0.0.1:{PORT}/x", False),
     ("127.0.0.1", PORT, "127.0.0.1:port", False), ("127.0.0.1", PORT, "[::1", False),
     ("127.0.0.1", None, "127.0.0.1:40123", True), ("127.0.0.1", None, "evil.example", False),
     ("0.0.0.0", PORT, f"192.168.1.5:{PORT}", True), ("0.0.0.0", PORT, f"localhost:{PORT}", True),
     ("0.0.0.0", PORT, f"evil.example:{PORT}", False), ("::", PORT, f"[fe80::1]:{PORT}", True),
     ("studio.lan", PORT, f"studio.lan:{PORT}", True),
     ("studio.lan", PORT, f"localhost:{PORT}", False),
     ("studio.lan", PORT, f"evil.example:{PORT}", False),
     ("10.0.0.2", PORT, f"10.0.0.3:{PORT}", False)],
)  # fmt: skip
def test_only_the_hosts_the_studio_is_served_at_pass(
    checkpoints: Path, run_id: str, served: str, port: int | None, host: str, ok: bool
) -> None:
    with _studio(checkpoints, served, port) as studio:
        answer = studio.get(f"/?token={TOKEN}", headers={"Host": host})
        assert answer.status_code == (303 if ok else 421), host


def test_a_second_studio_on_another_port_does_not_lock_out_the_first(
        checkpoints: Path, run_id: str) -> None:
    # a browser keeps one cookie jar per host, whatever the port: two studios (two projects)
    # open in one browser must not overwrite each other's cookie
    first = create_app(studio_sources(checkpoints), TOKEN, by="tester", port=PORT)
    second = create_app(studio_sources(checkpoints), "another-token", by="tester", port=PORT + 1)
    with TestClient(first, base_url=f"http://127.0.0.1:{PORT}", follow_redirects=False) as one, \
            TestClient(second, base_url=f"http://127.0.0.1:{PORT + 1}",
                       follow_redirects=False) as two:
        assert one.get(f"/?token={TOKEN}").status_code == 303
        assert two.get("/?token=another-token").status_code == 303
        for each in (one, two):  # one jar for the host, as a browser keeps
            for cookie in [*one.cookies.jar, *two.cookies.jar]:
                each.cookies.jar.set_cookie(cookie)
        assert one.get(f"/api/run/cp/{run_id}").status_code == 200
        assert two.get(f"/api/run/cp/{run_id}").status_code == 200
