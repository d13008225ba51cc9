"""SQLiteCheckpointer and restoring a suspended run in a new runner."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import py_trees
import pytest
from py_trees.common import Status

from jianmu.errors import CheckpointError
from jianmu.nodes import AgentState
from jianmu.runtime import (
    ApprovalRequest,
    AsyncNode,
    ReactiveRunner,
    RunStatus,
    SQLiteCheckpointer,
)
from jianmu.state import StateManager

pytestmark = pytest.mark.anyio


class Count(AsyncNode):
    """Appends its name to ``log``; a second run of it would show twice."""

    async def update_async(self) -> Status:
        self.state.update({"log": [*(self.state.get("log") or []), self.name]})
        return Status.SUCCESS


class Waits(Count):
    """Count, once it has waited: each takes a tick of its own."""

    async def update_async(self) -> Status:
        await asyncio.sleep(0)
        return await super().update_async()


class Ask(AsyncNode):
    async def update_async(self) -> Status:
        decision = self.ctx.interaction.decision("deploy")
        if decision is None:
            self.ctx.interaction.suspend(ApprovalRequest(id="deploy", summary="deploy?"))
            return Status.RUNNING
        self.state.write_port("approved", decision.approved)
        return Status.SUCCESS


def build_tree() -> py_trees.behaviour.Behaviour:
    # two children share a name: checkpoint keys are paths, not names
    return py_trees.composites.Sequence(
        "Root",
        memory=True,
        children=[Count("step"), Count("step"), Ask("ask"), Count("after")],
    )


async def test_suspend_checkpoint_restore_in_new_runner(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite"
    first = ReactiveRunner(build_tree(), StateManager(), checkpointer=SQLiteCheckpointer(db))
    result = await first.run(timeout=10)
    assert result.status is RunStatus.SUSPENDED
    run_id = result.run_id
    first.checkpointer.close()  # type: ignore[union-attr]

    store = SQLiteCheckpointer(db)
    saved = store.load(run_id)
    assert saved is not None and saved["status"] == "suspended"
    assert saved["nodes"]["0/0"]["name"] == saved["nodes"]["0/1"]["name"] == "step"
    json.dumps(saved)

    second = ReactiveRunner.restore(build_tree(), store, run_id, state_manager=StateManager())
    assert [r.id for r in second.pending] == ["deploy"]
    second.approve("deploy")
    done = await second.run(timeout=10)
    assert done.status is RunStatus.SUCCESS
    assert second.state.get("log") == ["step", "step", "after"]  # nothing ran twice
    assert second.state.get("approved") is True
    assert store.load(run_id)["status"] == "success"  # type: ignore[index]


async def test_restore_refuses_a_different_tree(tmp_path: Path) -> None:
    store = SQLiteCheckpointer(tmp_path / "runs.sqlite")
    result = await ReactiveRunner(build_tree(), checkpointer=store).run(timeout=10)
    other = py_trees.composites.Sequence("Other", memory=True, children=[Count("x")])
    with pytest.raises(CheckpointError, match="does not match"):
        ReactiveRunner.restore(other, store, result.run_id)
    with pytest.raises(CheckpointError, match="no checkpoint"):
        ReactiveRunner.restore(build_tree(), store, "missing")



async def test_restore_refuses_a_tree_without_a_node_the_checkpoint_has(tmp_path: Path) -> None:
    """A tree that lacks the node the run waits in (a script edited between the run and its
    resume) is refused: before, the approval was taken, the run ended SUCCESS without the
    step, and that end was saved over the run, which no resume could then take up."""
    store = SQLiteCheckpointer(tmp_path / "runs.sqlite")
    result = await ReactiveRunner(build_tree(), checkpointer=store).run(timeout=10)
    assert result.status is RunStatus.SUSPENDED
    shorter = py_trees.composites.Sequence(
        "Root", memory=True, children=[Count("step"), Count("step")]
    )
    with pytest.raises(CheckpointError) as raised:
        ReactiveRunner.restore(shorter, store, result.run_id)
    assert str(raised.value) == (
        "the tree does not match the checkpoint: node 0/2 ('ask') of the checkpoint is not in "
        "this tree"
    )
    assert store.load(result.run_id)["status"] == "suspended"  # type: ignore[index]
    assert store.holder(result.run_id) is None  # the refused restore let the run go
    again = ReactiveRunner.restore(build_tree(), store, result.run_id)
    again.approve("deploy")
    assert (await again.run(timeout=10)).status is RunStatus.SUCCESS
    assert again.state.get("log") == ["step", "step", "after"]

async def test_checkpoint_every_n_ticks() -> None:
    store = SQLiteCheckpointer(":memory:")
    children = [Count(f"c{i}") for i in range(4)]
    root = py_trees.composites.Sequence("Root", memory=True, children=children)
    runner = ReactiveRunner(root, checkpointer=store, checkpoint_every=1)
    result = await runner.run(timeout=10)
    assert result.status is RunStatus.SUCCESS
    runs = store.list_runs()
    assert runs[0][0] == runner.run_id and runs[0][1] == "success"


class RecordingCheckpointer(SQLiteCheckpointer):
    """Keeps (status, ticks) of every save, not just the last row."""

    def __init__(self) -> None:
        super().__init__(":memory:")
        self.saves: list[tuple[str, int]] = []

    def save(self, run_id: str, checkpoint: dict[str, object]) -> None:
        self.saves.append((str(checkpoint["status"]), int(checkpoint["ticks"])))  # type: ignore[call-overload]
        super().save(run_id, checkpoint)


@pytest.mark.parametrize("every", [1, 2, 3])
async def test_checkpoint_every_n_ticks_saves_each_intermediate_row(every: int) -> None:
    store = RecordingCheckpointer()
    root = py_trees.composites.Sequence(
        "Root", memory=True, children=[Waits(f"c{i}") for i in range(8)]
    )
    runner = ReactiveRunner(root, checkpointer=store, checkpoint_every=every)
    result = await runner.run(timeout=10)
    assert result.status is RunStatus.SUCCESS
    running = [ticks for status, ticks in store.saves if status == "running"]
    # every Nth tick while the tree runs, none in between (the last tick ends the run)
    assert running == [t for t in range(1, runner.ticks) if t % every == 0]
    assert len(running) >= 2
    assert store.saves[-1][0] == "success"


def test_checkpointer_rejects_non_json() -> None:
    with SQLiteCheckpointer() as store, pytest.raises(CheckpointError, match="not JSON"):
        store.save("r", {"x": object()})


def _damage(db: Path, run_id: str, text: str) -> None:
    """Write ``text`` over the run's newest checkpoint row, as a damaged file would hold."""
    import sqlite3

    with sqlite3.connect(db) as con:
        con.execute("UPDATE checkpoints SET data = ? WHERE run_id = ? AND seq = "
                    "(SELECT MAX(seq) FROM checkpoints WHERE run_id = ?)", (text, run_id, run_id))


