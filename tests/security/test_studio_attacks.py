"""Attacks on Jianmu Studio: requests without the token, cross-site posts, markup in a run.

The studio shows a run's data (node names, tool arguments and results, which a model or a
tool chose) in a browser that can approve calls: none of it may become markup, and no request
may act without the printed token, or post without the page's CSRF token from the same site.
"""

# ruff: noqa: F811 - the studio's fixtures are imported by name, and the tests take them
from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from jianmu._secrets import is_loopback
from jianmu.studio.app import cookie_name
from tests.studio.conftest import TOKEN, anonymous, checkpoints, client, run_id  # noqa: F401
from tests.studio.test_app import _csrf, _finished
from tests.support.durable import wait_for


def test_every_request_needs_the_token(anonymous: TestClient, run_id: str) -> None:
    for path in ("/", f"/run/cp/{run_id}", f"/api/run/cp/{run_id}", "/static/studio.js",
                 "/static/graph.js", f"/api/run/cp/{run_id}/point/0",
                 f"/stream/run/cp/{run_id}", "/?token=wrong", "/?scope=all",
                 f"/api/run/cp/{run_id}/point/0/state"):
        answer = anonymous.get(path)
        assert answer.status_code == 403, path
        assert run_id not in answer.text
    assert anonymous.post(f"/run/cp/{run_id}/approve", json={"call_id": "deploy_1"}
                          ).status_code == 403
    assert anonymous.post(f"/run/cp/{run_id}/fork", json={"point": 0}).status_code == 403


def test_the_token_becomes_a_strict_http_only_cookie(anonymous: TestClient) -> None:
    answer = anonymous.get(f"/?status=suspended&token={TOKEN}")
    assert answer.status_code == 303
    assert answer.headers["location"] == "/?status=suspended"  # the token leaves the URL
    cookie = answer.headers["set-cookie"].lower()
    assert f"{cookie_name(TOKEN)}={TOKEN}".lower() in cookie
    assert "httponly" in cookie and "samesite=strict" in cookie
    page = anonymous.get("/?status=suspended")
    assert page.status_code == 200
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["referrer-policy"] == "no-referrer"


def test_posts_need_the_csrf_token(client: TestClient, run_id: str) -> None:
    url = f"/run/cp/{run_id}/approve"
    body = {"call_id": "deploy_1"}
    assert client.post(url, json=body).status_code == 403
    assert client.post(url, json=body, headers={"X-CSRF-Token": "nope"}).status_code == 403
    csrf = _csrf(client, run_id)
    crossed = client.post(url, json=body, headers={"X-CSRF-Token": csrf,
                                                   "Origin": "http://evil.example"})
    assert crossed.status_code == 403
    assert client.get(f"/api/run/cp/{run_id}").json()["status"] == "suspended"


def test_nothing_from_the_run_is_markup(client: TestClient, run_id: str) -> None:
    page = client.get(f"/run/cp/{run_id}").text
    assert "<script>alert" not in page  # node name, arguments
    assert "&lt;script&gt;alert(&quot;node&quot;)&lt;/script&gt; flow" in page
    assert "&lt;script&gt;alert(&#x27;args&#x27;)&lt;/script&gt;" in page
    assert page.count("<script") == 1  # the studio's own script only
    csrf = _csrf(client, run_id)
    client.post(f"/run/cp/{run_id}/approve", json={"call_id": "deploy_1"},
                headers={"X-CSRF-Token": csrf})
    wait_for(lambda: _finished(client, run_id), 60, "the run to finish")
    page = client.get(f"/run/cp/{run_id}").text
    assert "<script>alert" not in page and "<b>deployed" not in page  # the tool's result
    assert "&lt;b&gt;deployed&lt;/b&gt;" in page
    assert page.count("<script") == 1


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("localhost", True), ("::1", True), ("0.0.0.0", False),
    ("192.168.1.5", False), ("example.com", False)])
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_a_fork_needs_the_csrf_token_from_the_same_site(client: TestClient, run_id: str,
                                                        checkpoints: Path) -> None:
    from jianmu.runtime import SQLiteCheckpointer

    with SQLiteCheckpointer(checkpoints) as store:
        runs = len(store.list_runs())
    url = f"/run/cp/{run_id}/fork"
    assert client.post(url, json={"point": 0}).status_code == 403
    csrf = _csrf(client, run_id)
    crossed = client.post(url, json={"point": 0}, headers={"X-CSRF-Token": csrf,
                                                           "Origin": "http://evil.example"})
    assert crossed.status_code == 403
    with SQLiteCheckpointer(checkpoints) as store:
        assert len(store.list_runs()) == runs


def test_markup_in_a_forked_state_is_text(client: TestClient, run_id: str) -> None:
    points = client.get(f"/api/run/cp/{run_id}").json()["points"]
    before = next(p["n"] for p in points if "asked: deploy" in p["label"]) - 1
    state = client.get(f"/api/run/cp/{run_id}/point/{before}").json()["state"]
    bad = '<img src=x onerror="alert(1)"><script>alert("fork")</script>'
    state["root"]["actions"][0]["arguments"] = {"target": bad}
    csrf = _csrf(client, run_id)
    made = client.post(f"/run/cp/{run_id}/fork", json={"point": before, "state": state},
                       headers={"X-CSRF-Token": csrf}).json()
    fork_id = made["run_id"]
    wait_for(lambda: client.get(f"/api/run/cp/{fork_id}").json()["pending"] or None, 60,
             "the fork to ask")
    page = client.get(f"/run/cp/{fork_id}").text
    assert "<img src=x" not in page and '<script>alert("fork")' not in page
    assert "&lt;img src=x onerror=" in page
    assert page.count("<script") == 1


def test_an_empty_token_is_refused_not_an_open_door(checkpoints: Path, run_id: str) -> None:
    # with "" as its token, "/?token=" (or an empty cookie) would open the studio to anyone
    from jianmu.studio import create_app
    from tests.support.studio import studio_sources

    sources = studio_sources(checkpoints)
    with pytest.raises(ValueError, match="token"):
        create_app(sources, "")
    sources[0].close()


def test_static_paths_reach_no_file_outside_the_static_folder(client: TestClient) -> None:
    for path in ("/static/%2e%2e/app.py", "/static/..%2fapp.py", "/static/%2e%2e%2fruns.py",
                 "/static/%2e%2e/%2e%2e/__init__.py", "/static//etc/passwd",
                 "/static/%2fetc%2fpasswd", "/static/..%5capp.py"):
        answer = client.get(path)
        assert answer.status_code == 404, path
        assert "create_app" not in answer.text and "root:" not in answer.text, path
    assert client.get("/static/studio.js").status_code == 200
