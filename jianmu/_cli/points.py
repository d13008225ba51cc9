"""``jianmu runs show RUN`` and ``jianmu runs fork RUN --at POINT`` for the runs 'jianmu run'
saved: a run's points (the same numbers as the studio's time slider and timeline), and a new
run started from one of them."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from jianmu._cli.common import (
    CLIError,
    ExitCode,
    heading,
    load_cli_config,
    make_console,
    parse_inputs,
    print_request,
    print_runs,
    visible,
    when,
)
from jianmu._cli.run import _describe, _drive, _stores
from jianmu._cli.targets import launch_config, load_target
from jianmu.errors import CheckpointError, JianmuError, RunClaimedError
from jianmu.runtime import ApprovalRequest, ReactiveRunner, SQLiteCheckpointer
from jianmu.runtime.fork import fork_run
from jianmu.runtime.lease import default_owner
from jianmu.studio.timeline import ended_agent_calls, event_timeline
from jianmu.studio.views import final_answer, point_rows, usage_text

__all__ = ("cmd_runs_fork", "cmd_runs_list", "cmd_runs_show", "run_points", "saved_runs")


def _durable(args: argparse.Namespace) -> bool:
    """Whether the command names a durable app (then ``runs show`` is its client's)."""
    return bool(getattr(args, "app", None) or os.environ.get("JIANMU_APP"))


def _open(path: str) -> SQLiteCheckpointer:
    if not Path(path).exists():  # a folder: the store's own error says what it is
        raise CLIError(f"no runs saved in {path!r} (runtime.checkpoint_path); run one with "
                       "'jianmu run', or give the --config the run used (a durable app's "
                       "runs: --app MODULE:ATTR)")
    return SQLiteCheckpointer(path)


def _missing(store: SQLiteCheckpointer, run_id: str) -> CLIError:
    known = ", ".join(r[0] for r in store.list_runs()[:10]) or "none"
    return CLIError(f"no run {run_id!r} in {store.path!r} (recent runs: {known}); use the "
                    "--config the run used")


def run_points(store: SQLiteCheckpointer, run_id: str) -> dict[str, Any]:
    """A checkpointed run with its points, as ``jianmu runs show --json`` prints it.

    Raises:
        CLIError: no such run.
    """
    data = store.load(run_id)
    if data is None:
        raise _missing(store, run_id)
    history = store.history
    recorded = history.points(run_id)
    tree = history.frame(run_id, recorded[-1].number).tree if recorded else None
    events = history.events(run_id)
    entries = event_timeline(events, snapshot=data.get("state"), tree=tree,
                             ended=ended_agent_calls(history, run_id, events))
    names = {k: str(v.get("name", "?")) for k, v in (data.get("nodes") or {}).items()}
    points = point_rows(recorded, entries, names)
    meta = history.run(run_id) or {}
    interaction = data.get("interaction") or {}
    asked = {r["id"]: r for r in interaction.get("asked", [])}
    status = data.get("status")
    if status == "running" and store.stopped(run_id):
        status = "stopped"  # its process ended without ending it (killed, crashed)
    return {
        "run_id": run_id, "tree": data.get("tree"), "status": status,
        "ticks": data.get("ticks"), "folder": meta.get("cwd"),
        "forked_from": ({"run": meta["parent"], "point": meta.get("parent_point")}
                        if meta.get("parent") else None),
        "error": data.get("error"), "final_answer": final_answer(data.get("state")),
        "usage": usage_text(data.get("state")),  # as the studio's run page says it
        "pending": [asked[i] for i in interaction.get("pending", []) if i in asked],
        "points": points,
        "timeline": entries,
    }


def saved_runs(store: SQLiteCheckpointer, status: str | None = None) -> list[dict[str, Any]]:
    """The runs in ``store``, newest first, as ``jianmu runs list --json`` prints them: id,
    tree, status ("stopped" for a run whose process ended without ending it), the time of
    its newest checkpoint and how many requests wait ("damaged": a row a restore refuses)."""
    rows = []
    for run_id, saved, updated in store.list_runs():
        try:
            data = store.load(run_id) or {}
        except CheckpointError:  # one damaged row hides no run: `runs show` says what is wrong
            data, saved = {}, "damaged"
        if saved == "running" and store.stopped(run_id):
            saved = "stopped"  # its process ended without ending it (killed, crashed)
        if status is not None and saved != status:
            continue
        rows.append({"run_id": run_id, "tree": data.get("tree"), "status": saved,
                     "updated": updated,
                     "pending": len((data.get("interaction") or {}).get("pending") or ())})
    return rows


def cmd_runs_list(args: argparse.Namespace) -> int:
    """``jianmu runs list``: a durable app's runs with --app, else the runs 'jianmu run'
    saved, newest first."""
    if _durable(args):
        from jianmu._cli.durable import cmd_runs_list as list_durable

        return list_durable(args)
    path = load_cli_config(args.config).runtime.checkpoint_path
    store = _open(path)
    try:
        rows = saved_runs(store, args.status)
    finally:
        store.close()
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False, default=str))
        return ExitCode.OK
    console = make_console()
    print_runs(console, f"runs in {visible(path)}, newest first", visible(path), args.status,
               ("run", "tree", "status", "updated", "pending"),
               [(visible(str(row["run_id"])), visible(str(row["tree"])),
                 visible(str(row["status"])), when(row["updated"]), str(row["pending"] or "-"))
                for row in rows])
    if not rows:
        return ExitCode.OK
    console.print("show one with: jianmu runs show RUN_ID")
    return ExitCode.OK


