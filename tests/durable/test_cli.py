"""The durable CLI in real processes: ``jianmu worker``, ``jianmu run --durable`` and
``jianmu runs ...`` on SQLite and PostgreSQL, a worker killed and its run recovered."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.cli._helpers import Done
from tests.support.durable import HERE, ROOT, Workers, fork_server, wait_for
from tests.support.forked_cli import DURABLE, run_jianmu

pytestmark = pytest.mark.timeout(400)

APP = f"{HERE / 'durable_app.py'}:engine"
MODULE_APP = "durable_app:engine"  # HERE is on the CLI's PYTHONPATH (Workers.env)


class CLI:
    """Runs ``python -m jianmu.cli`` with the test app's environment."""

    def __init__(self, workers: Workers) -> None:
        self.workers = workers
        self.started: list[subprocess.Popen[str]] = []

    def env(self, **extra: str) -> dict[str, str]:
        env = self.workers.env("cli", COLUMNS="200", NO_COLOR="1", **extra)
        env.pop("JIANMU_TEST_WORKER")  # a client has no executor id
        return env

    def __call__(self, *args: str, timeout: float = 120, **extra: str) -> Done:
        done = run_jianmu(args, cwd=ROOT, env=self.env(**extra), timeout=timeout,
                          preload=DURABLE)
        return Done(done.returncode, done.stdout, done.stderr)

    def worker(self, executor_id: str) -> tuple[Any, str]:
        """``jianmu worker APP --id ID``, started (``python -m jianmu.cli`` forked from the
        pre-imported `fork_server`, in a session of its own); its first line."""
        log = open(self.workers.tmp / f"{executor_id}.log", "a", encoding="utf-8")
        self.workers._logs.append(log)
        proc = fork_server().spawn(
            ["-m", "jianmu.cli", "worker", APP, "--id", executor_id, "--concurrency", "4"],
            env=self.env(), cwd=ROOT, stderr=log.fileno(), new_session=True)
        self.workers.procs.append(proc)  # killed at the end of the test whatever happens
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith(f"worker {executor_id} serving testapp on "), (
            line, (self.workers.tmp / f"{executor_id}.log").read_text())
        return proc, line

    def json(self, *args: str) -> Any:
        done = self(*args, "--json")
        assert done.code == 0, done.text
        return json.loads(done.out)


def _clean_error(done: Done, code: int, *fragments: str) -> None:
    assert done.code == code, done.text
    assert "Traceback" not in done.text, done.text
    assert "jianmu: error:" in done.err, done.text
    for fragment in fragments:
        assert fragment in done.err, done.err


@pytest.fixture
def cli(workers: Workers) -> CLI:
    return CLI(workers)


