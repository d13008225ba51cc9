"""``jianmu run`` and ``jianmu resume``: tick a tree with live progress and approvals."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shlex
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.text import Text

from jianmu._cli.common import (
    RUN_EXIT_CODES,
    CLIError,
    ExitCode,
    heading,
    load_cli_config,
    make_console,
    parse_edited_arguments,
    parse_inputs,
    print_request,
    read_json,
    say,
    visible,
)
from jianmu._cli.progress import Progress
from jianmu._cli.targets import LaunchStore, Target, launch_config, load_target
from jianmu.config import AppConfig
from jianmu.errors import ApprovalEditError, InteractionError, JianmuError
from jianmu.runtime import ApprovalRequest, ReactiveRunner, RunResult, RunStatus, SQLiteCheckpointer
from jianmu.runtime.lease import default_owner, store_failed

__all__ = ("cmd_resume", "cmd_run")

# a run's end is final; one that timed out or was cancelled (or stopped with Ctrl-C) goes on
_ENDED = {"success", "failure"}


def _stores(config: AppConfig) -> tuple[SQLiteCheckpointer, LaunchStore]:
    path = config.runtime.checkpoint_path
    return SQLiteCheckpointer(path), LaunchStore(path)


def cmd_run(args: argparse.Namespace) -> int:
    """``jianmu run TARGET``; with ``--durable APP``, a tree of the app's engine instead."""
    if getattr(args, "durable", None):
        from jianmu._cli.durable import cmd_run_durable

        return cmd_run_durable(args)
    for option, value in (("--tree", args.tree), ("--inputs", args.inputs), ("--wait", args.wait)):
        if value is not None:
            raise CLIError(f"{option} applies to --durable runs only")
    if args.target is None:
        raise CLIError("name what to run: jianmu run SCRIPT.py or SKILL_NAME")
    console = make_console()
    config = load_cli_config(args.config)
    inputs = parse_inputs(args.input or [])
    target = load_target(args.target, inputs=inputs, config=config, skills_dirs=args.skills_dir)
    checkpointer, launches = _stores(config)
    try:
        runner = ReactiveRunner(
            target.tree, target.state, config=config, constraints=target.constraints,
            checkpointer=checkpointer, extras={"cli_launch": target.launch.target},
            owner=default_owner("jianmu run"),
        )
        target.attach(runner)
        launches.save(runner.run_id, target.launch)
        # saved before the first tick: a run whose process dies before its first checkpoint
        # (killed in a long model call) is listed as stopped and resumed from its start
        runner.save_checkpoint("running")
        console.print(f"run {visible(runner.run_id)}: {_describe(target)}")
        return _drive(runner, target, args, console)
    finally:
        launches.close()
        checkpointer.close()


def cmd_resume(args: argparse.Namespace) -> int:
    """``jianmu resume RUN_ID``."""
    console = make_console()
    _one_decision_each(args)
    config = load_cli_config(args.config)
    checkpointer, launches = _stores(config)
    try:
        launch = launches.load(args.run_id)
        data = checkpointer.load(args.run_id)
        if data is None:
            known = ", ".join(r[0] for r in checkpointer.list_runs()[:10]) or "none"
            raise CLIError(
                f"no run {args.run_id!r} in {config.runtime.checkpoint_path!r} (recent runs: "
                f"{known}); resume from the folder and with the --config the run used"
            )
        if launch is None:
            raise CLIError(
                f"run {args.run_id!r} was not started by 'jianmu run', so the CLI cannot rebuild "
                "its tree; restore it in Python with ReactiveRunner.restore(tree, ...)"
            )
        if data.get("status") in _ENDED:
            raise CLIError(
                f"run {args.run_id!r} already finished ({data['status']}); nothing to resume"
            )
        config = launch_config(launch, args.run_id)  # its own folder and config, not ours
        target = load_target(launch.target, inputs=launch.inputs, config=config, launch=launch)
        runner = ReactiveRunner.restore(
            target.tree, checkpointer, args.run_id, state_manager=target.state, config=config,
            constraints=target.constraints, extras={"cli_launch": launch.target},
            owner=default_owner("jianmu resume"),  # refused while another owner holds the run
        )
        target.attach(runner)
        console.print(f"resuming run {visible(runner.run_id)}: {_describe(target)}")
        # every decision is recorded before any is reported: one refused, none was taken
        # (they are saved together as the block ends, not at all if one is refused)
        taken: list[str] = []
        try:
            with runner.deciding():
                _given_decisions(runner, args, taken)
        except InteractionError as exc:  # its message says this decision was not taken
            before = "; the decisions given before it were not recorded either" if taken else ""
            raise CLIError(f"{exc}{before}") from exc
        for line in taken:
            console.print(line)
        return _drive(runner, target, args, console)
    finally:
        launches.close()
        checkpointer.close()


