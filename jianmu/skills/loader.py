"""Parse a SKILL.md folder into a `Skill`; every problem is a `SkillLoadError` with file, line
and field.

Only the front matter is read: the file is read line by line up to the closing ``---``. A bt
skill's tree module is checked with `ast` (never imported here) for a ``build_tree``.
"""

from __future__ import annotations

import ast
import codecs
import difflib
import errno
import os
import stat
import unicodedata
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import ValidationError

from jianmu.config import (
    AppConfig,
    _key_lines,
    compose_and_load,
    unknown_key_hint,
    yaml_problem,
)
from jianmu.constraints import Constraints
from jianmu.errors import PathEscapeError, SkillLoadError, YAMLRefused
from jianmu.guard.enforcer import first_bad_rule
from jianmu.skills.skill import (
    CLAUDE_CODE_KEYS,
    MAX_BODY_BYTES,
    READ_SKILL_FILE,
    SKIPPED_FOLDERS,
    AllowedTool,
    Skill,
    SkillFrontMatter,
    first_undecodable,
    map_allowed_tools,
)
from jianmu.tools.builtin._paths import MAX_LISTED_FILES, PinnedFolder

__all__ = (
    "MAX_TREE_BYTES",
    "SKILL_FILE",
    "body_warnings",
    "fields_schema",
    "file_warnings",
    "known_tool_checker",
    "load_skill",
    "read_front_matter",
    "read_tree_source",
)

SKILL_FILE = "SKILL.md"
"""The file that makes a folder a skill."""

_TYPES = {
    "string": "string", "str": "string", "integer": "integer", "int": "integer",
    "number": "number", "float": "number", "boolean": "boolean", "bool": "boolean",
    "array": "array", "list": "array", "object": "object", "dict": "object", "any": "",
}
MAX_TREE_BYTES = 1024 * 1024
"""The largest tree module a bt skill may have."""
_MAX_FRONT_MATTER_LINES = 2000
_MAX_FRONT_MATTER_CHARS = 256 * 1024
"""Front matter is a few lines of metadata; anything larger is refused before parsing."""

ToolChecker = Callable[[str], bool]


def known_tool_checker(
    config: AppConfig | None = None, custom_tools: Iterable[Any] = ()
) -> ToolChecker:
    """A test for tool names: built-ins and aliases, the skill tools (``run_bt_skill``,
    ``read_skill_file``, ``run_skill_script``), custom tools (names or tools), and MCP tools (a
    configured server's name, or ``server__tool``)."""
    from jianmu.tools.providers import BuiltinToolProvider

    provider = BuiltinToolProvider.default()
    names = {n.lower() for n in provider.list_builtin_names()}
    names |= set(provider.aliases())
    # the skill tools a SkillNode adds itself (they are not built-ins)
    names |= {"run_bt_skill", READ_SKILL_FILE, "run_skill_script"}
    names |= {(t if isinstance(t, str) else t.name).lower() for t in custom_tools}
    servers = [s.lower() for s in (config.mcp.servers if config is not None else {})]

    def is_known(name: str) -> bool:
        key = name.strip().lower()
        return key in names or any(key == s or key.startswith(s + "__") for s in servers)

    is_known.known = sorted(names)  # type: ignore[attr-defined]  # for error messages
    return is_known