def _with(saved: dict[str, object], **changes: object) -> str:
    return json.dumps({**saved, **changes})


@pytest.mark.parametrize(("damage", "said"), [
    (lambda saved: "{oops", "is not JSON"),
    (lambda saved: "[1, 2]", "is not a JSON object"),
    (lambda saved: json.dumps({k: v for k, v in saved.items() if k != "state"}),
     "state: Field required"),
    (lambda saved: _with(saved, state="hello"), "state: Input should be a valid dictionary"),
    (lambda saved: _with(saved, ticks="many"), "ticks: Input should be a valid integer"),
    (lambda saved: _with(saved, ticks=-3), "ticks: Input should be greater than or equal to 0"),
    (lambda saved: _with(saved, nodes="x"), "nodes: Input should be a valid dictionary"),
    (lambda saved: _with(saved, interaction=[1]),
     "interaction: Input should be a valid dictionary"),
    (lambda saved: _with(saved, interaction={**saved["interaction"], "pending": [{"id": 5}]}),
     "requests cannot be restored"),
    (lambda saved: _with(saved, interaction={**saved["interaction"], "pending": ["never"]}),
     "requests cannot be restored"),
    (lambda saved: _with(saved, user_roles=7), "user_roles: Input should be a valid list"),
    (lambda saved: _with(saved, error=5), "error: Input should be a valid string"),
    (lambda saved: _with(saved, version=99), "unsupported checkpoint version 99"),
], ids=["text", "list", "no-state", "state-text", "ticks-text", "ticks-negative", "nodes",
        "interaction", "pending-object", "pending-unknown", "roles", "error", "version"])
