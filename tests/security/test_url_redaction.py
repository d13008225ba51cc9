"""Passwords never leave a database URL (issue 27, item 11).

A ``?password=`` query parameter was shown as written, and a malformed URL echoed its password
through psycopg's error (``invalid percent-encoded token: "PASSWORD%zz"``). Now the user-info's
password, password query parameters and any ``key=value`` secret are masked in every message,
log line and ``repr`` that carries a URL, errors raised by drivers included.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from jianmu._secrets import redact_text, redact_url, url_secrets
from jianmu.config import AppConfig
from jianmu.errors import DurableError
from tests.support.durable import HERE, ROOT, Workers
from tests.support.forked_cli import DURABLE, run_jianmu

pytest.importorskip("dbos")

SECRET = "Pa55-w0rd-s3cret"

URLS = [
    # a password as a query parameter, the server unreachable
    f"postgresql://user@127.0.0.1:1/db?sslmode=disable&password={SECRET}",
    # user-info and query both
    f"postgresql://user:{SECRET}@127.0.0.1:1/db?password={SECRET}x",
    # malformed: psycopg quotes the URL, or the token that broke, in its error
    f"postgresql://user:{SECRET}%zz@127.0.0.1:1/db",
    f"postgresql://user:{SECRET}@[::1/db",
    f"postgresql://user:{SECRET}@local host/db",
    f"postgresql://user:{SECRET}@127.0.0.1:1/db?nosuchoption=1",
    f"postgresql://user:{SECRET}@127.0.0.1:notaport/db",
]


@pytest.mark.parametrize("url", URLS)
def test_engine_errors_and_reprs_keep_the_password_out(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jianmu.durable import DurableEngine

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    engine = DurableEngine(url, name="leaky")
    engine.tree("t")(lambda inputs: None)  # type: ignore[arg-type,return-value]
    try:
        for attempt in (lambda: asyncio.run(engine.start("t", {})), engine.launch,
                        lambda: engine.runs()):
            with pytest.raises(DurableError) as caught:
                attempt()
            shown = f"{caught.value} {caught.value!r} {caught.value.args}"
            assert SECRET not in shown, shown
        assert SECRET not in repr(engine) and "leaky" in repr(engine)
    finally:
        engine.shutdown()


def test_driver_log_lines_lose_the_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from jianmu.durable import DurableEngine

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    url = URLS[1]
    DurableEngine(url, name="logged").shutdown()
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("dbos").warning("could not connect to %s", url)
        logging.getLogger("sqlalchemy.engine").warning("dsn: password=%s host=h", SECRET)
        logging.getLogger("jianmu.durable").warning("heartbeat failed: %s", f"x {SECRET}x y")
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert len(caplog.records) == 3 and SECRET not in text, text
    assert "user:***@127.0.0.1:1/db" in text


def test_config_reprs_mask_urls_and_keys() -> None:
    config = AppConfig.model_validate({
        "durable": {"database_url": URLS[1]},
        "llm": {"api_key": SECRET, "base_url": f"https://u:{SECRET}@llm.example/v1"},
        "mcp": {"servers": {"remote": {"url": f"https://{SECRET}@mcp.example/mcp"}}},
    })
    for shown in (repr(config), str(config), repr(config.durable), str(config.llm)):
        assert SECRET not in shown, shown
    assert "postgresql://user:***@127.0.0.1:1/db?password=***" in repr(config.durable)
    assert config.durable.database_url == URLS[1]  # the value itself is untouched


def test_the_cli_never_prints_the_password(tmp_path: Path) -> None:
    workers = Workers("sqlite:///unused", tmp_path)
    app = f"{HERE / 'durable_app.py'}:engine"
    for url in (URLS[0], URLS[2], URLS[3]):
        for args in (["runs", "list", "--app", app], ["worker", app]):
            env = workers.env("cli", JIANMU_TEST_DB=url)
            done = run_jianmu(args, cwd=ROOT, env=env, timeout=120, preload=DURABLE)
            assert done.returncode == 1, done.stdout + done.stderr
            assert "jianmu: error:" in done.stderr and "Traceback" not in done.stderr
            assert SECRET not in done.stdout + done.stderr, done.stderr


@pytest.mark.parametrize(("text", "expected"), [
    (f"postgresql://u:{SECRET}@h/db", "postgresql://u:***@h/db"),
    (f"postgresql://h/db?user=u&password={SECRET}&sslmode=require",
     "postgresql://h/db?user=u&password=***&sslmode=require"),
    (f"host=h password='{SECRET} x' dbname=d", "host=h password='***' dbname=d"),
    (f'missing "=" after "postgresql://u:{SECRET}@h" in connection info string',
     'missing "=" after "postgresql://u:***@h" in connection info string'),
    (f'{{"password": "{SECRET}", "user": "u"}}', '{"password": "***", "user": "u"}'),
    (f"https://{SECRET}@github.com/org/repo", "https://***@github.com/org/repo"),
    ("postgresql://u@h/db", "postgresql://u@h/db"),  # a user name is no secret
    ("password authentication failed for user \"u\"",
     "password authentication failed for user \"u\""),
])
def test_redact_text(text: str, expected: str) -> None:
    assert redact_text(text) == expected


def test_known_secrets_leave_any_text() -> None:
    url = f"postgresql://user:{SECRET}%zz@127.0.0.1:1/db"
    assert url_secrets(url) == [f"{SECRET}%zz"]
    message = f'invalid percent-encoded token: "{SECRET}%zz"'
    assert redact_text(message, *url_secrets(url)) == 'invalid percent-encoded token: "***"'
    assert redact_url(url) == "postgresql://user:***@127.0.0.1:1/db"