def _given_decisions(runner: ReactiveRunner, args: argparse.Namespace, taken: list[str]) -> None:
    """Take the decisions the command line gives, each line in ``taken`` (a line names the
    request decided: a call id alone names the one of that id)."""
    edited = _edited_arguments(args)
    for given in args.approve or []:
        request_id = runner.approve(given, args.message, arguments=edited)
        note = " with edited arguments" if edited is not None else ""
        taken.append(f"  ✓ approved {visible(request_id)}{note}")
    for given, text in getattr(args, "answer", None) or []:
        request_id = runner.answer(given, text)
        taken.append(f"  ✓ answered {visible(request_id)}")
    for given in args.reject or []:
        request_id = runner.reject(given, args.message or "rejected with jianmu resume")
        taken.append(f"  ✗ rejected {visible(request_id)}")


def _one_decision_each(args: argparse.Namespace) -> None:
    """Refuse a request given two decisions (``--approve X --approve X``, ``--reject X``)."""
    given = [*(args.approve or []), *(args.reject or []),
             *(request_id for request_id, _text in getattr(args, "answer", None) or [])]
    twice = sorted({request_id for request_id in given if given.count(request_id) > 1})
    if twice:
        raise CLIError(f"request {twice[0]!r} is given twice (--approve, --reject, --answer); "
                       "give each request one decision")


def _edited_arguments(args: argparse.Namespace) -> dict[str, object] | None:
    """``--arguments JSON``: the edited arguments of the one call approved with it."""
    raw = getattr(args, "arguments", None)
    if raw is None:
        return None
    if len(args.approve or []) != 1:
        raise CLIError("--arguments edits one call: give exactly one --approve ID with it")
    return parse_edited_arguments(raw)


def _describe(target: Target) -> str:
    launch = target.launch
    what = {"script": "script", "bt_skill": "BT skill", "prompt_skill": "prompt skill"}
    inputs = f" with {json.dumps(launch.inputs, ensure_ascii=False)}" if launch.inputs else ""
    return visible(f"{what[launch.kind]} {launch.target}{inputs}")


def _drive(runner: ReactiveRunner, target: Target, args: argparse.Namespace,
           console: Console) -> int:
    progress = Progress(console, runner.root)
    progress.subscribe(runner.ctx.events)
    timeout = args.timeout if args.timeout is not None else runner.ctx.constraints.timeout

    async def loop() -> RunResult:
        spent = 0.0
        try:
            while True:
                remaining = None if timeout is None else max(timeout - spent, 0.001)
                with progress.live():
                    result = await runner.run(timeout=remaining)
                spent += result.duration
                if result.status is not RunStatus.SUSPENDED:
                    return result
                with _plain_ctrl_c():
                    decided = _decide(runner, result.pending, args, console)
                if not decided:
                    return result
        finally:
            await target.close()

    try:
        result = asyncio.run(loop())
    except KeyboardInterrupt:
        saved = _save_interrupted(runner)
        console.print(say(("interrupted", "yellow"), f": run {visible(runner.run_id)} "
                          f"stopped; {saved}; 'jianmu resume {visible(runner.run_id)}' "
                          "goes on from there"))
        return ExitCode.STOPPED
    return _report(runner, target, result, progress, args, console)