def read_front_matter(file: Path, *, folder: PinnedFolder | None = None) -> tuple[str, int]:
    """The front matter text (between the ``---`` lines) and the line the body starts on.

    With ``folder`` (the pinned folder ``file`` is in), the file is read from it.

    Raises:
        SkillLoadError: the file cannot be read or has no front matter.
    """
    where = str(file)

    def decoded(data: bytes, number: int) -> str:
        # line by line, so that bytes past the front matter (the body) are never decoded here
        try:  # a character cut by the bounded read is left out: the length check then fails
            text: str = codecs.getincrementaldecoder("utf-8")().decode(
                data, final=data.endswith(b"\n"))
        except UnicodeDecodeError as exc:
            raise SkillLoadError(
                f"the file is not UTF-8 text: line {number} holds byte "
                f"0x{data[exc.start]:02x}; save the file as UTF-8",
                path=where, line=number,
            ) from None
        return text

    try:
        if folder is not None:
            fd = folder.open(file.name, os.O_RDONLY | os.O_NONBLOCK)
            opened: BinaryIO = os.fdopen(fd, "rb")
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                opened.close()
                raise SkillLoadError(f"{SKILL_FILE} is not a regular file", path=where)
        else:
            opened = file.open("rb")
        with opened as handle:
            # a byte-order mark (Notepad writes one) is not part of the first line
            first = decoded(handle.readline(4 * _MAX_FRONT_MATTER_CHARS), 1).removeprefix(
                "\ufeff")
            if first.strip() != "---":
                raise SkillLoadError(
                    "SKILL.md must start with a '---' line, then the YAML front matter "
                    "(name, description, ...), then another '---' line",
                    path=where, line=1,
                )
            lines: list[str] = []
            size = 0
            while raw := handle.readline(4 * (_MAX_FRONT_MATTER_CHARS + 1 - size)):
                line = decoded(raw, len(lines) + 2)
                if line.rstrip() in ("---", "..."):
                    return "".join(lines), len(lines) + 3
                lines.append(line)
                size += len(line)
                # bounded reads: one endless line must not be read whole into memory
                if size > _MAX_FRONT_MATTER_CHARS:
                    raise SkillLoadError(
                        f"the front matter is longer than {_MAX_FRONT_MATTER_CHARS} characters; "
                        "keep SKILL.md's metadata short and put text in the body",
                        path=where, line=len(lines) + 1,
                    )
                if len(lines) > _MAX_FRONT_MATTER_LINES:
                    break
    except (OSError, PathEscapeError) as exc:
        raise SkillLoadError(f"cannot read the file: {exc}", path=where) from None
    raise SkillLoadError(
        "the front matter is not closed: add a '---' line after the YAML", path=where, line=1
    )


def body_warnings(skill: Skill) -> tuple[str, ...]:
    """What the model will not read as written in ``skill``'s SKILL.md: a body cut at
    `MAX_BODY_BYTES`, bytes that are not UTF-8 (read as U+FFFD)."""
    try:
        data = skill.pinned.read_bytes(skill.file.name, MAX_BODY_BYTES + 1)
    except (OSError, PathEscapeError):
        return ()
    notes: list[str] = []
    cut = len(data) > MAX_BODY_BYTES
    if cut:
        notes.append(f"{SKILL_FILE} is larger than {MAX_BODY_BYTES:,} bytes: the model reads "
                     "its body only up to there")
    found = first_undecodable(data[:MAX_BODY_BYTES], final=not cut)
    if found is not None:
        line, byte = found
        notes.append(f"{SKILL_FILE} is not UTF-8 text from line {line} (byte 0x{byte:02x}): "
                     "the model reads U+FFFD there; save the file as UTF-8")
    return tuple(notes)


def file_warnings(skill: Skill) -> tuple[str, ...]:
    """The files of ``skill``'s folder its tools will refuse, as warnings: a link that leads
    out of the folder, a script with a ``#!`` line that is not executable (nor .py or .sh);
    at most `MAX_LISTED_FILES` entries are looked at."""
    root = os.path.realpath(skill.pinned.path)
    notes: list[str] = []
    budget = MAX_LISTED_FILES
    for here, folders, files in os.walk(root):
        folders[:] = [f for f in folders if f not in SKIPPED_FOLDERS]
        for name in sorted([*folders, *files]):
            budget -= 1
            if budget < 0:
                return tuple(notes)
            path = os.path.join(here, name)
            relative = os.path.relpath(path, root).replace(os.sep, "/")
            if os.path.islink(path):
                if os.path.commonpath([root, os.path.realpath(path)]) != root:
                    notes.append(f"{relative} is a link to outside the skill's folder: the "
                                 "skill's tools cannot read it; copy the file in")
            elif name in files and _unrunnable_script(path):
                notes.append(f"{relative} has a #! line but is not executable: "
                             "run_skill_script refuses it; chmod +x it")
    return tuple(notes)


