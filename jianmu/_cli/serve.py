"""The commands that serve: ``jianmu mcp serve`` (tools to MCP hosts) and ``jianmu studio`` (runs
to a browser), each behind a token; and ``jianmu sandbox build-image``."""

from __future__ import annotations

import argparse
import errno
import os
import sys
from typing import TYPE_CHECKING

from jianmu._cli.common import (
    CLIError,
    ExitCode,
    load_cli_config,
    make_console,
    require_extra,
    say,
)
from jianmu.errors import JianmuError, SandboxError, SkillLoadError

if TYPE_CHECKING:
    import socket
    from types import FrameType

    from rich.console import Console

    from jianmu.config import AppConfig
    from jianmu.skills import Skill

__all__ = (
    "DEFAULT_SERVED_TOOLS", "cmd_mcp_serve", "cmd_sandbox_build_image", "cmd_studio", "restorer",
)

DEFAULT_SERVED_TOOLS = ("read_file", "list_dir", "file_info", "glob_search", "grep_search",
                        "calculator")
"""What ``jianmu mcp serve`` exposes without ``--tools``: tools that only read."""


def _split(names: str) -> list[str]:
    return [n.strip() for n in names.split(",") if n.strip()]


def cmd_mcp_serve(args: argparse.Namespace) -> int:
    """``jianmu mcp serve``: serve built-ins over MCP with the config's guard, and with
    ``--skills-dir`` BT skills as a tool, prompt skills as prompts, skill files as resources."""
    # before the banner: a server that cannot start must not say it is serving
    require_extra("mcp", "mcp", *(("uvicorn",) if args.transport == "http" else ()))
    from jianmu.mcp.server import serve_sync, served_tools
    from jianmu.tools import ToolSet

    config = load_cli_config(args.config)
    # stdout is the MCP channel in stdio mode: everything for people goes to stderr
    log = make_console(stderr=True)
    names = _split(args.tools) if args.tools is not None else list(DEFAULT_SERVED_TOOLS)
    if not names:
        raise CLIError(f"--tools {args.tools!r} names no tool; write e.g. --tools "
                       "read_file,calculator (or leave it out for the read-only ones)")
    try:
        toolset = ToolSet.resolve(names, strict=True)
    except JianmuError as exc:
        raise CLIError(f"--tools: {exc}") from exc
    skills = _served_skills(args.skills_dir, config, log) if args.skills_dir else []
    bt_skills = [s for s in skills if s.is_bt]
    prompt_skills = [s for s in skills if not s.is_bt]
    if bt_skills:
        from jianmu.skills import RunBTSkillTool

        try:
            toolset = toolset.with_tools([RunBTSkillTool(bt_skills)])
        except SkillLoadError as exc:
            raise CLIError(str(exc)) from exc
    # the token is checked before the banner: a server that cannot start must not say it serves
    token = _bearer_token(args) if args.transport == "http" else None
    listener = _listener(args.host, args.port) if args.transport == "http" else None
    where = "stdio" if args.transport == "stdio" else \
        f"http://{args.host}:{args.port}{args.path}"
    # what clients will see: the guard's tool_policy hides denied tools from the listing
    served = [t.name for t in served_tools(toolset, guard=config.guard)]
    hidden = [n for n in toolset.names() if n not in served]
    log.print(f"serving {len(served)} tool(s) over MCP ({where}): "
              f"{', '.join(served) or 'none'}")
    if hidden:
        log.print("  not served (hidden by the guard, admin only or deprecated): "
                  f"{', '.join(hidden)}")
    if skills:
        log.print(f"  and {len(prompt_skills)} prompt skill(s) as prompts, the files of "
                  f"{len(skills)} skill(s) as resources skill://<skill>/<path>")
    if args.transport == "http":
        shown = f"${args.token_env}" if args.token_env else token
        log.print(f"  clients must send: Authorization: Bearer {shown}")
    try:
        serve_sync(toolset, transport=args.transport, host=args.host, port=args.port,
                   path=args.path, guard=config.guard, execution=config.execution,
                   prompts=prompt_skills, files=skills, token=token, config=config,
                   listener=listener)
    except ValueError as exc:
        raise CLIError(str(exc)) from exc
    except KeyboardInterrupt:
        log.print("stopped")
    return ExitCode.OK


