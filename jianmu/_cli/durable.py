"""The commands of a durable app: ``jianmu worker`` serves its runs; ``jianmu runs ...``
inspects and answers them, and ``jianmu run --durable APP TREE`` starts one and waits until it
ends or waits for approval. Those two are clients, from any process: they never execute runs.

An app is named ``module:attr`` or ``path/to/file.py:attr``, as uvicorn names one (`load_app`).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import json
import os
import shlex
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from rich.console import Console

from jianmu._cli.common import (
    RUN_EXIT_CODES,
    CLIError,
    ExitCode,
    heading,
    json_text,
    make_console,
    missing_extra,
    parse_edited_arguments,
    parse_inputs,
    print_request,
    print_runs,
    read_json,
    require_extra,
    say,
    visible,
    when,
)
from jianmu.errors import (
    AlreadyDecidedError,
    InteractionError,
    RunNotFoundError,
    TreeInputError,
    UnknownTreeError,
    exit_text,
)
from jianmu.runtime.context import QUESTION, ApprovalRequest
from jianmu.runtime.runner import RunResult, RunStatus

if TYPE_CHECKING:
    from jianmu.durable import DurableEngine, RunInfo

__all__ = (
    "DEFAULT_ATTR", "cmd_run_durable", "cmd_runs_answer", "cmd_runs_approve", "cmd_runs_list",
    "cmd_runs_recover", "cmd_runs_reject", "cmd_runs_show", "cmd_worker", "final_answer",
    "load_app", "open_app", "print_pending", "split_app",
)


def _app_spec(args: argparse.Namespace) -> str:
    spec = getattr(args, "app", None) or os.environ.get("JIANMU_APP")
    if not spec:
        saved = ""
        if getattr(args, "action", None) in ("approve", "reject", "answer"):
            # a person with a run 'jianmu run' saved lands here from 'jianmu runs --help'
            saved = ("; a run 'jianmu run' saved is answered with 'jianmu resume RUN_ID "
                     "--approve ID' (--reject ID, --answer ID TEXT)")
        raise CLIError("name the durable app: --app MODULE:ATTR or path/to/file.py:ATTR "
                       f"(or set JIANMU_APP){saved}")
    return str(spec)


def _load(args: argparse.Namespace, spec: str) -> DurableEngine:
    require_extra("dbos", "dbos", "psycopg")
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


def cmd_runs_list(args: argparse.Namespace) -> int:
    """``jianmu runs list --app APP``."""
    from jianmu.durable.engine import RUN_STATUSES

    if args.status is not None and args.status not in RUN_STATUSES:  # a saved run's only
        raise CLIError(f"--status {args.status}: a durable run's status is one of "
                       f"{', '.join(RUN_STATUSES)}")
    with open_app(args) as engine:
        infos = engine.runs(args.status)
    if args.json:
        print(json_text([i.to_dict() for i in infos]))
        return ExitCode.OK
    print_runs(make_console(), f"runs of {visible(engine.name)}", visible(engine.name),
               args.status, ("run", "tree", "status", "worker", "updated", "pending"),
               [(visible(info.run_id), visible(info.tree), visible(info.status),
                 visible(info.worker or "-"), when(info.updated),
                 ", ".join(visible(r.id) for r in info.pending)) for info in infos])
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
    if pending and pending[0].kind == QUESTION:
        console.print(f"answer with: jianmu runs answer {shlex.quote(visible(run_id))} {first} "
                      f"TEXT --app {shlex.quote(visible(app))}")
        return
    console.print(f"approve with: jianmu runs approve {where}   "
                  f"(or: jianmu runs reject {where} --reason R)")


def _show(console: Console, info: RunInfo, answer: Any, app: str) -> None:
    style = {"success": "green", "failure": "red", "suspended": "yellow"}.get(info.status, "")
    console.print(say(f"run {visible(info.run_id)}: ", (visible(info.status), style)))
    fields = {"tree": info.tree, "worker": info.worker or "-", "created": when(info.created),
              "updated": when(info.updated),
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


def _decide(args: argparse.Namespace, approved: bool, answer: str | None = None) -> int:
    console = make_console()
    edited = _edited(args) if approved and answer is None else None
    with open_app(args) as engine:
        _info(engine, args.run_id)
        try:
            if answer is not None:
                asyncio.run(engine.answer(args.run_id, args.call_id, answer))
            elif approved:
                asyncio.run(engine.approve(args.run_id, args.call_id, args.message,
                                           arguments=edited))
            else:
                asyncio.run(engine.reject(args.run_id, args.call_id, args.reason or ""))
        except RunNotFoundError as exc:
            raise CLIError(str(exc)) from None
        except AlreadyDecidedError as exc:  # the first decision stands: say which it was
            raise CLIError(str(exc), ExitCode.FAILURE) from None
        except InteractionError as exc:  # a question approved, an edit that does not fit
            raise CLIError(str(exc)) from None
    verb = "answered" if answer is not None else "approved" if approved else "rejected"
    console.print(f"{verb} {visible(args.call_id)} of run {visible(args.run_id)}; "
                  "a worker goes on with it")
    return ExitCode.OK


def cmd_runs_approve(args: argparse.Namespace) -> int:
    """``jianmu runs approve RUN_ID CALL_ID``."""
    return _decide(args, True)


def cmd_runs_reject(args: argparse.Namespace) -> int:
    """``jianmu runs reject RUN_ID CALL_ID``."""
    return _decide(args, False)


def cmd_runs_answer(args: argparse.Namespace) -> int:
    """``jianmu runs answer RUN_ID CALL_ID TEXT``: answer a question the run asked."""
    return _decide(args, True, answer=args.text)


def _edited(args: argparse.Namespace) -> dict[str, Any] | None:
    """``--arguments JSON``: the call's edited arguments."""
    raw = getattr(args, "arguments", None)
    return None if raw is None else parse_edited_arguments(raw)