def _unrunnable_script(path: str) -> bool:
    """Whether ``path`` has a ``#!`` line, no executable bit and no .py or .sh suffix."""
    if os.path.splitext(path)[1].lower() in (".py", ".sh"):
        return False
    try:
        if os.stat(path).st_mode & 0o111:
            return False
        with open(path, "rb") as handle:
            return handle.read(2) == b"#!"
    except OSError:
        return False


def fields_schema(value: Any, *, where: str, field: str, lines: dict[tuple[Any, ...], int],
                  line_offset: int) -> dict[str, Any]:
    """An ``inputs``/``outputs`` value as an object JSON Schema.

    A JSON Schema (``type: object`` or ``properties``) is kept; a short map such as
    ``{path: string, depth: {type: integer, default: 2}}`` becomes one, with every field
    without a default ``required``.

    Raises:
        SkillLoadError: an unknown type name or a field that is neither a type nor a schema.
    """
    def line_of(*path: Any) -> int | None:
        found = lines.get((field, *path)) or lines.get((field,))
        return found + line_offset if found is not None else None

    if _scalar_schema(value):
        raise SkillLoadError(
            f"{field} must map each field's name to its type (or be a 'type: object' JSON "
            f"Schema), got a JSON Schema of type {value['type']!r}: write '{field}: {{NAME: "
            f"{value['type']}}}' for a field NAME, or '{field}: {{type: {{type: "
            f"{value['type']}}}}}' for a field named 'type'",
            path=where, line=line_of("type"), field=f"{field}.type",
        )
    if "properties" in value or value.get("type") == "object" or "$schema" in value:
        if value.get("type", "object") != "object":
            raise SkillLoadError(
                f"{field} must be an object schema, got type {value.get('type')!r}",
                path=where, line=line_of("type"), field=f"{field}.type",
            )
        schema = {"type": "object", **value}
        if not isinstance(schema.get("properties", {}), dict):
            raise SkillLoadError(
                f"{field}.properties must be a mapping of field names to schemas",
                path=where, line=line_of("properties"), field=f"{field}.properties",
            )
        return schema
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, spec in value.items():
        if isinstance(spec, str):
            key = spec.strip().lower()
            if key not in _TYPES:
                raise SkillLoadError(
                    f"unknown type {spec!r} for {field} field {name!r}; use one of "
                    "string, integer, number, boolean, array, object (or a JSON Schema)",
                    path=where, line=line_of(name), field=f"{field}.{name}",
                )
            properties[name] = {"type": _TYPES[key]} if _TYPES[key] else {}
        elif isinstance(spec, dict):
            properties[name] = dict(spec)
        else:
            keyword = (
                f" ({name!r} is a JSON Schema keyword: a JSON Schema needs 'type: object' and "
                "'properties')" if name in _OBJECT_KEYWORDS else ""
            )
            raise SkillLoadError(
                f"{field} field {name!r} must be a type name such as 'string' or a JSON Schema "
                f"mapping, got {spec!r}{keyword}",
                path=where, line=line_of(name), field=f"{field}.{name}",
            )
        if "default" not in properties[name]:
            required.append(name)
    schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


_SCALAR_KEYWORDS = frozenset({
    "items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains", "enum", "const",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength",
    "maxLength", "pattern", "format", "title", "description", "default", "examples", "anyOf",
    "oneOf", "allOf", "not", "nullable",
})
"""Keywords beside a ``type`` that make a mapping a JSON Schema, not a map of fields."""
_OBJECT_KEYWORDS = frozenset({
    "required", "additionalProperties", "patternProperties", "minProperties", "maxProperties",
    "propertyNames", "dependentRequired", "enum", "const", "anyOf", "oneOf", "allOf", "$ref",
    "$defs", "definitions",
})
"""JSON Schema keywords that cannot be a field of the short form (their values are no type)."""


