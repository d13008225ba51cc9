"""What a caller gets wrong gets a clear error: unknown trees, bad inputs, no database, no run."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from jianmu.durable import DurableEngine
from jianmu.errors import (
    DurableDatabaseError,
    RunNotFoundError,
    TreeInputError,
    UnknownTreeError,
)
from jianmu.runtime.runner import RunStatus
from tests.support.durable import Workers

pytestmark = pytest.mark.timeout(400)


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """Errors do not depend on the database: SQLite only, to keep these quick."""
    return f"sqlite:///{tmp_path / 'durable.sqlite'}"


def test_unknown_tree_names_the_registered_ones(client: Any) -> None:
    with pytest.raises(UnknownTreeError) as caught:
        asyncio.run(client.start("no_such_tree", {}))
    message = str(caught.value)
    assert "no_such_tree" in message
    for name in ("confirm", "lines", "quick"):
        assert name in message
    assert client.runs() == []  # nothing was enqueued


def test_inputs_that_fail_the_schema(client: Any, tmp_path: Path) -> None:
    with pytest.raises(TreeInputError, match="lines"):
        asyncio.run(client.start("lines", {"path": str(tmp_path / "x")}))  # no `asks`
    with pytest.raises(TreeInputError):
        asyncio.run(client.start("lines", {"path": 1, "asks": "a", "hang_at": "soon"}))
    with pytest.raises(TreeInputError, match="JSON object"):
        asyncio.run(client.start("lines", ["not", "a", "dict"]))  # type: ignore[arg-type]
    assert client.runs() == []


def test_unreachable_database_names_the_url_without_its_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    url = "postgresql://user:secret@127.0.0.1:1/db"
    engine = DurableEngine(url, name="unreachable")
    engine.tree("t")(lambda inputs: None)  # type: ignore[arg-type,return-value]
    try:
        for attempt in (lambda: asyncio.run(engine.start("t", {})), engine.launch,
                        lambda: engine.runs()):
            with pytest.raises(DurableDatabaseError) as caught:
                attempt()
            message = str(caught.value)
            assert "127.0.0.1:1/db" in message and "user" in message
            assert "secret" not in message
            assert "secret" not in repr(caught.value)
    finally:
        engine.shutdown()


def test_unknown_run_and_unknown_approval(client: Any, tmp_path: Path) -> None:
    for attempt in (lambda: asyncio.run(client.result("nope", timeout=5)),
                    lambda: asyncio.run(client.approve("nope", "call_1")),
                    lambda: asyncio.run(client.reject("nope", "call_1", "no")),
                    lambda: client.run_info("nope")):
        with pytest.raises(RunNotFoundError, match="nope"):
            attempt()
    # a run that exists (queued: no worker here) but waits for no such approval
    run_id = asyncio.run(client.start("confirm", {"path": str(tmp_path / "deployed.txt")}))
    assert client.run_info(run_id).status == "queued"
    with pytest.raises(RunNotFoundError, match=r"waits for no approval 'deploy_9'.*none"):
        asyncio.run(client.approve(run_id, "deploy_9"))
    with pytest.raises(ValueError, match="bogus"):
        client.runs(status="bogus")
    assert [r.run_id for r in client.runs(status="queued")] == [run_id]
    assert client.runs(status="success") == []


def test_a_factory_that_raises_fails_the_run(workers: Workers, client: Any) -> None:
    workers.start("w1")
    run_id = asyncio.run(client.start("broken", {"why": "no API key"}))
    result = asyncio.run(client.result(run_id, timeout=120))
    assert result.status is RunStatus.FAILURE
    assert result.error is not None and "no API key" in result.error
    info = client.run_info(run_id)
    assert info.status == "failure"
    assert info.error is not None and "no API key" in info.error


def test_a_plain_def_update_async_says_async_def_as_in_a_plain_run(
    workers: Workers, client: Any
) -> None:
    """In a durable run (the node's work one step) it failed with Python's "object Status
    can't be used in 'await' expression"; a plain run says it must be async def."""
    workers.start("w1")
    run_id = asyncio.run(client.start("plain_def", {}))
    result = asyncio.run(client.result(run_id, timeout=120))
    assert result.status is RunStatus.FAILURE
    assert result.error is not None and result.error.startswith(
        "plain: TypeError: update_async must be a coroutine function, `async def "
        "update_async(self) -> Status`, but it returned <Status.SUCCESS: 'SUCCESS'>"), result.error


@pytest.mark.parametrize("name", ["t", "My App", "a" * 257, "app.v2"])
def test_an_app_name_dbos_refuses_is_refused_when_the_engine_is_made(
    db_url: str, name: str
) -> None:
    """DurableEngine(name="t") was taken, and every worker then failed at launch with DBOS's
    "Error initializing DBOS Transact: Invalid app name"."""
    from jianmu.errors import ConfigError

    with pytest.raises(ConfigError, match=r"durable app name .* must be 3-256 lowercase"):
        DurableEngine(db_url, name=name)
    assert DurableEngine(db_url, name="my-app_2").name == "my-app_2"


def test_a_bad_dbos_log_level_names_the_variable(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """JIANMU_DBOS_LOG_LEVEL=bogus failed the launch with logging's bare "ValueError: Unknown
    level: 'bogus'", naming no variable."""
    from jianmu.errors import ConfigError

    monkeypatch.setenv("JIANMU_DBOS_LOG_LEVEL", "bogus")
    engine = DurableEngine(db_url, name="levels")
    with pytest.raises(ConfigError, match=r"JIANMU_DBOS_LOG_LEVEL='bogus' is not a log level; "
                       r"use DEBUG, INFO, WARNING, ERROR or CRITICAL"):
        engine.launch()
    assert not engine.launched


def test_a_sqlite_too_old_for_dbos_on_python_3_12_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    # DBOS 3.x on Python 3.12+ stamps rows with unixepoch('subsec') (SQLite 3.42): an older
    # SQLite fails the launch on a NOT NULL column, which says nothing of the cause
    import sqlite3
    import sys

    from jianmu.durable import engine

    monkeypatch.setattr(sys, "version_info", (3, 12, 1, "final", 0))
    monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 40, 1))
    monkeypatch.setattr(sqlite3, "sqlite_version", "3.40.1")
    hint = engine._old_sqlite_hint("sqlite:////tmp/runs.sqlite")
    assert "needs SQLite 3.42 or later" in hint and "SQLite 3.40.1" in hint
    assert engine._old_sqlite_hint("postgresql://db.example/runs") == ""
    monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 46, 1))
    assert engine._old_sqlite_hint("sqlite:////tmp/runs.sqlite") == ""
    monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 40, 1))
    monkeypatch.setattr(sys, "version_info", (3, 11, 7, "final", 0))
    assert engine._old_sqlite_hint("sqlite:////tmp/runs.sqlite") == ""


