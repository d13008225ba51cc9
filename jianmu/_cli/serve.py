"""``jianmu mcp serve`` and ``jianmu sandbox build-image``."""

from __future__ import annotations

import argparse

from rich.markup import escape

from jianmu._cli.common import CLIError, ExitCode, load_cli_config, make_console
from jianmu.errors import JianmuError, SandboxError, SkillLoadError

__all__ = ("DEFAULT_SERVED_TOOLS", "cmd_mcp_serve", "cmd_sandbox_build_image")

DEFAULT_SERVED_TOOLS = ("read_file", "list_dir", "file_info", "glob_search", "grep_search",
                        "calculator")
"""What ``jianmu mcp serve`` exposes without ``--tools``: tools that only read."""


def _split(names: str) -> list[str]:
    return [n.strip() for n in names.split(",") if n.strip()]


def cmd_mcp_serve(args: argparse.Namespace) -> int:
    """``jianmu mcp serve``: serve built-ins (and BT skills) over MCP with the config's guard."""
    from jianmu.mcp import serve_sync
    from jianmu.tools import ToolSet

    config = load_cli_config(args.config)
    # stdout is the MCP channel in stdio mode: everything for people goes to stderr
    log = make_console(stderr=True)
    names = _split(args.tools) if args.tools is not None else list(DEFAULT_SERVED_TOOLS)
    try:
        toolset = ToolSet.resolve(names, strict=True)
    except JianmuError as exc:
        raise CLIError(f"--tools: {exc}") from exc
    if args.skills_dir:
        from jianmu.skills import RunBTSkillTool, SkillCatalog

        catalog = SkillCatalog(args.skills_dir, config=config)
        for error in catalog.errors:
            log.print(f"[yellow]skipped a broken skill[/]: {escape(str(error))}")
        bt_skills = [s for s in catalog if s.is_bt]
        if not bt_skills:
            raise CLIError(f"--skills-dir {', '.join(args.skills_dir)}: no BT skill found there")
        try:
            toolset = toolset.with_tools([RunBTSkillTool(bt_skills)])
        except SkillLoadError as exc:
            raise CLIError(str(exc)) from exc
    where = "stdio" if args.transport == "stdio" else \
        f"http://{args.host}:{args.port}{args.path}"
    log.print(f"serving {len(toolset)} tool(s) over MCP ({where}): "
              f"{escape(', '.join(toolset.names()))}")
    try:
        serve_sync(toolset, transport=args.transport, host=args.host, port=args.port,
                   path=args.path, guard=config.guard, execution=config.execution)
    except ValueError as exc:
        raise CLIError(str(exc)) from exc
    except KeyboardInterrupt:
        log.print("stopped")
    return ExitCode.OK


def cmd_sandbox_build_image(args: argparse.Namespace) -> int:
    """``jianmu sandbox build-image``: build (or find) the Docker sandbox image."""
    from jianmu.execution.image import build_image

    load_cli_config(args.config)
    console = make_console()
    try:
        image_id = build_image(args.name, suite=args.suite, mirror=args.mirror, force=args.force,
                               log=lambda line: console.print(f"  {escape(line)}"))
    except SandboxError as exc:  # no daemon, or both ways of building failed
        raise CLIError(str(exc), ExitCode.FAILURE) from exc
    console.print(f"image {escape(args.name)}: {image_id}")
    return ExitCode.OK
