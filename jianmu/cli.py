"""The ``jianmu`` command: run trees and skills, resume runs, inspect tools, skills and trees,
serve tools over MCP, build the sandbox image; serve, start and answer durable runs.

Exit codes: 0 success; 1 the run failed (or a skill did not validate, an image did not build);
2 usage or configuration error (bad arguments, config, script or skill); 3 the run is
suspended waiting for approval (it is checkpointed: ``jianmu resume RUN_ID``); 4 the run timed
out or was cancelled. Errors print as one line; ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import traceback
import warnings
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from jianmu._cli.common import TREE_FORMATS, CLIError, ExitCode, missing_extra, printable
from jianmu._secrets import redact_text

__all__ = ("build_parser", "main")

_CONFIG_PLACE = re.compile(r"^.*?:(?:\d+|\?): [\w.\[\]-]+: ")
"""Where a config error is (``FILE:LINE: llm.api_key: ``): its key path is no secret's name
before a value, and the config already leaves secret values out of what follows."""

_EPILOG = """\
exit codes: 0 success, 1 failure, 2 usage or config error, 3 suspended (waiting for
approval; resume with 'jianmu resume RUN_ID'), 4 timeout or cancelled.
"""

_RUN_EPILOG = """\
TARGET is a Python script or a skill name (with --durable, a tree of the app).

A script defines build_tree() (it may take the keyword arguments inputs, config and llm) or a
module-level 'tree', not both; optionally build_state() or STATE_SCHEMA (default: AgentState)
and build_llm(). --input values go to build_tree/build_state(inputs=...), else into the state.

A BT skill gets the --input values as its inputs (validated against its SKILL.md). A prompt
skill runs with the model of the config's llm section; its first user message is the 'task'
(or 'message') input, else all inputs as 'key: value' lines; inputs are also state fields.

--input key=value passes a string; key:=JSON passes a JSON value (key:=3, key:='[1,2]').

The run is checkpointed in the config's runtime.checkpoint_path. When a tool needs approval,
you are asked on standard input (y, n, or 'n REASON'); with --non-interactive the run stops
with exit code 3 and prints the run id and the pending request ids for 'jianmu resume'.

