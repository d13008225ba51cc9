"""``jianmu tools``, ``jianmu skills`` and ``jianmu tree``: list, show and validate what a run
would use; a tree as ASCII, DOT or Mermaid."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import py_trees
from py_trees.behaviour import Behaviour
from rich.table import Table

from jianmu._cli.common import (
    CLIError,
    ExitCode,
    json_text,
    load_cli_config,
    make_console,
    parse_inputs,
    printable,
    require_extra,
    say,
    visible,
)
from jianmu._cli.progress import node_kind
from jianmu._cli.targets import is_script, load_target, skill_catalog
from jianmu.errors import (
    MissingExtraError,
    SkillLoadError,
    SkillNotFoundError,
    ToolNotFoundError,
    ToolUnavailableWarning,
)

if TYPE_CHECKING:
    from jianmu.skills import Skill

__all__ = ("cmd_skills_list", "cmd_skills_show", "cmd_skills_validate", "cmd_tools_list",
           "cmd_tools_show", "cmd_tree_show", "to_dot", "to_mermaid")

TOOL_FORMATS = ("openai", "anthropic", "mcp", "spec")


def _first_line(text: str) -> str:
    """The first line, cut at the end of its first sentence."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    first = lines[0] if lines else ""
    end = first.find(". ")
    return first[: end + 1] if end >= 0 else first


# -- tools -----------------------------------------------------------------------------------


def _builtin_tools() -> tuple[list[Any], list[str]]:
    """Every built-in that loads, and a note for each that does not (a missing extra)."""
    from jianmu.tools import BuiltinToolProvider

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tools = BuiltinToolProvider().get_tools()
    return tools, [str(w.message) for w in caught]


def _mcp_tools(
    config: Any, only: str | None = None
) -> tuple[list[Any], list[str], list[str]]:
    """The tools of every server in the config's ``mcp.servers``, or of the one named ``only``
    (each connected, then closed); why each server that could not be listed was skipped; and
    why each tool a server listed was skipped (the command's notes, not Python warnings).

    Raises:
        CLIError: ``only`` is not a configured server.
    """
    from jianmu.mcp import providers_from_config

    providers = providers_from_config(config)
    if not providers:
        if only is not None:
            raise CLIError(f"--mcp {only}: no MCP servers are configured (mcp.servers)")
        return [], ["no MCP servers are configured (mcp.servers)"], []
    require_extra("mcp", "mcp")
    if only is not None:
        providers = [p for p in providers if p.name == only]
        if not providers:
            known = ", ".join(config.mcp.servers)
            raise CLIError(f"--mcp {only}: no such server in mcp.servers (configured: {known})")
    tools: list[Any] = []
    notes: list[str] = []

    async def gather() -> None:
        for provider in providers:
            try:
                await provider.initialize()
                tools.extend(provider.get_tools())
            except Exception as exc:  # one unreachable server must not hide the others
                notes.append(f"MCP server {provider.name!r} skipped: {exc}")
            finally:
                await provider.close()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ToolUnavailableWarning)
        asyncio.run(gather())
    skipped = [str(w.message) for w in caught if issubclass(w.category, ToolUnavailableWarning)]
    for other in caught:  # anything else is shown as it would have been
        if not issubclass(other.category, ToolUnavailableWarning):
            warnings.showwarning(other.message, other.category, other.filename, other.lineno)
    return tools, notes, skipped


_HINTS = (("readOnlyHint", "read-only"), ("destructiveHint", "destructive"),
          ("idempotentHint", "idempotent"), ("openWorldHint", "open-world"))


def _hints(tool: Any) -> str:
    """The server's annotations, short: ``read-only``, ``not destructive``..."""
    notes = tool.metadata.get("mcp_annotations") or {}
    words = [word if notes[key] else f"not {word}" for key, word in _HINTS
             if isinstance(notes.get(key), bool)]
    return ", ".join(words) or "none"