def _save_interrupted(runner: ReactiveRunner) -> str:
    """Checkpoint a run stopped by Ctrl-C where it stands; say what was kept.

    The tree was stopped (what was under way was cancelled, as at a timeout), so its state is
    one a resume can go on from, with the decisions already given. A run that never reached a
    checkpoint would otherwise be lost; one that did would lose what it did since.
    """
    # "running", as a periodic checkpoint (runtime.checkpoint_every) of an unfinished run is
    status = RunStatus.SUSPENDED.value if runner.interaction.pending else "running"
    try:
        runner.save_checkpoint(status)
    except Exception as exc:  # another owner took the run meanwhile, a full disk: say so
        return f"its last checkpoint is kept (saving this point failed: {visible(str(exc))})"
    return "saved where it stopped"


def _decide(runner: ReactiveRunner, pending: tuple[ApprovalRequest, ...],
            args: argparse.Namespace, console: Console) -> bool:
    """Record a decision for each pending request; False when nobody can decide now."""
    if getattr(args, "approve_all", False):
        questions = tuple(r for r in pending if r.question is not None)  # only a person answers
        for request in pending:  # the transcript records exactly what was approved
            if request.question is not None:
                continue
            print_request(console, heading("  approving (--approve-all) ", request), request,
                          indent="    ")
            runner.approve(request.id, "approved with --approve-all")
        if not questions:
            return True
        pending = questions
    if args.non_interactive:
        return False
    for request in pending:
        if request.question is not None:
            text = _ask_question(request, console)
            if text is None:
                console.print("no answer on standard input")
                return False
            runner.answer(request.id, text)
            continue
        if not _ask_until_decided(runner, request, console):
            return False
    return True


def _ask_until_decided(runner: ReactiveRunner, request: ApprovalRequest,
                       console: Console) -> bool:
    """Ask about one request until a decision is recorded; False at end of input.

    Arguments edited at the prompt that do not fit the tool are refused and asked again.
    """
    while True:
        answer = _ask(request, console)
        if answer is None:
            console.print("no answer on standard input")
            return False
        approved, message, edited = answer
        try:
            if edited is not None:
                runner.approve(request.id, "approved with edited arguments in the terminal",
                               arguments=edited)
            elif approved:
                runner.approve(request.id, message)
            else:
                runner.reject(request.id, message or "rejected in the terminal")
        except ApprovalEditError as exc:
            console.print(f"  {visible(str(exc))}")
            continue
        return True