With --durable APP (MODULE:ATTR or path/to/file.py:ATTR, default ATTR 'engine', naming a
DurableEngine), TARGET (or --tree NAME) is a tree registered with that engine and --inputs
JSON (or --input) its inputs: the run is queued for the app's workers ('jianmu worker APP')
and this command waits for it (--wait S: at most S seconds, then exit code 4; the run goes
on). When it waits for approval the command exits with code 3 and lists the requests; the run
stays parked until 'jianmu runs approve' (from any process) answers it; --approve-all
approves every request instead.
""" + "\n" + _EPILOG

_APP = "APP is MODULE:ATTR or path/to/file.py:ATTR (ATTR defaults to 'engine'): a DurableEngine."

_DURABLE_EPILOG = f"""\
{_APP}
--app defaults to $JIANMU_APP. These commands are clients: they never execute runs.
""" + "\n" + _EPILOG

_WORKER_EPILOG = f"""\
{_APP}
The worker executes the app's runs: those that 'jianmu run --durable' or the app's own code
starts, and those it takes over from a worker that stopped beating. Start as many as you like,
on any machine that reaches the app's database; each runs up to --concurrency runs at once.
Needs the 'dbos' extra: pip install 'jianmu[dbos]'.
""" + "\n" + _EPILOG


_RUNS_EPILOG = """\
Without --app (or $JIANMU_APP), 'list', 'show' and 'fork' work on the runs 'jianmu run' saved
in the config's runtime.checkpoint_path. Each run has points: point 0 is where it started, and
each tick that changed something adds one. 'jianmu runs show RUN_ID' lists them, with the same
numbers as the studio's time slider and timeline; 'jianmu runs fork RUN_ID --at POINT' starts
a new run from one (with --set KEY=VALUE changes to its state) and runs it as 'jianmu resume'
would. A tool call that finished before that point does not run again; later ones go through
the guard, approvals included.
""" + "\n" + _DURABLE_EPILOG


_STUDIO_EPILOG = """\
Serves Jianmu Studio: the runs of the checkpoint file (and of --app's durable engine), each
with its tree as a graph, its timeline, state and pending approvals, live; a time slider goes
back to any point of a run, and Fork starts a new run from there. The list shows the runs
started in this folder ("all projects" one click away). It prints a URL with a random token;
every request needs it (a cookie after the first visit). Approving a checkpointed run started
by 'jianmu run' continues it in the studio, as 'jianmu resume --approve' would.
Needs the 'studio' extra: pip install 'jianmu[studio]'.
"""


def _version() -> str:
    """The installed distribution's version (read from its metadata, not imported)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("jianmu")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _positive(kind: type[int] | type[float], *, zero: bool = False) -> Any:
    """An argparse type: a number of ``kind`` above 0 (or with ``zero``, 0 or more), else a
    usage error."""

    def parse(text: str) -> int | float:
        value = kind(text)  # a ValueError: argparse says "invalid float value: 'x'"
        if not (value >= 0 if zero else value > 0):  # also refuses NaN
            least = "0 or more" if zero else "above 0"
            raise argparse.ArgumentTypeError(f"{text!r} must be {least}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def _run_id(text: str) -> str:
    """An argparse type: a run id, which is text UTF-8 encodes (argv's byte of another encoding,
    a lone surrogate here, failed the store's look-up with an internal error)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not UTF-8 text, and no run has it") from None
    return text


def _port(text: str) -> int:
    """An argparse type: a TCP port, 1..65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"{port} is not a port: use 1..65535")
    return port


def _common(parser: argparse.ArgumentParser) -> None:
    # SUPPRESS: given before or after the sub-command, the value is kept either way
    parser.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS,
                        help="configuration file (default: $JIANMU_CONFIG, ./jianmu.yaml, "
                             "./configs/jianmu.yaml)")
    parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="print tracebacks of errors")


