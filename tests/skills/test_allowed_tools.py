"""allowed-tools: Agent Skills names map to Jianmu tools and tool_policy rule keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu.config import AppConfig
from jianmu.constraints import Constraints, GuardConstraints
from jianmu.guard._rules import parse_rule
from jianmu.mcp.provider import mcp_tool_names
from jianmu.skills import known_tool_checker, load_skill, map_allowed_tool
from jianmu.skills._allowed_tools import map_allowed_tools, split_allowed_tools


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