def _listener(host: str, port: int) -> socket.socket:
    """The server's socket, bound before the banner (a port in use is one error line)."""
    from jianmu._net import bind_listener

    try:
        return bind_listener(host, port)
    except OSError as exc:
        fix = ("; another server (one started before?) holds the port: stop it, or give "
               "another with --port" if exc.errno == errno.EADDRINUSE else "")
        raise CLIError(f"--host/--port: {exc.strerror or exc}{fix}", ExitCode.FAILURE) from exc


def _bearer_token(args: argparse.Namespace) -> str:
    """The token every HTTP request must carry: ``--token-env``'s variable, else a new one
    (the banner prints it, to stderr, for the person who connects clients).

    Raises:
        CLIError: ``--token-env`` names a variable that is unset or empty.
    """
    from jianmu._secrets import new_token

    if args.token_env:
        token = os.environ.get(args.token_env, "").strip()
        if not token:
            raise CLIError(f"--token-env {args.token_env}: the environment variable "
                           f"{args.token_env} is not set or empty; set it to the token "
                           "clients will send")
        return token
    return new_token()


def _served_skills(folders: list[str], config: AppConfig, log: Console) -> list[Skill]:
    """The skills of ``--skills-dir`` (broken ones reported and skipped).

    Raises:
        CLIError: the folders hold no skill at all.
    """
    from jianmu._cli.targets import check_skills_dirs
    from jianmu.skills import SkillCatalog

    check_skills_dirs(folders)
    catalog = SkillCatalog(folders, config=config)
    for error in catalog.errors:
        log.print(say(("skipped a broken skill", "yellow"), f": {error}"))
    if not len(catalog):
        raise CLIError(f"--skills-dir {', '.join(folders)}: no skill found there")
    return catalog.skills()


# -- jianmu studio -----------------------------------------------------------------------------


def restorer(path: str, config: AppConfig, explicit_config: bool = False):  # type: ignore[no-untyped-def]
    """Rebuilds a run as ``jianmu resume`` does (its launch record, its target), or None when
    'jianmu run' did not start it. The run is rebuilt in its own folder under its own recorded
    config (`launch_config`), never the studio's: ``config`` and ``explicit_config`` no longer
    choose it."""
    from jianmu._cli.targets import Launch, LaunchStore, launch_config, load_target
    from jianmu.errors import CheckpointError
    from jianmu.runtime import ReactiveRunner, SQLiteCheckpointer
    from jianmu.runtime.lease import default_owner
    from jianmu.studio import Restored

    def launched(run_id: str) -> Launch | None:
        launches = LaunchStore(path)
        try:
            return launches.load(run_id)
        finally:
            launches.close()

    def restore(run_id: str) -> Restored | None:
        launch = launched(run_id)
        if launch is None:
            return None
        used = launch_config(launch, run_id)  # its own folder and config, not the studio's
        target = load_target(launch.target, inputs=launch.inputs, config=used, launch=launch)
        checkpointer = SQLiteCheckpointer(path)
        try:
            runner = ReactiveRunner.restore(
                target.tree, checkpointer, run_id, state_manager=target.state, config=used,
                constraints=target.constraints, extras={"cli_launch": launch.target},
                owner=default_owner("jianmu studio"),  # refused while another owner holds it
            )
        except CheckpointError:
            checkpointer.close()
            raise
        target.attach(runner)

        async def close() -> None:
            try:
                await target.close()
            finally:
                checkpointer.close()

        return Restored(runner=runner, close=close)

    # the page offers Fork only for runs it can rebuild: those 'jianmu run' started
    restore.rebuilds = lambda run_id: launched(run_id) is not None  # type: ignore[attr-defined]
    return restore


