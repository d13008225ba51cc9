"""``jianmu worker`` and ``jianmu runs ...``: serve a durable app's runs, and inspect and answer
them from any process (a client: it never executes runs)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from jianmu._cli.approvals import heading, print_request
from jianmu._cli.apps import load_app
from jianmu._cli.common import CLIError, ExitCode, json_text, make_console, say, visible
from jianmu.errors import AlreadyDecidedError, RunNotFoundError
from jianmu.runtime import ApprovalRequest

if TYPE_CHECKING:
    from jianmu.durable import DurableEngine, RunInfo

__all__ = (
    "cmd_runs_approve", "cmd_runs_list", "cmd_runs_recover", "cmd_runs_reject", "cmd_runs_show",
    "cmd_worker", "final_answer", "open_app", "print_pending",
)


def _app_spec(args: argparse.Namespace) -> str:
    spec = getattr(args, "app", None) or os.environ.get("JIANMU_APP")
    if not spec:
        raise CLIError("name the durable app: --app MODULE:ATTR or path/to/file.py:ATTR "
                       "(or set JIANMU_APP)")
    return str(spec)


def _load(args: argparse.Namespace, spec: str) -> DurableEngine:
    if args.config:  # the app's engine reads its config the usual way: $JIANMU_CONFIG first
        os.environ["JIANMU_CONFIG"] = args.config
    return load_app(spec)


@contextmanager
def open_app(args: argparse.Namespace, spec: str | None = None) -> Iterator[DurableEngine]:
    """The app's engine as a client, its database reached (or a one-line error); closed after."""
    engine = _load(args, spec or _app_spec(args))
    try:
        engine.client  # noqa: B018 - connect now: an unreachable database fails here, cleanly
        yield engine
    finally:
        engine.shutdown()


def cmd_worker(args: argparse.Namespace) -> int:
    """``jianmu worker APP``: serve the app's runs until SIGTERM or SIGINT."""
    from jianmu.durable.engine import redact

    engine = _load(args, args.app)
    if args.id:
        engine.executor_id = args.id
    if args.concurrency is not None:
        if args.concurrency < 1:
            raise CLIError(f"--concurrency {args.concurrency}: give 1 or more")
        engine.config.durable.worker_concurrency = args.concurrency
    stop = threading.Event()
    # set before launching: a signal during the launch still ends in a clean shutdown
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        engine.launch()
        print(f"worker {visible(engine.executor_id)} serving {visible(engine.name)} on "
              f"{visible(redact(engine.database_url))}", flush=True)
        while not stop.wait(5.0):
            pass
    finally:
        engine.shutdown()
    print(f"worker {visible(engine.executor_id)} stopped", flush=True)
    return ExitCode.OK


def _when(stamp: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp)) if stamp else "-"


def cmd_runs_list(args: argparse.Namespace) -> int:
    """``jianmu runs list``."""
    with open_app(args) as engine:
        infos = engine.runs(args.status)
    if args.json:
        print(json_text([i.to_dict() for i in infos]))
        return ExitCode.OK
    console = make_console()
    if not infos:
        which = f" with status {args.status}" if args.status else ""
        console.print(f"no runs{which} in {visible(engine.name)}")
        return ExitCode.OK
    # every cell is data: the console prints it as written (no markup, escapes shown)
    table = Table(title=f"runs of {visible(engine.name)}")
    for column in ("run", "tree", "status", "worker", "updated", "pending"):
        table.add_column(column)
    for info in infos:
        table.add_row(visible(info.run_id), visible(info.tree), visible(info.status),
                      visible(info.worker or "-"), _when(info.updated),
                      ", ".join(visible(r.id) for r in info.pending))
    console.print(table)
    return ExitCode.OK


def final_answer(snapshot: dict[str, Any] | None) -> Any:
    """The final answer in a run's state snapshot, if any."""
    if not isinstance(snapshot, dict):
        return None
    root = snapshot.get("root", snapshot)
    return root.get("final_answer") if isinstance(root, dict) else None


def print_pending(console: Console, run_id: str, pending: tuple[ApprovalRequest, ...],
                  app: str) -> None:
    """The pending requests in full, then how to answer them from any process."""
    for request in pending:
        print_request(console, heading("  pending ", request, sep="  "), request, indent="    ")
    first = shlex.quote(visible(pending[0].id)) if pending else "CALL_ID"
    where = f"{shlex.quote(visible(run_id))} {first} --app {shlex.quote(visible(app))}"
    console.print(f"approve with: jianmu runs approve {where}   "
                  f"(or: jianmu runs reject {where} --reason R)")


