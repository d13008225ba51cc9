"""The one resolver of tool paths (jianmu/execution/runner.py) and the descriptor walk
(jianmu/tools/builtin/_paths.py): a sibling ``ws-evil`` beside ``ws`` is outside, a workspace
reached through a symlink works and stays confined, and the guard's path forms agree with
what the tools touch."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from jianmu.constraints import Constraints, ExecutionConstraints
from jianmu.errors import PathEscapeError, ToolExecutionError, ToolInputError
from jianmu.execution.runner import (
    ToolRunner,
    current_workspace,
    effective_root,
    is_inside,
    locate,
    resolve_tool_path,
    use_workspace,
)
from jianmu.guard import ToolPolicyChecker
from jianmu.guard._rules import path_forms
from jianmu.tools import ToolSet
from jianmu.tools.builtin import _paths
from jianmu.tools.calls import ToolCall

LOOT = "EVIL-SIBLING-LOOT"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """tmp/ws (with secrets/key and docs/), tmp/ws-evil/loot.txt, tmp/link -> ws."""
    ws = tmp_path / "ws"
    (ws / "secrets").mkdir(parents=True)
    (ws / "secrets" / "key").write_text("KEY\n")
    (ws / "docs").mkdir()
    (ws / "docs" / "a.txt").write_text("alpha\n")
    (tmp_path / "ws-evil").mkdir()
    (tmp_path / "ws-evil" / "loot.txt").write_text(LOOT + "\n")
    (tmp_path / "link").symlink_to(ws, target_is_directory=True)
    return tmp_path


def test_is_inside_needs_the_separator() -> None:
    assert is_inside("/t/ws", "/t/ws")
    assert is_inside("/t/ws/a", "/t/ws")
    assert is_inside("/t/ws/a", "/t/ws/")
    assert not is_inside("/t/ws-evil", "/t/ws")
    assert not is_inside("/t/ws-evil/a", "/t/ws")
    assert not is_inside("/t/w", "/t/ws")
    assert not is_inside("/t", "/t/ws")
    assert is_inside("/x", "/")


@pytest.mark.parametrize(
    "spelling", ["../ws-evil/loot.txt", "@/ws-evil/loot.txt", "./../ws-evil", "..", "@"]
)
def test_a_sibling_with_a_common_prefix_is_outside(tree: Path, spelling: str) -> None:
    ws = tree / "ws"
    path = spelling.replace("@", str(tree))
    with pytest.raises(PathEscapeError, match="outside the workspace"):
        resolve_tool_path(path, ws)
    assert not locate(path, ws).inside


def test_resolve_gives_real_and_relative_locations(tree: Path) -> None:
    ws = tree / "ws"
    where = resolve_tool_path("docs/../secrets/key", ws)
    assert (where.real, where.rel, where.root) == (str(ws / "secrets" / "key"), "secrets/key",
                                                   str(ws))
    assert where.forms() == ("secrets/key", "secrets/key")
    assert resolve_tool_path(".", ws).rel == "."
    assert resolve_tool_path(str(ws), ws).real == str(ws)
    new = resolve_tool_path("docs/new/file.txt", ws)  # need not exist
    assert new.real == str(ws / "docs" / "new" / "file.txt")


def test_a_symlink_to_a_sibling_is_refused_as_such(tree: Path) -> None:
    ws = tree / "ws"
    (ws / "evil").symlink_to(tree / "ws-evil", target_is_directory=True)
    with pytest.raises(PathEscapeError, match="through a symbolic link"):
        resolve_tool_path("evil/loot.txt", ws)
    with pytest.raises(PathEscapeError) as caught:
        resolve_tool_path("../ws-evil/loot.txt", ws)
    assert "symbolic link" not in str(caught.value)
    where = locate("evil/loot.txt", ws)
    assert where.forms() == ("evil/loot.txt", str(tree / "ws-evil" / "loot.txt"))


@pytest.mark.parametrize(
    ("path", "error"),
    [(42, ToolInputError), ("", ToolInputError), ("   ", ToolInputError),
     ("a\x00b", ToolInputError), ("~/x", PathEscapeError), ("~", PathEscapeError)],
)
def test_bad_paths_are_refused(tree: Path, path: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        resolve_tool_path(path, tree / "ws")  # type: ignore[arg-type]


def test_a_missing_root_is_an_execution_error(tmp_path: Path) -> None:
    with pytest.raises(ToolExecutionError, match="not an existing folder"):
        resolve_tool_path("x", tmp_path / "nope")
    with use_workspace(tmp_path / "nope", check=False), pytest.raises(ToolExecutionError):
        _paths.real_root()


@pytest.mark.anyio
async def test_a_symlink_loop_fails_cleanly(tree: Path) -> None:
    ws = tree / "ws"
    (ws / "loop").symlink_to("loop")
    with use_workspace(ws):
        result = await ToolSet.resolve(["read_file"], strict=True).execute(
            "read_file", {"path": "loop/x"}
        )
    assert not result.ok and result.error


def test_effective_root_and_use_workspace(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tree)
    assert effective_root() == tree
    assert effective_root("ws") == tree / "ws"
    monkeypatch.setenv("HOME", str(tree))
    assert effective_root("~/ws") == tree / "ws"
    with use_workspace("ws") as root:
        assert root == tree / "ws" and current_workspace() == tree / "ws"
        assert effective_root() == tree / "ws"
    # made absolute, except a Path given unchecked (the runner's own absolute folder)
    for given, check in ((Path("ws"), True), ("ws", True), ("ws", False)):
        with use_workspace(given, check=check) as root:
            assert root == tree / "ws" and isinstance(root, Path), (given, check)
    assert current_workspace() == tree
    with pytest.raises(ValueError, match="not an existing folder"):
        with use_workspace("missing"):
            pass


def test_the_runner_fixes_its_workspace_from_the_workdir(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tree)
    assert ToolRunner(ExecutionConstraints(workdir="ws")).workspace == tree / "ws"
    assert ToolRunner(ExecutionConstraints()).workspace == tree


# -- a workspace reached through a symlink ------------------------------------------------


@pytest.fixture
def linked(tree: Path) -> Iterator[Path]:
    """The workspace made current through the symlink tmp/link -> tmp/ws."""
    with use_workspace(tree / "link"):
        yield tree


@pytest.mark.anyio
async def test_a_workspace_reached_through_a_symlink_works_and_stays_confined(
    linked: Path,
) -> None:
    tools = ToolSet.resolve(
        ["read_file", "write_file", "list_dir", "glob_search", "grep_search", "file_info",
         "str_replace"], strict=True,
    )
    link = linked / "link"
    ok = {
        "read_file": {"path": "docs/a.txt"},
        "file_info": {"path": str(link / "docs" / "a.txt")},
        "list_dir": {"path": "docs"},
        "glob_search": {"pattern": "*.txt"},
        "grep_search": {"pattern": "alpha"},
    }
    for name, args in ok.items():
        result = await tools.execute(name, args)
        assert result.ok, (name, result.error)
        assert "a.txt" in str(result.output) or "alpha" in str(result.output), name
    wrote = await tools.execute("write_file", {"path": "docs/new/b.txt", "content": "beta\n"})
    assert wrote.ok, wrote.error
    assert (linked / "ws" / "docs" / "new" / "b.txt").read_text() == "beta\n"
    absolute = await tools.execute("read_file", {"path": str(linked / "ws" / "docs" / "a.txt")})
    assert absolute.ok and "alpha" in str(absolute.output)
    edited = await tools.execute("str_replace", {"path": "docs/a.txt", "old": "alpha",
                                                 "new": "ALPHA"})
    assert edited.ok, edited.error
    for name, args in [
        ("read_file", {"path": "../ws-evil/loot.txt"}),
        ("read_file", {"path": str(linked / "ws-evil" / "loot.txt")}),
        ("list_dir", {"path": ".."}),
        ("grep_search", {"pattern": "LOOT", "path": ".."}),
        ("write_file", {"path": "../ws-evil/new.txt", "content": "x"}),
        ("file_info", {"path": "../link/../ws-evil/loot.txt"}),
    ]:
        result = await tools.execute(name, args)
        assert not result.ok and LOOT not in str(result.error), (name, args)
    assert sorted(p.name for p in (linked / "ws-evil").iterdir()) == ["loot.txt"]


def test_guard_rules_see_every_spelling_through_a_symlinked_root(tree: Path) -> None:
    link, ws = tree / "link", tree / "ws"
    for value in ("secrets/key", str(link / "secrets" / "key"), str(ws / "secrets" / "key"),
                  "../ws/secrets/key", "../link/secrets/key", "docs/../secrets/key"):
        assert "secrets/key" in path_forms(value, link), value
    assert path_forms("../ws-evil/loot.txt", link)[1:] == [
        str(tree / "ws-evil" / "loot.txt")
    ]
    checker = ToolPolicyChecker({"read_file(path:secrets/*)": "deny"}, workspace=link)
    read = ToolSet.resolve(["read_file"], strict=True).get("read_file")
    verdict, _reason, _rule = checker.resolve(
        ToolCall(name="read_file", arguments={"path": str(ws / "secrets" / "key")}), read
    )
    assert verdict == "deny"


def test_constraints_workdir_through_a_symlink_is_the_same_workspace(tree: Path) -> None:
    c = Constraints.model_validate({"execution": {"workdir": str(tree / "link")}})
    assert ToolRunner(c.execution).workspace == tree / "link"
    assert resolve_tool_path("docs/a.txt", c.execution.workdir).root == str(tree / "ws")


# -- the descriptor walk --------------------------------------------------------------------


def test_open_beneath_refuses_a_symlinked_component(tree: Path) -> None:
    ws = str(tree / "ws")
    os.symlink(tree / "ws-evil", tree / "ws" / "evil")
    with pytest.raises(PathEscapeError, match="symbolic link"):
        _paths.open_dir_beneath(os.path.join(ws, "evil"), ws)
    with pytest.raises(PathEscapeError):
        _paths.open_beneath(os.path.join(ws, "evil", "loot.txt"), ws, os.O_RDONLY)
    with pytest.raises(OSError) as caught:  # the last component: O_NOFOLLOW
        _paths.open_beneath(os.path.join(ws, "evil"), ws, os.O_RDONLY)
    assert caught.value.errno == errno.ELOOP
    for outside in (str(tree / "ws-evil"), str(tree / "ws-evil" / "loot.txt"), ws):
        with pytest.raises(PathEscapeError):
            _paths.open_beneath(outside, ws, os.O_RDONLY)
    with pytest.raises(PathEscapeError):
        _paths.open_dir_beneath(str(tree / "ws-evil"), ws)


def test_open_dir_beneath_creates_only_when_asked(tree: Path) -> None:
    ws = str(tree / "ws")
    target = os.path.join(ws, "n1", "n2")
    with pytest.raises(FileNotFoundError):
        _paths.open_dir_beneath(target, ws)
    fd = _paths.open_dir_beneath(target, ws, create=True)
    os.close(fd)
    assert os.path.isdir(target)
    fd = _paths.open_dir_beneath(target, ws, create=True)  # existing: fine
    os.close(fd)
    with pytest.raises(NotADirectoryError):
        _paths.open_dir_beneath(os.path.join(ws, "docs", "a.txt", "x"), ws, create=True)
    with _paths.closing_fd(_paths.open_dir_beneath(ws, ws)) as root_fd:
        assert "docs" in os.listdir(root_fd)
    assert _paths.display_path(ws, ws) == "."
    assert _paths.display_path(os.path.join(ws, "docs", "a.txt"), ws) == "docs/a.txt"
    assert _paths.display_path(os.path.join(ws, "-a"), ws) == "-a"
    assert _paths.display_path(os.path.join(ws, "#b"), ws) == "#b"
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o777 & ~umask  # as mkdir -p makes it
    with _paths.closing_fd(_paths.open_dir_beneath(ws, ws)) as root_fd:
        assert _paths._is_link("missing", root_fd) is False
        assert _paths._is_link("docs", root_fd) is False


def test_names_sorting_before_a_dot_are_components(tree: Path) -> None:
    ws = tree / "ws"
    (ws / "-d").mkdir()
    (ws / "-d" / "f.txt").write_text("in -d\n")
    (ws / "f.txt").write_text("in the root\n")
    fd = _paths.open_beneath(str(ws / "-d" / "f.txt"), str(ws), os.O_RDONLY)
    with os.fdopen(fd) as fh:
        assert fh.read() == "in -d\n"


def test_dir_fd_at_creates_nothing_unless_asked(tree: Path) -> None:
    with _paths.closing_fd(_paths.open_dir_beneath(str(tree / "ws"), str(tree / "ws"))) as fd:
        with pytest.raises(FileNotFoundError):
            _paths.dir_fd_at(fd, "not-there")
    assert not (tree / "ws" / "not-there").exists()


def test_resolve_path_honours_an_explicit_root(tree: Path) -> None:
    with use_workspace(tree / "ws"):
        evil = str(tree / "ws-evil")
        assert _paths.resolve_path("loot.txt", root=evil) == os.path.join(evil, "loot.txt")
        assert _paths.resolve_path("docs") == str(tree / "ws" / "docs")
