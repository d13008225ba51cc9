"""`Skill`: one SKILL.md folder, its validated front matter, and its files loaded on demand.

The front matter follows the open Agent Skills format (``name``, ``description``, ``license``,
``compatibility``, ``metadata``, ``allowed-tools``) plus Jianmu's fields (``execution``,
``tree``, ``tools``, ``constraints``, ``inputs``, ``outputs``, ``version``, ``history_limit``).
Claude Code's own keys (`CLAUDE_CODE_KEYS`) load with a warning each; any other key is an error.
Only the front matter is read when a skill is loaded: the Markdown body and the folder's
other files (``scripts/``, ``references/``, ``reference/``, ``examples/``, a top-level
``forms.md``...) are read when asked for.

The folder is pinned when the skill is loaded (`PinnedFolder`: one descriptor, opened without
following a link): the body, the files, the tree module and the read-only mount of its scripts
all come from that descriptor, so a folder renamed or swapped for a link afterwards changes
nothing.

``allowed-tools: Read Grep Bash(git:*) mcp__github__create_issue`` lists the tools a skill uses,
spelled as Claude Code spells them. Each entry becomes the Jianmu tools it stands for (``Read``
→ ``read_file`` and ``read_skill_file``) and a ``tool_policy`` rule key (``Bash(git:*)`` →
``bash(git *)``), parsed with the guard's own rule parser. In Jianmu they make tools available
but never pre-approve them: a skill may only tighten, so whether a tool asks first is the
config's decision (see ``loader``); `map_allowed_tools` does the mapping.

An entry Jianmu has no tool for (``Task``, ``TodoWrite``, ``NotebookEdit``, a misspelling, a
pattern the rule parser refuses) is not an error — the reference validator ``skills-ref``
accepts any string — but a warning kept on the `Skill` (``Skill.warnings``, shown by
``jianmu skills validate``), and the entry is ignored at run time.
"""

from __future__ import annotations

import codecs
import re
import stat
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from jianmu.constraints import Constraints, SkillConstraints
from jianmu.errors import ConfigError, PathEscapeError
from jianmu.tools.builtin._paths import PinnedFolder

if TYPE_CHECKING:
    from jianmu.tools.base import Tool
    from jianmu.tools.providers import BuiltinToolProvider
    from jianmu.tools.registry import ToolSet

__all__ = (
    "CLAUDE_CODE_KEYS",
    "CLAUDE_TOOL_NAMES",
    "DEFAULT_PROMPT_TOOLS",
    "MAX_BODY_BYTES",
    "MAX_NAME_LENGTH",
    "READ_SKILL_FILE",
    "SKIPPED_FOLDERS",
    "AllowedTool",
    "Skill",
    "SkillFrontMatter",
    "find_named",
    "first_undecodable",
    "map_allowed_tool",
    "map_allowed_tools",
    "skill_name_problem",
    "split_allowed_tools",
)


READ_SKILL_FILE = "read_skill_file"
"""The tool that reads a file of a loaded skill's folder (added by the `SkillNode`)."""

CLAUDE_TOOL_NAMES: dict[str, str] = {
    "bash": "bash",
    "read": "read_file",
    "write": "write_file",
    "edit": "str_replace",
    "multiedit": "str_replace",
    "glob": "glob_search",
    "grep": "grep_search",
    "webfetch": "http_request",
    "websearch": "duckduckgo_search",
    "ls": "list_dir",
}
"""Tool names of the Agent Skills / Claude Code world (lower-cased) to Jianmu's built-ins."""

CLAUDE_CODE_KEYS = frozenset({
    "argument-hint", "disable-model-invocation", "user-invocable", "model", "effort", "context",
    "agent", "hooks", "paths", "shell", "when_to_use",
})
"""Front-matter keys Claude Code adds to the open format (its ``.claude/skills/`` hold them):
Jianmu has no such settings, so a skill that has them loads, with a warning each, and keeps
them in `Skill.claude_code`; any other unknown key is an error (a misspelt key lost unseen)."""

_ALSO_GRANTS: dict[str, tuple[str, ...]] = {"read": (READ_SKILL_FILE,)}
"""Claude's ``Read`` also reads the skill's own files; Jianmu needs a second tool for that."""