def _show(console: Console, info: RunInfo, answer: Any, app: str) -> None:
    style = {"success": "green", "failure": "red", "suspended": "yellow"}.get(info.status, "")
    console.print(say(f"run {visible(info.run_id)}: ", (visible(info.status), style)))
    fields = {"tree": info.tree, "worker": info.worker or "-", "created": _when(info.created),
              "updated": _when(info.updated),
              "inputs": json.dumps(info.inputs, ensure_ascii=False, default=str)}
    for key, value in fields.items():
        console.print(say("  ", (key, "bold"), ": ", visible(str(value))))
    if info.error:
        console.print(say("  ", ("error", "bold"), ": ", visible(info.error)))
    if answer is not None:
        shown = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
        console.print(say("  ", ("final answer", "bold"), ": ", visible(shown)))
    if info.pending:
        console.print(say("  ", ("pending", "bold"), f": {len(info.pending)} approval(s)"))
        print_pending(console, info.run_id, info.pending, app)


def cmd_runs_show(args: argparse.Namespace) -> int:
    """``jianmu runs show RUN_ID``."""
    with open_app(args) as engine:
        info = _info(engine, args.run_id)
        answer = None
        if info.status in ("success", "failure"):
            answer = final_answer(asyncio.run(engine.state(info.run_id)))
    if args.json:
        print(json_text({**info.to_dict(), "final_answer": answer}))
        return ExitCode.OK
    _show(make_console(), info, answer, _app_spec(args))
    return ExitCode.OK


def _info(engine: DurableEngine, run_id: str) -> RunInfo:
    try:
        return engine.run_info(run_id)
    except RunNotFoundError as exc:
        raise CLIError(f"{exc} in {engine.name} on the app's database") from None


def _decide(args: argparse.Namespace, approved: bool) -> int:
    console = make_console()
    with open_app(args) as engine:
        _info(engine, args.run_id)
        try:
            if approved:
                asyncio.run(engine.approve(args.run_id, args.call_id, args.message))
            else:
                asyncio.run(engine.reject(args.run_id, args.call_id, args.reason or ""))
        except RunNotFoundError as exc:
            raise CLIError(str(exc)) from None
        except AlreadyDecidedError as exc:  # the first decision stands: say which it was
            raise CLIError(str(exc), ExitCode.FAILURE) from None
    verb = "approved" if approved else "rejected"
    console.print(f"{verb} {visible(args.call_id)} of run {visible(args.run_id)}; "
                  "a worker goes on with it")
    return ExitCode.OK


def cmd_runs_approve(args: argparse.Namespace) -> int:
    """``jianmu runs approve RUN_ID CALL_ID``."""
    return _decide(args, True)


def cmd_runs_reject(args: argparse.Namespace) -> int:
    """``jianmu runs reject RUN_ID CALL_ID``."""
    return _decide(args, False)


def cmd_runs_recover(args: argparse.Namespace) -> int:
    """``jianmu runs recover --worker ID``: hand a dead worker's runs to the live ones."""
    console = make_console()
    with open_app(args) as engine:
        _warn_if_alive(engine, args.worker)
        ids = engine.recover(args.worker)
    if not ids:
        console.print(f"worker {visible(args.worker)} has no pending runs")
        return ExitCode.OK
    console.print(f"handed {len(ids)} run(s) of worker {visible(args.worker)} to the live "
                  "workers:")
    for run_id in ids:
        console.print(f"  {visible(run_id)}")
    return ExitCode.OK


def _warn_if_alive(engine: DurableEngine, worker: str) -> None:
    """Say so when ``worker`` beat lately: if it is alive after all, the calls it has in
    flight run twice. Recovering is still the operator's call (they may have just killed it)."""
    after = engine.config.durable.takeover_after_s
    beat = max(0.2, min(5.0, after / 3))  # as often as durable._tables.Heartbeat beats
    for row in engine.workers():
        silent = time.time() - float(row["last_seen"])
        if row["executor_id"] == worker and silent < 2 * beat:
            make_console(stderr=True).print(say(
                ("warning", "yellow"), f": worker {visible(worker)} beat {silent:.0f} s ago; if "
                "it is still alive, the tool calls it has in flight run again"
            ))
