"""A run page's live stream while nothing happens, and when something then does: a page left
open on a waiting run must not rebuild the run's whole view on every poll (a run of thousands
of events costs the server a core per open page), and must still see a change made elsewhere."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jianmu.cli import main
from jianmu.studio import create_app
from jianmu.studio.app import cookie_name
from jianmu.studio.patch import apply_patch
from jianmu.studio.runs import FINISHED
from tests.studio.conftest import TOKEN
from tests.support.studio import studio_sources

KEEPALIVE = b": still here"


class _Counted:
    """A run source that counts how often a run's view is built."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.kind = inner.kind
        self.views = 0

    def view(self, run_id: str) -> dict[str, Any]:
        self.views += 1
        return dict(self.inner.view(run_id))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def _stream(app: Any, path: str, until: Callable[[list[bytes]], bool]) -> list[bytes]:
    """The chunks the stream at ``path`` sends until ``until`` holds; then the page leaves."""
    chunks: list[bytes] = []
    done = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            assert message["status"] == 200, message
        elif message["type"] == "http.response.body" and message.get("body"):
            chunks.append(message["body"])
            if until(chunks):
                done.set()

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
             "root_path": "", "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1),
             "headers": [(b"host", b"127.0.0.1"),
                         (b"cookie", f"{cookie_name(TOKEN)}={TOKEN}".encode())]}
    await asyncio.wait_for(app(scope, receive, send), 120)
    return chunks


def _events(chunks: list[bytes]) -> list[tuple[str, bytes]]:
    """Each event the stream sent: its name (``message`` when it has none) and its data."""
    out = []
    for event in b"".join(chunks).split(b"\n\n"):
        name, data = "message", None
        for line in event.split(b"\n"):
            if line.startswith(b"event: "):
                name = line[len(b"event: "):].decode()
            elif line.startswith(b"data: "):
                data = line[len(b"data: "):]
        if data is not None:
            out.append((name, data))
    return out


def _data(chunks: list[bytes]) -> list[dict[str, Any]]:
    """The run's view after each event: the whole view, or the last one patched."""
    views: list[dict[str, Any]] = []
    for name, data in _events(chunks):
        if name == "patch":
            told = json.loads(data)  # what changed, with the run's status
            views.append(apply_patch(views[-1], told["patch"]))
            assert views[-1]["status"] == told["status"]
        else:
            views.append(json.loads(data))
    return views