def cmd_studio(args: argparse.Namespace) -> int:
    """``jianmu studio``: print the URL with its token, then serve until Ctrl-C."""
    require_extra("studio", "starlette", "uvicorn")
    if args.app:
        require_extra("dbos", "dbos", "psycopg")
    import uvicorn

    from jianmu._secrets import is_loopback, new_token
    from jianmu.studio import CheckpointRuns, DurableRuns, create_app
    from jianmu.studio.runs import Journal

    config = load_cli_config(args.config)
    path = os.path.abspath(os.path.expanduser(args.checkpoints or
                                              config.runtime.checkpoint_path))
    if args.checkpoints and os.path.isdir(path):
        raise CLIError(f"--checkpoints {args.checkpoints!r} is a directory; name the SQLite "
                       "file in it")
    if args.checkpoints and not os.path.isfile(path):
        raise CLIError(f"--checkpoints {args.checkpoints!r}: no such file")
    # the config's file is made by the first 'jianmu run': before it, an empty list
    os.makedirs(os.path.dirname(path), exist_ok=True)
    journal = Journal(path)
    sources: list = [CheckpointRuns(path, journal, restorer(path, config, bool(args.config)))]
    if args.app:
        from jianmu._cli.durable import load_app

        if args.config:  # the app's engine reads its config the usual way
            os.environ["JIANMU_CONFIG"] = args.config
        engine = load_app(args.app)
        engine.client  # noqa: B018 - reach its database now: one clean error if unreachable
        sources.append(DurableRuns(engine, journal))
    token = args.token or new_token()
    if not is_loopback(args.host):
        print(f"jianmu: warning: serving on {args.host}, not the loopback interface: anyone "
              "who can reach it and learns the token can approve tool calls", file=sys.stderr)
    shown = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
    host = f"[{shown}]" if ":" in shown else shown
    listener = _listener(args.host, args.port)
    print(f"Jianmu Studio on {path}" + (f" and app {args.app}" if args.app else ""), flush=True)
    print(f"open: http://{host}:{args.port}/?token={token}", flush=True)
    app = create_app(sources, token, host=args.host, port=args.port)

    class Server(uvicorn.Server):
        """uvicorn's server, which ends the open pages' streams when it is told to stop (each
        would hold it up until cut, with a traceback, on Ctrl-C)."""

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            app.state.closing.set()
            super().handle_exit(sig, frame)
            # a stop signal is how a studio ends: not raised again once it stopped (uvicorn
            # does, and the command then ended as a run cut short: 'error: interrupted', 4)
            captured = getattr(self, "_captured_signals", None)
            if isinstance(captured, list):
                captured.clear()

    server = Server(uvicorn.Config(app, host=args.host, port=args.port, log_level="warning",
                                   timeout_graceful_shutdown=1))
    try:
        server.run(sockets=[listener])
    except KeyboardInterrupt:  # a Ctrl-C before uvicorn took the signals over: as one after
        server.should_exit = True
    if server.should_exit:
        print("stopped", flush=True)  # as `mcp serve` says it
    return ExitCode.OK


# -- jianmu sandbox build-image ----------------------------------------------------------------


def cmd_sandbox_build_image(args: argparse.Namespace) -> int:
    """``jianmu sandbox build-image``: build (or find) the Docker sandbox image."""
    from jianmu.execution.image import build_image

    load_cli_config(args.config)
    console = make_console()
    try:
        image_id = build_image(args.name, suite=args.suite, mirror=args.mirror, force=args.force,
                               log=lambda line: console.print(f"  {line}"))
    except SandboxError as exc:  # no daemon, or both ways of building failed
        raise CLIError(str(exc), ExitCode.FAILURE) from exc
    console.print(f"image {args.name}: {image_id}")
    return ExitCode.OK