def _guard_view(tool: Any, config: Any) -> tuple[str, str]:
    """Whether the guard asks before ``tool`` runs (``no``, ``yes``, ``denied``), and why.

    The config's ``guard.tool_policy`` and ``default_policy`` over the tool's permission, as a
    call without arguments meets them (argument rules may still ask for some calls), and the
    runner's refusal of network tools under ``execution.network: false``.
    """
    from jianmu.guard import ToolPolicyChecker
    from jianmu.tools.calls import ToolCall

    policy = ToolPolicyChecker.from_guard_constraints(config.guard)
    if policy.hides(tool, user_roles=frozenset()):
        return "denied", "hidden from the model by guard.tool_policy"
    verdict, reason, _rule = policy.resolve(ToolCall(name=tool.name, arguments={}), tool)
    if verdict != "deny" and "http" in tool.effect_tags and config.execution.network is False:
        return "denied", "it uses the network and execution.network is false"
    limit = config.guard.rate_limits.get(tool.name)
    if limit is not None and verdict != "deny":
        reason += f"; at most {limit} call(s) a minute"
    return {"allow": "no", "confirm": "yes", "deny": "denied"}[verdict], reason


def _server_table(server: str, tools: list[Any], config: Any) -> Table:
    """One MCP server's tools with the guard's view of each."""
    trust = config.mcp.servers[server].trust
    table = Table(title=f"MCP server {server} (trust: {trust})")
    for column in ("name", "category", "permission", "asks first", "hints"):
        table.add_column(column, no_wrap=column != "hints")
    table.add_column("why", overflow="fold")
    for tool in tools:
        asks, why = _guard_view(tool, config)
        table.add_row(tool.name, tool.category, tool.permission, asks, _hints(tool), why)
    return table


def cmd_tools_list(args: argparse.Namespace) -> int:
    """``jianmu tools list``: the built-in tools (and with ``--mcp`` the servers') as a table;
    ``--mcp SERVER``: that server's tools with the guard's view of each."""
    config = load_cli_config(args.config)
    console = make_console()
    if isinstance(args.mcp, str):
        served, problems, skipped = _mcp_tools(config, args.mcp)
        if problems:
            raise CLIError("; ".join(problems), ExitCode.FAILURE)
        console.print(_server_table(args.mcp, served, config))
        for note in skipped:
            console.print(say((note, "dim")))
        return ExitCode.OK
    tools, notes = _builtin_tools()
    if args.mcp:
        served, problems, skipped = _mcp_tools(config)
        tools += served
        notes += problems + skipped
    table = Table(title="tools" if args.mcp else "built-in tools")
    for column in ("name", "category", "permission", "parallel-safe"):
        table.add_column(column, no_wrap=True)
    table.add_column("description", overflow="fold")
    for tool in sorted(tools, key=lambda t: t.name):
        missing = _missing_extras(tool)
        marks = "".join(f" (needs the {extra!r} extra: not installed)" for extra in missing)
        table.add_row(tool.name, tool.category, tool.permission,
                      "yes" if tool.parallel_safe else "no",
                      _first_line(tool.get_description()) + marks)
        notes += [f"{tool.name} needs the {extra!r} extra, which is not installed: "
                  f"pip install 'jianmu[{extra}]'" for extra in missing]
    console.print(table)
    for note in notes:
        console.print(say((note, "dim")))
    return ExitCode.OK


def _missing_extras(tool: Any) -> list[str]:
    """The extras ``tool`` needs that are not installed: its ``metadata["requires"]`` maps the
    import name of each package it needs to the pip extra that installs it."""
    missing: list[str] = []
    for module, extra in (tool.metadata.get("requires") or {}).items():
        try:
            require_extra(extra, module)
        except MissingExtraError:
            if extra not in missing:
                missing.append(extra)
    return missing


