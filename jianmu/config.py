"""`AppConfig`, loaded from ``configs/jianmu.yaml``, and `load_config`.

Config files and SKILL.md front matter may be written by an attacker, so their YAML is read by
`compose_and_load`: no anchors or aliases, no key written twice (the second would silently
replace the first: a deny rule gone) nor merged in with ``<<``, bounded size and depth.
Aliases are what make a "billion laughs" document: ten short lines that expand to gigabytes.
Refusing them at the first anchor, before anything is built, keeps memory flat; the size and
nesting bounds keep a huge or very deep document from exhausting memory or the stack.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, get_args, get_origin

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
)

from jianmu import plugins
from jianmu._secrets import MASK, redact_url
from jianmu.constraints import (
    DEFAULT_READ_ONLY_PATHS,
    BlankIsUnset,
    Constraints,
    ExecutionConstraints,
    GuardConstraints,
    Switch,
    is_read_only,
    lowered,
    read_only,
    read_only_path,
)
from jianmu.errors import ConfigError, YAMLRefused

if TYPE_CHECKING:
    import yaml

__all__ = (
    "AppConfig",
    "LLMConfig",
    "MCPAuthConfig",
    "MCPConfig",
    "MCPServerConfig",
    "MCPTrust",
    "RuntimeConfig",
    "SkillsConfig",
    "TelemetryConfig",
    "default_config",
    "load_config",
)

_ENV_VAR = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
"""``${VAR}``, ``${VAR:-default}``, or ``$${`` (a literal ``${``)."""
_SEARCH_PATHS = ("jianmu.yaml", "configs/jianmu.yaml")
MAX_CONFIG_CHARS = 1_000_000
"""Longest jianmu.yaml accepted; the shipped one is about 10 KB."""


def _default_state_file(name: str) -> str:
    return _state_file(name, os.environ.get("XDG_STATE_HOME"), os.environ.get("HOME"))


@functools.lru_cache(maxsize=16)
def _state_file(name: str, state_home: str | None, home: str | None) -> str:
    # by the variables it reads: every runner builds a config, and the joins cost more.
    # A relative XDG_STATE_HOME is ignored (the XDG spec): it put saved runs in the current
    # folder, most often the workspace that sandboxed code may write
    if not (state_home and os.path.isabs(state_home)):
        state_home = None
    base = state_home or os.path.join(_home(), ".local", "state")
    return os.path.join(base, "jianmu", name)


def _home() -> str:
    """The user's home: ``$HOME`` when it is absolute, else the account's (a relative ``HOME``
    made the state folder relative, in the current folder; an empty one made it ``/``)."""
    home = os.environ.get("HOME", "")
    if os.path.isabs(home):
        return os.path.expanduser("~")
    try:
        import pwd  # only for a HOME that cannot be used
    except ImportError:  # not POSIX: its own rules (USERPROFILE)
        return os.path.expanduser("~")
    try:
        return pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:  # no account of that uid: the root folder, never the current one
        return os.path.abspath(os.sep)


class _Section(BlankIsUnset):
    model_config = ConfigDict(defer_build=True, extra="forbid")

    _secret_fields: ClassVar[frozenset[str]] = frozenset()
    """Fields shown as ``***`` in a ``repr``."""
    _url_fields: ClassVar[frozenset[str]] = frozenset()
    """Fields holding a URL, shown without its password in a ``repr`` (`redact_url`)."""

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        for key, value in super().__repr_args__():
            if key in self._secret_fields and value is not None:
                value = MASK
            elif key in self._url_fields and isinstance(value, str):
                value = redact_url(value)
            yield key, value


_KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
"""The variable each built-in provider reads its API key from when ``llm.api_key`` is unset."""


class LLMConfig(_Section):
    """The model provider."""

    _secret_fields = frozenset({"api_key"})
    _url_fields = frozenset({"base_url"})

    provider: str | None = None
    """A registered provider (`jianmu.plugins`): ``openai`` for any OpenAI-compatible server,
    ``anthropic`` for Claude through the Messages API, ``scripted`` for the offline stand-in,
    or a plug-in's name."""
    model: str | None = None
    """Model name sent to the server."""
    base_url: str | None = None
    """Server URL, e.g. ``http://127.0.0.1:8000/v1``."""
    api_key: str | None = None
    """API key; use ``${OPENAI_API_KEY}`` (``${ANTHROPIC_API_KEY}``) rather than writing it in
    the file. When unset, the provider reads that variable itself."""
    timeout: float = Field(default=60.0, gt=0)
    """Seconds the agent node's model call may take in all (retries and a stream's whole reply
    included; with fallbacks, each model asked); and the provider built from this section
    takes it as its own ``timeout``: the longest wait for a byte of the answer."""
    max_retries: int = Field(default=3, ge=0)
    """Retries of transient failures (429, 5xx, connection reset)."""
    on_cut_off: Annotated[Literal["continue", "fail", "accept"], BeforeValidator(lowered)] = (
        "continue"
    )
    """What the agent node does with an answer (a reply of text, no tool call) that the token
    limit cut off: ``continue`` asks the model to go on where it stopped (up to
    ``max_continuations`` times) and joins the parts; ``fail`` fails the run with
    `OutputTruncatedError`; ``accept`` keeps the partial answer (an ``llm.call.cut_off``
    event says so). ``create_react_node(on_cut_off=...)`` sets it per agent."""
    max_continuations: int = Field(default=2, ge=0)
    """How often an answer cut off at the token limit is continued before the run fails
    with `OutputTruncatedError` (``on_cut_off: continue``)."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Extra request parameters such as ``temperature``."""
    fallback: list[LLMConfig] = Field(default_factory=list)
    """Models asked in turn when this one is rate-limited, down or unreachable (after its own
    retries): each an ``llm:`` section of its own (`jianmu.llm.FallbackLLM`)."""

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, value: str | None) -> str | None:
        if value is not None and not plugins.is_registered("llm", value):
            raise ConfigError(f"llm.provider: {plugins.unknown_name_message('llm', value)}")
        return value

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        # without a scheme httpx fails each call, retried as a dropped connection
        if value is not None and not value.strip().lower().startswith(("http://", "https://")):
            raise ValueError("the URL must start with http:// or https://")
        return value

    @property
    def endpoint_configured(self) -> bool:
        """Whether a real model server is configured: a base URL, an API key, or (``api_key``
        unset) the key variable the provider reads itself (``$OPENAI_API_KEY``,
        ``$ANTHROPIC_API_KEY``)."""
        if self.provider == "scripted":
            return False
        variable = _KEY_VARIABLES.get(self.provider or "openai")  # unset provider: openai
        return bool(self.base_url or self.api_key or (variable and os.environ.get(variable)))

    @field_validator("fallback")
    @classmethod
    def _fallbacks_name_models(cls, value: list[LLMConfig]) -> list[LLMConfig]:
        for index, each in enumerate(value):
            if each.fallback:
                raise ConfigError(f"llm.fallback[{index}]: a fallback model lists no "
                                  "fallback of its own; list every model under llm.fallback")
            if each.provider == "fallback":
                raise ConfigError(f"llm.fallback[{index}].provider: name the model's own "
                                  "provider (openai, anthropic, ...)")
        return value


class SkillsConfig(_Section):
    """Where skills are found."""

    paths: list[str] = Field(default_factory=list)
    """Folders scanned for SKILL.md folders, besides ``skills/``."""
    history_limit: int = Field(default=10, ge=0)
    """Messages of the global conversation a skill sees by default."""


class TelemetryConfig(_Section):
    """OpenTelemetry settings."""

    enabled: Switch = True
    """Whether runs open spans."""
    capture_content: Switch = False
    """Attach tool arguments and results, and the reasons of the guard's decisions and of
    guardrails' trips, to spans (they may hold secrets); messages are never attached."""
    exporter: Annotated[Literal["none", "console", "otlp"], BeforeValidator(lowered)] = "none"
    """Where the spans of the CLI's runs go (`jianmu.telemetry`): ``none`` (the default: the
    global provider an application set up, if any), ``console`` (JSON on standard error), or
    ``otlp`` (OTLP over HTTP, set up by the ``OTEL_EXPORTER_OTLP_*`` variables; needs the
    ``otlp`` extra)."""
    service_name: str = "jianmu"
    """``service.name`` of the tracer provider that Jianmu builds (`jianmu.telemetry`); left
    unset, ``OTEL_SERVICE_NAME`` names it when set."""


class RuntimeConfig(_Section):
    """The runner and the agent loop."""

    checkpoint_every: int | None = Field(default=None, ge=1)
    """Checkpoint every N ticks (always at a suspension) when a checkpointer is set."""
    checkpoint_path: str = Field(default_factory=lambda: _default_state_file("checkpoints.sqlite"))
    """SQLite file that the CLI keeps its checkpoints in. It defaults to the user's state folder
    (``$XDG_STATE_HOME/jianmu`` when that is absolute, else ``~/.local/state/jianmu``), outside
    any workspace: code that a sandbox lets write the workspace must not be able to edit saved
    runs (and with them approvals and user roles)."""
    debug_dir: str = ".jianmu/debug"
    """Where a failed skill writes the snapshot of its namespace (below it, no link is followed:
    relative, it is likely in the workspace, where sandboxed code may write)."""
    @field_validator("checkpoint_path", "debug_dir")
    @classmethod
    def _expand_home(cls, value: str) -> str:
        return os.path.expanduser(value)

    poll_interval: float = Field(default=0.05, gt=0)
    """Seconds between ticks while a node polls: a plain py_trees behaviour that returns
    RUNNING (a ``Timer``, say) or that a composite re-enters on every tick (a condition of a
    selector without memory), a running ``EternalGuard``, or an async node that returned
    RUNNING. Otherwise the runner ticks only when something changes."""
    max_iterations: int | None = Field(default=None, ge=1)
    """Default cap on agent-loop rounds."""
    timeout: float | None = Field(default=None, gt=0)
    """Default timeout of a run, in seconds."""
    cleanup_grace: float = Field(default=0.5, ge=0)
    """Seconds past a timed run's deadline that the tasks it stopped get to run their cleanup
    (``finally`` blocks) before ``run()`` returns; those still at it then go on after it,
    named in a ``run.cleanup_pending`` event. A run without a timeout waits for them all."""
    max_messages: int | None = Field(default=None, ge=1)
    """Default number of recent messages sent to the model."""


MCPTrust = Literal["none", "read_only", "all"]
"""How far an MCP server's tool annotations are believed (see `MCPServerConfig.trust`)."""


class MCPAuthConfig(_Section):
    """Authentication to a streamable-HTTP MCP server: a bearer token."""

    type: Annotated[Literal["bearer"], BeforeValidator(lowered)] = "bearer"
    """``bearer``: ``Authorization: Bearer <token>`` on every request."""
    token: SecretStr
    """The token; write ``${VAR}`` to read it from the environment. Never shown."""


class MCPServerConfig(_Section):
    """One MCP server: a command to start (stdio) or a URL (streamable HTTP)."""

    _url_fields = frozenset({"url"})

    command: str | None = None
    """Executable for a stdio server."""
    args: list[str] = Field(default_factory=list)
    """Its arguments."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment for it."""
    url: str | None = None
    """URL of a streamable-HTTP server."""
    headers: dict[str, SecretStr] = Field(default_factory=dict)
    """HTTP headers sent with every request to ``url``; ``${VAR}`` reads a secret from the
    environment. Values are never shown (repr, logs, errors)."""
    auth: MCPAuthConfig | None = None
    """How to authenticate to ``url``: ``{type: bearer, token: ${VAR}}``."""
    timeout: float = Field(default=30.0, gt=0)
    """Seconds a call may take."""
    connect_timeout: float = Field(default=30.0, gt=0)
    """Seconds that starting the server and the MCP handshake may take (apart from calls)."""
    trust: Annotated[MCPTrust, BeforeValidator(lowered)] = "none"
    """How far the server's tool annotations (hints) are believed. ``none``: every tool asks
    first (unless ``guard.tool_policy`` allows it) and counts as using the network; missing
    hints take the MCP spec's defaults (destructive, open-world). ``read_only``: tools that
    declare ``readOnlyHint: true`` run without asking. ``all``: every hint is believed."""
    _from_environment: tuple[str, ...] = PrivateAttr(default=())

    @property
    def from_environment(self) -> tuple[str, ...]:
        """The values its ``${VAR}`` references read from the environment (`parse_config`):
        a token in ``args`` or ``url`` too, which the client never shows (errors reach the
        model)."""
        return self._from_environment


_MCP_SERVER_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_))*", re.ASCII)


