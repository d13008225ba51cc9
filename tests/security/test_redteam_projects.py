"""Red team, one studio and two projects (issue 34, item 8).

Project A's run, answered from a studio started in project B, wrote into B's folder; a fork of
it made from B's studio (started with ``--config``), or ``jianmu resume --config`` run in B,
ran under B's ``jianmu.yaml``, so a call that A's rules ask about ran without asking. Now a run
is resumed, decided and forked in its own folder under its own recorded config, and refused
with a clear message where that folder or config is gone.
"""

from __future__ import annotations

import re
from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from jianmu._cli.serve import restorer
from jianmu.cli import main
from jianmu.config import load_config
from jianmu.studio import CheckpointRuns, create_app
from jianmu.studio.runs import Journal
from tests.studio.test_app import _csrf
from tests.support.durable import wait_for

TOKEN = "test-token"
RUN_TIMEOUT = 20
FLOW = '''
import py_trees
from py_trees.common import Status

from jianmu import AgentState, AsyncNode, ToolExecutor
from jianmu.tools.registry import ToolSet


class Ask(AsyncNode):
    """Asks for one write_file call, as a model would."""

    def __init__(self, name: str) -> None:
        super().__init__(name)

    async def update_async(self) -> Status:
        self.state.update({"actions": [{"id": self.name, "name": "write_file",
                                        "arguments": {"path": self.name + ".txt",
                                                      "content": "x"}}]})
        return Status.SUCCESS


def build_tree():
    tools = ToolSet.resolve(["write_file"])
    return py_trees.composites.Sequence("two writes", memory=True, children=[
        Ask("first"), ToolExecutor("write_first", tools),
        Ask("second"), ToolExecutor("write_second", tools),
    ])


STATE_SCHEMA = AgentState
'''