@contextlib.contextmanager
def _plain_ctrl_c() -> Iterator[None]:
    """Ctrl-C raises `KeyboardInterrupt` at once while the person is asked.

    The prompts wait inside ``asyncio.run``, whose SIGINT handler only cancels the main task:
    a blocking read of standard input never sees that, and the person would have to press
    Ctrl-C twice. While asking, Ctrl-C acts as in any plain program.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers (and it is the one that gets SIGINT)
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _ask_question(request: ApprovalRequest, console: Console) -> str | None:
    """Ask a question (``ask_user``) on standard input; its answer, or None at end of input."""
    console.print(Text.assemble(("question ", "bold yellow"), visible(request.id), ": ",
                                visible(request.question or "")), soft_wrap=True)
    console.print("  your answer: ", end="")
    console.file.flush()
    line = sys.stdin.readline()
    if not line:
        console.print()
        return None
    text = line.rstrip("\n")
    if not sys.stdin.isatty():
        console.print(visible(text))  # echo piped answers so the transcript reads well
    return text


def _ask(request: ApprovalRequest,
         console: Console) -> tuple[bool, str | None, dict[str, Any] | None] | None:
    """Ask on standard input (a terminal or a pipe); None at end of input.

    The person sees the tool and its full arguments, not only the summary (which is cut at
    200 characters and could hide the part of a command that matters).
    """
    print_request(console, heading(Text("approval needed ", style="bold yellow"), request),
                  request)
    while True:
        console.print("  approve? [y/n, or 'n REASON', or 'e JSON' to run it with these "
                      "arguments] ", end="")
        console.file.flush()
        line = sys.stdin.readline()
        if not line:
            console.print()
            return None
        answer = line.strip()
        word, _, rest = answer.partition(" ")
        if not sys.stdin.isatty():
            console.print(answer)  # echo piped answers so the transcript reads well
        if word.lower() in ("y", "yes"):
            return True, rest.strip() or None, None
        if word.lower() in ("e", "edit") and rest.strip():
            try:
                edited = read_json(rest)
            except json.JSONDecodeError as exc:
                console.print(f"  the arguments are not JSON: {exc}")
                continue
            if isinstance(edited, dict):
                return True, None, edited
            console.print("  the arguments must be a JSON object")
            continue
        if word.lower() in ("n", "no"):
            return False, rest.strip() or None, None
        console.print("  please answer y or n")


def _report(runner: ReactiveRunner, target: Target, result: RunResult, progress: Progress,
            args: argparse.Namespace, console: Console) -> int:
    progress.show_final(runner.state.get("usage"))
    status = result.status
    if status is RunStatus.SUSPENDED:
        # absolute and quoted: the hint is pasted from any folder, into a shell
        hint_config = (f" --config {shlex.quote(os.path.abspath(args.config))}"
                       if args.config else "")
        # a question waits for an answer, not an approval (as the studio's timeline says)
        asked = sum(1 for r in result.pending if r.question is not None)
        approvals = len(result.pending) - asked
        waits = " and ".join([f"{approvals} approval(s)"] * bool(approvals or not asked)
                             + [f"{asked} answer(s)"] * bool(asked))
        console.print(say(("suspended", "yellow"), f": run {visible(runner.run_id)} waits for "
                          f"{waits}; it is saved in "
                          f"{runner.ctx.config.runtime.checkpoint_path}"))
        for request in result.pending:
            print_request(console, heading("  pending ", request, sep="  "), request,
                          indent="    ")
        first = shlex.quote(visible(result.pending[0].id)) if result.pending else "ID"
        if result.pending and result.pending[0].question is not None:
            console.print(f"resume with: jianmu resume {visible(runner.run_id)} --answer {first}"
                          f" TEXT{hint_config}")
            return ExitCode.SUSPENDED
        console.print(f"resume with: jianmu resume {visible(runner.run_id)} --approve {first}"
                      f"{hint_config}   (or --reject {first})")
        return ExitCode.SUSPENDED
    code = RUN_EXIT_CODES[status]
    if status is RunStatus.SUCCESS:
        try:
            value = target.result()
        except JianmuError as exc:  # a BT skill's result that does not fit its outputs
            console.print(say(("failure", "red"), f": {visible(str(exc))}"))
            return ExitCode.FAILURE
        if value is not None:
            shown = value if isinstance(value, str) else json.dumps(
                value, indent=2, ensure_ascii=False, default=str
            )
            # a tool's output may carry ANSI escapes: the console shows them, never obeys
            console.print(f"result:\n{shown}" if "\n" in shown else f"result: {shown}")
    style = {"success": "green", "failure": "red"}.get(status.value, "yellow")
    reason = f": {visible(result.error)}" if result.error else ""  # the full error, only here
    console.print(say((status.value, style), f" run {visible(runner.run_id)} after "
                      f"{runner.ticks} ticks{reason}"))
    if store_failed(result.exception):  # interrupted, not lost: it is saved as going on
        console.print(f"the checkpoint store failed, so the run stopped where it was last "
                      f"saved; once the store can be written again, 'jianmu resume "
                      f"{visible(runner.run_id)}' goes on from there")
    return int(code)