_MCP_PREFIX = "mcp__"
"""Claude Code names an MCP tool ``mcp__<server>__<tool>``; Jianmu's is ``<server>__<tool>``."""

# an entry is a name, optionally followed by a parenthesised pattern that may hold spaces;
# entries are parted by spaces or commas (Claude Code's own examples write "Read, Grep, Glob")
_ENTRY_RE = re.compile(r"[^\s(),]+(?:\([^()]*\))?")

ToolChecker = Callable[[str], bool]
_T = TypeVar("_T")


@dataclass(frozen=True, kw_only=True)
class AllowedTool:
    """One ``allowed-tools`` entry, mapped (or ignored, with the reason in `warning`)."""

    entry: str
    """The entry as written, e.g. ``Bash(git:*)``."""
    tool: str | None
    """The Jianmu tool name, e.g. ``bash``; ``None`` when Jianmu has no such tool."""
    rule: str | None
    """The ``tool_policy`` key, e.g. ``bash(git *)`` (the bare tool name without a pattern);
    ``None`` when the entry is ignored."""
    tools: tuple[str, ...] = ()
    """Every Jianmu tool the entry makes available: ``Read`` → ``read_file``,
    ``read_skill_file``; empty when the entry is ignored."""
    warning: str | None = None
    """Why the entry is ignored; ``None`` when it maps to a tool."""


def split_allowed_tools(value: str) -> list[str]:
    """Split the space- (or comma-) separated form; spaces and commas inside parentheses stay
    in their entry.

    Raises:
        ValueError: the text has unbalanced parentheses.
    """
    entries = _ENTRY_RE.findall(value)
    if re.sub(r"[\s,]", "", "".join(entries)) != re.sub(r"[\s,]", "", value):
        raise ValueError(
            f"cannot split allowed-tools {value!r}: check the parentheses, "
            "e.g. 'Read Grep Bash(git:*)'"
        )
    return entries


def _ignored(entry: str, why: str) -> AllowedTool:
    return AllowedTool(entry=entry, tool=None, rule=None, warning=f"{entry!r} {why}; ignored")


def _mcp_name(name: str) -> str | None:
    """``mcp__github__create_issue`` → ``github__create_issue`` (``mcp__github`` → ``github``),
    spelled as `MCPToolProvider` names the tool; ``None`` for a name without a server."""
    from jianmu.mcp.provider import mcp_tool_names  # the MCP client comes only with such a name

    server, _, tool = name[len(_MCP_PREFIX):].partition("__")
    if not server:
        return None
    return mcp_tool_names(server, [tool])[0].lower() if tool else server


def map_allowed_tool(entry: str, is_known: ToolChecker | None = None) -> AllowedTool:
    """Map one entry such as ``Bash(git:*)`` to Jianmu tool names and a rule key.

    Claude Code's names map through `CLAUDE_TOOL_NAMES`; Claude's prefix pattern
    ``Bash(git:*)`` ("``git`` then anything") becomes the glob rule ``bash(git *)``;
    ``mcp__server__tool`` becomes the MCP tool ``server__tool``. An entry naming a tool Jianmu
    does not have comes back ignored (``tool`` is ``None``, ``warning`` says why).

    Args:
        entry: The entry as written in SKILL.md.
        is_known: Accepts Jianmu tool names that need no mapping (built-ins, aliases, MCP
            tools, custom tools); ``None`` accepts only mapped names.

    Raises:
        ValueError: the entry's pattern is invalid (empty parentheses, ``:*`` without a prefix).
    """
    from jianmu.guard._rules import parse_rule  # the shell grammar loads when a skill names tools

    try:
        rule = parse_rule(entry)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    name = rule.tool
    if name in CLAUDE_TOOL_NAMES:
        mapped = CLAUDE_TOOL_NAMES[name]
    elif name.startswith(_MCP_PREFIX):
        found = _mcp_name(name)
        if found is None:
            return _ignored(entry, "names no MCP server (write 'mcp__server__tool')")
        mapped = found
        if not (is_known is not None and is_known(mapped)):
            # kept: the server may be configured where the skill runs; unconfigured, the
            # SkillNode connects nothing and the toolset skips the name
            server = mapped.partition("__")[0]
            return AllowedTool(
                entry=entry, tool=mapped, rule=_rule_key(entry, mapped, rule.prefix),
                tools=(mapped,),
                warning=f"{entry!r}: no MCP server {server!r} is configured under mcp.servers; "
                        "the tool is unavailable until one is",
            )
    elif is_known is not None and is_known(name):
        mapped = name
    else:
        return _ignored(entry, "is not a tool Jianmu has (known: Bash, Read, Write, Edit, "
                               "MultiEdit, Glob, Grep, LS, WebFetch, WebSearch, mcp__server__tool "
                               "and Jianmu tool names)")
    return AllowedTool(
        entry=entry, tool=mapped, rule=_rule_key(entry, mapped, rule.prefix),
        tools=(mapped, *_ALSO_GRANTS.get(name, ())),
    )