class Projects:
    """Folders A and B, each with its own jianmu.yaml, sharing one checkpoint file."""

    def __init__(self, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.monkeypatch = monkeypatch
        self.checkpoints = tmp / "state" / "checkpoints.sqlite"
        self.checkpoints.parent.mkdir()
        self.flow = tmp / "flow.py"
        self.flow.write_text(FLOW, encoding="utf-8")
        self.a, self.b = tmp / "a", tmp / "b"
        for folder, policy in ((self.a, "confirm"), (self.b, "allow")):
            folder.mkdir()
            (folder / "jianmu.yaml").write_text(
                f"runtime:\n  checkpoint_path: {self.checkpoints}\n  timeout: {RUN_TIMEOUT}\n"
                f"guard:\n  tool_policy:\n    write_file: {policy}\n", encoding="utf-8")
        monkeypatch.setenv("XDG_STATE_HOME", str(tmp / "xdg"))

    def jianmu(self, where: Path, *args: str) -> tuple[int, str]:
        """``jianmu ARGS`` run in ``where``: its exit code and output."""
        self.monkeypatch.chdir(where)
        out = StringIO()
        with redirect_stdout(out):
            code = main(list(args))
        return code, out.getvalue()

    def start_in_a(self) -> str:
        """A's run, suspended on its first write (A's rules ask)."""
        code, out = self.jianmu(self.a, "run", str(self.flow), "--non-interactive")
        assert code == 3, out
        found = re.search(r"run (\w+)", out)
        assert found, out
        return found.group(1)

    def studio_in_b(self, explicit: bool) -> TestClient:
        """B's studio, as ``jianmu studio`` (``--config jianmu.yaml`` when ``explicit``)."""
        self.monkeypatch.chdir(self.b)
        config = load_config("jianmu.yaml" if explicit else None)
        path = str(self.checkpoints)
        sources = [CheckpointRuns(path, Journal(path), restorer(path, config, explicit))]
        app = create_app(sources, TOKEN, by="tester", project=str(self.b))
        return TestClient(app, base_url="http://127.0.0.1", follow_redirects=False)

    def written(self) -> dict[str, list[str]]:
        return {p.name: sorted(f.name for f in p.glob("*.txt")) for p in (self.a, self.b)}


@pytest.fixture
def projects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Projects:
    return Projects(tmp_path, monkeypatch)


def _asks_second(studio: TestClient, run_id: str) -> dict[str, Any] | None:
    view = studio.get(f"/api/run/cp/{run_id}").json()
    asked = [p["id"] for p in view["pending"]] == ["second"] and view["status"] == "suspended"
    return view if asked or view["status"] in ("success", "failure") else None


@pytest.mark.parametrize("explicit", [False, True])
def test_a_decision_from_another_projects_studio_runs_in_the_runs_own(
    projects: Projects, explicit: bool
) -> None:
    run_id = projects.start_in_a()
    with projects.studio_in_b(explicit) as studio:
        studio.get(f"/?token={TOKEN}")
        answer = studio.post(f"/run/cp/{run_id}/approve", json={"call_id": "first"},
                             headers={"X-CSRF-Token": _csrf(studio, run_id)})
        assert answer.status_code == 200, answer.text
        view = wait_for(lambda: _asks_second(studio, run_id), RUN_TIMEOUT + 1, "the next ask")
    # the approved write went to A's folder; A's rules asked about the second one
    assert view["status"] == "suspended", view["status"]
    assert projects.written() == {"a": ["first.txt"], "b": []}


@pytest.mark.parametrize("explicit", [False, True])
def test_a_fork_from_another_projects_studio_runs_under_the_runs_own_rules(
    projects: Projects, explicit: bool
) -> None:
    run_id = projects.start_in_a()
    with projects.studio_in_b(explicit) as studio:
        studio.get(f"/?token={TOKEN}")
        answer = studio.post(f"/run/cp/{run_id}/fork", json={"point": 0},
                             headers={"X-CSRF-Token": _csrf(studio, run_id)})
        assert answer.status_code == 200, answer.text
        fork_id = answer.json()["run_id"]

        def asks_first() -> dict[str, Any] | None:
            view = studio.get(f"/api/run/cp/{fork_id}").json()
            asked = [p["id"] for p in view["pending"]] == ["first"]
            done = view["status"] in ("success", "failure")
            return view if (asked and view["status"] == "suspended") or done else None

        view = wait_for(asks_first, RUN_TIMEOUT + 1, "the fork to ask")
    assert view["status"] == "suspended"
    assert projects.written() == {"a": [], "b": []}


@pytest.mark.parametrize("config", [[], ["--config", "jianmu.yaml"]])
def test_the_cli_resumes_and_forks_in_the_runs_own_folder(
    projects: Projects, config: list[str]
) -> None:
    run_id = projects.start_in_a()
    code, out = projects.jianmu(projects.b, "runs", "fork", run_id, "--at", "0",
                                "--non-interactive", *config)
    assert code == 3, out  # A's rules ask about the first write of the fork as well
    found = re.search(r"forked run (\w+)", out)
    assert found, out
    assert projects.written() == {"a": [], "b": []}
    code, out = projects.jianmu(projects.b, "resume", found.group(1), "--approve", "first",
                                "--non-interactive", *config)
    assert code == 3, out  # and about the second
    assert projects.written() == {"a": ["first.txt"], "b": []}


def test_a_run_whose_folder_is_gone_is_refused(
    projects: Projects, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id = projects.start_in_a()
    projects.a.rename(projects.a.with_name("a-moved"))
    with projects.studio_in_b(False) as studio:
        studio.get(f"/?token={TOKEN}")
        csrf = {"X-CSRF-Token": _csrf(studio, run_id)}
        answer = studio.post(f"/run/cp/{run_id}/approve", json={"call_id": "first"},
                             headers=csrf)
        assert answer.status_code == 409 and "which is gone" in answer.json()["error"]
        answer = studio.post(f"/run/cp/{run_id}/fork", json={"point": 0}, headers=csrf)
        assert answer.status_code == 400 and "which is gone" in answer.json()["error"]
        assert studio.get(f"/api/run/cp/{run_id}").json()["pending"][0]["id"] == "first"
    capsys.readouterr()
    code, _out = projects.jianmu(projects.b, "resume", run_id, "--approve", "first",
                                 "--non-interactive")
    assert code != 0 and "which is gone" in capsys.readouterr().err
    assert list(projects.b.glob("*.txt")) == []


def test_a_run_whose_config_is_gone_is_refused(
    projects: Projects, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id = projects.start_in_a()
    (projects.a / "jianmu.yaml").unlink()
    capsys.readouterr()
    code, _out = projects.jianmu(projects.b, "runs", "fork", run_id, "--at", "0",
                                 "--non-interactive")
    assert code != 0 and "config" in capsys.readouterr().err
    assert projects.written() == {"a": [], "b": []}