def mcp_server_name_problem(name: object) -> str | None:
    """Why ``name`` cannot name an MCP server, or None.

    Its tools are named ``<name>__<tool>``: a name is exactly that prefix (ASCII letters,
    digits, ``-`` and single ``_`` inside), so no two servers' tools can share a name and a
    ``server__tool`` reference splits at its first ``__``.
    """
    if isinstance(name, str) and _MCP_SERVER_NAME.fullmatch(name) and not name.endswith("_"):
        return None
    return (f"MCP server name {name!r} must be ASCII letters, digits, '-' and single '_' "
            "inside (its tools are named <server>__<tool>)")


class MCPConfig(_Section):
    """MCP servers whose tools skills may use."""

    servers: dict[str, MCPServerConfig] = Field(default_factory=dict)
    """Server name to how to reach it (see `mcp_server_name_problem`), unique ignoring case."""

    @field_validator("servers")
    @classmethod
    def _server_names(cls, value: dict[str, MCPServerConfig]) -> dict[str, MCPServerConfig]:
        seen: dict[str, str] = {}
        for name in value:
            problem = mcp_server_name_problem(name)
            if problem is not None:
                raise ValueError(problem)
            if name.lower() in seen:
                raise ValueError(
                    f"MCP servers {seen[name.lower()]!r} and {name!r} differ only in case; their "
                    "tools' names would be the same ignoring case: rename one"
                )
            seen[name.lower()] = name
        return value


