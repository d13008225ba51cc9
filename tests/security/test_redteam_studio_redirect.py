"""Red team, the studio's door: the redirect that swaps ``?token=`` for a cookie.

Fixed here: it sent the browser to the path as the server had decoded it. ``//evil.example/``
came back as ``Location: //evil.example/``, which a browser reads as another host (an open
redirect, the fresh cookie in hand), and a run's link with ``?token=`` whose id holds ``?`` or
``#`` (``/run/cp/a%3Fb%23c``) came back as ``/run/cp/a?b#c``: another run's page, the rest of
the id taken for a query and a fragment.
"""

# ruff: noqa: F811 - the studio's fixtures are imported by name, and the tests take them
from __future__ import annotations

from urllib.parse import urljoin, urlsplit

import pytest
from starlette.testclient import TestClient

from tests.studio.conftest import TOKEN, anonymous, checkpoints, run_id  # noqa: F401


@pytest.mark.parametrize(("path", "back"), [
    ("//evil.example/", "/evil.example/"),
    ("///evil.example/x", "/evil.example/x"),
    ("/\\evil.example/", "/%5Cevil.example/"),
    ("/run/cp/a%3Fb%23c", "/run/cp/a%3Fb%23c"),
    ("/run/cp/nightly%20%237%3F", "/run/cp/nightly%20%237%3F"),
    ("/run/cp/a%2Fb", "/run/cp/a%2Fb"),
    ("/run/cp/caf%C3%A9", "/run/cp/caf%C3%A9"),
])
def test_the_token_redirect_stays_on_the_studio_with_the_path_as_sent(
        anonymous: TestClient, path: str, back: str) -> None:
    answer = anonymous.get(f"http://127.0.0.1{path}?token={TOKEN}&status=running")
    assert answer.status_code == 303
    location = answer.headers["location"]
    assert location == f"{back}?status=running"
    # where a browser goes: this host, never one named in the path (a backslash is a slash
    # to a browser's URL parser)
    assert urlsplit(urljoin("http://127.0.0.1/", location.replace("\\", "/"))).netloc == \
        "127.0.0.1"


def test_a_runs_link_with_the_token_opens_that_run(anonymous: TestClient, run_id: str) -> None:
    answer = anonymous.get(f"/run/cp/{run_id}?token={TOKEN}")
    assert answer.headers["location"] == f"/run/cp/{run_id}"
    page = anonymous.get(answer.headers["location"])
    assert page.status_code == 200 and f'data-run="{run_id}"' in page.text