def _scalar_schema(value: dict[str, Any]) -> bool:
    """Whether ``value`` is a JSON Schema of a type other than object (``{type: array, items:
    ...}``), which the short form read as fields named ``type`` and ``items``."""
    kind = value.get("type")
    return (
        isinstance(kind, str) and kind.strip().lower() in _TYPES and _TYPES[kind.strip().lower()]
        not in ("object", "") and all(k == "type" or k in _SCALAR_KEYWORDS for k in value)
    )


def _pydantic_error(exc: ValidationError, where: str, lines: dict[tuple[Any, ...], int],
                    offset: int) -> SkillLoadError:
    def line_of(loc: tuple[Any, ...]) -> int | None:
        return lines.get(loc) or lines.get(loc[:-1]) or lines.get(loc[:1])

    # report the problem nearest the top of the file first, as an editor would; a missing
    # field (which has no line) last: a misspelt key ('descripton') is also a missing one,
    # and the misspelling, with its line and the key meant, is what to fix
    errors = sorted(exc.errors(), key=lambda e: (e["type"] == "missing",
                                                 line_of(tuple(e["loc"])) or 0))
    first = errors[0]
    loc = tuple(first["loc"])
    dotted = ".".join(str(p) for p in loc) or "<front matter>"
    line = line_of(loc)
    if first["type"] == "extra_forbidden":
        hint = unknown_key_hint(SkillFrontMatter, loc)
        message = f"unknown key {loc[-1]!r}{hint}"
        if len(loc) == 1:
            message += " (free-form data goes under 'metadata')"
    elif first["type"] == "missing":
        message = f"the required field {dotted!r} is missing"
    else:
        got = repr(first.get("input"))
        said = first["msg"]
        if first["type"] == "value_error":  # our validator's words, without "Value error, "
            said = str(first["ctx"]["error"])
        message = f"{said} (got {got if len(got) <= 80 else got[:77] + '...'})"
        if loc == ("name",):
            message += ("; a name is 1-64 lowercase letters (any script), digits and hyphens, "
                        "with no hyphen at either end and no '--'")
    if len(errors) > 1:
        others = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in errors[1:4]
        )
        message += f" (also: {others})"
    return SkillLoadError(
        message, path=where, line=line + offset if line is not None else None, field=dotted
    )


def _mapped_allowed(
    raw: list[str] | str | None, is_known: ToolChecker
) -> tuple[tuple[AllowedTool, ...], tuple[str, ...]]:
    """The mapped entries and the warnings (pydantic already checked the value's shape)."""
    if raw is None:
        return (), ()
    allowed, notes = map_allowed_tools(raw, is_known)
    return allowed, tuple(f"allowed-tools: {note}" for note in notes)


def read_tree_source(folder: PinnedFolder, name: str) -> bytes:
    """The source of the tree module ``name`` of a pinned skill folder (bounded).

    Raises:
        OSError: missing, a folder, not a regular file, or larger than `MAX_TREE_BYTES`.
        PathEscapeError: it leads outside the folder.
    """
    data = folder.read_bytes(name, MAX_TREE_BYTES + 1)
    if len(data) > MAX_TREE_BYTES:
        raise OSError(errno.EFBIG, f"larger than {MAX_TREE_BYTES:,} bytes", name)
    return data