class DurableConfig(_Section):
    """Durable runs on DBOS (`jianmu.durable`, extra ``dbos``)."""

    _url_fields = frozenset({"database_url"})

    database_url: str | None = None
    """``postgresql://user:password@host:port/db`` for many workers; unset: an SQLite file in the
    user's state folder (one machine). ``${VAR}`` reads the environment."""
    worker_concurrency: int = Field(default=64, ge=1)
    """Runs one worker executes at once (a run parked on an approval counts until it wakes)."""
    takeover_after_s: float = Field(default=60.0, gt=0)
    """Seconds without a heartbeat after which a live worker takes over a worker's runs."""
    poll_interval_s: float = Field(default=0.1, gt=0)
    """Seconds between a worker's looks at the queue for new runs."""
    notify_poll_s: float = Field(default=1.0, ge=0.001)
    """Seconds between a worker's looks for the decisions and answers its parked runs wait for,
    on SQLite (PostgreSQL tells the worker at once): DBOS's notification polling interval."""

    @property
    def sqlite_path(self) -> str:
        """The embedded default's database file."""
        return _default_state_file("durable.sqlite")


class AppConfig(_Section):
    """The whole configuration."""

    guard: GuardConstraints = Field(default_factory=GuardConstraints)
    execution: ExecutionConstraints = Field(default_factory=ExecutionConstraints)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    skills: SkillsConfig = Field(default_factory=SkillsConfig)
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    runtime: RuntimeConfig = Field(default_factory=RuntimeConfig)
    mcp: MCPConfig = Field(default_factory=MCPConfig)
    durable: DurableConfig = Field(default_factory=DurableConfig)
    source: str | None = Field(default=None, exclude=True)
    """The file this was loaded from, if any."""
    key_lines: dict[tuple[Any, ...], int] = Field(default_factory=dict, exclude=True)
    """The line of each key in that file (by its path of keys), for errors found later: a
    tool rule the guard cannot parse (`jianmu.guard.checkers.check_config_rules`)."""

    def constraints(self) -> Constraints:
        """The configuration's layer of constraints: the farthest one (read-only, and made
        once, for a read-only configuration such as `default_config`)."""
        if is_read_only(self):
            layer = _read_only_layers.get(id(self))
            if layer is None:
                layer = _read_only_layers[id(self)] = read_only(self._layer())
            return layer
        return self._layer()

    def _layer(self) -> Constraints:
        return Constraints(
            guard=self.guard,
            execution=_skills_held(self.execution, self.skills.paths),
            max_iterations=self.runtime.max_iterations,
            timeout=self.runtime.timeout,
            max_messages=self.runtime.max_messages,
        )