def cmd_tools_show(args: argparse.Namespace) -> int:
    """``jianmu tools show NAME``: the tool's definition as JSON."""
    from jianmu.tools import BuiltinToolProvider

    config = load_cli_config(args.config)
    if "__" in args.name and config.mcp.servers:  # server__tool: a configured MCP server's
        served, notes, skipped = _mcp_tools(config)
        notes += skipped
        found = [t for t in served if t.name == args.name]
        if not found:
            known = ", ".join(t.name for t in served) or "none"
            raise CLIError(f"no MCP tool named {args.name!r} (MCP tools: {known})"
                           + "".join(f"; {n}" for n in notes))
        tool = found[0]
    else:
        try:
            tool = BuiltinToolProvider().load(args.name)
        except ToolNotFoundError as exc:
            if "__" in args.name:  # server__tool, as --help offers, with no server configured
                raise CLIError(f"{exc}; {args.name!r} reads as server__tool, and no MCP servers "
                               "are configured (mcp.servers)") from exc
            raise CLIError(str(exc)) from exc
    if args.format == "openai":
        data: Any = tool.to_openai()
    elif args.format == "anthropic":
        data = tool.to_anthropic()
    elif args.format == "mcp":
        data = tool.to_mcp()
    else:
        data = tool.spec()
    print(json_text(data))
    return ExitCode.OK


# -- skills ----------------------------------------------------------------------------------


def cmd_skills_list(args: argparse.Namespace) -> int:
    """``jianmu skills list``: the catalog, and the skills that failed to load."""
    config = load_cli_config(args.config)
    console = make_console()
    catalog = skill_catalog(config, args.skills_dir)
    table = Table(title="skills")
    for column in ("name", "execution", "version", "tools", "description"):
        table.add_column(column, overflow="fold")
    for skill in catalog:
        table.add_row(skill.name, skill.execution, skill.version or "",
                      _tools_text(skill), _first_line(skill.description))
    console.print(table)
    for skill in catalog:
        for note in skill.warnings:
            console.print(say(("warning", "yellow"), f" {skill.name}: {note}"))
    for error in catalog.errors:
        console.print(say(("broken", "red"), f": {error}"))
    if not len(catalog) and not catalog.errors:
        folders = ", ".join(str(p) for p in catalog.paths)
        console.print(f"no skills found in {folders}; add SKILL.md folders there "
                      "or list folders in the config's skills.paths")
    return ExitCode.OK


def _tools_text(skill: Any) -> str:
    """The skill's tool names; the defaults marked as such."""
    if skill.tools or skill.is_bt:
        return ", ".join(skill.tools)
    return ", ".join(skill.tool_names) + " (default: the skill names no tools)"


def _size(size: int) -> str:
    """``812 B``, ``4.1 KB``, ``2.3 MB``."""
    if size < 1024:
        return f"{size} B"
    return f"{size / 1024:.1f} KB" if size < 1024 * 1024 else f"{size / 1024 / 1024:.1f} MB"


def cmd_skills_show(args: argparse.Namespace) -> int:
    """``jianmu skills show NAME``: front matter, tools, constraints, every file, body."""
    config = load_cli_config(args.config)
    console = make_console()
    catalog = skill_catalog(config, args.skills_dir)
    try:
        skill = catalog.get(args.name)
    except SkillNotFoundError as exc:
        raise CLIError(str(exc)) from exc
    rows: list[tuple[str, Any]] = [
        ("name", skill.name), ("description", skill.description.strip()),
        ("execution", skill.execution), ("folder", str(skill.folder)),
        ("tree", skill.tree_path.name if skill.tree_path else None),
        ("version", skill.version), ("license", skill.license),
        ("compatibility", skill.compatibility),
        ("tools", _tools_text(skill) or None),
        ("allowed-tools", ", ".join(a.entry for a in skill.allowed_tools) or None),
        ("history_limit", skill.history_limit),
        ("inputs", _json(skill.inputs)), ("outputs", _json(skill.outputs)),
        ("constraints", _json(skill.constraints.model_dump(exclude_none=True,
                                                           exclude_defaults=True)) or None),
        ("metadata", _json(skill.metadata) if skill.metadata else None),
    ]
    for key, value in rows:
        if value not in (None, ""):
            # a value's further lines (a `description: |`) are indented under it: at the left
            # edge, its 'tools: none' line would read as the skill's own
            shown = "\n".join(str(value).splitlines()).replace("\n", "\n" + " " * (len(key) + 2))
            console.print(say((key, "bold"), f": {shown}"))
    for note in skill.warnings:
        console.print(say(("warning", "yellow"), f": {note}"))
    files = skill.files()
    console.print(say(("files", "bold"), f": {len(files) or 'none besides SKILL.md'}"))
    width = max((len(path) for path, _ in files), default=0)
    for path, size in files:
        console.print(f"  {visible(path).ljust(width)}  {_size(size):>9}")
    console.print()
    console.print(skill.body if skill.body else say(("(no body)", "dim")))
    return ExitCode.OK


