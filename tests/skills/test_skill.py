"""`Skill`: names as the reference validator judges them, every file of the folder, confined
reads, the tools a skill runs with, and allowed-tools mapped to Jianmu tools and rule keys."""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

import pytest

from jianmu.config import AppConfig
from jianmu.constraints import Constraints, GuardConstraints
from jianmu.errors import SkillLoadError
from jianmu.guard._rules import parse_rule
from jianmu.mcp.provider import mcp_tool_names
from jianmu.skills import known_tool_checker, load_skill, map_allowed_tool
from jianmu.skills.skill import (
    DEFAULT_PROMPT_TOOLS,
    map_allowed_tools,
    skill_name_problem,
    split_allowed_tools,
)
from jianmu.tools import tool


def _write(folder: Path, front: str, body: str = "Do it.\n") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(f"---\n{front}---\n{body}", encoding="utf-8")
    return folder


def _named(root: Path, name: str, extra: str = "") -> Path:
    return _write(root / name, f"name: {name}\ndescription: d\n{extra}")


@pytest.mark.parametrize(
    "name", ["pdf", "pdf-processing", "a1", "2fa", "café", "数据-分析", "ñandú-2", "x" * 64],
)
def test_names_the_reference_validator_accepts_load(tmp_path: Path, name: str) -> None:
    assert skill_name_problem(name) is None
    assert load_skill(_named(tmp_path, name)).name == name


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("PDF", "lowercase"),
        ("Café", "lowercase"),
        ("-pdf", "start or end with a hyphen"),
        ("pdf-", "start or end with a hyphen"),
        ("pdf--x", "'--'"),
        ("pdf_x", "found '_'"),
        ("pdf.x", "found '.'"),
        ("x" * 65, "the limit is 64"),
        (" ", "empty"),
    ],
)
def test_names_the_reference_validator_refuses(tmp_path: Path, name: str, problem: str) -> None:
    assert problem in (skill_name_problem(name) or "")
    folder = _write(tmp_path / "skill", f"name: '{name}'\ndescription: d\n")
    with pytest.raises(SkillLoadError, match="lowercase letters \\(any script\\)") as info:
        load_skill(folder)
    assert info.value.field == "name" and info.value.line == 2 and problem in str(info.value)


def test_name_and_folder_compare_after_unicode_normalisation(tmp_path: Path) -> None:
    # macOS file systems hand back decomposed names; YAML usually holds the composed form
    folder = _write(tmp_path / unicodedata.normalize("NFD", "café"), "name: café\ndescription: d\n")
    assert load_skill(folder).name == "café"
    other = _write(tmp_path / "cafe", "name: café\ndescription: d\n")
    with pytest.raises(SkillLoadError, match="differs from the folder's name 'cafe'"):
        load_skill(other)


@pytest.fixture
def public_skill(tmp_path: Path) -> Path:
    """A skill laid out like the public ones, with things a listing must leave out."""
    folder = _named(tmp_path / "skills", "pdf")
    files = {
        "forms.md": "# forms\n",
        "reference/api.md": "api",
        "examples/3p-updates.md": "example",
        "themes/dark/theme.json": "{}",
        "scripts/with_server.py": "print('hi')\n",
        "LICENSE.txt": "MIT",
        ".git/config": "[core]",
        "__pycache__/x.cpython-311.pyc": "bytecode",
        "scripts/__pycache__/y.pyc": "bytecode",
        "node_modules/left-pad/index.js": "module.exports = 1",
    }
    for relative, text in files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (tmp_path / "secret.txt").write_text("outside", encoding="utf-8")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "key").write_text("outside", encoding="utf-8")
    os.symlink(tmp_path / "secret.txt", folder / "secret-link.txt")
    os.symlink(tmp_path / "outside", folder / "outside-dir")
    os.symlink(folder / "forms.md", folder / "forms-link.md")
    os.symlink(folder / "reference", folder / "ref-again")
    os.symlink(tmp_path / "missing", folder / "dangling")
    return folder


def test_resources_list_every_file_whatever_the_folder(public_skill: Path) -> None:
    skill = load_skill(public_skill)
    assert skill.resources() == [
        "LICENSE.txt",
        "examples/3p-updates.md",
        "forms-link.md",  # a link that stays inside is a file of the folder
        "forms.md",
        "reference/api.md",
        "scripts/with_server.py",
        "themes/dark/theme.json",
    ]