def test_worker_run_suspend_approve_from_other_processes_recover(
    cli: CLI, db_url: str, tmp_path: Path
) -> None:
    deployed = tmp_path / "deployed.txt"
    first, line = cli.worker("w1")
    password = db_url.split("://", 1)[1].split("@")[0].partition(":")[2] if "@" in db_url else ""
    assert not password or password not in line  # the URL is printed without its password

    # a run that asks first: the client lists the request and exits 3; the run stays parked
    done = cli("run", "--durable", APP, "confirm", "-i", f"path={deployed}", "--non-interactive")
    assert done.code == 3, done.text
    run_id = done.out.split()[1].rstrip(":")
    assert f"suspended: run {run_id} waits for 1 approval(s)" in done.out
    assert "pending deploy_1" in done.out and "tool: deploy" in done.out
    assert '"target": "prod"' in done.out
    assert f"jianmu runs approve {run_id} deploy_1 --app {APP}" in done.out

    listed = cli.json("runs", "list", "--app", MODULE_APP, "--status", "suspended")
    assert [(r["run_id"], r["tree"], r["worker"]) for r in listed] == [(run_id, "confirm", "w1")]
    assert [p["id"] for p in listed[0]["pending"]] == ["deploy_1"]
    table = cli("runs", "list", "--app", APP)
    assert table.code == 0 and run_id in table.out and "suspended" in table.out, table.text

    # wrong ids name what is wrong, one line, usage exit code
    _clean_error(cli("runs", "approve", run_id, "nope", "--app", APP), 2, "'nope'", "deploy_1")
    _clean_error(cli("runs", "show", "no-such-run", "--app", APP), 2, "'no-such-run'")

    # the worker dies while the run waits; another worker gets it back with `runs recover`
    Workers.kill(first)
    cli.worker("w2")
    recovered = cli("runs", "recover", "--worker", "w1", "--app", APP)
    assert recovered.code == 0, recovered.text
    assert "handed 1 run(s) of worker w1" in recovered.out and run_id in recovered.out
    # w1 beat moments ago, but its id is free: it is dead, known without a guess from the clock
    assert recovered.err == "", recovered.err

    # rejecting needs a run that exists too
    _clean_error(cli("runs", "reject", run_id, "deploy_9", "--app", APP, "--reason", "x"), 2,
                 "'deploy_9'")
    # approved from yet another process: w2 goes on with the run, which succeeds, deploying once
    approved = cli("runs", "approve", run_id, "deploy_1", "--app", APP, "-m", "go")
    assert approved.code == 0, approved.text
    shown = wait_for(lambda: (s := cli.json("runs", "show", run_id, "--app", APP))["status"]
                     == "success" and s, what="the approved run to finish")
    assert shown["final_answer"] == "finished: deployed" and shown["pending"] == []
    assert shown["worker"] == "w2"
    assert deployed.read_text().splitlines() == ["deployed prod"]
    text = cli("runs", "show", run_id, "--app", APP)
    assert "success" in text.out and "final answer: finished: deployed" in text.out, text.text

    # a run that needs no approval, its inputs as JSON and its tree by --tree: exit 0
    quick = cli("run", "--durable", APP, "--tree", "quick", "--inputs",
                json.dumps({"path": str(tmp_path / "quick.txt"), "run": "q1"}))
    assert quick.code == 0, quick.text
    assert "result: ok" in quick.out and "success run" in quick.out
    assert (tmp_path / "quick.txt").read_text().split() == ["q1", "w2"]

    # SIGTERM stops a worker cleanly
    live = cli.workers.procs[-1]
    os.kill(live.pid, signal.SIGTERM)
    assert live.wait(timeout=120) == 0
    assert live.stdout is not None and "worker w2 stopped" in live.stdout.read()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)  # the errors depend on no DB
def test_bad_apps_ids_and_databases_are_one_line_errors(cli: CLI, tmp_path: Path) -> None:
    _clean_error(cli("runs", "list", "--app", f"{HERE / 'durable_app.py'}:nope"), 2,
                 "no attribute 'nope'")
    _clean_error(cli("runs", "list", "--app", f"{HERE / 'durable_app.py'}:LinesInputs"), 2,
                 "not a DurableEngine")
    _clean_error(cli("runs", "list", "--app", "no_such_module:engine"), 2,
                 "no module 'no_such_module'")
    _clean_error(cli("worker", str(tmp_path / "missing.py")), 2, "no file")
    _clean_error(cli("runs", "list"), 2, "--app")
    _clean_error(cli("run", "--durable", APP, "no_tree"), 2, "no tree 'no_tree'")

    # nobody serves the app: --wait gives up (exit 4) and says the run goes on
    waited = cli("run", "--durable", APP, "quick", "-i", "path=x", "-i", "run=r", "--wait", "0.5")
    assert waited.code == 4, waited.text
    assert "still running" in waited.out and "jianmu runs show" in waited.out

    # an unreachable database: its URL without the password, one line, for clients and workers
    down = "postgresql://u:secret@127.0.0.1:1/x"
    for args in (("runs", "list", "--app", APP), ("runs", "show", "r1", "--app", APP),
                 ("worker", APP)):
        done = cli(*args, JIANMU_TEST_DB=down)
        _clean_error(done, 1, "127.0.0.1:1/x")
        assert "secret" not in done.text, done.text
        assert len(done.err.strip().splitlines()) == 1, done.err


@pytest.mark.parametrize(("spec", "split"), [
    ("pkg.app:engine", ("pkg.app", "engine")),
    ("pkg.app", ("pkg.app", "engine")),
    ("path/to/app.py:eng", ("path/to/app.py", "eng")),
    ("path/to/app.py", ("path/to/app.py", "engine")),
    ("C:\\apps\\app.py", ("C:\\apps\\app.py", "engine")),
    ("app:holder.engine", ("app", "holder.engine")),
])
def test_app_specs_split_as_uvicorn_names_apps(spec: str, split: tuple[str, str]) -> None:
    from jianmu._cli.durable import split_app

    assert split_app(spec) == split