def cmd_runs_recover(args: argparse.Namespace) -> int:
    """``jianmu runs recover --worker ID``: hand a dead worker's runs to the live ones."""
    console = make_console()
    with open_app(args) as engine:
        ids = engine.recover(args.worker)
    if not ids:
        console.print(f"worker {visible(args.worker)} has no pending runs")
        return ExitCode.OK
    console.print(f"handed {len(ids)} run(s) of worker {visible(args.worker)} to the live "
                  "workers:")
    for run_id in ids:
        console.print(f"  {visible(run_id)}")
    return ExitCode.OK


# -- jianmu run --durable ----------------------------------------------------------------------


_SETTLE_S = 0.2
"""Pause after --approve-all answered, before looking again (the worker takes the answers)."""


def cmd_run_durable(args: argparse.Namespace) -> int:
    """``jianmu run --durable APP TREE``."""
    if args.timeout is not None:
        raise CLIError("--timeout does not apply to --durable runs (the workers' config sets "
                       "the run's timeout); --wait S stops waiting for it")
    if args.skills_dir:
        raise CLIError("--skills-dir does not apply to --durable runs")
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
            given = read_json(args.inputs)
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


# -- loading the app ---------------------------------------------------------------------------


DEFAULT_ATTR = "engine"
"""The attribute an APP without ``:attr`` names."""


def split_app(spec: str) -> tuple[str, str]:
    """``(module or file, attribute)`` of an APP spec; the attribute defaults to ``engine``."""
    where, sep, attr = spec.rpartition(":")
    # no colon, or the colon is a Windows drive's ("C:\\app.py"): the whole spec is the place
    if not sep or any(c in attr for c in "/\\") or attr.endswith(".py"):
        return spec, DEFAULT_ATTR
    return where, attr or DEFAULT_ATTR


def _is_file(where: str) -> bool:
    return where.endswith(".py") or "/" in where or os.sep in where


def _import_file(spec: str, where: str) -> ModuleType:
    path = Path(where).expanduser().resolve()
    if not path.is_file():
        raise CLIError(f"app {spec!r}: no file {where!r}")
    name = path.stem
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "__file__", None) == str(path):
        return loaded
    folder = str(path.parent)
    if folder not in sys.path:  # its sibling modules import as they do when run as a script
        sys.path.insert(0, folder)
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise CLIError(f"app {spec!r}: {where!r} is not a Python file")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except SystemExit as exc:
        sys.modules.pop(name, None)
        raise CLIError(f"app {spec!r}: loading {where} {exit_text(exc)}") from exc
    except Exception as exc:
        sys.modules.pop(name, None)
        missing = missing_extra(exc) if isinstance(exc, ImportError) else None
        if missing is not None:  # the app imports a package of an extra: name the extra
            raise missing from exc
        raise CLIError(f"app {spec!r}: {where} failed to load: {type(exc).__name__}: {exc}"
                       ) from exc
    return module


def _import_module(spec: str, where: str) -> ModuleType:
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:  # as uvicorn's --app-dir: the current folder
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(where)
    except ModuleNotFoundError as exc:
        if exc.name and (where == exc.name or where.startswith(exc.name + ".")):
            raise CLIError(f"app {spec!r}: no module {where!r} (looked in {cwd} and the "
                           "Python path)") from None
        missing = missing_extra(exc)
        if missing is not None:
            raise missing from exc
        raise CLIError(f"app {spec!r}: module {where!r} failed to import: {exc}") from exc
    except SystemExit as exc:  # sys.exit() at its top ended jianmu silently, with its code
        raise CLIError(f"app {spec!r}: importing module {where!r} {exit_text(exc)}") from exc
    except Exception as exc:
        raise CLIError(f"app {spec!r}: module {where!r} failed to import: "
                       f"{type(exc).__name__}: {exc}") from exc


def load_app(spec: str) -> DurableEngine:
    """The `DurableEngine` that ``spec`` names (``module:attr``, ``file.py:attr``; attr
    defaults to ``engine`` and may be dotted).

    Raises:
        CLIError: the module or file cannot be found or imported, it has no such attribute,
            or the attribute is not a `DurableEngine`.
    """
    from jianmu.durable import DurableEngine

    where, attr = split_app(spec)
    if not where:
        raise CLIError(f"app {spec!r}: write MODULE:ATTR or path/to/file.py:ATTR")
    value: object = _import_file(spec, where) if _is_file(where) else _import_module(spec, where)
    for part in attr.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise CLIError(f"app {spec!r}: {where} has no attribute {attr!r}") from None
    if not isinstance(value, DurableEngine):
        raise CLIError(f"app {spec!r}: {attr} is a {type(value).__name__}, not a DurableEngine")
    return value
