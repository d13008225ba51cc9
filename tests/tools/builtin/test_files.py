"""Tests for jianmu/tools/builtin/files.py: normal use and bad inputs."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from jianmu.errors import ToolExecutionError, ToolInputError
from jianmu.tools.builtin import (
    FileInfoTool,
    ListDirTool,
    ReadFileTool,
    StrReplaceTool,
    WriteFileTool,
)
from jianmu.tools.calls import ToolResult

pytestmark = pytest.mark.anyio


# -- read_file ----------------------------------------------------------------------------


async def test_read_whole_file(ws: Path) -> None:
    (ws / "a.txt").write_text("one\ntwo\n")
    assert await ReadFileTool().execute({"path": "a.txt"}) == "one\ntwo\n"


async def test_read_with_offset_and_limit_says_what_remains(ws: Path) -> None:
    (ws / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    out = await ReadFileTool().execute({"path": "n.txt", "offset": 3, "limit": 2})
    assert out == "line 3\nline 4\n[lines 3-4 of 10; 6 more lines: call again with offset=5]"
    last = await ReadFileTool().execute({"path": "n.txt", "offset": 10})
    assert last == "line 10\n[lines 10-10 of 10]"
    one_left = await ReadFileTool().execute({"path": "n.txt", "offset": 8, "limit": 2})
    assert one_left.endswith("1 more line: call again with offset=10]")


async def test_read_empty_file(ws: Path) -> None:
    (ws / "e.txt").write_text("")
    assert await ReadFileTool().execute({"path": "e.txt"}) == "[e.txt is empty]"


async def test_read_file_without_final_newline(ws: Path) -> None:
    (ws / "x.txt").write_text("a\nb")
    out = await ReadFileTool().execute({"path": "x.txt", "limit": 1})
    assert out == "a\n[lines 1-1 of 2; 1 more line: call again with offset=2]"
    assert await ReadFileTool().execute({"path": "x.txt", "offset": 2}) == "b\n[lines 2-2 of 2]"


async def test_read_missing_file(ws: Path) -> None:
    with pytest.raises(ToolExecutionError, match=r"'nope.txt' does not exist"):
        await ReadFileTool().execute({"path": "nope.txt"})


async def test_read_binary_file(ws: Path) -> None:
    (ws / "img.bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    with pytest.raises(ToolExecutionError, match=r"binary file"):
        await ReadFileTool().execute({"path": "img.bin"})


async def test_read_directory(ws: Path) -> None:
    (ws / "d").mkdir()
    with pytest.raises(ToolExecutionError, match=r"'d' is a directory.*list_dir"):
        await ReadFileTool().execute({"path": "d"})


async def test_read_non_utf8_file(ws: Path) -> None:
    (ws / "latin.txt").write_bytes("café\n".encode("latin-1"))
    with pytest.raises(ToolExecutionError, match=r"not valid UTF-8 \(byte 0xe9 at offset 3\)"):
        await ReadFileTool().execute({"path": "latin.txt"})


async def test_read_fifo_is_refused_without_blocking(ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    with pytest.raises(ToolExecutionError, match=r"not a regular file"):
        await ReadFileTool().execute({"path": "pipe"})


async def test_read_bad_offset_and_limit(ws: Path) -> None:
    (ws / "a.txt").write_text("x\n")
    with pytest.raises(ToolInputError, match=r"offset 5 is past the end of 'a.txt', which has 1"):
        await ReadFileTool().execute({"path": "a.txt", "offset": 5})
    with pytest.raises(ToolInputError):
        await ReadFileTool().execute({"path": "a.txt", "offset": 0})
    with pytest.raises(ToolInputError):
        await ReadFileTool().execute({"path": "a.txt", "limit": 0})


async def test_long_result_is_truncated_with_a_marker(ws: Path) -> None:
    (ws / "big.txt").write_text("x" * 100 + "\n")
    tool = ReadFileTool()
    tool.max_result_length = 40
    raw = await tool.execute({"path": "big.txt"})
    result = ToolResult.from_raw(tool.name, raw).truncate(tool.max_result_length)
    assert result.truncated
    assert result.output.startswith("x" * 40)
    assert "[truncated: 61 more characters]" in result.output


# -- write_file ---------------------------------------------------------------------------


async def test_write_creates_parents_and_reports(ws: Path) -> None:
    out = await WriteFileTool().execute({"path": "a/b/c.txt", "content": "hi\nthere"})
    assert out == "Wrote 8 characters (2 lines) to new file a/b/c.txt"
    assert (ws / "a/b/c.txt").read_text() == "hi\nthere"


async def test_overwrite_and_append(ws: Path) -> None:
    tool = WriteFileTool()
    await tool.execute({"path": "f.txt", "content": "one\n"})
    out = await tool.execute({"path": "f.txt", "content": "two\n", "mode": "append"})
    assert out.startswith("Appended 4 characters (1 lines) to file f.txt")
    assert (ws / "f.txt").read_text() == "one\ntwo\n"
    await tool.execute({"path": "f.txt", "content": "three\n"})
    assert (ws / "f.txt").read_text() == "three\n"
    await tool.execute({"path": "new.txt", "content": "x", "mode": "append"})
    assert (ws / "new.txt").read_text() == "x"


async def test_write_is_atomic_and_keeps_mode(ws: Path) -> None:
    target = ws / "run.sh"
    target.write_text("old")
    target.chmod(0o755)
    inode_before = target.stat().st_ino
    await WriteFileTool().execute({"path": "run.sh", "content": "new"})
    assert target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o755
    # A rename, not an in-place write: the file is a new inode, and no temp file is left.
    assert target.stat().st_ino != inode_before
    assert sorted(p.name for p in ws.iterdir()) == ["run.sh"]


async def test_write_failure_leaves_no_temp_file(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (ws / "f.txt").write_text("original")

    def broken_replace(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(ToolExecutionError, match=r"No space left"):
        await WriteFileTool().execute({"path": "f.txt", "content": "new"})
    assert (ws / "f.txt").read_text() == "original"
    assert sorted(p.name for p in ws.iterdir()) == ["f.txt"]


async def test_write_bad_inputs(ws: Path) -> None:
    (ws / "d").mkdir()
    (ws / "file").write_text("x")
    with pytest.raises(ToolExecutionError, match=r"'d' is a directory"):
        await WriteFileTool().execute({"path": "d", "content": "x"})
    with pytest.raises(ToolExecutionError, match=r"a parent of 'file/x.txt' is a file"):
        await WriteFileTool().execute({"path": "file/x.txt", "content": "x"})
    with pytest.raises(ToolInputError, match=r"mode"):
        await WriteFileTool().execute({"path": "a.txt", "content": "x", "mode": "insert"})
    with pytest.raises(ToolExecutionError, match=r"workspace folder itself"):
        await WriteFileTool().execute({"path": ".", "content": "x"})
    with pytest.raises(ToolInputError):
        await WriteFileTool().execute({"path": "a.txt"})


_GIT_CONFIG = '[core]\n\tfsmonitor = "id > ran.txt; false"\n'


@pytest.mark.parametrize(
    ("path", "folder"),
    [
        (".git/config", ".git"),  # e12: core.fsmonitor runs on the next `git status`
        (".git/hooks/pre-commit", ".git"),
        (".git", ".git"),  # a `.git` file (gitdir: ...) would point git elsewhere
        ("sub/.git/config", ".git"),  # a nested repository
        (".GIT/config", ".git"),  # case-insensitive file systems
        ("./src/../.git/config", ".git"),
        (".jianmu/state.json", ".jianmu"),
    ],
)
async def test_write_into_git_or_jianmu_folders_is_refused(
    ws: Path, path: str, folder: str
) -> None:
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    with pytest.raises(ToolInputError, match=rf"writing {path!r} is refused: .*{folder!r}"):
        await WriteFileTool().execute({"path": path, "content": _GIT_CONFIG})
    with pytest.raises(ToolInputError, match="is refused"):
        await WriteFileTool().execute({"path": path, "content": "x", "mode": "append"})
    assert (ws / ".git" / "config").read_text() == "[core]\n"
    assert not (ws / "sub").exists() and not (ws / ".jianmu").exists()


async def test_write_through_a_link_into_git_is_refused(ws: Path) -> None:
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / "innocent").symlink_to(ws / ".git")
    with pytest.raises(ToolInputError, match=r"inside a '\.git' folder"):
        await WriteFileTool().execute({"path": "innocent/config", "content": _GIT_CONFIG})
    with pytest.raises(ToolInputError, match=r"inside a '\.git' folder"):
        await StrReplaceTool().execute(
            {"path": "innocent/config", "old": "[core]", "new": _GIT_CONFIG}
        )
    assert (ws / ".git" / "config").read_text() == "[core]\n"


async def test_git_files_stay_readable_and_lookalikes_writable(ws: Path) -> None:
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    with pytest.raises(ToolInputError, match="is refused"):
        await StrReplaceTool().execute({"path": ".git/config", "old": "[core]", "new": "x"})
    assert await ReadFileTool().execute({"path": ".git/config"}) == "[core]\n"
    for ok in (".gitignore", ".github/workflows/ci.yml", "docs/.git-notes", "x.git/a"):
        await WriteFileTool().execute({"path": ok, "content": "fine\n"})
        assert (ws / ok).read_text() == "fine\n"


async def test_append_to_binary_is_refused(ws: Path) -> None:
    (ws / "b.bin").write_bytes(b"\x00\x01")
    with pytest.raises(ToolExecutionError, match=r"binary"):
        await WriteFileTool().execute({"path": "b.bin", "content": "x", "mode": "append"})
    assert (ws / "b.bin").read_bytes() == b"\x00\x01"


# -- str_replace --------------------------------------------------------------------------


async def test_str_replace_once(ws: Path) -> None:
    (ws / "m.py").write_text("a = 1\nb = 2\n")
    out = await StrReplaceTool().execute({"path": "m.py", "old": "b = 2", "new": "b = 3"})
    assert out == "Replaced 1 occurrence in m.py (line 2)"
    assert (ws / "m.py").read_text() == "a = 1\nb = 3\n"


async def test_str_replace_ambiguous_says_how_many(ws: Path) -> None:
    (ws / "m.py").write_text("x = 1\nx = 1\nx = 1\n")
    with pytest.raises(ToolExecutionError, match=r"occurs 3 times.*set count=3"):
        await StrReplaceTool().execute({"path": "m.py", "old": "x = 1", "new": "x = 2"})
    assert (ws / "m.py").read_text() == "x = 1\nx = 1\nx = 1\n"
    with pytest.raises(ToolExecutionError, match=r"occurs 3 times in 'm.py', not 2"):
        await StrReplaceTool().execute({"path": "m.py", "old": "x = 1", "new": "y", "count": 2})
    out = await StrReplaceTool().execute({"path": "m.py", "old": "x = 1", "new": "y", "count": 3})
    assert out == "Replaced 3 occurrences in m.py (line 1, 2, 3)"
    assert (ws / "m.py").read_text() == "y\ny\ny\n"


async def test_str_replace_bad_inputs(ws: Path) -> None:
    (ws / "m.py").write_text("a = 1\n")
    (ws / "latin.txt").write_bytes(b"caf\xe9\n")
    with pytest.raises(ToolExecutionError, match=r"old text not found in 'm.py'"):
        await StrReplaceTool().execute({"path": "m.py", "old": "zzz", "new": "y"})
    with pytest.raises(ToolInputError, match=r"old is empty"):
        await StrReplaceTool().execute({"path": "m.py", "old": "", "new": "y"})
    with pytest.raises(ToolInputError, match=r"the same"):
        await StrReplaceTool().execute({"path": "m.py", "old": "a", "new": "a"})
    with pytest.raises(ToolExecutionError, match=r"does not exist"):
        await StrReplaceTool().execute({"path": "no.py", "old": "a", "new": "b"})
    with pytest.raises(ToolExecutionError, match=r"not valid UTF-8"):
        await StrReplaceTool().execute({"path": "latin.txt", "old": "caf", "new": "b"})
    with pytest.raises(ToolExecutionError, match=r"is a directory"):
        await StrReplaceTool().execute({"path": ".", "old": "a", "new": "b"})


# -- list_dir -----------------------------------------------------------------------------


async def test_list_dir_tree(ws: Path) -> None:
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    (ws / "README.md").write_text("hello")
    (ws / ".git").mkdir()
    (ws / "build").mkdir()
    top = await ListDirTool().execute({})
    assert top == "./\n  build/\n  src/\n  README.md  (5 B)"
    deep = await ListDirTool().execute({"path": "src", "depth": 3})
    assert deep == "src/\n  pkg/\n    mod.py  (6 B)"
    filtered = await ListDirTool().execute({"depth": 2, "ignore": ["build", "*.md"]})
    assert filtered == "./\n  .git/\n  src/\n    pkg/"


async def test_list_dir_bad_inputs(ws: Path) -> None:
    (ws / "f.txt").write_text("x")
    (ws / "empty").mkdir()
    with pytest.raises(ToolExecutionError, match=r"'nope' does not exist"):
        await ListDirTool().execute({"path": "nope"})
    with pytest.raises(ToolExecutionError, match=r"'f.txt' is a file"):
        await ListDirTool().execute({"path": "f.txt"})
    with pytest.raises(ToolInputError):
        await ListDirTool().execute({"depth": 0})
    assert await ListDirTool().execute({"path": "empty"}) == "empty/\n  [empty]"


# -- file_info ----------------------------------------------------------------------------


async def test_file_info_of_a_text_file(ws: Path) -> None:
    (ws / "u.txt").write_text("héllo\nwörld\n", encoding="utf-8")
    info = await FileInfoTool().execute({"path": "u.txt"})
    assert info["type"] == "file"
    assert info["encoding"] == "utf-8"
    assert info["lines"] == 2
    assert info["size"] == len("héllo\nwörld\n".encode())
    assert info["modified"].endswith("+00:00")
    assert json.loads(json.dumps(info)) == info


@pytest.mark.parametrize(
    ("data", "encoding", "lines"),
    [
        (b"plain\n", "ascii", 1),
        (b"no newline", "ascii", 1),
        (b"\xef\xbb\xbfbom\n", "utf-8-sig", 1),
        ("hi\n".encode("utf-16"), "utf-16", None),
        (b"\x00\x01\x02", "binary", None),
        (b"caf\xe9\n", "unknown (not UTF-8)", 1),
        (b"", "ascii", 0),
    ],
)
async def test_file_info_encodings(
    ws: Path, data: bytes, encoding: str, lines: int | None
) -> None:
    (ws / "f").write_bytes(data)
    info = await FileInfoTool().execute({"path": "f"})
    assert info["encoding"] == encoding
    assert info.get("lines") == lines


async def test_file_info_of_a_folder_and_missing(ws: Path) -> None:
    (ws / "d").mkdir()
    (ws / "d" / "x").write_text("")
    info = await FileInfoTool().execute({"path": "d"})
    assert info["type"] == "directory" and info["entries"] == 1
    with pytest.raises(ToolExecutionError, match=r"does not exist"):
        await FileInfoTool().execute({"path": "missing"})


async def test_metadata_matches_the_issue() -> None:
    expected = {
        "read_file": ("read", ("file_read",), True),
        "write_file": ("write", ("file_write",), False),
        "list_dir": ("read", ("file_read",), True),
        "file_info": ("read", ("file_read",), True),
        "str_replace": ("write", ("file_write",), False),
    }
    for cls in (ReadFileTool, WriteFileTool, ListDirTool, FileInfoTool, StrReplaceTool):
        tool = cls()
        assert (tool.category, tool.effect_tags, tool.parallel_safe) == expected[tool.name]
        tool.check_definition(require_parameter_descriptions=True)