def cmd_runs_show(args: argparse.Namespace) -> int:
    """``jianmu runs show RUN_ID``: a durable app's run with --app, else a checkpointed run
    and its points."""
    if _durable(args):
        from jianmu._cli.durable import cmd_runs_show as show_durable

        return show_durable(args)
    config = load_cli_config(args.config)
    store = _open(config.runtime.checkpoint_path)
    try:
        shown = run_points(store, args.run_id)
    finally:
        store.close()
    if args.json:
        print(json.dumps(shown, indent=2, ensure_ascii=False, default=str))
        return ExitCode.OK
    # as `jianmu run` gives it: the hints work pasted from any folder, under this config
    _print(shown, f" --config {shlex.quote(os.path.abspath(args.config))}" if args.config else "")
    return ExitCode.OK


def _print(shown: dict[str, Any], config_flag: str = "") -> None:
    console = make_console()
    status = str(shown["status"])
    style = {"success": "green", "failure": "red", "suspended": "yellow",
             "stopped": "red"}.get(status, "")
    console.print(Text.assemble(f"run {shown['run_id']}: ", (visible(status), style)))
    fields: dict[str, Any] = {"tree": shown["tree"], "folder": shown["folder"] or "-",
                              "ticks": shown["ticks"]}
    origin = shown["forked_from"]
    if origin:
        fields["forked from"] = f"run {origin['run']} at point {origin['point']}"
    if shown["usage"]:
        fields["usage"] = shown["usage"]
    if shown["error"]:
        fields["error"] = shown["error"]
    answer = shown["final_answer"]
    if answer is not None:
        fields["final answer"] = answer if isinstance(answer, str) else json.dumps(
            answer, ensure_ascii=False, default=str)
    if status == "stopped":
        fields["note"] = ("its process ended before the run did (killed or crashed): "
                          f"jianmu resume {shown['run_id']} goes on from its last checkpoint")
    for key, value in fields.items():
        console.print(Text.assemble("  ", (f"{key}: ", "bold"), visible(str(value))),
                      soft_wrap=True)
    points = shown["points"]
    if points:
        table = Table(title="points (the studio's time slider; fork with --at POINT)",
                      title_justify="left")
        for column in ("point", "tick", "time", "what happened"):
            table.add_column(column, overflow="fold")
        for point in points:
            table.add_row(str(point["n"]), str(point["tick"]), when(point["time"]),
                          Text(visible(str(point["label"]))))
        console.print(table)
    else:
        console.print("  no points recorded")
    run_id = shown["run_id"]
    for raw in shown["pending"]:
        request = ApprovalRequest.from_dict(raw)
        print_request(console, heading("  pending ", request, sep="  "), request, indent="    ")
    if shown["pending"]:
        # as `jianmu run` says it: a question is answered, not approved (refused), and an id
        # with a space (an AskUser's "ask:ask flow/ask") quoted for the shell
        first = ApprovalRequest.from_dict(shown["pending"][0])
        said = escape(shlex.quote(visible(first.id)))
        console.print(f"resume with: jianmu resume {run_id} --answer {said} TEXT"
                      f"{escape(config_flag)}" if first.question is not None else
                      f"resume with: jianmu resume {run_id} --approve {said}"
                      f"{escape(config_flag)}")
    if points:
        console.print(f"fork with: jianmu runs fork {run_id} --at POINT [--set KEY=VALUE]"
                      f"{escape(config_flag)}")


def cmd_runs_fork(args: argparse.Namespace) -> int:
    """``jianmu runs fork RUN_ID --at POINT [--set KEY=VALUE]``: a new run from that point,
    then run it as ``jianmu resume`` would (the original run is not touched)."""
    try:
        values = parse_inputs(args.set or [])
    except CLIError as exc:
        raise CLIError(str(exc).replace("--input", "--set")) from None
    console = make_console()
    config = load_cli_config(args.config)
    _open(config.runtime.checkpoint_path).close()
    checkpointer, launches = _stores(config)
    try:
        if checkpointer.load(args.run_id) is None:
            raise _missing(checkpointer, args.run_id)
        launch = launches.load(args.run_id)
        if launch is None:
            raise CLIError(
                f"run {args.run_id!r} was not started by 'jianmu run', so the CLI cannot "
                "rebuild its tree; fork it in Python with jianmu.runtime.fork.fork_run and "
                "ReactiveRunner.restore"
            )
        config = launch_config(launch, args.run_id)  # its own folder and config, not ours
        try:
            fork_id = fork_run(checkpointer, args.run_id, args.at, values=values,
                               owner=default_owner("jianmu runs fork"))
        except RunClaimedError:
            raise  # another owner acts on the run now: a failure to retry, not bad usage
        except CheckpointError as exc:
            raise CLIError(f"--at {args.at}: {exc}" if "point" in str(exc) else str(exc)) \
                from None
        target = load_target(launch.target, inputs=launch.inputs, config=config, launch=launch)
        try:
            runner = ReactiveRunner.restore(
                target.tree, checkpointer, fork_id, state_manager=target.state, config=config,
                constraints=target.constraints, extras={"cli_launch": launch.target},
                owner=default_owner("jianmu runs fork"),
            )
        except JianmuError as exc:  # a --set value the state's schema refuses: leave nothing
            checkpointer.delete(fork_id)
            asyncio.run(target.close())
            raise CLIError(f"the fork did not start, and its new run {fork_id} was removed: "
                           f"{exc}") from None
        target.attach(runner)
        console.print(f"forked run {fork_id} from run {escape(args.run_id)} at point {args.at}:"
                      f" {escape(_describe(target))}")
        return _drive(runner, target, args, console)
    finally:
        launches.close()
        checkpointer.close()