async def test_a_damaged_checkpoint_is_a_clear_error_and_changes_nothing(
    tmp_path: Path, damage: object, said: str,
) -> None:
    db = tmp_path / "runs.sqlite"
    store = SQLiteCheckpointer(db)
    result = await ReactiveRunner(build_tree(), StateManager(), checkpointer=store).run(timeout=10)
    assert result.status is RunStatus.SUSPENDED
    saved = store.load(result.run_id)
    assert saved is not None
    text = damage(saved)  # type: ignore[operator]
    _damage(db, result.run_id, text)
    with pytest.raises(CheckpointError, match=said) as caught:
        ReactiveRunner.restore(build_tree(), store, result.run_id, state_manager=StateManager())
    assert result.run_id in str(caught.value) or "version" in said
    # the row is as it was, the run not claimed: once repaired, it goes on
    _damage(db, result.run_id, json.dumps(saved))
    again = ReactiveRunner.restore(build_tree(), store, result.run_id, state_manager=StateManager())
    again.approve("deploy")
    assert (await again.run(timeout=10)).status is RunStatus.SUCCESS
    store.close()


async def test_a_damaged_page_of_the_file_is_a_clear_error(tmp_path: Path) -> None:
    """A file that opens but whose pages are damaged (a disk's fault, a copy cut short): the
    read names the file and the run, as a `CheckpointError`, not sqlite3's bare error."""
    import sqlite3

    db = tmp_path / "runs.sqlite"
    store = SQLiteCheckpointer(db)
    result = await ReactiveRunner(build_tree(), StateManager(), checkpointer=store).run(timeout=10)
    store.close()
    plain = sqlite3.connect(db)
    plain.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    (root,), (size,) = (plain.execute(sql).fetchone() for sql in (
        "SELECT rootpage FROM sqlite_master WHERE name = 'checkpoints'", "PRAGMA page_size"))
    plain.close()
    data = bytearray(db.read_bytes())
    start = (root - 1) * size  # the checkpoints' table, its header and cells overwritten
    data[start:start + size] = b"\xff" * size
    db.write_bytes(bytes(data))
    damaged = SQLiteCheckpointer(db)
    with pytest.raises(CheckpointError, match=f"{result.run_id}.*{db.name}.*malformed"):
        damaged.load(result.run_id)
    with pytest.raises(CheckpointError, match="malformed"):
        ReactiveRunner.restore(build_tree(), damaged, result.run_id, state_manager=StateManager())
    with pytest.raises(CheckpointError, match="malformed"):
        damaged.list_runs()


def test_an_empty_run_id_is_refused_not_replaced() -> None:
    """A run id given as "" was silently replaced by a fresh one: its checkpoints were then
    saved under a name nobody knew."""
    with pytest.raises(ValueError, match="run id"):
        ReactiveRunner(build_tree(), StateManager(), run_id="")


async def test_a_state_that_no_longer_fits_its_schema_names_the_run(tmp_path: Path) -> None:
    from jianmu.errors import StateValidationError

    store = SQLiteCheckpointer(tmp_path / "runs.sqlite")
    state = StateManager(AgentState)
    result = await ReactiveRunner(build_tree(), state, checkpointer=store).run(timeout=10)

    class Changed(AgentState):
        rounds: str  # type: ignore[assignment]  # was an int when the run was saved

    with pytest.raises(StateValidationError, match=f"run {result.run_id!r}.*rounds"):
        ReactiveRunner.restore(build_tree(), store, result.run_id,
                               state_manager=StateManager(Changed))
    assert store.holder(result.run_id) is None  # refused: nothing claimed, nothing changed