def _json(value: Any) -> str | None:
    return json.dumps(value, ensure_ascii=False, default=str) if value else None


def _problem_line(error: SkillLoadError) -> str:
    """``file:line: field: message``."""
    where = error.path or "<skill>"
    if error.line is not None:
        where += f":{error.line}"
    if error.field:
        where += f" [{error.field}]"
    text = str(error)
    message = text[len(where) + 2:] if text.startswith(where + ": ") else text
    return f"{_shown_path(error.path)}:{error.line or 1}: {error.field or 'skill'}: {message}"


def _shown_path(path: str | None) -> str:
    """``path`` relative to the current folder when it lies below it."""
    if not path:
        return "<skill>"
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return path


def _name_line(skill: Skill) -> int | None:
    """The line of ``name:`` in the skill's SKILL.md (the front matter starts on line 2)."""
    from jianmu.skills.loader import read_front_matter

    text, _ = read_front_matter(skill.file, folder=skill.pinned)
    lines = text.splitlines()
    return next((i + 2 for i, line in enumerate(lines) if line.startswith("name:")), None)


def cmd_skills_validate(args: argparse.Namespace) -> int:
    """``jianmu skills validate [PATH...]``: every skill at any depth; exit 1 if any is broken."""
    from jianmu.skills import SKILL_FILE, SkillCatalog, find_skill_folders
    from jianmu.skills.loader import body_warnings, file_warnings

    config = load_cli_config(args.config)
    console = make_console()
    folders: list[Path] = []
    for raw in args.paths or ["skills"]:
        base = Path(raw)
        if not base.exists():
            raise CLIError(f"{raw!r} does not exist; give a skill folder or a folder of skills")
        found = find_skill_folders(base)
        if not found:
            raise CLIError(f"no {SKILL_FILE} in {raw!r} or its sub-folders")
        known = {f.resolve() for f in folders}
        folders.extend(f for f in found if f.resolve() not in known)
    checker = SkillCatalog([], config=config)
    problems = warned = 0
    seen: dict[str, Path] = {}
    for folder in folders:
        try:
            # absolute, so that errors raised while importing tree.py find their line
            skill = checker.validate(folder.resolve(), run_tree=args.run_trees)
            first = seen.setdefault(skill.name, skill.file)
            if first is not skill.file:  # a catalog over both folders would refuse it
                raise SkillLoadError(
                    f"duplicate skill {skill.name!r}: already found at "
                    f"{_shown_path(str(first))}; rename one of them",
                    path=str(skill.file), line=_name_line(skill), field="name",
                )
        except SkillLoadError as exc:
            problems += 1
            console.print(_problem_line(exc))
            continue
        console.print(say(("ok", "green"), f" {skill.name} ({skill.execution}) "
                          f"{_shown_path(str(skill.file))}"))
        if skill.is_bt and not args.run_trees:  # a downloaded skill's code is not run by a look
            console.print(say("  ", ("note", "cyan"), f": {skill.tree} was parsed, not run: "
                              "--run-trees imports it and builds the tree (running the "
                              "skill's Python here, unsandboxed)"))
        notes = (*skill.warnings, *body_warnings(skill), *file_warnings(skill))
        warned += bool(notes)
        for note in notes:
            console.print(say("  ", ("warning", "yellow"), f": {note}"))
    with_warnings = f", {warned} with warnings" if warned else ""
    if problems:
        console.print(f"{problems} of {len(folders)} skill(s) have errors{with_warnings}")
        return ExitCode.FAILURE
    console.print(f"{len(folders)} skill(s) valid{with_warnings}")
    return ExitCode.OK


# -- trees -------------------------------------------------------------------------------------