def _check_tree(folder: PinnedFolder, path: Path, where: str, line: int | None) -> None:
    try:
        source = read_tree_source(folder, path.name)
    except (OSError, PathEscapeError) as exc:
        missing = isinstance(exc, FileNotFoundError)
        raise SkillLoadError(
            f"the tree module {path.name!r} does not exist in {str(path.parent)!r}; create it "
            "with a function build_tree(ctx) that returns a py_trees behaviour" if missing
            else f"the tree module {path.name!r} cannot be read: {exc}",
            path=where, line=line, field="tree",
        ) from None
    try:
        module = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise SkillLoadError(
            f"syntax error: {exc.msg}", path=str(path), line=exc.lineno, field="build_tree"
        ) from None
    for node in module.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "build_tree":
            return
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if any(isinstance(t, ast.Name) and t.id == "build_tree" for t in targets):
            return
        if isinstance(node, ast.ImportFrom) and any(
            (a.asname or a.name) == "build_tree" for a in node.names
        ):
            return
    raise SkillLoadError(
        f"{path.name} defines no build_tree: add 'def build_tree(ctx): ...' returning a "
        "py_trees behaviour",
        path=where, line=line, field="tree",
    )


def _skill_file_problem(pinned: PinnedFolder, folder: Path) -> str | None:
    """Why the folder's SKILL.md cannot be read as one, or None: each case named, not all
    "no SKILL.md" (a link out of the folder, a folder of that name)."""
    try:
        mode = pinned.stat(SKILL_FILE).st_mode
    except PathEscapeError:
        return (f"{SKILL_FILE} is a link that leads outside the skill's folder, which a skill "
                "may not read; copy the file in")
    except FileNotFoundError:
        if os.path.islink(folder / SKILL_FILE):
            return f"{SKILL_FILE} is a link to nothing; make it a file"
        return f"no {SKILL_FILE} in {str(folder)!r}"
    except OSError as exc:
        return f"cannot read {SKILL_FILE}: {exc.strerror or exc}"
    if stat.S_ISDIR(mode):
        return f"{SKILL_FILE} is a folder; it must be a file of front matter and instructions"
    if not stat.S_ISREG(mode):
        return f"{SKILL_FILE} is not a regular file"
    return None