def test_files_come_with_their_sizes(public_skill: Path) -> None:
    files = dict(load_skill(public_skill).files())
    assert files["forms.md"] == len("# forms\n") and files["LICENSE.txt"] == 3
    assert files["scripts/with_server.py"] == len("print('hi')\n")
    assert "SKILL.md" not in files


def test_reads_are_confined_to_the_folder(public_skill: Path) -> None:
    skill = load_skill(public_skill)
    assert skill.read_resource("examples/3p-updates.md") == "example"
    assert skill.read_resource("forms-link.md") == "# forms\n"
    assert skill.read_resource("ref-again/api.md") == "api"
    outside = str(public_skill.parent.parent / "secret.txt")
    for escape in ("../../secret.txt", outside, "secret-link.txt", "outside-dir/key",
                   "reference/../../../secret.txt", "dangling"):
        with pytest.raises(ValueError, match="outside the skill's folder"):
            skill.resource_path(escape)
    os.symlink(public_skill / "gone.md", public_skill / "dangling-inside")
    with pytest.raises(FileNotFoundError, match="has no file 'dangling-inside'"):
        skill.resource_path("dangling-inside")
    with pytest.raises(FileNotFoundError, match="has no file 'reference'"):
        skill.resource_path("reference")  # a folder is not a file


def test_a_missing_file_message_names_a_few_files(tmp_path: Path) -> None:
    folder = _named(tmp_path, "many")
    for index in range(30):
        (folder / f"f{index:02d}.md").write_text("x", encoding="utf-8")
    with pytest.raises(FileNotFoundError, match=r"f19\.md and 10 more$"):
        load_skill(folder).resource_path("nope.md")


def test_a_prompt_skill_naming_no_tool_gets_the_read_only_defaults(tmp_path: Path) -> None:
    skill = load_skill(_named(tmp_path, "plain"))
    assert skill.tools == () and skill.tool_names == DEFAULT_PROMPT_TOOLS
    assert set(DEFAULT_PROMPT_TOOLS) == {
        "read_file", "list_dir", "glob_search", "grep_search", "file_info", "read_skill_file"
    }
    # the toolset holds the built-ins; read_skill_file is added by the SkillNode
    assert skill.toolset().names() == ["read_file", "list_dir", "glob_search", "grep_search",
                                       "file_info"]


def test_only_ignored_allowed_tools_still_get_the_defaults(tmp_path: Path) -> None:
    skill = load_skill(_named(tmp_path, "claude-only", "allowed-tools: Task TodoWrite\n"))
    assert skill.tools == () and skill.tool_names == DEFAULT_PROMPT_TOOLS
    assert len(skill.warnings) == 2


def test_a_skill_that_names_tools_gets_exactly_those(tmp_path: Path) -> None:
    listed = load_skill(_named(tmp_path, "calc", "tools: [calculator]\n"))
    assert listed.tool_names == ("calculator",)
    assert listed.toolset().names() == ["calculator"]
    reads = load_skill(_named(tmp_path, "reads", "allowed-tools: Read Grep\n"))
    assert reads.tool_names == ("read_file", "read_skill_file", "grep_search")
    assert reads.toolset().names() == ["read_file", "grep_search"]


def test_a_bt_skill_gets_no_default(tmp_path: Path) -> None:
    folder = _named(tmp_path, "tree-skill", "execution: bt\n")
    (folder / "tree.py").write_text("def build_tree(ctx): ...\n", encoding="utf-8")
    assert load_skill(folder).tool_names == ()


def test_toolset_takes_a_custom_read_skill_file(tmp_path: Path) -> None:
    @tool
    def read_skill_file(skill: str, path: str) -> str:
        """Read a file of a skill.

        Args:
            skill: The skill.
            path: The file.
        """
        return f"{skill}/{path}"

    skill = load_skill(_named(tmp_path, "plain"))
    assert "read_skill_file" in skill.toolset([read_skill_file]).names()