def _skills_held(execution: ExecutionConstraints, paths: list[str]) -> ExecutionConstraints:
    """``execution`` with every ``skills.paths`` folder inside the workspace read-only."""
    # the next run imports a BT skill's tree.py from them in the engine's process: code the
    # host runs, as `skills/` is (`DEFAULT_READ_ONLY_PATHS`), whatever read_only_paths says
    root = Path(execution.workdir).expanduser() if execution.workdir else None
    held = []
    for path in paths:
        if os.path.isabs(path) and root is not None and root.is_absolute():
            path = os.path.relpath(os.path.normpath(path), os.path.normpath(root))
        try:
            held.append(read_only_path(path))
        except ValueError:
            continue  # outside the workspace: no sandbox writes it
    if not held:
        return execution
    given = execution.read_only_paths
    current = list(DEFAULT_READ_ONLY_PATHS) if given is None else given
    return execution.model_copy(
        update={"read_only_paths": list(dict.fromkeys([*current, *held]))})


_BOOKKEEPING = frozenset(
    name for name, field in AppConfig.model_fields.items() if field.exclude
)
"""`AppConfig`'s fields that say where it came from (``source``, ``key_lines``): no file sets
them."""

_read_only_layers: dict[int, Constraints] = {}
"""The constraints layer of each read-only configuration (they live for good: ids stay)."""