def test_a_store_made_before_leases_named_their_process_still_leases(tmp_path: Path) -> None:
    """A file whose ``jianmu_leases`` table predates its ``process`` column (the first leases
    had none) made every claim fail: "table jianmu_leases has no column named process"."""
    import sqlite3

    db = tmp_path / "runs.sqlite"
    old = sqlite3.connect(db)
    old.execute("CREATE TABLE jianmu_leases (run_id TEXT PRIMARY KEY, owner TEXT NOT NULL,"
                " expires REAL NOT NULL)")
    old.execute("INSERT INTO jianmu_leases VALUES ('held', 'an-old-owner', 0)")
    old.commit()
    old.close()
    with SQLiteCheckpointer(db) as store:
        assert store.claim("r", "me").owner == "me"
        assert store.claim("held", "me").owner == "me"  # the old owner's lapsed lease


def test_two_processes_opening_a_store_from_before_leases_named_their_process_both_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Both saw the ``process`` column missing and both added it: the second failed to open,
    "duplicate column name: process" (two `jianmu resume` started at once on an old file)."""
    import sqlite3

    db = tmp_path / "runs.sqlite"
    with sqlite3.connect(db) as old:
        old.execute("CREATE TABLE jianmu_leases (run_id TEXT PRIMARY KEY, owner TEXT NOT NULL,"
                    " expires REAL NOT NULL)")
    old.close()
    read = SQLiteCheckpointer._lease_columns

    def other_opener_between(store: SQLiteCheckpointer) -> set[str]:
        columns = read(store)
        if "process" not in columns:  # the other process adds it just after this one looked
            monkeypatch.setattr(SQLiteCheckpointer, "_lease_columns", read)
            with sqlite3.connect(db) as other:
                other.execute("ALTER TABLE jianmu_leases ADD COLUMN process TEXT NOT NULL"
                              " DEFAULT ''")
            other.close()
        return columns

    monkeypatch.setattr(SQLiteCheckpointer, "_lease_columns", other_opener_between)
    with SQLiteCheckpointer(db) as store:
        assert store.claim("r", "me").owner == "me"


def test_another_programs_database_is_refused_at_open_and_left_as_it_was(
    tmp_path: Path,
) -> None:
    """An SQLite file of another program with a ``checkpoints`` table of its own opened, got
    Jianmu's tables written into it, and failed later mid-run ("no such column: seq")."""
    import sqlite3

    db = tmp_path / "app.sqlite"
    with sqlite3.connect(db) as other:
        other.execute("CREATE TABLE checkpoints (x)")
        other.execute("INSERT INTO checkpoints VALUES (1)")
    with pytest.raises(CheckpointError, match=r"cannot open checkpoint store .*app\.sqlite.*: "
                       r"its table 'checkpoints' is not Jianmu's \(no column created, data, "
                       r"run_id, seq"):
        SQLiteCheckpointer(db)
    with sqlite3.connect(db) as other:
        tables = {row[0] for row in other.execute("SELECT name FROM sqlite_master")}
        assert tables == {"checkpoints"}
        assert other.execute("PRAGMA journal_mode").fetchone()[0] != "wal"


def test_a_checkpoint_path_that_is_a_folder_says_so(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=r"cannot open checkpoint store .*: it is a "
                       "folder; name a file"):
        SQLiteCheckpointer(tmp_path)


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), "5", True, None])
def test_a_busy_timeout_that_is_no_wait_is_refused(tmp_path: Path, bad: object) -> None:
    with pytest.raises(ValueError, match="busy_timeout must be a number of seconds"):
        SQLiteCheckpointer(tmp_path / "runs.sqlite", busy_timeout=bad)