def test_the_skill_tools_may_be_named_in_tools(tmp_path: Path) -> None:
    skill = load_skill(_named(tmp_path, "own", "tools: [read_skill_file, run_skill_script]\n"))
    assert skill.tool_names == ("read_skill_file", "run_skill_script")
    assert skill.toolset().names() == []  # the SkillNode adds them, not the provider


@pytest.mark.parametrize(
    ("entry", "tools", "rule"),
    [
        ("Bash", ("bash",), "bash"),
        ("Bash(*)", ("bash",), "bash"),
        ("Bash(git:*)", ("bash",), "bash(git *)"),
        ("Bash(npm run test:*)", ("bash",), "bash(npm run test *)"),
        ("Bash(git status)", ("bash",), "bash(git status)"),
        ("Bash(git status*)", ("bash",), "bash(git status*)"),
        ("Read", ("read_file", "read_skill_file"), "read_file"),
        ("read", ("read_file", "read_skill_file"), "read_file"),
        ("Write", ("write_file",), "write_file"),
        ("Edit", ("str_replace",), "str_replace"),
        ("MultiEdit", ("str_replace",), "str_replace"),
        ("Glob", ("glob_search",), "glob_search"),
        ("Grep", ("grep_search",), "grep_search"),
        ("LS", ("list_dir",), "list_dir"),
        ("WebFetch", ("http_request",), "http_request"),
        ("WebSearch", ("duckduckgo_search",), "duckduckgo_search"),
        ("Write(path:docs/*)", ("write_file",), "write_file(path:docs/*)"),
        ("mcp__github__create_issue", ("github__create_issue",), "github__create_issue"),
        ("mcp__github", ("github",), "github"),
    ],
)
def test_mapping(entry: str, tools: tuple[str, ...], rule: str) -> None:
    mapped = map_allowed_tool(entry, lambda name: name.startswith("github"))
    assert (mapped.tool, mapped.tools, mapped.rule, mapped.entry) == (tools[0], tools, rule, entry)
    assert mapped.warning is None


def test_claude_prefix_becomes_a_rule_the_guard_reads_as_prefix_then_anything() -> None:
    rule = parse_rule(map_allowed_tool("Bash(git:*)").rule or "")
    assert rule.tool == "bash" and rule.pattern == "git *"
    assert rule.match_text("git status") and rule.match_text("git log --oneline -3")
    assert not rule.match_text("gitk") and not rule.match_text("rm -rf /")
    exact = parse_rule(map_allowed_tool("Bash(git status)").rule or "")
    assert exact.match_text("git status") and not exact.match_text("git status --short")


def test_mcp_tool_takes_the_name_the_provider_gives_it() -> None:
    mapped = map_allowed_tool("mcp__my.server__do-it", lambda name: True)
    assert mapped.tool == mcp_tool_names("my.server", ["do-it"])[0].lower() == "my_server__do-it"


def test_mcp_tool_of_an_unconfigured_server_is_kept_with_a_warning() -> None:
    mapped = map_allowed_tool("mcp__github__create_issue")
    assert mapped.tools == ("github__create_issue",)
    assert "no MCP server 'github' is configured" in (mapped.warning or "")


@pytest.mark.parametrize(
    "entry", ["Task", "TodoWrite", "NotebookEdit", "NotebookRead", "Fly", "mcp__", "Bash()",
              "Bash(:*)"],
)
def test_names_jianmu_has_no_tool_for_are_ignored_with_a_warning(entry: str) -> None:
    (mapped,), notes = map_allowed_tools([entry])
    assert mapped.tool is None and mapped.tools == () and mapped.rule is None
    assert notes == (mapped.warning,) and f"{entry!r}" in notes[0] and "ignored" in notes[0]


def test_jianmu_names_pass_when_known() -> None:
    assert map_allowed_tool("calculator", lambda n: n == "calculator").tool == "calculator"
    assert map_allowed_tool("calculator").tool is None


def test_bad_pattern_is_explained() -> None:
    with pytest.raises(ValueError, match="parentheses are empty"):
        map_allowed_tool("Bash()")
    (mapped,), _ = map_allowed_tools("Bash()")
    assert "parentheses are empty" in (mapped.warning or "")


def test_unbalanced_text_is_split_at_spaces_with_a_warning() -> None:
    allowed, notes = map_allowed_tools("Read Bash(git")
    assert [a.tool for a in allowed] == ["read_file", None]
    assert "check the parentheses" in notes[0]