def default_config() -> AppConfig:
    """What a run given no configuration reads: `AppConfig()`, built once and shared.

    It is read-only (`jianmu.constraints.read_only`): setting any of it raises `ConfigError`,
    since every such run reads the same object. To change a setting, pass a configuration of
    your own (``AppConfig(...)``, `load_config`). Built anew when ``HOME`` or
    ``XDG_STATE_HOME`` changes, as the default file paths come from them.
    """
    return _default_config(os.environ.get("XDG_STATE_HOME"), os.environ.get("HOME"))


@functools.lru_cache(maxsize=8)
def _default_config(state_home: str | None, home: str | None) -> AppConfig:
    return read_only(AppConfig())


def _key_lines(node: yaml.Node, path: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], int]:
    """Map every key path in a composed YAML document to its 1-based line."""
    import yaml  # here, not at the top: `import jianmu` does not need yaml

    lines: dict[tuple[Any, ...], int] = {path: node.start_mark.line + 1}
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key_path = (*path, key_node.value)
            lines.update(_key_lines(value_node, key_path))
            lines[key_path] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines.update(_key_lines(item, (*path, i)))
    return lines


def _interpolate(value: Any, where: str, path: tuple[Any, ...], lines: dict,
                 read: list[tuple[tuple[Any, ...], str]] | None = None) -> Any:
    """Replace ``${VAR}`` and ``${VAR:-default}`` in every string from the environment
    (``$${`` is a ``${`` of its own); a ``${`` of neither shape is an error. Each value read
    from the environment is added to ``read`` with its key's path."""
    if isinstance(value, dict):
        return {k: _interpolate(v, where, (*path, k), lines, read) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, where, (*path, i), lines, read) for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value

    def refused(problem: str) -> ConfigError:
        return ConfigError(f"{where}:{lines.get(path, '?')}: {_dotted(path)}: {problem}; write "
                           "${NAME} or ${NAME:-default} (and $${ for a '${' of its own)")

    # a reference written wrong was kept as text: '${OPENAI_API_KEY' sent as the key itself
    for match in _ENV_VAR.finditer(value):
        if "${" in (match.group(2) or ""):
            raise refused(f"in {match.group(0)!r}, a default cannot hold another ${{...}}")
    rest = _ENV_VAR.sub("", value)
    start = rest.find("${")
    if start >= 0:
        end = rest.find("}", start)
        fragment = rest[start:end + 1] if end >= 0 else rest[start:]
        shown = fragment if len(fragment) <= 40 else fragment[:39] + "…"
        raise refused(f"{shown!r} is not a ${{VAR}} reference")

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name is None:  # $${
            return "${"
        if name in os.environ:
            if read is not None:
                read.append((path, os.environ[name]))
            return os.environ[name]
        if default is not None:
            return default
        raise ConfigError(
            f"{where}:{lines.get(path, '?')}: {_dotted(path)}: environment variable "
            f"{name!r} is not set; set it or write ${{{name}:-default}}"
        )

    return _ENV_VAR.sub(replace, value)


def _dotted(path: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in path) or "<root>"


def _model_at(path: tuple[Any, ...], root: type[BaseModel] | None = None) -> type[BaseModel] | None:
    """The pydantic model that holds the keys at ``path`` (from ``root``), for suggestions.

    A ``dict[str, Model]`` field (``mcp.servers``) is walked through its keys.
    """
    model: Any = root or AppConfig
    parts = list(path)
    while parts:
        part = parts.pop(0)
        field = model.model_fields.get(part) if isinstance(part, str) else None
        if field is None:
            return None
        args = get_args(field.annotation)
        if get_origin(field.annotation) is dict:
            value = args[1] if len(args) == 2 else None
            if not (isinstance(value, type) and issubclass(value, BaseModel)) or not parts:
                return None
            parts.pop(0)  # the dict's key, e.g. the server's name
            model = value
            continue
        candidates = (field.annotation, *args)
        nested = [c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)]
        if not nested:
            return None
        model = nested[0]
    return model


