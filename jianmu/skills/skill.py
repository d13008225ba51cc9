"""`Skill`: one SKILL.md folder, its validated front matter, and its files loaded on demand.

The front matter follows the open Agent Skills format (``name``, ``description``, ``license``,
``compatibility``, ``metadata``, ``allowed-tools``) plus Jianmu's fields (``execution``,
``tree``, ``tools``, ``constraints``, ``inputs``, ``outputs``, ``version``, ``history_limit``).
Only the front matter is read when a skill is loaded: the Markdown body, ``scripts/``,
``references/`` and ``assets/`` are read when asked for.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from jianmu.constraints import Constraints, SkillConstraints
from jianmu.skills._allowed_tools import AllowedTool

if TYPE_CHECKING:
    from jianmu.tools.base import Tool
    from jianmu.tools.providers import BuiltinToolProvider
    from jianmu.tools.toolset import ToolSet

__all__ = ("NAME_PATTERN", "RESOURCE_FOLDERS", "Skill", "SkillFrontMatter")

NAME_PATTERN = r"^[a-z0-9]+(-[a-z0-9]+)*$"
"""A skill name: lowercase letters and digits in words joined by single hyphens."""

RESOURCE_FOLDERS = ("scripts", "references", "assets")
"""Sub-folders whose files a skill may read on demand."""


class SkillFrontMatter(BaseModel):
    """The YAML front matter of a SKILL.md, as written (validated, not yet resolved)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = Field(min_length=1, max_length=64, pattern=NAME_PATTERN)
    """The skill's name; must equal its folder's name."""
    description: str = Field(min_length=1, max_length=1024)
    """What the skill does and when to use it (the model reads it)."""
    license: str | None = None
    """License name or the file that holds it."""
    compatibility: str | None = Field(default=None, max_length=500)
    """Environment requirements (products, packages, network)."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Free-form extra information."""
    allowed_tools: list[str] | str | None = Field(default=None, alias="allowed-tools")
    """Tools the skill uses (a space-separated string or a list); they are not pre-approved."""
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


@dataclass(kw_only=True, eq=False)
class Skill:
    """A loaded skill: front matter resolved, body and resources read on demand."""

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
    """Tool names: ``tools`` and the tools of ``allowed-tools``, lower-cased, no duplicates."""
    allowed_tools: tuple[AllowedTool, ...] = ()
    """The mapped ``allowed-tools`` entries."""
    constraints: Constraints = field(default_factory=Constraints)
    """The SKILL.md layer: ``constraints`` plus an ``allow`` rule per ``allowed-tools`` entry
    that the skill's own ``tool_policy`` does not name."""
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
    body_line: int = 1
    """1-based line of SKILL.md where the Markdown body starts."""
    _body: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        # whoever built the skill, its layer is the author's: merged, it may only tighten
        self.constraints = SkillConstraints.of(self.constraints)

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
            lines = self.file.read_text(encoding="utf-8").splitlines(keepends=True)
            self._body = "".join(lines[self.body_line - 1 :]).strip()
        return self._body

    def resources(self) -> list[str]:
        """Files under ``scripts/``, ``references/`` and ``assets/``, relative, sorted."""
        found: list[str] = []
        for sub in RESOURCE_FOLDERS:
            base = self.folder / sub
            if base.is_dir():
                found.extend(
                    p.relative_to(self.folder).as_posix() for p in base.rglob("*") if p.is_file()
                )
        return sorted(found)

    def resource_path(self, relative: str) -> Path:
        """The absolute path of a file in the skill's folder.

        Raises:
            ValueError: the path leaves the skill's folder.
            FileNotFoundError: no such file.
        """
        root = self.folder.resolve()
        target = (root / relative).resolve()
        if not target.is_relative_to(root):
            raise ValueError(
                f"skill {self.name!r}: resource {relative!r} is outside the skill's folder; "
                "use a path relative to it such as 'references/guide.md'"
            )
        if not target.is_file():
            known = ", ".join(self.resources()) or "none"
            raise FileNotFoundError(
                f"skill {self.name!r} has no file {relative!r}; its resources: {known}"
            )
        return target

    def read_resource(self, relative: str) -> str:
        """Read a text file of the skill's folder (e.g. ``references/guide.md``).

        Raises:
            ValueError: the path leaves the skill's folder.
            FileNotFoundError: no such file.
        """
        return self.resource_path(relative).read_text(encoding="utf-8")

    def toolset(
        self,
        custom: Iterable[Tool] = (),
        *,
        provider: BuiltinToolProvider | None = None,
        strict: bool = False,
    ) -> ToolSet:
        """The skill's tools: custom tools of those names, else the built-ins.

        Names that are neither (MCP tools) are left out; add them from their provider.
        """
        from jianmu.tools.providers import BuiltinToolProvider
        from jianmu.tools.toolset import ToolSet

        source = provider or BuiltinToolProvider.default()
        custom_list = [t for t in custom if t.name.lower() in self.tools]
        custom_names = {t.name.lower() for t in custom_list}
        builtins = set(source.list_builtin_names()) | set(source.aliases())
        names = [n for n in self.tools if n in builtins and n not in custom_names]
        return ToolSet.resolve(names, custom_list, strict=strict, provider=source)

    def summary(self) -> str:
        """``name (execution): description`` on one line, for listings and prompts."""
        return f"{self.name} ({self.execution}): {self.description.strip().splitlines()[0]}"

    def __repr__(self) -> str:
        return f"<Skill {self.name!r} {self.execution} at {str(self.folder)!r}>"