def _run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--non-interactive", action="store_true",
                        help="do not ask for approvals: checkpoint, print the pending requests "
                             "and exit with code 3")
    parser.add_argument("--approve-all", action="store_true",
                        help="approve every request without asking")
    parser.add_argument("--timeout", type=_positive(float), metavar="S",
                        help="seconds the tree may run (default: the config's runtime.timeout "
                             "or the skill's); time waiting for answers does not count")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``jianmu`` command."""
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="jianmu", description="Jianmu: behaviour-tree workflows for LLM agents.",
        epilog=_EPILOG, formatter_class=formatter,
    )
    _common(parser)
    parser.add_argument("--version", action="version", version=f"jianmu {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(sub: argparse._SubParsersAction, name: str, help_: str, **kw: object
            ) -> argparse.ArgumentParser:
        made: argparse.ArgumentParser = sub.add_parser(
            name, help=help_, description=help_, formatter_class=formatter, **kw  # type: ignore[arg-type]
        )
        _common(made)
        return made

    run = add(commands, "run", "run a script's tree or a skill", epilog=_RUN_EPILOG)
    run.add_argument("target", metavar="TARGET", nargs="?",
                     help="SCRIPT.py or SKILL_NAME (with --durable: the tree's name)")
    run.add_argument("--input", "-i", action="append", metavar="KEY=VALUE",
                     help="an input (repeatable); KEY:=JSON for a JSON value")
    run.add_argument("--skills-dir", action="append", metavar="DIR",
                     help="look for skills here instead of skills/ and skills.paths")
    run.add_argument("--durable", metavar="APP",
                     help="run TARGET, a tree of APP's DurableEngine, in the app's workers")
    run.add_argument("--tree", metavar="NAME", help="--durable: the tree to run (or TARGET)")
    run.add_argument("--inputs", metavar="JSON",
                     help="--durable: the run's inputs as a JSON object (with any --input)")
    run.add_argument("--wait", type=_positive(float, zero=True), metavar="S",
                     help="--durable: stop waiting after S seconds (exit 4; the run goes on)")
    _run_options(run)
    run.set_defaults(handler="jianmu._cli.run:cmd_run", traced=True)

    resume = add(commands, "resume", "continue a checkpointed run", epilog=_EPILOG)
    resume.add_argument("run_id", metavar="RUN_ID", type=_run_id)
    resume.add_argument("--approve", action="append", metavar="ID",
                        help="approve a pending request (repeatable)")
    resume.add_argument("--reject", action="append", metavar="ID",
                        help="reject a pending request (repeatable)")
    resume.add_argument("--message", "-m", help="a note for the decisions (the model sees it)")
    resume.add_argument("--arguments", metavar="JSON",
                        help="run the one call approved with --approve with these arguments "
                             "instead (a JSON object; checked against the tool's schema and "
                             "the guard's policy)")
    resume.add_argument("--answer", action="append", nargs=2, metavar=("ID", "TEXT"),
                        help="answer a pending question (ask_user) with TEXT (repeatable)")
    _run_options(resume)
    resume.set_defaults(handler="jianmu._cli.run:cmd_resume", traced=True)

    _durable_commands(commands, add)

    studio = add(commands, "studio", "watch runs and answer approvals in a browser",
                 epilog=_STUDIO_EPILOG)
    studio.add_argument("--host", default="127.0.0.1",
                        help="interface to serve on (default 127.0.0.1; others print a warning)")
    studio.add_argument("--port", type=_port, default=8765, help="port (default 8765)")
    studio.add_argument("--checkpoints", metavar="PATH",
                        help="the SQLite checkpoint file (default: the config's "
                             "runtime.checkpoint_path, where 'jianmu run' saves runs)")
    studio.add_argument("--app", metavar="APP",
                        help="also show a durable app's runs, MODULE:ATTR or FILE.py:ATTR")
    studio.add_argument("--token", help=argparse.SUPPRESS)  # tests: a known token
    studio.set_defaults(handler="jianmu._cli.serve:cmd_studio", traced=True)

    tools = add(commands, "tools", "inspect the built-in tools and the config's MCP servers' tools")
    tools_sub = tools.add_subparsers(dest="action", metavar="ACTION", required=True)
    tools_list = add(tools_sub, "list",
                     "list the built-in tools (with --mcp, the MCP servers' too)")
    tools_list.add_argument("--mcp", nargs="?", const=True, default=False, metavar="SERVER",
                            help="also list the tools of the config's mcp.servers (connects); "
                                 "with SERVER, only that server's tools and whether the guard "
                                 "asks before each runs")
    tools_list.set_defaults(handler="jianmu._cli.info:cmd_tools_list")
    tools_show = add(tools_sub, "show", "print a tool's definition as JSON (a built-in, or "
                                        "server__tool of the config's mcp.servers)")
    tools_show.add_argument("name", metavar="NAME")
    tools_show.add_argument("--format", choices=("openai", "anthropic", "mcp", "spec"),
                            default="openai", help="definition format (default: openai)")
    tools_show.set_defaults(handler="jianmu._cli.info:cmd_tools_show")

    skills = add(commands, "skills", "list, show and validate skills")
    skills_sub = skills.add_subparsers(dest="action", metavar="ACTION", required=True)
    skills_list = add(skills_sub, "list", "list the skills and any that failed to load")
    skills_show = add(skills_sub, "show", "show a skill's front matter and body")
    skills_show.add_argument("name", metavar="NAME")
    for sub_parser in (skills_list, skills_show):
        sub_parser.add_argument("--skills-dir", action="append", metavar="DIR",
                                help="look here instead of skills/ and skills.paths")
    skills_list.set_defaults(handler="jianmu._cli.info:cmd_skills_list")
    skills_show.set_defaults(handler="jianmu._cli.info:cmd_skills_show")
    validate = add(skills_sub, "validate",
                   "check every skill under the paths, at any depth (exit 1 on any error)")
    validate.add_argument("paths", nargs="*", metavar="PATH",
                          help="a skill folder, a SKILL.md, or any folder holding skills at any "
                               "depth, e.g. a repository (default: skills)")
    validate.add_argument("--run-trees", action="store_true",
                          help="also import each BT skill's tree module and build its tree "
                               "(runs the skill's Python here, unsandboxed; default: parse only)")
    validate.set_defaults(handler="jianmu._cli.info:cmd_skills_validate")

    tree = add(commands, "tree", "inspect trees")
    tree_sub = tree.add_subparsers(dest="action", metavar="ACTION", required=True)
    show = add(tree_sub, "show", "print a script's or BT skill's tree")
    show.add_argument("target", metavar="TARGET", help="SCRIPT.py or a BT SKILL_NAME")
    show.add_argument("--format", choices=TREE_FORMATS,
                      default="ascii", help="output format (default: ascii)")
    show.add_argument("--input", "-i", action="append", metavar="KEY=VALUE",
                      help="inputs for building the tree (repeatable)")
    show.add_argument("--skills-dir", action="append", metavar="DIR",
                      help="look for skills here instead of skills/ and skills.paths")
    show.set_defaults(handler="jianmu._cli.info:cmd_tree_show")

    mcp = add(commands, "mcp", "Model Context Protocol")
    mcp_sub = mcp.add_subparsers(dest="action", metavar="ACTION", required=True)
    serve = add(mcp_sub, "serve", "serve tools to MCP hosts, with the config's guard",
                epilog="Needs the 'mcp' extra: pip install 'jianmu[mcp]'.\n\n" + _EPILOG)
    serve.add_argument("--tools", metavar="A,B",
                       help="built-in tools to serve, comma-separated (default: read-only ones: "
                            "read_file, list_dir, file_info, glob_search, grep_search, "
                            "calculator)")
    serve.add_argument("--skills-dir", action="append", metavar="DIR",
                       help="also serve the skills found here: BT skills as the run_bt_skill "
                            "tool, prompt skills as MCP prompts, their files as MCP resources "
                            "skill://<skill>/<path>")
    serve.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    serve.add_argument("--host", default="127.0.0.1", help="http: interface (default 127.0.0.1)")
    serve.add_argument("--port", type=_port, default=8000, help="http: port (default 8000)")
    serve.add_argument("--path", default="/mcp", help="http: endpoint path (default /mcp)")
    serve.add_argument("--token-env", metavar="NAME",
                       help="http: read the bearer token every request must carry from the "
                            "environment variable NAME (default: a new token, printed at "
                            "start)")
    serve.set_defaults(handler="jianmu._cli.serve:cmd_mcp_serve", traced=True)

    sandbox = add(commands, "sandbox", "the Docker sandbox")
    sandbox_sub = sandbox.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = add(sandbox_sub, "build-image", "build the sandbox image (unless present)")
    build.add_argument("--name", default="jianmu-sandbox:latest", help="repository:tag")
    build.add_argument("--suite", default="bookworm", help="Debian release (default bookworm)")
    build.add_argument("--mirror", help="Debian mirror (default: the host's apt sources)")
    build.add_argument("--force", action="store_true", help="rebuild even if it exists")
    build.set_defaults(handler="jianmu._cli.serve:cmd_sandbox_build_image")
    return parser


def _durable_commands(commands: argparse._SubParsersAction, add: Any) -> None:
    """``jianmu worker`` and ``jianmu runs ...`` (durable runs, extra ``dbos``)."""
    worker = add(commands, "worker", "serve a durable app's runs until SIGTERM or Ctrl-C",
                 epilog=_WORKER_EPILOG)
    worker.add_argument("app", metavar="APP", help="MODULE:ATTR or path/to/file.py:ATTR")
    worker.add_argument("--id", metavar="EXECUTOR_ID",
                        help="this worker's stable id (restarted with it, it resumes its runs "
                             "at once; default: the engine's, else a fresh one)")
    worker.add_argument("--concurrency", type=_positive(int), metavar="N",
                        help="runs executed at once (default: durable.worker_concurrency)")
    worker.set_defaults(handler="jianmu._cli.durable:cmd_worker", traced=True)

    runs = add(commands, "runs", "show and fork saved runs; list, show, answer and recover "
               "durable runs", epilog=_RUNS_EPILOG)
    runs_sub = runs.add_subparsers(dest="action", metavar="ACTION", required=True)

    def action(name: str, help_: str, handler: str) -> argparse.ArgumentParser:
        made: argparse.ArgumentParser = add(runs_sub, name, help_, epilog=_DURABLE_EPILOG)
        made.add_argument("--app", metavar="APP",
                          help="the durable app, MODULE:ATTR or FILE.py:ATTR ($JIANMU_APP)")
        made.set_defaults(handler=f"jianmu._cli.durable:{handler}")
        return made

    listed = action("list", "list the runs 'jianmu run' saved, newest first (an app's runs "
                    "with --app, oldest first)", "cmd_runs_list")
    listed.set_defaults(handler="jianmu._cli.points:cmd_runs_list")
    listed.epilog = _RUNS_EPILOG
    listed.add_argument("--status", choices=("queued", "running", "suspended", "success",
                                             "failure", "timeout", "cancelled", "stopped",
                                             "damaged"))
    listed.add_argument("--json", action="store_true", help="print JSON")
    show = action("show", "show a run: its status, pending approvals, error, final answer and "
                  "(a run 'jianmu run' saved) its points", "cmd_runs_show")
    show.set_defaults(handler="jianmu._cli.points:cmd_runs_show")
    show.epilog = _RUNS_EPILOG
    show.add_argument("run_id", metavar="RUN_ID", type=_run_id)
    show.add_argument("--json", action="store_true", help="print JSON")
    fork = add(runs_sub, "fork", "start a new run from a point of a run 'jianmu run' saved "
               "(the original is not changed)", epilog=_RUNS_EPILOG)
    fork.add_argument("run_id", metavar="RUN_ID", type=_run_id)
    fork.add_argument("--at", type=int, required=True, metavar="POINT",
                      help="the point to start from, as 'jianmu runs show RUN_ID' and the "
                           "studio's time slider number them")
    fork.add_argument("--set", action="append", metavar="KEY=VALUE",
                      help="set a state key at that point (repeatable; KEY:=JSON for a JSON "
                           "value; NAMESPACE/KEY in a skill's namespace)")
    _run_options(fork)
    fork.set_defaults(handler="jianmu._cli.points:cmd_runs_fork", traced=True)
    approve = action("approve", "approve a pending request of a run", "cmd_runs_approve")
    reject = action("reject", "reject a pending request of a run (the model sees the reason)",
                    "cmd_runs_reject")
    for decide in (approve, reject):
        decide.add_argument("run_id", metavar="RUN_ID", type=_run_id)
        decide.add_argument("call_id", metavar="CALL_ID", help="the pending request's id")
    approve.add_argument("--message", "-m", help="a note for the model")
    approve.add_argument("--arguments", metavar="JSON",
                         help="run the call with these arguments instead (a JSON object; "
                              "checked against the tool's schema and the guard's policy)")
    reject.add_argument("--reason", "-r", help="why (the model sees it)")
    answer = action("answer", "answer a question a run asked (ask_user, AskUser)",
                    "cmd_runs_answer")
    answer.add_argument("run_id", metavar="RUN_ID", type=_run_id)
    answer.add_argument("call_id", metavar="ID", help="the pending question's id")
    answer.add_argument("text", metavar="TEXT", help="the answer (the asker reads it)")
    recover = action("recover", "hand a dead worker's pending runs to the live workers",
                     "cmd_runs_recover")
    recover.add_argument("--worker", required=True, metavar="EXECUTOR_ID")


def _handler(spec: str):  # type: ignore[no-untyped-def]
    import importlib

    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def _tracing(args: argparse.Namespace) -> AbstractContextManager[object]:
    """The ``telemetry.exporter`` of the config for a command that runs trees (`jianmu.telemetry`:
    its spans flushed as the command ends, however it ends); nothing for the others."""
    if not getattr(args, "traced", False):
        return nullcontext()
    from jianmu.config import load_config
    from jianmu.telemetry import tracing

    return tracing(load_config(args.config))


def _stop_as_ctrl_c(signum: int, frame: Any) -> None:
    """SIGTERM (a process manager's stop, ``timeout``, ``kill``) stops a command as Ctrl-C
    does: the run saved where it stands, its MCP servers and sandboxes closed, not left
    running, also where Ctrl-C is ignored (a job started in the background)."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # no handler to go through
        signal.default_int_handler(signum, frame)  # raises KeyboardInterrupt here
    else:  # through whatever handles Ctrl-C now (asyncio.run's cancels the run's task)
        os.kill(os.getpid(), signal.SIGINT)


def _say_warnings() -> None:
    """Show Jianmu's own warnings as ``jianmu: warning: ...`` lines, others as Python does.

    One raised in a run's task (an MCP server a skill connects, with a tool left out) was
    shown naming a line of asyncio's and quoting it: nothing the user wrote, nor could fix.
    """
    from jianmu.errors import JianmuWarning

    python_s = warnings.showwarning
    if getattr(python_s, "jianmu", False):
        return

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: Any = None, line: str | None = None) -> None:
        if not issubclass(category, JianmuWarning):
            python_s(message, category, filename, lineno, file, line)
            return
        try:
            print(f"jianmu: warning: {printable(str(message))}", file=file or sys.stderr)
        except OSError:  # stderr gone: as Python's own, nowhere to say it
            pass

    show.jianmu = True  # type: ignore[attr-defined]
    warnings.showwarning = show


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``jianmu`` command; return its exit code."""
    from jianmu.errors import ConfigError, JianmuError

    parser = build_parser()
    given = sys.argv[1:] if argv is None else list(argv)
    if not given:  # a newcomer's first try: the commands, not "COMMAND is required"
        parser.print_help(sys.stderr)
        return int(ExitCode.USAGE)
    args = parser.parse_args(given)
    _say_warnings()
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # commands that serve set theirs
        signal.signal(signal.SIGTERM, _stop_as_ctrl_c)
    args.config = getattr(args, "config", None)
    args.debug = getattr(args, "debug", False)
    try:
        with _tracing(args):
            return int(_handler(args.handler)(args))
    except BrokenPipeError:  # e.g. piped into head: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return int(ExitCode.FAILURE)
    except KeyboardInterrupt as exc:
        error: BaseException = exc
        code, message = ExitCode.STOPPED, "interrupted"
    except CLIError as exc:
        error, code, message = exc, exc.code, str(exc)
    except ConfigError as exc:
        error, code, message = exc, ExitCode.USAGE, str(exc)
    except JianmuError as exc:
        error, code, message = exc, ExitCode.FAILURE, str(exc)
    except ImportError as exc:  # a package of an extra, imported wherever: name the extra
        missing = missing_extra(exc)
        error, code = exc, ExitCode.FAILURE
        if missing is not None:
            message = str(missing)
        else:
            message = f"{type(exc).__name__}: {exc}"
            if not args.debug:
                message += " (run with --debug for the traceback)"
    except Exception as exc:  # a bug or an unexpected failure: one line unless --debug
        error, code, message = exc, ExitCode.FAILURE, f"{type(exc).__name__}: {exc}"
        if not args.debug:
            message += " (run with --debug for the traceback)"
    if args.debug:
        traceback.print_exception(error)
    # the message may quote a run id, a tool's output or a driver's error: shown, never
    # obeyed, and without the password of any URL it quotes
    print(f"jianmu: error: {printable(_redacted(message, error))}", file=sys.stderr)
    return int(code)


def _redacted(message: str, error: BaseException) -> str:
    """``message`` without secrets; a config error's place is kept whole, else the first word
    after ``llm.api_key: `` (``environment variable 'X' is not set``) was taken for the key."""
    from jianmu.errors import ConfigError

    place = _CONFIG_PLACE.match(message) if isinstance(error, ConfigError) else None
    if place is None or message[place.end():place.end() + 1] in ("'", '"'):
        return redact_text(message)  # a quoted piece of the value ('${sk-...}') stays masked
    return redact_text(place.group()) + redact_text(message[place.end():])


if __name__ == "__main__":
    sys.exit(main())