def unknown_key_hint(root: type[BaseModel], loc: tuple[Any, ...]) -> str:
    """``; did you mean 'x'?`` (or the valid keys) for an unknown key at ``loc`` under ``root``."""
    model = _model_at(loc[:-1], root)
    known = [f.alias or name for name, f in model.model_fields.items()
             if not f.exclude] if model else []  # excluded: bookkeeping, never written
    import difflib  # only a misspelt key needs it

    close = difflib.get_close_matches(str(loc[-1]), known, n=1)
    if close:
        return f"; did you mean {close[0]!r}?"
    return f"; valid keys: {', '.join(known)}" if known else ""


_SECRET_KEYS = frozenset({"headers", "auth", "token", "api_key", "base_url", "url",
                          "database_url"})
"""Keys whose values a validation error must not echo."""


_NULL_KEYS = ("null", "Null", "NULL", "~", "")
"""How YAML writes a key it reads as null."""


def _line_of(loc: tuple[Any, ...], lines: dict[tuple[Any, ...], int]) -> int | str:
    """The line of the key at ``loc`` (or of its parent), ``?`` if none: a key YAML read as a
    number or null (``5:``, ``~:``) is one pydantic names by its value, YAML by its text."""
    loc = tuple(part for part in loc if part != "[key]")
    texts = {tuple(str(part) for part in path): line for path, line in lines.items()}
    for path in (loc, loc[:-1]):
        found = lines.get(path) or texts.get(tuple(str(part) for part in path))
        if found is None and path and path[-1] in (None, "None"):  # pydantic's name of null
            found = next((texts[key] for text in _NULL_KEYS
                          if (key := (*map(str, path[:-1]), text)) in texts), None)
        if found:
            return found
    return "?"


def _key_line(parent: tuple[Any, ...], key: Any, lines: dict[tuple[Any, ...], int]) -> int:
    """The line of the key under ``parent`` that YAML reads as ``key`` (``True`` for ``yes``,
    which pydantic names ``1``), 0 if none."""
    import yaml

    parent = tuple(str(part) for part in parent)
    for path, line in lines.items():
        if len(path) == len(parent) + 1 and tuple(map(str, path[:-1])) == parent:
            try:
                read = yaml.safe_load(str(path[-1])) if path[-1] != "" else None
            except yaml.YAMLError:
                continue
            if read == key and type(read) is type(key):
                return line
    return 0


def _explain(error: Any, where: str, lines: dict[tuple[Any, ...], int]) -> str:
    loc = tuple(error["loc"])
    line = _line_of(loc, lines)
    if loc and loc[-1] == "[key]":  # a key that is not text: YAML read it as a number, a null
        got = error.get("input")
        shown = "null" if got is None else str(got)
        line = _key_line(loc[:-2], got, lines) or line
        return (f"{where}:{line}: {_dotted(loc[:-1])}: a key here is text, and YAML reads "
                f"{shown} as {type(got).__name__}: quote it ('{shown}': ...)")
    if error["type"] == "extra_forbidden":
        return f"{where}:{line}: {_dotted(loc)}: unknown key{unknown_key_hint(AppConfig, loc)}"
    got = error.get("input")
    if error["type"] == "value_error":  # our own validators' words, without pydantic's
        message = str(error["ctx"]["error"])
        head, sep, rest = message.partition(": ")
        # a validator's message may start with the key path it knows ("llm.provider: ...")
        if sep and head.replace("[", ".").split(".")[-1].rstrip("]") == str(loc[-1]):
            message = rest
        error = {**error, "msg": message}
    if _SECRET_KEYS.intersection(str(part) for part in loc):
        return f"{where}:{line}: {_dotted(loc)}: {error['msg']} (value not shown: it may be secret)"
    return (
        f"{where}:{line}: {_dotted(loc)}: {error['msg']} "
        f"(got {got!r} of type {type(got).__name__})"
    )


def _find_config(path: str | os.PathLike[str] | None) -> Path | None:
    if path is not None:
        if not os.fspath(path):  # Path('') is '.', the folder: '--config "$UNSET"' said so
            raise ConfigError("the config file's name is empty; name a YAML file")
        return _config_file(Path(path), "config file")
    env = os.environ.get("JIANMU_CONFIG")
    if env:
        return _config_file(Path(env), "config file named by $JIANMU_CONFIG")
    for candidate in _SEARCH_PATHS:
        if Path(candidate).is_file():
            return Path(candidate)
    return None