def _rule_key(entry: str, tool: str, prefix: bool) -> str:
    """The rule key: the Jianmu tool name, then the entry's pattern (``git:*`` → ``git *``)."""
    if "(" not in entry:
        return tool
    inner = entry[entry.index("(") + 1 : entry.rindex(")")].strip()
    if inner == "*":
        return tool
    if prefix:
        # Claude's `cmd:*` is "cmd, then anything": the glob `cmd *` (Jianmu's `cmd:*` would
        # also match a bare `cmd`; the glob is the stricter spelling the issue asks for)
        inner = inner[:-2].rstrip() + " *"
    return f"{tool}({inner})"


def map_allowed_tools(
    value: str | Sequence[str], is_known: ToolChecker | None = None
) -> tuple[tuple[AllowedTool, ...], tuple[str, ...]]:
    """Map an ``allowed-tools`` value (a string of entries parted by spaces or commas, or a list).

    Never raises for what the reference validator accepts: an entry that cannot be split or
    parsed, or names no tool, is ignored with a warning.

    Returns:
        The mapped entries (ignored ones included, with their ``warning``), and the warnings.
    """
    notes: list[str] = []
    if isinstance(value, str):
        try:
            entries = split_allowed_tools(value)
        except ValueError as exc:
            notes.append(f"{exc}; split at spaces instead")
            entries = value.split()
    else:
        entries = [str(e) for e in value]
    mapped: list[AllowedTool] = []
    for entry in entries:
        try:
            item = map_allowed_tool(entry, is_known)
        except ValueError as exc:
            item = _ignored(entry, f"has an invalid pattern ({exc})")
        mapped.append(item)
        if item.warning is not None:
            notes.append(item.warning)
    return tuple(mapped), tuple(notes)


MAX_NAME_LENGTH = 64
"""The longest skill name (characters, after NFKC normalisation)."""

_SHOWN_FILES = 20
"""Files named in a "no such file" message; a skill may hold hundreds."""

MAX_BODY_BYTES = 1024 * 1024
"""The most of a SKILL.md read for its body (a body is instructions, not data)."""

SKIPPED_FOLDERS = frozenset({".git", "__pycache__", "node_modules"})
"""Folders of a skill that are never listed as its files."""

DEFAULT_PROMPT_TOOLS = (
    "read_file", "list_dir", "glob_search", "grep_search", "file_info", READ_SKILL_FILE,
)
"""The tools of a prompt skill that names none (no ``tools``, no usable ``allowed-tools``):
the read-only file tools, and ``read_skill_file`` for the skill's own files."""


def skill_name_problem(name: str) -> str | None:
    """What is wrong with a skill name, as the reference validator ``skills-ref`` judges it.

    A name is 1-64 characters (NFKC-normalised): letters that are lowercase (any script,
    ``é`` and ``数`` included; ``É`` is not), digits and hyphens, with no hyphen at either end
    and no ``--``. Returns ``None`` for a good name.
    """
    if not name.strip():
        return "the name is empty"
    text = unicodedata.normalize("NFKC", name.strip())
    if len(text) > MAX_NAME_LENGTH:
        return f"the name is {len(text)} characters long; the limit is {MAX_NAME_LENGTH}"
    if text != text.lower():
        return "the name must be lowercase"
    if text.startswith("-") or text.endswith("-"):
        return "the name must not start or end with a hyphen"
    if "--" in text:
        return "the name must not contain '--'"
    bad = sorted({c for c in text if not (c.isalnum() or c == "-")})
    if bad:
        return f"the name may hold only letters, digits and hyphens (found {''.join(bad)!r})"
    return None