# Mermaid shapes: composites are drawn apart from leaves, each kind in its own shape.
_MERMAID_SHAPE = {
    "sequence": ('{{"', '"}}'),   # hexagon
    "selector": ('{"', '"}'),     # rhombus
    "parallel": ('[["', '"]]'),   # subroutine
    "decorator": ('(["', '"])'),  # stadium
    "leaf": ('["', '"]'),         # rectangle
}
_MARK = {"sequence": "→ ", "selector": "? ", "parallel": "⇉ ", "decorator": "◇ ", "leaf": ""}
_DOT_SHAPE = {"sequence": "box", "selector": "octagon", "parallel": "parallelogram",
              "decorator": "ellipse", "leaf": "ellipse"}


def _numbered(root: Behaviour) -> list[tuple[str, Behaviour, str | None]]:
    """(id, node, parent id) for each node in depth-first order; ids are ``n0``, ``n1``..."""
    counter = itertools.count()
    out: list[tuple[str, Behaviour, str | None]] = []

    def walk(node: Behaviour, parent: str | None) -> None:
        node_id = f"n{next(counter)}"
        out.append((node_id, node, parent))
        for child in node.children:
            walk(child, node_id)

    walk(root, None)
    return out


def to_mermaid(root: Behaviour) -> str:
    """A Mermaid flowchart (``graph TD``) of the tree; composites are shaped by kind."""
    lines = ["graph TD"]
    nodes = _numbered(root)
    for node_id, node, _ in nodes:
        kind = node_kind(node)
        left, right = _MERMAID_SHAPE[kind]
        label = (_MARK[kind] + node.name).replace('"', "#quot;")
        lines.append(f"    {node_id}{left}{label}{right}")
    lines += [f"    {parent} --> {node_id}" for node_id, _, parent in nodes if parent]
    return "\n".join(lines) + "\n"


def to_dot(root: Behaviour) -> str:
    """A Graphviz DOT digraph of the tree, ids ``n0``..., one shape per kind of node."""
    lines = ["digraph tree {", "    ordering=out;", "    node [fontsize=10];"]
    nodes = _numbered(root)
    for node_id, node, _ in nodes:
        kind = node_kind(node)
        label = (_MARK[kind] + node.name).replace("\\", "\\\\").replace('"', '\\"')
        lines.append(f'    {node_id} [label="{label}", shape={_DOT_SHAPE[kind]}];')
    lines += [f"    {parent} -> {node_id};" for node_id, _, parent in nodes if parent]
    lines.append("}")
    return "\n".join(lines) + "\n"


def cmd_tree_show(args: argparse.Namespace) -> int:
    """``jianmu tree show TARGET --format FORMAT``."""
    config = load_cli_config(args.config)
    inputs = parse_inputs(args.input or [])
    if not is_script(args.target) and not Path(args.target).is_dir():
        _refuse_prompt_skill(args.target, config, args.skills_dir)
    target = load_target(args.target, inputs=inputs, config=config, skills_dirs=args.skills_dir)
    root = target.tree
    if args.format == "ascii":
        text = py_trees.display.ascii_tree(root)
    elif args.format == "dot":
        text = to_dot(root)
    else:
        text = to_mermaid(root)
    print(printable(text.rstrip("\n")))
    return ExitCode.OK


def _refuse_prompt_skill(name: str, config: Any, skills_dirs: list[str] | None) -> None:
    """A prompt skill has no tree of its own to show (its model follows its body): say so,
    rather than ask for a task and a model as running it would."""
    from jianmu.errors import SkillLoadError, SkillNotFoundError

    try:
        skill = skill_catalog(config, skills_dirs).get(name)
    except (SkillLoadError, SkillNotFoundError):
        return  # load_target says what is wrong, as `jianmu run` does
    if not skill.is_bt:
        raise CLIError(f"skill {skill.name!r} is a prompt skill: it has no tree to show (a "
                       "SkillNode whose model follows its body); 'jianmu tree show' takes a "
                       f"script or a BT skill, and 'jianmu skills show {skill.name}' shows "
                       "this one")