def _config_file(path: Path, what: str) -> Path:
    """``path`` if it is a file; else a `ConfigError` saying what it is instead."""
    if path.is_file():
        return path
    if path.is_dir():
        raise ConfigError(f"{path}: {what} is a directory; name the YAML file in it")
    raise ConfigError(f"{path}: {what} not found")


def yaml_problem(exc: Exception, text: str) -> tuple[int | None, str]:
    """The 1-based line of ``text`` that a `compose_and_load` error is at (if known) and what
    to say of it, prefixed ``YAML syntax error: `` unless we refused the YAML ourselves."""
    import yaml

    if isinstance(exc, yaml.reader.ReaderError) and isinstance(exc.character, int):
        # a character YAML refuses (NUL, ESC...): its message gave an offset, not a line
        line: int | None = text.count("\n", 0, exc.position) + 1
        problem = f"unacceptable character #x{exc.character:04x}: {exc.reason}"
    else:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        if "'\\t'" in problem:  # pyyaml's words name the tab but not the fix
            lines = text.splitlines()
            before = (lines[mark.line][: mark.column] if mark is not None
                      and mark.line < len(lines) else "")
            problem += (" (a tab inside an unquoted value: quote the value, or write spaces)"
                        if before.strip() else " (YAML indents with spaces, never tabs)")
    kind = "" if isinstance(exc, YAMLRefused) else "YAML syntax error: "
    return line, f"{kind}{problem}"


def parse_config(text: str, where: str = "<config>") -> AppConfig:
    """Validate YAML text as an `AppConfig`; raise `ConfigError` with file, line and key."""
    import yaml  # here, not at the top: `import jianmu` does not need yaml

    try:
        node, data = compose_and_load(text, max_chars=MAX_CONFIG_CHARS)
    except (yaml.YAMLError, YAMLRefused) as exc:
        line, problem = yaml_problem(exc, text)
        raise ConfigError(f"{where}:{line or '?'}: {problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{where}:1: the top level must be a mapping of sections")
    lines = _key_lines(node) if node is not None else {}
    taken = sorted(_BOOKKEEPING.intersection(data))  # fields of ours, set below: no settings
    if taken:
        raise ConfigError(f"{where}:{lines.get((taken[0],), '?')}: {taken[0]}: unknown key"
                          f"{unknown_key_hint(AppConfig, (taken[0],))}")
    read: list[tuple[tuple[Any, ...], str]] = []
    data = _interpolate(data, where, (), lines, read)
    try:
        config = AppConfig.model_validate(data)
    except ValidationError as exc:
        problems = "\n".join(_explain(e, where, lines) for e in exc.errors())
        raise ConfigError(problems) from None
    _check_mcp_servers(config, where, lines)
    for name, server in config.mcp.servers.items():
        server._from_environment = tuple(v for p, v in read if p[:3] == ("mcp", "servers", name))
    config.source = where
    config.key_lines = lines
    return config


def _check_mcp_servers(config: AppConfig, where: str, lines: dict[tuple[Any, ...], int]) -> None:
    """Refuse an ``mcp.servers`` entry no client could connect with, with its line (the client
    checks the same when it connects, too late for a file's line)."""
    for name, server in config.mcp.servers.items():
        problem = None
        if (server.command is None) == (server.url is None):
            problem = ("give exactly one of command (a stdio server) or url (a streamable-HTTP "
                       "server)")
        elif server.url is not None and not server.url.startswith(("http://", "https://")):
            problem = "url must start with http:// or https://"
        elif server.command is not None and (server.headers or server.auth):
            problem = ("headers and auth are for a url server; give a stdio server its "
                       "secrets through env")
        if problem is not None:
            line = lines.get(("mcp", "servers", name), "?")
            raise ConfigError(f"{where}:{line}: mcp.servers.{name}: {problem}")


def load_config(path: str | os.PathLike[str] | None = None) -> AppConfig:
    """Load the config: ``path``, else ``$JIANMU_CONFIG``, ``./jianmu.yaml``,
    ``./configs/jianmu.yaml``, else the defaults.

    Raises:
        ConfigError: the file is missing, unreadable, not UTF-8, not YAML, or does not fit
            `AppConfig`.
    """
    found = _find_config(path)
    if found is None:
        return AppConfig()
    try:
        data = found.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{found}: cannot read the file: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            f"{found}:{line}: the file is not UTF-8 text: line {line} holds byte "
            f"0x{data[exc.start]:02x}; save the file as UTF-8"
        ) from None
    return parse_config(text, str(found))


