"""``jianmu studio``: serve Jianmu Studio on the CLI's checkpoints (and a durable app's runs)."""

from __future__ import annotations

import argparse
import os
import sys

from jianmu._cli.common import CLIError, ExitCode, load_cli_config
from jianmu._cli.launches import LaunchStore
from jianmu._cli.targets import load_target
from jianmu.config import AppConfig, load_config
from jianmu.errors import CheckpointError
from jianmu.runtime import ReactiveRunner, SQLiteCheckpointer

__all__ = ("cmd_studio", "restorer")


def restorer(path: str, config: AppConfig, explicit_config: bool = False):  # type: ignore[no-untyped-def]
    """Rebuilds a run as ``jianmu resume`` does (its launch record, its target), or None when
    'jianmu run' did not start it."""
    from jianmu.studio import Restored

    def restore(run_id: str) -> Restored | None:
        launches = LaunchStore(path)
        try:
            launch = launches.load(run_id)
        finally:
            launches.close()
        if launch is None:
            return None
        used = config
        if not explicit_config and launch.config and launch.config != config.source:
            if os.path.isfile(launch.config):
                used = load_config(launch.config)
        target = load_target(launch.target, inputs=launch.inputs, config=used, launch=launch)
        checkpointer = SQLiteCheckpointer(path)
        try:
            runner = ReactiveRunner.restore(
                target.tree, checkpointer, run_id, state_manager=target.state, config=used,
                constraints=target.constraints, extras={"cli_launch": launch.target},
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

    return restore


def cmd_studio(args: argparse.Namespace) -> int:
    """``jianmu studio``: print the URL with its token, then serve until Ctrl-C."""
    import uvicorn

    from jianmu.studio import CheckpointRuns, DurableRuns, create_app
    from jianmu.studio.journal import Journal
    from jianmu.studio.security import is_loopback, new_token

    config = load_cli_config(args.config)
    path = os.path.abspath(os.path.expanduser(args.checkpoints or
                                              config.runtime.checkpoint_path))
    if args.checkpoints and not os.path.isfile(path):
        raise CLIError(f"--checkpoints {args.checkpoints!r}: no such file")
    journal = Journal(path)
    sources: list = [CheckpointRuns(path, journal, restorer(path, config, bool(args.config)))]
    if args.app:
        from jianmu._cli.apps import load_app

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
    print(f"Jianmu Studio on {path}" + (f" and app {args.app}" if args.app else ""), flush=True)
    print(f"open: http://{host}:{args.port}/?token={token}", flush=True)
    server = uvicorn.Server(uvicorn.Config(
        create_app(sources, token), host=args.host, port=args.port, log_level="warning",
        timeout_graceful_shutdown=1,
    ))
    server.run()
    return ExitCode.OK
