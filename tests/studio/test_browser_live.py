"""A live run in a real browser: the page is sent what changed (`jianmu.studio.patch`) and
puts the run together from it, and its timeline keeps what it drew (a run of hundreds of
turns was drawn whole again on every update: 0.1-0.2 s of script each, growing with the run).
Skips like `test_browser` when Chromium is missing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jianmu.studio import create_app
from tests.studio.test_browser import (  # noqa: F401 - the fixtures
    TOKEN,
    WAIT_S,
    _api,
    _no_alert,
    _text,
    _until,
    driver,
)
from tests.support.studio import serve, start_gated_run, start_suspended, studio_sources

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


def test_a_live_timeline_keeps_what_it_drew_and_adds_what_is_new(
        driver: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    checkpoints = tmp_path / "runs" / "checkpoints.sqlite"
    start_suspended(checkpoints)
    gates, thread = start_gated_run(checkpoints, 3 * WAIT_S)

    def calls(d: Any) -> int:
        return _text(d, "#timeline").count("started: wait_gate")

    try:
        with serve(create_app(studio_sources(checkpoints), TOKEN, by="browser")) as url:
            driver.get(f"{url}/?token={TOKEN}")
            _until(driver, lambda d: _api(d, "/api/run/cp/gated").get("points"), "a point")
            driver.get(f"{url}/run/cp/gated")
            _until(driver, lambda d: calls(d) == 1, "the first call")
            driver.execute_script(
                "window.first = document.querySelector('#timeline .point-group')")
            for gate in gates:
                gate.set()
            _until(driver, lambda d: _text(d, "#status") == "success", "the run to finish")
            assert calls(driver) == 3
            kept = driver.execute_script(
                "return window.first.isConnected && "
                "document.querySelector('#timeline .point-group') === window.first")
            assert kept, "the timeline was drawn again from scratch"
            shown = driver.execute_script(
                "return Array.from(document.querySelectorAll('#timeline .entry .title'))"
                ".map(e => e.textContent)")
            told = _api(driver, "/api/run/cp/gated")
            assert shown == [t["title"] for t in told["timeline"]]
            assert _text(driver, "#result") == told["result"] == "done"
            _no_alert(driver)
    finally:
        for gate in gates:
            gate.set()
        thread.join(WAIT_S)
        driver.get("about:blank")


def test_a_patch_sets_a_key_named_proto_as_a_key(
        driver: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """A run's data may hold a key ``__proto__`` (a model's arguments): patched in, it is a key
    of that object, and no object's prototype changes."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    checkpoints = tmp_path / "runs" / "checkpoints.sqlite"
    start_suspended(checkpoints)
    try:
        with serve(create_app(studio_sources(checkpoints), TOKEN, by="browser")) as url:
            driver.get(f"{url}/?token={TOKEN}")
            seen = driver.execute_async_script(
                "const done = arguments[arguments.length - 1];"
                "import('/static/patch.js').then(({applyPatch}) => {"
                "  const out = applyPatch({a: {}}, JSON.parse(arguments[0]));"
                "  done([Object.keys(out), Object.keys(out.a), out.a.bad, out.bad, ({}).bad,"
                "        JSON.stringify(out)]);"
                "});", '{"o": {"a": {"o": {"__proto__": {"=": {"bad": 1}}}},'
                       ' "__proto__": {"=": {"bad": 2}}}}')
            assert seen == [["a", "__proto__"], ["__proto__"], None, None, None,
                            '{"a":{"__proto__":{"bad":1}},"__proto__":{"bad":2}}']
    finally:
        driver.get("about:blank")