def find_named(skills: Mapping[str, _T], name: object) -> _T | None:
    """The entry of ``skills`` (by skill name) that ``name`` means, as a model may spell it:
    with spaces around it, in another case or another Unicode form (a skill's name is
    lowercase, so no two skills differ only so); ``None`` when there is none."""
    if not isinstance(name, str):
        return None
    found = skills.get(name)
    if found is None:
        found = skills.get(unicodedata.normalize("NFKC", name.strip()).lower())
    return found


class SkillFrontMatter(BaseModel):
    """The YAML front matter of a SKILL.md, as written (validated, not yet resolved)."""

    model_config = ConfigDict(defer_build=True, extra="forbid", populate_by_name=True)

    name: str
    """The skill's name (see `skill_name_problem`); must equal its folder's name."""
    description: str = Field(min_length=1, max_length=1024)
    """What the skill does and when to use it (the model reads it)."""
    license: str | None = None
    """License name or the file that holds it."""
    compatibility: str | None = Field(default=None, max_length=500)
    """Environment requirements (products, packages, network)."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Free-form extra information."""
    allowed_tools: list[str] | str | None = Field(default=None, alias="allowed-tools")
    """Tools the skill uses (parted by spaces or commas, or a list); not pre-approved."""
    execution: Literal["prompt", "bt"] = "prompt"
    """``prompt``: the body goes into the agent's system prompt; ``bt``: ``tree`` builds a tree."""
    tree: str | None = None
    """For ``bt`` skills: the Python file (in the folder) that defines ``build_tree``."""
    tools: list[str] = Field(default_factory=list)
    """Jianmu tool names the skill uses."""
    constraints: Constraints | None = None
    """The skill's layer of constraints (it can only tighten the config's and the node's)."""
    inputs: dict[str, Any] | None = None
    """JSON Schema of the inputs, or a short field map such as ``{path: string}``."""
    outputs: dict[str, Any] | None = None
    """JSON Schema of ``skill_result``, or a short field map."""
    version: str | int | float | None = None
    """The skill's version."""
    history_limit: int | None = Field(default=None, ge=0)
    """Messages of the global conversation the skill sees."""

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        problem = skill_name_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return unicodedata.normalize("NFKC", value.strip())

    @field_validator("description")
    @classmethod
    def _check_description(cls, value: str) -> str:
        if not value.strip():  # the model picks a skill by it: blank, the skill is never chosen
            raise ValueError("the description is blank; say what the skill does and when to "
                             "use it")
        return value

    @field_validator("allowed_tools", mode="before")
    @classmethod
    def _check_allowed_tools(cls, value: Any) -> Any:
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, list) and all(isinstance(e, str) for e in value):
            return value
        raise ValueError(
            "allowed-tools must be a space-separated string or a list of strings, "
            "e.g. 'Read Grep Bash(git:*)'"
        )


