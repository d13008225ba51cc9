"""Skills served over MCP: prompt skills as MCP prompts, skill files as MCP resources.

`jianmu.mcp` sits below `jianmu.skills`, so the skills arrive as anything that has the few
attributes below (`PromptSource`, `FileSource`; a `jianmu.skills.Skill` has them all).

- A prompt is listed with the skill's name and description; getting it returns the skill's
  body (read only then) as one user message. Prompts take no arguments.
- Every file of a skill's folder except its SKILL.md is a resource ``skill://<skill>/<path>``
  (``__pycache__`` and ``.git`` left out), its mime type guessed from the name; it is read as
  text when it decodes as UTF-8 and is not a known binary type, else as a base64 blob.
  A read is confined to the skill's folder: ``..`` leading out, absolute paths and symlinks
  leading out are refused, and the file is opened from the folder's descriptor without
  following links.

Each folder is pinned once, when the server is built (a skill loaded by `jianmu.skills`
brings the folder it pinned at load; see `jianmu.tools.builtin._paths`): listings, reads and
prompts all come from that descriptor, so a folder renamed or swapped for a link afterwards
changes nothing.
"""

from __future__ import annotations

import asyncio
import base64
import mimetypes
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote, unquote, urlsplit

from jianmu.errors import JianmuError, PathEscapeError
from jianmu.tools.builtin._paths import PinnedFolder, closing_fd

if TYPE_CHECKING:
    import mcp.types as types

__all__ = (
    "MAX_RESOURCE_BYTES",
    "SKILL_URI_SCHEME",
    "FileSource",
    "PromptSource",
    "SkillContent",
    "skill_files",
    "skill_resource_uri",
)

SKILL_URI_SCHEME = "skill"
"""The scheme of a skill file's resource URI: ``skill://<skill>/<path>``."""

MAX_RESOURCE_BYTES = 8 * 1024 * 1024
"""The largest skill file a client may read (the whole file travels in one message)."""

_SKIPPED_DIRS = frozenset({"__pycache__", ".git"})
_SKILL_FILE = "SKILL.md"  # served as the prompt, not as a resource
_TEXT_TYPES = ("application/json", "application/xml", "application/javascript",
               "application/x-sh", "application/x-yaml", "application/yaml", "application/toml")


class PromptSource(Protocol):
    """A skill served as an MCP prompt."""

    @property
    def name(self) -> str:
        """The prompt's name."""
        ...

    @property
    def description(self) -> str:
        """What the prompt is for."""
        ...

    @property
    def body(self) -> str:
        """The prompt's text, read when a client gets the prompt."""
        ...


class FileSource(Protocol):
    """A skill whose folder's files are served as MCP resources (its ``pinned`` folder, a
    `PinnedFolder`, when it has one; else ``folder`` is pinned when the server is built)."""

    @property
    def name(self) -> str:
        """The skill's name: the URI's authority."""
        ...

    @property
    def folder(self) -> Path:
        """The skill's folder."""
        ...


def skill_resource_uri(skill: str, path: str) -> str:
    """The resource URI of the file ``path`` (relative, ``/``-separated) of ``skill``."""
    return f"{SKILL_URI_SCHEME}://{quote(skill, safe='')}/{quote(path)}"


def _served(rel: str) -> bool:
    """Whether a folder-relative path is one of the skill's files (not SKILL.md, no cache)."""
    parts = rel.split("/")
    return rel != _SKILL_FILE and not _SKIPPED_DIRS.intersection(parts[:-1])


def skill_files(folder: Path | PinnedFolder) -> list[tuple[str, int]]:
    """Every file of ``folder`` except SKILL.md: (relative path, size), sorted.

    A symlink whose real location is outside the folder is left out; folders reached
    through symlinks are not entered.
    """
    pinned = folder if isinstance(folder, PinnedFolder) else PinnedFolder(folder)
    return [(rel, size) for rel, size in pinned.files(skip=_SKIPPED_DIRS) if _served(rel)]


def _read_confined(folder: PinnedFolder, rel: str) -> bytes:
    """The bytes of the file ``rel`` of ``folder``, confined to it.

    Raises:
        PathEscapeError: the path leads outside the folder (``..``, absolute, a symlink).
        FileNotFoundError: no such file (or one not served: SKILL.md, a cache).
        ValueError: an empty path, not a regular file, or larger than `MAX_RESOURCE_BYTES`.
    """
    if not rel.strip() or "\x00" in rel:
        raise ValueError(f"{rel!r} names no file of the skill")
    if os.path.isabs(rel):
        raise PathEscapeError(f"{rel!r} leads outside the skill's folder (it is absolute)")
    try:
        shown = folder.resolve(rel)
    except PathEscapeError as exc:
        raise PathEscapeError(str(exc).replace("the folder", "the skill's folder")) from None
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(f"the skill has no file {rel!r}") from None
    if not shown or not _served(shown):
        raise FileNotFoundError(f"{rel!r} is not one of the skill's files")
    try:
        fd = folder.open(shown, os.O_RDONLY | os.O_NONBLOCK)
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(f"the skill has no file {shown!r}") from None
    except IsADirectoryError:
        raise FileNotFoundError(
            f"{shown!r} is a folder; list the resources to see its files") from None
    with closing_fd(fd):
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise FileNotFoundError(f"{shown!r} is a folder; list the resources to see its files")
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{shown!r} is not a regular file")
        if st.st_size > MAX_RESOURCE_BYTES:
            raise ValueError(
                f"{shown!r} has {st.st_size} bytes, more than the {MAX_RESOURCE_BYTES} "
                "served; read it from the skill's folder instead"
            )
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(MAX_RESOURCE_BYTES + 1)
        if len(data) > MAX_RESOURCE_BYTES:  # it grew after the fstat
            raise ValueError(f"{shown!r} has more than the {MAX_RESOURCE_BYTES} bytes served")
        return data