def test_an_idle_stream_does_not_rebuild_the_run(checkpoints: Path, run_id: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("jianmu.studio.app.POLL_S", 0.001)
    source = _Counted(studio_sources(checkpoints)[0])
    app = create_app([source], TOKEN, by="tester")
    # two keep-alive comments: sixty polls with nothing new
    chunks = asyncio.run(_stream(app, f"/stream/run/cp/{run_id}",
                                 lambda seen: sum(KEEPALIVE in c for c in seen) >= 2))
    assert [v["status"] for v in _data(chunks)] == ["suspended"]
    assert source.views <= 3, f"the view was built {source.views} times for one unchanged run"
    source.close()


def test_an_idle_stream_still_sees_a_decision_made_elsewhere(
        checkpoints: Path, run_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("jianmu.studio.app.POLL_S", 0.001)
    source = _Counted(studio_sources(checkpoints)[0])
    app = create_app([source], TOKEN, by="tester")
    config = str(checkpoints.parent / "jianmu.yaml")
    codes: list[int] = []
    terminal = threading.Thread(target=lambda: codes.append(
        main(["resume", run_id, "--config", config, "--approve", "deploy_1"])))

    def then_resumed(seen: list[bytes]) -> bool:
        if any(KEEPALIVE in c for c in seen) and not terminal.is_alive() and not codes:
            terminal.start()  # a terminal answers while the page idles
        return any(v["status"] == "success" for v in _data(seen))

    chunks = asyncio.run(_stream(app, f"/stream/run/cp/{run_id}", then_resumed))
    terminal.join(60)
    assert codes == [0]
    statuses = [v["status"] for v in _data(chunks)]
    assert statuses[0] == "suspended" and statuses[-1] == "success", statuses
    source.close()


def test_the_stream_of_a_run_answered_here_ends_with_who_answered(
        checkpoints: Path, run_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The studio's journal names who answered; the run goes on only once that is written, so
    the stream's last view (the page closes its source on it) says it too."""
    from tests.studio.test_ask_edit import _start_question

    monkeypatch.setattr("jianmu.studio.app.POLL_S", 0.001)
    asking = _start_question(checkpoints)
    source = studio_sources(checkpoints)[0]
    ended = threading.Event()  # the page has seen the run end
    write = source.journal.add

    def add(run: str, name: str, node: str | None = None, **fields: Any) -> None:
        # a journal written after the run was let go: written once the page saw the end
        for going in [t for t in threading.enumerate() if t.name == f"studio-run-{run}"]:
            going.join(60)
            ended.wait(60)
        write(run, name, node, **fields)

    monkeypatch.setattr(source.journal, "add", add)
    app = create_app([source], TOKEN, by="tester")
    views: list[dict[str, Any]] = []
    answering = threading.Thread(target=lambda: source.decide(
        asking, views[0]["pending"][0]["id"], True, None, "tester", answer="Lisbon"))

    def answered(seen: list[bytes]) -> bool:
        views[:] = _data(seen)
        if views and answering.ident is None:
            answering.start()  # the person answers on the page
        if views and views[-1]["status"] == "success":
            ended.set()
            return True
        return False

    asyncio.run(_stream(app, f"/stream/run/cp/{asking}", answered))
    answering.join(60)
    titles = [t["title"] for t in views[-1]["timeline"] if t["kind"] == "decision"]
    assert titles and titles[0].startswith("answered by tester"), titles
    source.close()


def test_a_long_live_run_is_sent_as_changes_not_whole_each_time(
        checkpoints: Path, run_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 50-turn run watched live: each update was the whole view again (2.6 MB sent for a run
    whose view is 0.1 MB, the square of its length); now the changes, which the page puts
    together into the run's view."""
    from jianmu import ReactiveRunner, ScriptedLLM, SQLiteCheckpointer, StateManager, tool
    from jianmu.nodes import AgentState, create_react_node
    from jianmu.studio.app import _jsonable

    monkeypatch.setattr("jianmu.studio.app.POLL_S", 0.01)  # a turn takes longer: no busy loop
    turns = 50
    gates = [threading.Event() for _ in range(turns)]

    @tool(timeout_seconds=None)
    async def wait_gate(step: int) -> str:
        """Wait until the page has seen the run so far.

        Args:
            step: which step.
        """
        await asyncio.to_thread(gates[step].wait, 120)
        return f"step {step} done " + "x" * 200

    llm = ScriptedLLM([[{"name": "wait_gate", "arguments": {"step": i}}] for i in range(turns)]
                      + ["done"])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    runner = ReactiveRunner(
        create_react_node(llm, [wait_gate], name="gated", max_iterations=turns + 1), state,
        checkpointer=SQLiteCheckpointer(str(checkpoints)), run_id="gated")
    source = studio_sources(checkpoints)[0]
    thread = threading.Thread(target=lambda: runner.run_sync(timeout=600), daemon=True)
    thread.start()
    try:
        while not source.store.history.points("gated"):
            gates[0].wait(0.01)  # the run's first point, before the page opens
        app = create_app([source], TOKEN, by="tester")
        opened = 0

        def follow(seen: list[bytes]) -> bool:
            nonlocal opened
            views = _data(seen)
            while opened < turns and len(views) > opened:  # one turn per update seen
                gates[opened].set()
                opened += 1
            return False  # followed until the stream ends it: the run ended, all written

        chunks = asyncio.run(_stream(app, "/stream/run/cp/gated", follow))
    finally:
        for gate in gates:
            gate.set()
        thread.join(60)
    final = _jsonable(source.view("gated"))
    assert _data(chunks)[-1] == final
    sent, whole = sum(map(len, chunks)), len(json.dumps(final))
    # the whole view first and last, the changes in between (each view whole: 26 times)
    assert sent < 4 * whole, f"{sent} bytes sent for a run whose view is {whole}"
    source.close()


def test_a_run_going_on_in_the_studio_is_not_rebuilt_while_it_waits(
        checkpoints: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run the studio goes on with (approved on the page) waits on a long tool call: its
    page's stream built the run's whole view again on every poll (a run of 2,000 entries:
    0.2 s of the server each half second, per open page), though nothing changed; now only
    when the run ticked or wrote something, and it still sees the run end."""
    from jianmu import ReactiveRunner, ScriptedLLM, SQLiteCheckpointer, StateManager, tool
    from jianmu.nodes import AgentState, create_react_node
    from jianmu.studio import CheckpointRuns, Restored
    from jianmu.studio.runs import Journal

    monkeypatch.setattr("jianmu.studio.app.POLL_S", 0.001)
    started, gate = threading.Event(), threading.Event()

    @tool(read_only=False, confirm=True)
    def begin() -> str:
        """Begin (asks a person first)."""
        return "begun"

    @tool(timeout_seconds=None)
    async def wait_gate() -> str:
        """Wait until the test opens the gate."""
        started.set()
        await asyncio.to_thread(gate.wait, 120)
        return "through"

    def model(messages: list[Any]) -> Any:
        told = sum(m.role == "tool" for m in messages)
        return ([{"name": "begin", "arguments": {}}], [{"name": "wait_gate", "arguments": {}}],
                "done")[min(told, 2)]

    def build() -> Any:
        return create_react_node(ScriptedLLM([model] * 4), [begin, wait_gate], name="gated")

    path = str(checkpoints)
    checkpoints.parent.mkdir(parents=True, exist_ok=True)
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    first = ReactiveRunner(build(), state, checkpointer=SQLiteCheckpointer(path), run_id="gated")
    assert first.run_sync(timeout=60).status.value == "suspended"

    def restore(run_id: str) -> Restored:
        store = SQLiteCheckpointer(path)
        runner = ReactiveRunner.restore(build(), store, run_id,
                                        state_manager=StateManager(AgentState))

        async def close() -> None:
            await runner.aclose()
            store.close()

        return Restored(runner, close)

    source = _Counted(CheckpointRuns(path, Journal(path), restore))
    source.decide("gated", first.interaction.snapshot()["pending"][0], True, None, "tester")
    assert started.wait(60)
    app = create_app([source], TOKEN, by="tester")
    built: list[int] = []

    def idle_then_end(seen: list[bytes]) -> bool:
        # ten keep-alives: 300 polls while the run waits, in which it writes only what its
        # call's start leaves to write (an event, a point or two)
        if sum(KEEPALIVE in c for c in seen) >= 10 and not gate.is_set():
            built.append(source.views)
            gate.set()
        return _data(seen)[-1]["status"] == "success"

    try:
        chunks = asyncio.run(_stream(app, "/stream/run/cp/gated", idle_then_end))
    finally:
        gate.set()
    assert built[0] <= 10, f"the view was built {built[0]} times in 300 polls of a waiting run"
    assert _data(chunks)[-1]["result"] == "done"
    source.close()


def _ended_before_its_last_event(checkpoints: Path) -> list[Any]:
    """A run that ended, as it is before its last event (``run.finished``) is written: that
    event's row, taken out."""
    import sqlite3

    from jianmu import ReactiveRunner, ScriptedLLM, SQLiteCheckpointer, StateManager
    from jianmu.nodes import AgentState, create_react_node

    checkpoints.parent.mkdir(parents=True, exist_ok=True)
    with SQLiteCheckpointer(str(checkpoints)) as store:
        state = StateManager(AgentState, {"messages": [{"role": "user", "content": "hi"}]})
        runner = ReactiveRunner(create_react_node(ScriptedLLM(["hello"]), [], name="chat"),
                                state, checkpointer=store, run_id="chat")
        assert runner.run_sync(timeout=60).ok
    with sqlite3.connect(checkpoints) as db:
        ending = db.execute("SELECT * FROM jianmu_events WHERE run_id = 'chat' AND"
                            " name = 'run.finished'").fetchall()
        assert len(ending) == 1
        db.execute("DELETE FROM jianmu_events WHERE run_id = 'chat' AND name = 'run.finished'")
    return ending


def test_the_stream_of_a_run_that_ended_waits_for_its_last_events(
        checkpoints: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run's checkpoint says it ended a moment before its last event (``run.finished``, the
    timeline's "run success") is written: the stream ended at the checkpoint, and the page
    closed its source, without that entry, until reloaded. Here that moment is held open."""
    import sqlite3

    from jianmu.studio import CheckpointRuns
    from jianmu.studio.runs import Journal

    monkeypatch.setattr("jianmu.studio.app.POLL_S", 0.001)
    ending = _ended_before_its_last_event(checkpoints)
    source = CheckpointRuns(str(checkpoints), Journal(str(checkpoints)))
    app = create_app([source], TOKEN, by="tester")

    def then_written(seen: list[bytes]) -> bool:
        views = _data(seen)
        if len(views) == 1 and sum(KEEPALIVE in c for c in seen) == 1:
            with sqlite3.connect(checkpoints) as db:  # the run's last event comes
                marks = ", ".join("?" * len(ending[0]))
                db.executemany(f"INSERT INTO jianmu_events VALUES ({marks})", ending)
        return "run success" in [t["title"] for t in views[-1]["timeline"]]

    chunks = asyncio.run(_stream(app, "/stream/run/cp/chat", then_written))
    views = _data(chunks)
    assert "run success" in [t["title"] for t in views[-1]["timeline"]]
    assert views[-1]["timeline"] == source.view("chat")["timeline"]
    assert views[0]["status"] == "success" and views[0]["settled"] is False
    assert views[-1]["settled"] is True
    source.close()


def test_a_run_whose_last_event_never_comes_ends_its_stream_as_it_is(
        checkpoints: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its process died between the checkpoint and the last event: after ``SETTLE_S`` the
    stream sends the run as it is, and ends (the page would otherwise follow it for ever)."""
    from jianmu.studio import CheckpointRuns
    from jianmu.studio.runs import Journal

    monkeypatch.setattr("jianmu.studio.app.POLL_S", 0.001)
    monkeypatch.setattr("jianmu.studio.app.SETTLE_S", 0.0)
    _ended_before_its_last_event(checkpoints)
    source = CheckpointRuns(str(checkpoints), Journal(str(checkpoints)))
    app = create_app([source], TOKEN, by="tester")
    chunks = asyncio.run(_stream(app, "/stream/run/cp/chat", lambda seen: False))
    views = _data(chunks)
    assert [v["settled"] for v in views] == [False, True]
    assert views[-1]["status"] == "success"
    source.close()


def test_a_run_that_went_on_long_still_waits_for_its_last_events(
        checkpoints: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The wait for a run's last events begins when it ends, not when its page opened: a run
    followed for longer than ``SETTLE_S`` was cut at its end without them."""
    import itertools
    import sqlite3

    from jianmu.studio import CheckpointRuns
    from jianmu.studio.runs import Journal

    monkeypatch.setattr("jianmu.studio.app.POLL_S", 0.001)
    ticks = itertools.count()
    monkeypatch.setattr("jianmu.studio.app._clock", lambda: float(next(ticks)))  # 1 s a look
    ending = _ended_before_its_last_event(checkpoints)
    with sqlite3.connect(checkpoints) as db:  # and before its final checkpoint: going on
        saved = db.execute("SELECT * FROM checkpoints WHERE run_id = 'chat'").fetchall()
        db.execute("DELETE FROM checkpoints WHERE run_id = 'chat'")
    source = CheckpointRuns(str(checkpoints), Journal(str(checkpoints)))
    app = create_app([source], TOKEN, by="tester")

    def write(table: str, rows: list[Any]) -> None:
        with sqlite3.connect(checkpoints) as db:
            marks = ", ".join("?" * len(rows[0]))
            db.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)

    def ends(seen: list[bytes]) -> bool:
        views = _data(seen)
        if views[-1]["status"] not in FINISHED and sum(KEEPALIVE in c for c in seen) == 1:
            write("checkpoints", saved)  # 30 polls later: it ends
        elif views[-1]["status"] == "success" and not views[-1]["settled"]:
            write("jianmu_events", ending)  # and its last event comes
        return False  # followed until the stream ends it

    chunks = asyncio.run(_stream(app, "/stream/run/cp/chat", ends))
    views = _data(chunks)
    assert views[0]["status"] not in FINISHED
    assert "run success" in [t["title"] for t in views[-1]["timeline"]]
    source.close()


def test_a_view_read_while_the_run_writes_its_end_is_never_settled_on_an_older_point(
        checkpoints: Path, run_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run's end writes its checkpoint, then its last point with ``run.finished``. A view
    that read the points before that last write and the events after it was "settled" on the
    point before the last, and a page following the run stopped there, its final answer
    unseen (a loaded machine hit it): the events are read first."""
    import sqlite3

    from jianmu import ReactiveRunner, ScriptedLLM, SQLiteCheckpointer, StateManager, tool
    from jianmu.nodes import AgentState, create_react_node
    from jianmu.studio.app import _jsonable, _settled

    @tool
    def look(step: int) -> str:
        """Look.

        Args:
            step: which step.
        """
        return f"saw {step}"

    llm = ScriptedLLM([[{"name": "look", "arguments": {"step": 1}}], "done"])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    runner = ReactiveRunner(create_react_node(llm, [look], name="looker"), state,
                            checkpointer=SQLiteCheckpointer(str(checkpoints)), run_id="ending")
    assert runner.run_sync().ok
    source = studio_sources(checkpoints)[0]
    final = _jsonable(source.view("ending"))
    assert _settled(final)

    # the run's last write taken back out, and made again while a view is being read
    db = sqlite3.connect(checkpoints)
    last = db.execute("SELECT MAX(point) FROM jianmu_points WHERE run_id = 'ending'").fetchone()[0]
    point = db.execute("SELECT * FROM jianmu_points WHERE run_id = 'ending' AND point = ?",
                       (last,)).fetchall()
    events = db.execute("SELECT * FROM jianmu_events WHERE run_id = 'ending' AND point = ?",
                        (last,)).fetchall()
    assert any(row[3] == "run.finished" for row in events)
    with db:
        db.execute("DELETE FROM jianmu_points WHERE run_id = 'ending' AND point = ?", (last,))
        db.execute("DELETE FROM jianmu_events WHERE run_id = 'ending' AND point = ?", (last,))
    source = studio_sources(checkpoints)[0]
    load = source.store.load

    def written_meanwhile(run_id: str) -> Any:
        with db:
            db.executemany("INSERT INTO jianmu_points VALUES (?, ?, ?, ?, ?)", point)
            db.executemany("INSERT INTO jianmu_events VALUES (?, ?, ?, ?, ?, ?)", events)
        return load(run_id)

    monkeypatch.setattr(source.store, "load", written_meanwhile)
    during = _jsonable(source.view("ending"))
    monkeypatch.undo()
    db.close()
    assert not _settled(during) or during == final  # settled only on the whole end
    assert _jsonable(source.view("ending")) == final  # and the next look has it all
