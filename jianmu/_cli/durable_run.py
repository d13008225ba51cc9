"""``jianmu run --durable APP TREE``: start one run through a durable app's workers, as a
client, and wait for it (answering approvals here, like ``jianmu run``, if asked to)."""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from jianmu._cli.approvals import ask_approval, heading, print_request
from jianmu._cli.common import CLIError, ExitCode, make_console, parse_inputs, visible
from jianmu._cli.durable import final_answer, open_app, print_pending
from jianmu.errors import RunNotFoundError, TreeInputError, UnknownTreeError
from jianmu.runtime import ApprovalRequest, RunResult, RunStatus

if TYPE_CHECKING:
    from jianmu.durable import DurableEngine

__all__ = ("cmd_run_durable",)

_EXIT = {
    RunStatus.SUCCESS: ExitCode.OK,
    RunStatus.FAILURE: ExitCode.FAILURE,
    RunStatus.SUSPENDED: ExitCode.SUSPENDED,
    RunStatus.TIMEOUT: ExitCode.STOPPED,
    RunStatus.CANCELLED: ExitCode.STOPPED,
}
_POLL_S = 1.0
"""How long one look at the run waits before checking its approvals and ``--wait`` again."""


def cmd_run_durable(args: argparse.Namespace) -> int:
    """``jianmu run --durable APP TREE``."""
    if args.timeout is not None:
        raise CLIError("--timeout does not apply to --durable runs (the workers' config sets "
                       "the run's timeout); --wait S stops waiting for it")
    if args.skills_dir:
        raise CLIError("--skills-dir does not apply to --durable runs")
    if args.wait is not None and args.wait < 0:
        raise CLIError(f"--wait {args.wait:g}: give 0 or more seconds")
    console = make_console()
    inputs = parse_inputs(args.input or [])
    with open_app(args, args.durable) as engine:
        try:
            engine.check_inputs(args.target, inputs)
        except (UnknownTreeError, TreeInputError) as exc:
            raise CLIError(str(exc)) from None
        run: dict[str, str] = {}
        try:
            return asyncio.run(_run(engine, args, inputs, console, run))
        except KeyboardInterrupt:
            if "id" not in run:
                raise
            console.print(f"[yellow]interrupted[/]: stopped waiting; run {run['id']} goes on "
                          f"in the workers ({escape(_show_hint(run['id'], args))})")
            return ExitCode.STOPPED


def _show_hint(run_id: str, args: argparse.Namespace) -> str:
    return f"jianmu runs show {run_id} --app {shlex.quote(args.durable)}"


async def _run(engine: DurableEngine, args: argparse.Namespace, inputs: dict[str, Any],
               console: Console, run: dict[str, str]) -> int:
    run_id = run["id"] = await engine.start(args.target, inputs)
    given = f" with {json.dumps(inputs, ensure_ascii=False)}" if inputs else ""
    console.print(f"run {run_id}: durable tree {escape(visible(args.target + given))} "
                  f"of {escape(engine.name)}")
    console.file.flush()
    loop = asyncio.get_running_loop()
    deadline = None if args.wait is None else loop.time() + args.wait
    answered: set[str] = set()
    while True:
        left = None if deadline is None else deadline - loop.time()
        if left is not None and left <= 0:
            console.print(f"[yellow]still running[/]: run {run_id} did not end within "
                          f"{args.wait:g} s (is a worker serving {escape(engine.name)}?); it "
                          f"goes on in the workers ({escape(_show_hint(run_id, args))})")
            return ExitCode.STOPPED
        try:
            result = await engine.result(run_id, timeout=_POLL_S if left is None
                                         else min(_POLL_S, left))
        except TimeoutError:
            continue
        if result.status is not RunStatus.SUSPENDED:
            return await _report(engine, result, console)
        fresh = tuple(r for r in result.pending if r.id not in answered)
        if not fresh:
            continue  # our decisions are on their way to the worker
        if not await _decide(engine, run_id, fresh, args, console):
            return _suspended(result, args, console)
        answered.update(r.id for r in fresh)


async def _decide(engine: DurableEngine, run_id: str, pending: tuple[ApprovalRequest, ...],
                  args: argparse.Namespace, console: Console) -> bool:
    """Send a decision for each request; False when nobody can decide here."""
    if args.non_interactive and not args.approve_all:
        return False
    for request in pending:
        message: str | None
        if args.approve_all:  # the transcript records exactly what was approved
            print_request(console, heading("  approving (--approve-all) ", request), request,
                          indent="    ")
            approved, message = True, "approved with --approve-all"
        else:
            answer = await asyncio.to_thread(ask_approval, request, console)
            if answer is None:
                console.print("no answer on standard input")
                return False
            approved, message = answer
        try:
            if approved:
                await engine.approve(run_id, request.id, message)
            else:
                await engine.reject(run_id, request.id, message or "rejected in the terminal")
        except RunNotFoundError:  # someone answered it meanwhile, from another process
            console.print(Text.assemble("  ", visible(request.id),
                                        " was already decided elsewhere"))
    return True


def _suspended(result: RunResult, args: argparse.Namespace, console: Console) -> int:
    console.print(f"[yellow]suspended[/]: run {result.run_id} waits for "
                  f"{len(result.pending)} approval(s); it stays parked in the workers")
    print_pending(console, result.run_id, result.pending, args.durable)
    return ExitCode.SUSPENDED


async def _report(engine: DurableEngine, result: RunResult, console: Console) -> int:
    status = result.status
    if status is RunStatus.SUCCESS:
        value = final_answer(await engine.state(result.run_id))
        if value is not None:
            shown = value if isinstance(value, str) else json.dumps(
                value, indent=2, ensure_ascii=False, default=str)
            shown = "\n".join(visible(line.expandtabs()) for line in shown.split("\n"))
            console.print(f"result:\n{escape(shown)}" if "\n" in shown else
                          f"result: {escape(shown)}")
    style = {"success": "green", "failure": "red"}.get(status.value, "yellow")
    reason = f": {visible(result.error)}" if result.error else ""
    console.print(f"[{style}]{status.value}[/] run {result.run_id} after {result.ticks} ticks"
                  f"{escape(reason)}")
    return int(_EXIT[status])
