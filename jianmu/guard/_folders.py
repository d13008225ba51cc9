"""Where a shell command runs after ``cd``: the folder a command line changed to, and a
command's words read in it (``cd secrets; cat key`` reads ``secrets/key``), for `_shell`."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ("FOLDER_COMMANDS", "Folders", "changed_to", "folder_of", "in_folder", "through_proc")


class _Word(Protocol):
    """A word of a command (`jianmu.guard._shell.Word`)."""

    @property
    def text(self) -> str:
        """Its value, or its source text when only the run knows it."""

    @property
    def literal(self) -> bool:
        """Whether its value is known before the run."""


FOLDER_COMMANDS = frozenset({"cd", "pushd", "popd"})
_STACK_PLACE = re.compile(r"^[+-][0-9]+$")


# a process's own folder and root, as the kernel shows them: `/proc/self/cwd/secrets/key` is
# `secrets/key` to the command that reads it (the guard's own /proc/self is another process)
_PROC_LINK = re.compile(r"^/proc/(?:self|thread-self|[0-9]+)(?:/task/[0-9]+)?/(cwd|root)(?=/|$)")
# links at the top of /proc, as the folders they lead to (`..` from them goes there)
_PROC_TOP = {"self": ["self"], "thread-self": ["self", "task", "0"], "net": ["self", "net"],
             "mounts": ["self", "mounts"]}
# entries of a process's folder that are links: past one, `..` is not lexical
_PROC_LINKS = frozenset({"cwd", "root", "exe"})


def _proc_spelling(word: str) -> str:
    """A word under ``/proc`` (or ``/dev/fd``, a link to ``/proc/self/fd``) as one spelling:
    ``//``, ``.`` and the ``..`` that /proc's own folders undo tidied (``/proc//self/./cwd``,
    ``/dev/fd/../cwd`` and ``/proc/net/../cwd`` are ``/proc/self/cwd``), up to a link of the
    process (``cwd``, ``root``, ``exe``, a descriptor), past which the word is kept as given."""
    parts = [part for part in word.split("/") if part not in ("", ".")]
    if parts[:2] == ["dev", "fd"]:
        parts[:2] = ["proc", "self", "fd"]
    if parts[:1] != ["proc"]:
        return word
    out: list[str] = []
    for i, part in enumerate(parts):
        if part == "..":
            if out:
                out.pop()
            continue
        if out == ["proc"] and part in _PROC_TOP:
            out.extend(_PROC_TOP[part])
            continue
        out.append(part)
        if out[:1] != ["proc"]:
            continue  # `/proc/..` led out of /proc: the rest is no process's
        if part in _PROC_LINKS or (len(out) >= 2 and out[-2] == "fd"):
            out.extend(parts[i + 1 :])
            break
    return "/" + "/".join(out)


def through_proc(word: str) -> str:
    """``word`` with a leading ``/proc/self/cwd`` read as ``.`` and ``/proc/self/root`` as
    ``/`` (also for another process or thread, which in a sandbox is the command's own, and
    however the way there is spelt: `_proc_spelling`)."""
    if word.startswith("/") and ("/proc" in word or "/dev/" in word):
        word = _proc_spelling(word)
    while (found := _PROC_LINK.match(word)) is not None:
        rest = word[found.end() :]
        word = ("." if found.group(1) == "cwd" else "") + rest or "/"
        if word.startswith("/") and ("/proc" in word or "/dev/" in word):
            word = _proc_spelling(word)
    return word


def changed_to(name: str, args: Sequence[_Word]) -> str | None:
    """The folder ``cd ARGS`` (or ``pushd``) changes to, or None when only the run knows it
    (no argument: home; ``-``, ``~``, ``popd``, a word known at run time)."""
    rest = [w for w in args if not (w.literal and w.text.startswith("-") and w.text != "-")]
    if name == "popd" or len(rest) != 1 or not rest[0].literal:
        return None
    folder = through_proc(rest[0].text)
    if name == "pushd" and _STACK_PLACE.match(folder):
        return None  # `pushd +1` turns the stack: the folder of an earlier pushd
    return None if folder in ("", "-") or folder.startswith("~") else folder


def folder_of(folders: list[str | None]) -> str | None:
    """Where the commands after these changes of folder run, relative to where the line
    started (absolute when one was), or None when only the run knows."""
    where = "."
    for folder in folders:
        if folder is None:
            return None
        where = posixpath.join(where, folder)
    return where


def in_folder(
    folder: str | None, forms: list[tuple[str, ...]], dyn: list[frozenset[int]]
) -> None:
    """Add to a command run after a ``cd`` each form with its relative words in that folder
    (``cd secrets; cat key`` is ``cat secrets/key`` too); in a folder only the run knows,
    its relative words may name anything."""
    for form, dynamic in list(zip(forms, dyn, strict=True)):
        moved = list(form)
        unknown = set(dynamic)
        for i, word in enumerate(form[1:], start=1):
            if i in dynamic or word.startswith(("-", "/", "~")) or "://" in word:
                continue
            if folder is None:
                unknown.add(i)
            else:
                moved[i] = posixpath.normpath(posixpath.join(folder, word))
        if tuple(moved) != form or unknown != dynamic:
            forms.append(tuple(moved))
            dyn.append(frozenset(unknown))


MAX_FOLDER = 4096
"""The longest folder a line's changes of folder are followed to (Linux's PATH_MAX)."""
MOVED_CHARS = 1 << 22
"""How many characters of words one line may put in the folder it changed to: a line of
``cd d; cd d; ...``, or a long folder then many words, was gigabytes of words (each command
joined every earlier change again). Past it, a relative word is in a folder only the run
knows (it may name anything: no grant, every restriction)."""


@dataclass
class Folders:
    """A line's changes of folder so far, and where they lead (`folder_of`, kept as they
    come, to `MAX_FOLDER`)."""

    changes: list[str | None] = field(default_factory=list)
    """Each folder changed to (None: one only the run knows)."""
    where: str | None = "."
    """Where the commands after them run, None when only the run knows."""
    moved: int = 0
    """Characters of words put in that folder so far (`MOVED_CHARS` at most)."""

    def change(self, folder: str | None) -> None:
        """A ``cd`` to ``folder`` (`changed_to`)."""
        self.changes.append(folder)
        where = None if self.where is None or folder is None else posixpath.join(
            self.where, folder)
        self.where = where if where is None or len(where) <= MAX_FOLDER else None

    def place(self, forms: list[tuple[str, ...]], dyn: list[frozenset[int]]) -> None:
        """`in_folder` for a command after the changes, if any, within `MOVED_CHARS`."""
        if not self.changes:
            return
        where = self.where
        if where is not None:
            self.moved += len(where) * sum(len(form) for form in forms)
            if self.moved > MOVED_CHARS:
                where = None
        in_folder(where, forms, dyn)