@dataclass(kw_only=True, eq=False)
class Skill:
    """A loaded skill: front matter resolved, body and files read on demand.

    Its tools (`tool_names`): a skill that names tools (``tools``, or ``allowed-tools``
    entries Jianmu has a tool for) gets exactly those — ``Read`` brings ``read_file`` and
    ``read_skill_file``. A prompt skill that names none gets `DEFAULT_PROMPT_TOOLS`, the
    read-only file tools (``read_file``, ``list_dir``, ``glob_search``, ``grep_search``,
    ``file_info``) and ``read_skill_file``, rather than no tools at all. A bt skill's tools are
    what its tree places, so it gets no default.
    """

    name: str
    """The skill's name (equal to its folder's name)."""
    description: str
    """What the skill does and when to use it."""
    folder: Path
    """The skill's folder."""
    file: Path
    """Its SKILL.md."""
    execution: Literal["prompt", "bt"] = "prompt"
    """``prompt`` or ``bt``."""
    tree: str | None = None
    """For bt skills: the file name of the tree module (``tree.py`` unless set)."""
    tools: tuple[str, ...] = ()
    """Tool names as written: ``tools`` and the tools of ``allowed-tools``, lower-cased, no
    duplicates (see `tool_names` for what the skill runs with)."""
    allowed_tools: tuple[AllowedTool, ...] = ()
    """The mapped ``allowed-tools`` entries (ignored ones too, with their warning)."""
    constraints: Constraints = field(default_factory=Constraints)
    """The SKILL.md layer: ``constraints`` without ``allow`` rules (a skill only tightens;
    ``allowed-tools`` never pre-approve)."""
    inputs: dict[str, Any] | None = None
    """JSON Schema (type object) of the inputs; ``None`` when the skill declares none."""
    outputs: dict[str, Any] | None = None
    """JSON Schema of ``skill_result``; ``None`` when the skill declares none."""
    version: str | None = None
    """The skill's version."""
    history_limit: int | None = None
    """Messages of the global conversation the skill sees; ``None``: the config's."""
    license: str | None = None
    """License name or file."""
    compatibility: str | None = None
    """Environment requirements."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Free-form extra information."""
    claude_code: dict[str, Any] = field(default_factory=dict)
    """Claude Code's own keys of the front matter (`CLAUDE_CODE_KEYS`), as written; Jianmu
    ignores them."""
    body_line: int = 1
    """1-based line of SKILL.md where the Markdown body starts."""
    warnings: tuple[str, ...] = ()
    """What the skill asks for that Jianmu ignores (``allowed-tools: Task``...): not errors,
    shown by ``jianmu skills validate``."""
    pinned: PinnedFolder = field(default=None, repr=False)  # type: ignore[assignment]
    """The folder, held by descriptor since the skill was loaded (`PinnedFolder`); pinned
    when the skill is made if not given."""
    _body: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        # whoever built the skill, its layer is the author's: merged, it may only tighten
        self.constraints = SkillConstraints.of(self.constraints)
        if self.pinned is None:
            self.pinned = PinnedFolder(self.folder)

    @property
    def base_dir(self) -> str:
        """Where the skill's folder is shown, read-only, to sandboxed commands
        (``/skills/<name>``): its scripts run as ``python <base_dir>/scripts/x.py``."""
        from jianmu.execution.sandbox import MOUNT_ROOT

        return f"{MOUNT_ROOT}/{self.name}"

    @property
    def is_bt(self) -> bool:
        """Whether the skill runs a behaviour tree."""
        return self.execution == "bt"

    @property
    def tree_path(self) -> Path | None:
        """The tree module of a bt skill; ``None`` for prompt skills."""
        return self.folder / (self.tree or "tree.py") if self.is_bt else None

    @property
    def body(self) -> str:
        """The Markdown body (the prompt), read from SKILL.md on first access."""
        if self._body is None:
            name = self.file.name
            data = self.pinned.read_bytes(name, MAX_BODY_BYTES + 1)
            cut = len(data) > MAX_BODY_BYTES
            text = data[:MAX_BODY_BYTES].decode("utf-8", errors="replace")
            lines = text.splitlines(keepends=True)
            self._body = "".join(lines[_body_start(lines, self.body_line) - 1 :]).strip()
            if cut:
                self._body += (f"\n\n[the rest of {name} is not shown: only its first "
                               f"{MAX_BODY_BYTES:,} bytes are read]")
        return self._body

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The tool names the skill runs with: its own, else (prompt skills) the defaults."""
        if self.tools or self.is_bt:
            return self.tools
        return DEFAULT_PROMPT_TOOLS

    def files(self) -> list[tuple[str, int]]:
        """Every file of the folder but SKILL.md, as (relative POSIX path, size in bytes).

        Sorted by path, whatever the sub-folder (``forms.md``, ``reference/``, ``examples/``,
        ``scripts/``...). ``.git``, ``__pycache__`` and ``node_modules`` are skipped, and so
        are symlinks: a file link that leaves the folder, and every folder link (the files it
        points to inside the folder are listed where they really are). Listed from the pinned
        folder, at most `jianmu.tools.builtin._paths.MAX_LISTED_FILES` entries.
        """
        found = self.pinned.files(skip=SKIPPED_FOLDERS)
        return [(path, size) for path, size in found if path != self.file.name]

    def resources(self) -> list[str]:
        """Every file of the folder but SKILL.md, relative POSIX paths, sorted (see `files`)."""
        return [path for path, _ in self.files()]

    def resource_path(self, relative: str) -> Path:
        """The absolute path of a file in the skill's folder (as pinned).

        The path is resolved in the pinned folder with links inside followed; one that ends
        outside the folder (``..``, an absolute path, a link out) is refused. Read the file
        with `read_resource`, which reads it from the pinned folder, not by this path.

        Raises:
            ValueError: the path leaves the skill's folder.
            FileNotFoundError: no such file.
        """
        return Path(self.pinned.path) / self._resolved(relative)

    def _resolved(self, relative: str) -> str:
        try:
            real = self.pinned.resolve(relative)
            is_file = bool(real) and stat.S_ISREG(self.pinned.stat(real).st_mode)
        except PathEscapeError:
            raise ValueError(
                f"skill {self.name!r}: resource {relative!r} is outside the skill's folder; "
                "use a path relative to it such as 'references/guide.md'"
            ) from None
        except OSError:
            is_file = False
        if not is_file:
            known = self.resources()
            shown = ", ".join(known[:_SHOWN_FILES]) or "none"
            if len(known) > _SHOWN_FILES:
                shown += f" and {len(known) - _SHOWN_FILES} more"
            raise FileNotFoundError(
                f"skill {self.name!r} has no file {relative!r}; its resources: {shown}"
            )
        return real

    def read_resource(self, relative: str, *, limit: int = MAX_BODY_BYTES) -> str:
        """Read a text file of the skill's folder (e.g. ``references/guide.md``), from the
        pinned folder, at most ``limit`` bytes.

        Raises:
            ValueError: the path leaves the skill's folder, or the file is not UTF-8.
            FileNotFoundError: no such file.
        """
        data = self.pinned.read_bytes(self._resolved(relative), limit)
        return data.decode("utf-8")

    def toolset(
        self,
        custom: Iterable[Tool] = (),
        *,
        provider: BuiltinToolProvider | None = None,
        strict: bool = False,
    ) -> ToolSet:
        """The skill's tools (`tool_names`): custom tools of those names, else the built-ins.

        Names that are neither are left out: MCP tools (add them from their provider), and
        ``read_skill_file`` (the `SkillNode` adds it for the skills it loads).
        """
        from jianmu.tools.providers import BuiltinToolProvider
        from jianmu.tools.registry import ToolSet

        source = provider or BuiltinToolProvider.default()
        wanted = self.tool_names
        custom_list = [t for t in custom if t.name.lower() in wanted]
        custom_names = {t.name.lower() for t in custom_list}
        builtins = set(source.list_builtin_names()) | set(source.aliases())
        names = [n for n in wanted if n in builtins and n not in custom_names]
        return ToolSet.resolve(names, custom_list, strict=strict, provider=source)

    def summary(self) -> str:
        """``name (execution): description`` on one line, for listings and prompts."""
        first = next(iter(self.description.strip().splitlines()), "")
        return f"{self.name} ({self.execution}): {first}"

    def __repr__(self) -> str:
        return f"<Skill {self.name!r} {self.execution} at {str(self.folder)!r}>"


def _body_start(lines: Sequence[str], loaded: int) -> int:
    """The line the body starts on in the file as it is now: after the front matter's closing
    line. SKILL.md may have been edited since the skill was loaded (its front matter grown or
    shrunk), and the line found then would cut the body or show front matter as body."""
    if lines and lines[0].removeprefix("\ufeff").strip() == "---":
        for number, line in enumerate(lines[1:], start=2):
            if line.rstrip() in ("---", "..."):
                return number + 1
    return loaded


def first_undecodable(data: bytes, *, final: bool) -> tuple[int, int] | None:
    """The line (from 1) and the value of the first byte of ``data`` that is not UTF-8; with
    ``final`` false, a character cut at the end of ``data`` is not one."""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data, final=final)
    except UnicodeDecodeError as exc:
        return data.count(b"\n", 0, exc.start) + 1, data[exc.start]
    return None