@pytest.mark.parametrize("message", [b"no", 3, {"why": "x"}])
def test_a_decisions_message_that_is_not_text_is_refused_before_it_is_sent(
    db_url: str, message: Any,
) -> None:
    # sent, the worker's runner took it as it came: b"no" failed every checkpoint after it
    engine = DurableEngine(db_url)
    for decide in (engine.approve, engine.reject):
        with pytest.raises(TypeError, match="a decision's message is text"):
            asyncio.run(decide("run", "call", message))


def test_a_tree_name_registered_twice_is_refused(db_url: str) -> None:
    """A second ``@engine.tree("greet")`` silently replaced the first: runs of one name built
    whichever factory each worker's module registered last."""
    from jianmu.errors import ConfigError

    engine = DurableEngine(db_url, name="twice")

    def first(inputs: dict[str, Any]) -> Any: ...

    def second(inputs: dict[str, Any]) -> Any: ...

    engine.tree("greet")(first)
    engine.tree("greet")(first)  # the same factory again (a module imported twice) is no clash
    with pytest.raises(ConfigError, match=r"tree 'greet' is registered already \(by '.*\.first'\); "
                                          r"give '.*\.second' a name of its own"):
        engine.tree("greet")(second)
    assert engine._trees["greet"].factory is first
    # a bare @engine.tree took the factory for the name and registered nothing: "no tree
    # 'greet' is registered (registered: none)" at the first run; a schema not a model failed
    # there too (AttributeError: model_validate)
    with pytest.raises(ConfigError, match=r"a tree's name is a non-empty string, got <function"
                                          r".*: write @engine.tree\('NAME'\)"):
        engine.tree(second)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"inputs of tree 'other' are a pydantic model class"):
        engine.tree("other", inputs=dict)  # type: ignore[arg-type]
    assert engine.trees == ["greet"]


@pytest.mark.parametrize("url", ["mysql://u:secret@db/app", "nonsense", "sqlite:///",
                                 "sqlite://relative.db"])
def test_a_database_url_dbos_cannot_use_is_refused_when_the_engine_is_made(url: str) -> None:
    """``DurableEngine("mysql://...")`` was taken, and its first client call failed in psycopg's
    words ("failed to resolve host 'db'"): DBOS reads any scheme as PostgreSQL's."""
    from jianmu.errors import ConfigError

    with pytest.raises(ConfigError, match=r"is not one DBOS takes: give postgresql://") as got:
        DurableEngine(url, name="urls")
    assert "secret" not in str(got.value)


def test_a_folder_as_the_sqlite_database_says_so(tmp_path: Path) -> None:
    """``sqlite:////some/folder`` failed with SQLite's bare "unable to open database file"."""
    engine = DurableEngine(f"sqlite:///{tmp_path}", name="folder")
    try:
        with pytest.raises(DurableDatabaseError, match=r"is a folder; name a file in it "
                                                       r"\(sqlite:///.*/durable\.sqlite\)"):
            engine.client  # noqa: B018
    finally:
        engine.shutdown()


@pytest.mark.parametrize("built", [(None, None, None), ("root", "AgentState")])
def test_a_factory_that_returns_a_wrong_tuple_says_what_to_return(db_url: str, built: Any) -> None:
    """A factory returning three things failed the run with "ValueError: too many values to
    unpack (expected 2)"; one returning a state that is no StateManager, with an AttributeError."""
    engine = DurableEngine(db_url, name="tuples")
    engine.tree("t")(lambda inputs: built)
    with pytest.raises(TypeError, match=r"the factory of tree 't' returned \(.*\); return the "
                                        r"root, or \(root, StateManager\)"):
        engine.build_runner("t", {"task": "go"}, run_id="r1")