# -- YAML that may come from an attacker -------------------------------------------------------

MAX_YAML_DEPTH = 64
"""Deepest nesting of mappings and sequences accepted (real configs and skills use < 10)."""


@functools.cache
def _strict_loader() -> Any:
    """The loader class, built on first use so that importing Jianmu does not import yaml."""
    import yaml
    from yaml.events import AliasEvent

    class _StrictLoader(yaml.SafeLoader):
        """`yaml.SafeLoader` whose composer refuses anchors, aliases and deep nesting."""

        def __init__(self, stream: str, max_depth: int) -> None:
            super().__init__(stream)
            self._depth = 0
            self._max_depth = max_depth

        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()
            mark: Any = event.start_mark  # the pure-Python loader's Mark (stubs also list C's)
            # checked on the event, before the composer records or expands anything
            if isinstance(event, AliasEvent):
                raise YAMLRefused(
                    f"YAML aliases (*{event.anchor}) are not allowed; write the value out",
                    problem_mark=mark,
                )
            anchor = getattr(event, "anchor", None)
            if anchor is not None:
                raise YAMLRefused(
                    f"YAML anchors (&{anchor}) are not allowed; write the value out",
                    problem_mark=mark,
                )
            self._depth += 1
            try:
                if self._depth > self._max_depth:
                    raise YAMLRefused(
                        f"the YAML is nested more than {self._max_depth} levels deep",
                        problem_mark=mark,
                    )
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

        def fetch_flow_collection_start(self, token_class: Any) -> None:
            # a `[` or `{` past the limit is refused as the scanner meets it: the composer
            # sees it only after the scanner has read up to 1,024 characters ahead, at a cost
            # that grows with every bracket still open (seconds for 10,000 of them)
            if self.flow_level >= self._max_depth:
                raise YAMLRefused(
                    f"the YAML is nested more than {self._max_depth} levels deep",
                    problem_mark=self.get_mark(),
                )
            super().fetch_flow_collection_start(token_class)

        def construct_object(self, node: Any, deep: bool = False) -> Any:
            try:
                return super().construct_object(node, deep)
            except (YAMLRefused, yaml.YAMLError):
                raise
            except (ValueError, OverflowError) as exc:  # `!!int zz`, 5,000 digits, month 13
                tag = str(node.tag).rpartition(":")[2] or "value"
                raise YAMLRefused(
                    f"this {tag} cannot be read: {exc}", problem_mark=node.start_mark
                ) from None

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            # YAML keys are unique: a key written twice would silently drop the first value
            # (a policy, a limit), so it is refused, as in strict YAML 1.2 parsers
            if isinstance(node, yaml.MappingNode):
                seen: set[Any] = set()
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        # a later key silently replaces a merged one (`<<: {rm: deny}` then
                        # `rm: allow`): refused as a key written twice would be
                        raise YAMLRefused(
                            "YAML merge keys (<<) are not allowed; write the keys out",
                            problem_mark=key_node.start_mark,
                        )
                    key = self.construct_object(key_node, deep=True)
                    try:
                        repeated = key in seen
                        seen.add(key)
                    except TypeError:  # unhashable: the constructor below says so
                        continue
                    if repeated:
                        raise YAMLRefused(
                            f"the key {key!r} is written twice in one mapping; keep one",
                            problem_mark=key_node.start_mark,
                        )
            return super().construct_mapping(node, deep)

    return _StrictLoader


def compose_and_load(
    text: str, *, max_chars: int, max_depth: int = MAX_YAML_DEPTH
) -> tuple[yaml.Node | None, Any]:
    """Compose ``text`` once and build its data: (the node tree for line numbers, the data).

    Raises:
        YAMLRefused: the text is longer than ``max_chars``, nests deeper than ``max_depth``,
            or uses an anchor or an alias.
        yaml.YAMLError: the text is not valid YAML.
    """
    if len(text) > max_chars:
        raise YAMLRefused(
            f"the YAML is {len(text)} characters long; at most {max_chars} are allowed"
        )
    loader = _strict_loader()(text, max_depth)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    return node, data
