"""``jianmu run --durable APP TREE``: start one run through a durable app's workers, as a
client, and wait until it ends or waits for approval (which ``jianmu runs approve`` gives,
from any process)."""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
from typing import TYPE_CHECKING, Any

from rich.console import Console

from jianmu._cli.approvals import heading, print_request
from jianmu._cli.common import (
    RUN_EXIT_CODES,
    CLIError,
    ExitCode,
    make_console,
    parse_inputs,
    say,
    visible,
)
from jianmu._cli.durable import final_answer, open_app, print_pending
from jianmu.errors import (
    AlreadyDecidedError,
    RunNotFoundError,
    TreeInputError,
    UnknownTreeError,
)
from jianmu.runtime import ApprovalRequest, RunResult, RunStatus

if TYPE_CHECKING:
    from jianmu.durable import DurableEngine

__all__ = ("cmd_run_durable",)

_SETTLE_S = 0.2
"""Pause after --approve-all answered, before looking again (the worker takes the answers)."""


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
    tree, inputs = _tree(args), _inputs(args)
    with open_app(args, args.durable) as engine:
        try:
            engine.check_inputs(tree, inputs)
        except (UnknownTreeError, TreeInputError) as exc:
            raise CLIError(str(exc)) from None
        run: dict[str, str] = {}
        try:
            return asyncio.run(_run(engine, tree, inputs, args, console, run))
        except KeyboardInterrupt:
            if "id" not in run:
                raise
            console.print(say(("interrupted", "yellow"), f": stopped waiting; run "
                              f"{visible(run['id'])} goes on in the workers "
                              f"({_show_hint(run['id'], args)})"))
            return ExitCode.STOPPED


def _tree(args: argparse.Namespace) -> str:
    if args.tree and args.target and args.tree != args.target:
        raise CLIError(f"two trees named: {args.target!r} and --tree {args.tree!r}")
    tree = args.tree or args.target
    if not tree:
        raise CLIError("name the tree to run: jianmu run --durable APP TREE (or --tree TREE)")
    return str(tree)


def _inputs(args: argparse.Namespace) -> dict[str, Any]:
    given: dict[str, Any] = {}
    if args.inputs is not None:
        try:
            given = json.loads(args.inputs)
        except json.JSONDecodeError as exc:
            raise CLIError(f"--inputs is not JSON ({exc.msg}): {args.inputs!r}") from None
        if not isinstance(given, dict):
            raise CLIError(f"--inputs must be a JSON object, got {type(given).__name__}")
    return {**given, **parse_inputs(args.input or [])}


def _show_hint(run_id: str, args: argparse.Namespace) -> str:
    return f"jianmu runs show {shlex.quote(visible(run_id))} --app " \
        f"{shlex.quote(visible(args.durable))}"


async def _run(engine: DurableEngine, tree: str, inputs: dict[str, Any],
               args: argparse.Namespace, console: Console, run: dict[str, str]) -> int:
    run_id = run["id"] = await engine.start(tree, inputs)
    given = f" with {json.dumps(inputs, ensure_ascii=False)}" if inputs else ""
    console.print(f"run {visible(run_id)}: durable tree {visible(tree + given)} "
                  f"of {visible(engine.name)}")
    console.file.flush()
    loop = asyncio.get_running_loop()
    deadline = None if args.wait is None else loop.time() + args.wait
    answered: set[str] = set()
    while True:
        left = None if deadline is None else max(deadline - loop.time(), 0.0)
        try:
            result = await engine.wait(run_id, timeout=left)
        except TimeoutError:
            console.print(say(("still running", "yellow"), f": run {visible(run_id)} did not "
                              f"end within {args.wait:g} s (is a worker serving "
                              f"{visible(engine.name)}?); it goes on in the workers "
                              f"({_show_hint(run_id, args)})"))
            return ExitCode.STOPPED
        if result.status is not RunStatus.SUSPENDED:
            return await _report(engine, result, console)
        if not args.approve_all:
            return _suspended(result, args, console)
        fresh = tuple(r for r in result.pending if r.id not in answered)
        await _approve_all(engine, run_id, fresh, console)
        answered.update(r.id for r in fresh)
        await asyncio.sleep(_SETTLE_S)


async def _approve_all(engine: DurableEngine, run_id: str,
                       pending: tuple[ApprovalRequest, ...], console: Console) -> None:
    """Approve each request, showing exactly what was approved."""
    for request in pending:
        print_request(console, heading("  approving (--approve-all) ", request), request,
                      indent="    ")
        try:
            await engine.approve(run_id, request.id, "approved with --approve-all")
        except AlreadyDecidedError as exc:  # someone answered it first, from another process
            console.print(f"  {visible(str(exc))}")
        except RunNotFoundError:  # answered and gone on meanwhile
            console.print(f"  {visible(request.id)} was already decided elsewhere")


def _suspended(result: RunResult, args: argparse.Namespace, console: Console) -> int:
    console.print(say(("suspended", "yellow"), f": run {visible(result.run_id)} waits for "
                      f"{len(result.pending)} approval(s); it stays parked in the workers"))
    print_pending(console, result.run_id, result.pending, args.durable)
    return ExitCode.SUSPENDED


async def _report(engine: DurableEngine, result: RunResult, console: Console) -> int:
    status = result.status
    if status is RunStatus.SUCCESS:
        value = final_answer(await engine.state(result.run_id))
        if value is not None:
            shown = value if isinstance(value, str) else json.dumps(
                value, indent=2, ensure_ascii=False, default=str)
            # a tool's output may carry ANSI escapes: the console shows them, never obeys
            console.print(f"result:\n{shown}" if "\n" in shown else f"result: {shown}")
    style = {"success": "green", "failure": "red"}.get(status.value, "yellow")
    reason = f": {visible(result.error)}" if result.error else ""
    console.print(say((status.value, style), f" run {visible(result.run_id)} after "
                      f"{result.ticks} ticks{reason}"))
    return int(RUN_EXIT_CODES[status])