def load_skill(folder: str | Path, *, is_known_tool: ToolChecker | None = None) -> Skill:
    """Load the skill in ``folder`` (or the folder of a given SKILL.md): front matter only.

    Args:
        folder: The skill's folder, or its SKILL.md.
        is_known_tool: Which tool names are valid (default: `known_tool_checker()`).

    Raises:
        SkillLoadError: naming the file, the line and the field that is wrong.
    """
    folder = Path(folder)
    file = folder if folder.name == SKILL_FILE else folder / SKILL_FILE
    folder = file.parent
    where = str(file)
    try:
        # pinned now: everything below is read from this descriptor, never by path again
        pinned = PinnedFolder(folder)
    except (OSError, PathEscapeError) as exc:
        raise SkillLoadError(f"cannot open the skill's folder: {exc}", path=where) from None
    problem = _skill_file_problem(pinned, folder)
    if problem is not None:
        raise SkillLoadError(problem, path=where)
    is_known = is_known_tool or known_tool_checker()
    text, body_line = read_front_matter(file, folder=pinned)
    offset = 1  # the front matter starts on line 2
    import yaml  # here, not at the top: `import jianmu` does not need yaml

    try:
        node, data = compose_and_load(text, max_chars=_MAX_FRONT_MATTER_CHARS)
    except (yaml.YAMLError, YAMLRefused) as exc:
        line, problem = yaml_problem(exc, text)
        raise SkillLoadError(problem, path=where,
                             line=line + offset if line is not None else None) from None
    if not isinstance(data, dict):
        raise SkillLoadError(
            "the front matter must be a mapping with at least 'name' and 'description'",
            path=where, line=2,
        )
    lines = _key_lines(node) if node is not None else {}

    def line_of(*path: Any) -> int | None:
        found = lines.get(path)
        return found + offset if found is not None else None

    # Claude Code's keys (`model: haiku`, `disable-model-invocation: true`): the skill was
    # written for it, and loads here with a warning instead of being refused as broken
    claude_code = {key: data.pop(key) for key in list(data) if key in CLAUDE_CODE_KEYS}
    try:
        spec = SkillFrontMatter.model_validate(data)
    except ValidationError as exc:
        raise _pydantic_error(exc, where, lines, offset) from None
    # as for jianmu.yaml: a rule no call can match is named now, not when the skill runs
    bad = first_bad_rule(spec.constraints.guard) if spec.constraints is not None else None
    if bad is not None:
        section, key, message = bad
        raise SkillLoadError(
            message, path=where, field=f"constraints.guard.{section}",
            line=line_of("constraints", "guard", section, key) or line_of("constraints"),
        )
    if spec.name != unicodedata.normalize("NFKC", folder.name):
        raise SkillLoadError(
            f"name {spec.name!r} differs from the folder's name {folder.name!r}; "
            "rename one so they match",
            path=where, line=line_of("name"), field="name",
        )
    for index, tool_name in enumerate(spec.tools):
        if not is_known(tool_name):
            known = getattr(is_known, "known", [])
            close = difflib.get_close_matches(tool_name.lower(), known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"known tools: {', '.join(known)}"
            raise SkillLoadError(
                f"unknown tool {tool_name!r}; {hint} (MCP tools are 'server__tool' for a server "
                "configured under mcp.servers)",
                path=where, line=line_of("tools", index) or line_of("tools"),
                field=f"tools[{index}]",
            )
    allowed, warnings = _mapped_allowed(spec.allowed_tools, is_known)
    warnings += tuple(_claude_code_warning(key, value) for key, value in claude_code.items())
    unused = [key for key in ("inputs", "outputs") if getattr(spec, key) is not None]
    if spec.execution == "prompt" and unused:
        # nothing reads them for a prompt skill: its task is the conversation, its answer text
        warnings += (f"{' and '.join(unused)} are used by BT skills only (execution: bt); a "
                     "prompt skill's are not checked, nor shown to the model",)
    if spec.execution == "bt":
        tree_name = spec.tree or "tree.py"
        if Path(tree_name).name != tree_name or not tree_name.endswith(".py"):
            raise SkillLoadError(
                f"tree must be the name of a .py file in the skill's folder, got {tree_name!r}",
                path=where, line=line_of("tree"), field="tree",
            )
        _check_tree(pinned, folder / tree_name, where, line_of("tree") or line_of("execution"))
    elif spec.tree is not None:
        raise SkillLoadError(
            "tree is only used by bt skills; add 'execution: bt' or remove 'tree'",
            path=where, line=line_of("tree"), field="tree",
        )
    schemas = {
        key: fields_schema(value, where=where, field=key, lines=lines, line_offset=offset)
        if value is not None else None
        for key, value in (("inputs", spec.inputs), ("outputs", spec.outputs))
    }
    for key, schema in schemas.items():
        if schema is not None:
            _check_rules(spec.name, key, schema, where, line_of(key))
    if schemas["inputs"] is not None:
        _check_defaults(spec.name, schemas["inputs"], where, line_of)
    tools: list[str] = []
    for name in [*spec.tools, *(t for a in allowed for t in a.tools)]:
        if name.lower() not in tools:
            tools.append(name.lower())
    return Skill(
        name=spec.name,
        description=spec.description,
        folder=folder,
        file=file,
        execution=spec.execution,
        tree=(spec.tree or "tree.py") if spec.execution == "bt" else None,
        tools=tuple(tools),
        allowed_tools=allowed,
        constraints=_without_allow_rules(spec.constraints),
        inputs=schemas["inputs"],
        outputs=schemas["outputs"],
        version=_version_text(node, spec.version),
        history_limit=spec.history_limit,
        license=spec.license,
        compatibility=spec.compatibility,
        metadata=spec.metadata,
        claude_code=claude_code,
        body_line=body_line,
        warnings=warnings,
        pinned=pinned,
    )


def _claude_code_warning(key: str, value: Any) -> str:
    """What Jianmu does with one of Claude Code's own front-matter keys: nothing, said so."""
    if key == "disable-model-invocation" and value is True:
        return (f"{key}: Claude Code's key, ignored: a SkillNode given this skill offers it to "
                "its model all the same; give it to no SkillNode to keep it from models")
    if key == "when_to_use":
        return (f"{key}: Claude Code's key, ignored: the model chooses a skill by its "
                "description only; move this text into the description")
    return (f"{key}: Claude Code's key, ignored: Jianmu has no such setting (it is kept in "
            "Skill.claude_code)")


def _check_rules(name: str, field: str, schema: dict[str, Any], where: str,
                 line: int | None) -> None:
    """Hold an ``inputs``/``outputs`` schema to the rules of a schema from outside (the lax
    checker walks it on every run: ``anyOf: 5`` failed each with a ``TypeError``).

    Raises:
        SkillLoadError: naming the first problem, the file, the line and the field.
    """
    from jianmu.errors import ToolDefinitionError
    from jianmu.tools import _arguments
    from jianmu.tools._schema_shape import check_given_schema

    try:
        check_given_schema(name, schema)  # fields beside `properties` were never read
        _arguments.check_foreign_schema(name, schema, what=field)
    except ToolDefinitionError as exc:
        more = f" (and {len(exc.problems) - 1} more)" if len(exc.problems) > 1 else ""
        raise SkillLoadError(f"{exc.problems[0]}{more}", path=where, line=line,
                             field=field) from None


def _check_defaults(name: str, schema: dict[str, Any], where: str,
                    line_of: Callable[..., int | None]) -> None:
    """Hold each input's ``default`` to the input's own schema (``null`` means "none"): a
    default that does not fit failed every run that left the input out, blaming the caller.

    Raises:
        SkillLoadError: naming the input, the file and the default's line.
    """
    from jianmu.errors import ToolInputError
    from jianmu.tools import _arguments

    for field, prop in (schema.get("properties") or {}).items():
        if not isinstance(prop, dict) or prop.get("default") is None:
            continue
        single = {"type": "object", "properties": {field: prop}}
        try:
            _arguments.validate_with_schema(f"{name} inputs", single, {field: prop["default"]},
                                            root=schema)  # its refs name the whole schema's
        except ToolInputError as exc:
            raise SkillLoadError(
                f"the default of input {field!r} does not fit the input's own schema: "
                f"{'; '.join(exc.problems)}; change the default or the type",
                path=where, field=f"inputs.{field}.default",
                line=(line_of("inputs", field, "default")
                      or line_of("inputs", "properties", field, "default")
                      or line_of("inputs", field) or line_of("inputs")),
            ) from None


def _version_text(node: Any, version: str | float | None) -> str | None:
    """The version as written: YAML reads ``version: 1.10`` as the number 1.1."""
    if version is None:
        return None
    if not isinstance(version, str):
        for key, value in getattr(node, "value", None) or ():
            if getattr(key, "value", None) == "version" and isinstance(
                getattr(value, "value", None), str
            ):
                return str(value.value)
    return str(version)


def _without_allow_rules(constraints: Constraints | None) -> Constraints:
    """The skill's constraints without its ``allow`` rules.

    A skill may tighten and never loosen: an ``allow`` from a SKILL.md (or its
    ``allowed-tools``) would override a tool's own ``user_confirm`` permission, which only the
    operator's config or the host's node may do. Its deny and confirm rules stay.
    """
    base = constraints or Constraints()
    guard = base.guard
    policy = {rule: p for rule, p in guard.tool_policy.items() if p != "allow"}
    default = None if guard.default_policy == "allow" else guard.default_policy
    if policy == guard.tool_policy and default == guard.default_policy:
        return base
    update = {"tool_policy": policy, "default_policy": default}
    return base.model_copy(update={"guard": guard.model_copy(update=update)})