def _mime_type(path: str) -> str | None:
    guessed, _encoding = mimetypes.guess_type(path, strict=False)
    return guessed


def _as_contents(uri: str, path: str, data: bytes) -> Any:
    """Text contents when the file is text, else a base64 blob."""
    import mcp.types as types

    mime = _mime_type(path)
    binary = mime is not None and not (mime.startswith("text/") or mime in _TEXT_TYPES)
    if not binary:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            return types.TextResourceContents(uri=uri, mime_type=mime or "text/plain", text=text)
    return types.BlobResourceContents(
        uri=uri, mime_type=mime or "application/octet-stream",
        blob=base64.b64encode(data).decode("ascii"),
    )


def _invalid(message: str) -> Exception:
    from mcp.shared.exceptions import MCPError as SDKError
    from mcp.types import INVALID_PARAMS

    return SDKError(code=INVALID_PARAMS, message=message)


@dataclass(frozen=True)
class _Folder:
    name: str
    pinned: PinnedFolder


class SkillContent:
    """The MCP prompt and resource handlers for some skills (see the module docstring).

    Args:
        prompts: Skills served as prompts, in listing order.
        files: Skills whose folders' files are served as resources.
    """

    def __init__(
        self, *, prompts: Iterable[PromptSource] = (), files: Iterable[FileSource] = ()
    ) -> None:
        self.prompts = {p.name: p for p in prompts}
        # pinned now, when the server is built (a loaded skill brings its own pin)
        self.folders = {
            f.name: _Folder(f.name, getattr(f, "pinned", None) or PinnedFolder(f.folder))
            for f in files
        }

    async def list_prompts(self, _ctx: Any, _params: Any) -> types.ListPromptsResult:
        """``prompts/list``: each prompt's name and description."""
        import mcp.types as types

        return types.ListPromptsResult(prompts=[
            types.Prompt(name=p.name, description=p.description) for p in self.prompts.values()
        ])

    async def get_prompt(self, _ctx: Any, params: Any) -> types.GetPromptResult:
        """``prompts/get``: the skill's body as one user message."""
        import mcp.types as types

        found = self.prompts.get(params.name)
        if found is None:
            known = ", ".join(self.prompts) or "none"
            raise _invalid(f"unknown prompt {params.name!r}; this server offers: {known}")
        body = await asyncio.to_thread(lambda: found.body)
        return types.GetPromptResult(description=found.description, messages=[
            types.PromptMessage(role="user", content=types.TextContent(type="text", text=body))
        ])

    def _listing(self) -> list[types.Resource]:
        import mcp.types as types

        listing: list[types.Resource] = []
        for entry in self.folders.values():
            for rel, size in skill_files(entry.pinned):
                listing.append(types.Resource(
                    uri=skill_resource_uri(entry.name, rel), name=f"{entry.name}/{rel}",
                    description=f"file {rel!r} of the skill {entry.name!r}",
                    mime_type=_mime_type(rel), size=size,
                ))
        return listing

    async def list_resources(self, _ctx: Any, _params: Any) -> types.ListResourcesResult:
        """``resources/list``: every file of every skill folder (walked on each call)."""
        import mcp.types as types

        return types.ListResourcesResult(resources=await asyncio.to_thread(self._listing))

    async def list_resource_templates(
        self, _ctx: Any, _params: Any
    ) -> types.ListResourceTemplatesResult:
        """``resources/templates/list``: none, every file is listed (a server of resources
        answers it: hosts ask after ``resources/list``)."""
        import mcp.types as types

        return types.ListResourceTemplatesResult(resource_templates=[])

    async def read_resource(self, _ctx: Any, params: Any) -> types.ReadResourceResult:
        """``resources/read``: one skill file, confined to its skill's folder."""
        import mcp.types as types

        uri = str(params.uri)
        parts = urlsplit(uri)
        entry = self.folders.get(unquote(parts.netloc))
        if parts.scheme != SKILL_URI_SCHEME or entry is None:
            known = ", ".join(self.folders) or "none"
            raise _invalid(f"unknown resource {uri!r}; resources here are "
                           f"{SKILL_URI_SCHEME}://<skill>/<path> for the skills: {known}")
        rel = unquote(parts.path).removeprefix("/")
        try:
            data = await asyncio.to_thread(_read_confined, entry.pinned, rel)
        except (OSError, ValueError, JianmuError) as exc:
            # PathEscapeError, a bad path, a missing file: the client asked for the wrong thing
            raise _invalid(f"cannot read {uri!r} of the skill {entry.name!r}: {exc}") from None
        return types.ReadResourceResult(contents=[_as_contents(uri, rel, data)])
