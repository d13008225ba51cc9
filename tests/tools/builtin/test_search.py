"""Tests for jianmu/tools/builtin/search.py: the tools, .gitignore and timed regexes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jianmu.errors import ToolExecutionError, ToolInputError
from jianmu.tools.builtin import GlobSearchTool, GrepSearchTool
from jianmu.tools.builtin import search as search_module
from jianmu.tools.builtin.search import GitIgnore, find_files, find_lines, glob_to_regex

pytestmark = pytest.mark.anyio


@pytest.fixture
def project(ws: Path) -> Path:
    files = {
        "README.md": "# Demo\nTODO: write docs\n",
        "src/app.py": "def main():\n    return 'Hello'\n# todo later\n",
        "src/util.py": "def helper(x):\n    return x\n",
        "src/gen/out.py": "generated = True\n",
        "tests/test_app.py": "from src.app import main\n\ndef test_main():\n    main()\n",
        "build/lib.py": "def main():\n    pass\n",
        "logs/a.log": "main crashed\n",
        "logs/keep.log": "main kept\n",
        "notes/.gitignore": "*.tmp\n",
        "notes/x.tmp": "def main tmp\n",
        "notes/x.txt": "def main txt\n",
        ".gitignore": "build/\n*.log\n!keep.log\nsrc/gen\n",
    }
    for rel, text in files.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("def main in git\n")
    (ws / "src" / "blob.bin").write_bytes(b"def main\x00\x01")
    return ws


async def test_glob_respects_gitignore(project: Path) -> None:
    out = await GlobSearchTool().execute({"pattern": "**/*.py"})
    assert out.splitlines() == ["src/app.py", "src/util.py", "tests/test_app.py"]
    # Without a slash the pattern matches names at any depth.
    assert (await GlobSearchTool().execute({"pattern": "*.py"})) == out
    logs = await GlobSearchTool().execute({"pattern": "*.log"})
    assert logs == "logs/keep.log"  # negation re-includes it
    notes = await GlobSearchTool().execute({"pattern": "*", "root": "notes"})
    assert notes.splitlines() == ["notes/.gitignore", "notes/x.txt"]  # nested .gitignore


async def test_glob_with_a_path_pattern_and_root(project: Path) -> None:
    assert await GlobSearchTool().execute({"pattern": "src/*.py"}) == "src/app.py\nsrc/util.py"
    assert await GlobSearchTool().execute({"pattern": "*.py", "root": "tests"}) == (
        "tests/test_app.py"
    )
    assert await GlobSearchTool().execute({"pattern": "app.?y", "root": "src"}) == "src/app.py"
    none = await GlobSearchTool().execute({"pattern": "*.rs"})
    assert none == "No files match '*.rs' under '.'"


async def test_glob_bad_inputs(project: Path) -> None:
    with pytest.raises(ToolInputError, match="pattern is empty"):
        await GlobSearchTool().execute({"pattern": " "})
    with pytest.raises(ToolInputError, match="must be relative"):
        await GlobSearchTool().execute({"pattern": "src/../../x"})
    with pytest.raises(ToolExecutionError, match="does not exist"):
        await GlobSearchTool().execute({"pattern": "*", "root": "nope"})
    with pytest.raises(ToolExecutionError, match="is a file"):
        await GlobSearchTool().execute({"pattern": "*", "root": "README.md"})


async def test_grep_file_line_text(project: Path) -> None:
    out = await GrepSearchTool().execute({"pattern": r"def main"})
    assert out.splitlines() == [
        "notes/x.txt:1:def main txt",
        "src/app.py:1:def main():",
    ]


async def test_grep_case_glob_and_path(project: Path) -> None:
    out = await GrepSearchTool().execute({"pattern": "todo", "case_sensitive": False})
    assert out.splitlines() == ["README.md:2:TODO: write docs", "src/app.py:3:# todo later"]
    only_py = await GrepSearchTool().execute({"pattern": "main", "glob": "*.py"})
    assert only_py.splitlines() == [
        "src/app.py:1:def main():",
        "tests/test_app.py:1:from src.app import main",
        "tests/test_app.py:3:def test_main():",
        "tests/test_app.py:4:    main()",
    ]
    one_file = await GrepSearchTool().execute({"pattern": "return", "path": "src/util.py"})
    assert one_file == "src/util.py:2:    return x"


async def test_grep_stops_at_max_matches_and_says_so(project: Path) -> None:
    out = await GrepSearchTool().execute({"pattern": "main", "max_matches": 2})
    lines = out.splitlines()
    assert len(lines) == 3
    assert "stopped at max_matches=2" in lines[-1]


async def test_grep_no_matches_and_long_lines(project: Path) -> None:
    out = await GrepSearchTool().execute({"pattern": "zebra"})
    assert out.startswith("No matches for 'zebra' in '.'")
    (project / "min.js").write_text("a" * 1000 + "NEEDLE\n")
    long = await GrepSearchTool().execute({"pattern": "a+NEEDLE"})
    assert long.startswith("min.js:1:" + "a" * 300 + "…[+706 chars]")


async def test_grep_invalid_regex(project: Path) -> None:
    with pytest.raises(ToolInputError, match=r"invalid regular expression 'def \(': "):
        await GrepSearchTool().execute({"pattern": "def ("})
    with pytest.raises(ToolInputError, match="pattern is empty"):
        await GrepSearchTool().execute({"pattern": ""})
    with pytest.raises(ToolExecutionError, match="does not exist"):
        await GrepSearchTool().execute({"pattern": "x", "path": "missing"})


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("*.py", "a/b/c.py", True),
        ("*.py", "c.py", True),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/x/a.py", False),
        ("src/**/*.py", "src/x/y/a.py", True),
        ("src/**/*.py", "src/a.py", True),
        ("**/test_*.py", "tests/test_a.py", True),
        ("[ab].txt", "b.txt", True),
        ("[!ab].txt", "b.txt", False),
        ("a?.md", "ab.md", True),
    ],
)
def test_glob_to_regex(pattern: str, path: str, matches: bool) -> None:
    assert bool(glob_to_regex(pattern).match(path)) is matches


def test_gitignore_rules(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text(
        "# comment\n\n/root_only.txt\n*.o\n!keep.o\ndocs/\nsub/deep/*.tmp\n\\#hash\n"
    )
    ig = GitIgnore()
    ig.load(str(tmp_path), "")
    assert ig.ignored("root_only.txt", False)
    assert not ig.ignored("x/root_only.txt", False)
    assert ig.ignored("a/b/c.o", False)
    assert not ig.ignored("a/keep.o", False)
    assert ig.ignored("docs", True)
    assert not ig.ignored("docs", False)  # dir-only rule
    assert ig.ignored("sub/deep/x.tmp", False)
    assert not ig.ignored("other/deep/x.tmp", False)
    assert ig.ignored("#hash", False)


async def test_metadata_matches_the_issue() -> None:
    for cls in (GlobSearchTool, GrepSearchTool):
        tool = cls()
        assert tool.category == "read" and tool.parallel_safe
        assert tool.effect_tags == ("file_read",)
        tool.check_definition(require_parameter_descriptions=True)


async def test_grep_catastrophic_pattern_is_stopped_and_named(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (a|aa)+$ over 60 a's and a '!' backtracks ~fib(60) times: no machine ends it, so any
    # per-match budget runs out. The budget is given to each match directly (never "spent"
    # before the match starts, however busy the machine), and the tool's own timeout is far
    # above it, so the search always stops first and names the line.
    monkeypatch.setattr(search_module, "_remaining", lambda: 0.2)
    (project / "crafted.txt").write_text("ok\n" + "a" * 60 + "!\n")
    tool = GrepSearchTool()
    assert tool.timeout_seconds == 60.0
    with pytest.raises(ToolExecutionError, match=r"took too long on crafted\.txt:2; simplify"):
        await tool.execute({"pattern": "(a|aa)+$", "path": "crafted.txt"})


def test_grep_search_budget_bounds_a_whole_folder(project: Path) -> None:
    # the whole search shares one budget: generous against walking this small folder on a
    # busy machine, yet spent in full by the pattern, which never ends
    (project / "crafted.txt").write_text("a" * 60 + "!\n")
    with pytest.raises(ToolExecutionError, match=r"took too long on crafted\.txt:1"):
        find_lines("(a|aa)+$", ".", timeout=3.0)


def test_grep_out_of_time_between_lines_is_not_blamed_on_the_pattern(project: Path) -> None:
    out = find_lines("main", ".", timeout=1e-9)  # spent before the first line is searched
    assert out == "No matches for 'main' in '.' (0 files searched; the search ran out of " \
        "time, narrow the path or glob)"


def test_grep_keeps_python_re_syntax(project: Path) -> None:
    (project / "syntax.txt").write_text("name = 'x'\nfoo_bar(1)\n")
    assert find_lines(r"(?P<n>\w+)_bar\((?P=n)?\d\)", "syntax.txt") == "syntax.txt:2:foo_bar(1)"
    assert find_lines(r"NAME\s*=", "syntax.txt", case_sensitive=False) == (
        "syntax.txt:1:name = 'x'"
    )
    assert find_lines(r"(?i)^FOO|^zzz", "syntax.txt") == "syntax.txt:2:foo_bar(1)"


@pytest.mark.parametrize("pattern", ["a{3000000}", "(?:a{1000}){1000}", "(?:[ab]{300}){300}"])
def test_grep_refuses_patterns_that_expand_too_much(project: Path, pattern: str) -> None:
    with pytest.raises(ToolInputError, match=r"too large once its counted repeats"):
        find_lines(pattern)


def test_grep_allows_modest_counted_repeats(project: Path) -> None:
    (project / "hex.txt").write_text("id=" + "f" * 40 + "\n")
    assert find_lines(r"[0-9a-f]{40}", "hex.txt").startswith("hex.txt:1:id=")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
async def test_search_skips_fifos_instead_of_blocking(project: Path) -> None:
    os.mkfifo(project / "pipe.txt")  # opening it for reading would wait for a writer
    (project / "plain.txt").write_text("findme\n")
    out = await GrepSearchTool().execute({"pattern": "findme"})
    assert out == "plain.txt:1:findme"
    assert await GlobSearchTool().execute({"pattern": "*.txt", "root": "."}) == (
        "plain.txt\nnotes/x.txt"
    )
    with pytest.raises(ToolExecutionError, match="not a regular file or a folder"):
        await GrepSearchTool().execute({"pattern": "x", "path": "pipe.txt"})


def test_glob_with_many_stars_does_not_hang(project: Path) -> None:
    # With `re`, [^/]*a[^/]*a... over a long crafted name backtracks for hours.
    name = "b" + "a" * 60 + "c"
    (project / name).write_text("x\n")
    assert find_files("*a*a*a*a*a*a*a*a*a*a*ab", timeout=5.0).startswith("No files match")
    assert find_files("b*c", timeout=5.0) == name


def test_glob_search_reports_running_out_of_time(project: Path) -> None:
    with pytest.raises(ToolExecutionError, match="glob search ran out of time"):
        find_files("**/*.py", timeout=1e-9)  # spent before the first match begins