def test_split_keeps_spaces_inside_parentheses() -> None:
    assert split_allowed_tools("Read  Bash(git status:*)\tGrep") == [
        "Read", "Bash(git status:*)", "Grep"
    ]
    with pytest.raises(ValueError, match="parentheses"):
        split_allowed_tools("Read Bash(git")


def test_split_takes_commas_as_claude_code_writes_them() -> None:
    # "Read, Grep, Glob" was three ignored entries 'Read,', 'Grep,' and 'Glob,'
    assert split_allowed_tools("Read, Grep,Glob, Bash(git add:*, git commit:*)") == [
        "Read", "Grep", "Glob", "Bash(git add:*, git commit:*)"
    ]
    allowed, notes = map_allowed_tools("Read, Grep, Glob")
    assert [a.tool for a in allowed] == ["read_file", "grep_search", "glob_search"]
    assert notes == ()


def _skill(tmp_path: Path, front: str) -> Path:
    folder = tmp_path / "allowed"
    folder.mkdir()
    (folder / "SKILL.md").write_text(
        f"---\nname: allowed\ndescription: d\n{front}---\n", encoding="utf-8"
    )
    return folder


def test_skill_tools_and_allow_rules(tmp_path: Path) -> None:
    skill = load_skill(_skill(tmp_path, (
        "tools: [calculator]\nallowed-tools: Read Bash(git:*)\n"
        "constraints: {guard: {tool_policy: {read_file: confirm}}}\n"
    )))
    assert skill.tools == ("calculator", "read_file", "read_skill_file", "bash")
    # allowed-tools make tools available; they never pre-approve (only the config may allow
    # a tool that asks first), while the skill's own confirm rule is kept
    assert skill.constraints.guard.tool_policy == {"read_file": "confirm"}


def test_a_skill_cannot_allow_a_tool_that_asks_first(tmp_path: Path) -> None:
    skill = load_skill(_skill(tmp_path, (
        "tools: [bash]\nallowed-tools: Bash\n"
        "constraints: {guard: {default_policy: allow, tool_policy: {bash: allow, "
        "write_file: deny}}}\n"
    )))
    assert skill.constraints.guard.tool_policy == {"write_file": "deny"}
    assert skill.constraints.guard.default_policy is None


def test_list_form(tmp_path: Path) -> None:
    skill = load_skill(_skill(tmp_path, "allowed-tools: [Grep, 'Bash(npm run *)']\n"))
    assert [a.rule for a in skill.allowed_tools] == ["grep_search", "bash(npm run *)"]
    assert skill.warnings == ()


def test_allow_rules_never_loosen_the_config(tmp_path: Path) -> None:
    skill = load_skill(_skill(tmp_path, "allowed-tools: Bash Write\n"))
    config = Constraints(guard=GuardConstraints(tool_policy={"bash": "deny"},
                                                default_policy="confirm"))
    merged = Constraints.merge(config, skill.constraints)
    assert merged.guard.tool_policy["bash"] == "deny"
    assert "write_file" not in merged.guard.tool_policy  # the config's default applies
    assert merged.guard.default_policy == "confirm"


def test_unknown_entries_are_warnings_not_errors(tmp_path: Path) -> None:
    skill = load_skill(_skill(tmp_path, (
        "allowed-tools: Read Grep Bash(git:*) Task TodoWrite mcp__github__create_issue\n"
    )))
    assert skill.tools == (
        "read_file", "read_skill_file", "grep_search", "bash", "github__create_issue"
    )
    assert [w.split(" ", 2)[1] for w in skill.warnings] == [
        "'Task'", "'TodoWrite'", "'mcp__github__create_issue':"
    ]
    assert all(w.startswith("allowed-tools: ") for w in skill.warnings)


def test_mcp_entry_of_a_configured_server_has_no_warning(tmp_path: Path) -> None:
    config = AppConfig.model_validate({"mcp": {"servers": {"github": {"command": "gh-mcp"}}}})
    skill = load_skill(_skill(tmp_path, "allowed-tools: mcp__github__create_issue\n"),
                       is_known_tool=known_tool_checker(config))
    assert skill.tools == ("github__create_issue",) and skill.warnings == ()
