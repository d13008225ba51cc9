"""allowed-tools: Agent Skills names map to Jianmu tools and tool_policy rule keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu.constraints import Constraints, GuardConstraints
from jianmu.errors import SkillLoadError
from jianmu.skills import load_skill, map_allowed_tool
from jianmu.skills._allowed_tools import split_allowed_tools


@pytest.mark.parametrize(
    ("entry", "tool", "rule"),
    [
        ("Bash", "bash", "bash"),
        ("Bash(git:*)", "bash", "bash(git:*)"),
        ("Bash(git status*)", "bash", "bash(git status*)"),
        ("Read", "read_file", "read_file"),
        ("Write", "write_file", "write_file"),
        ("Edit", "str_replace", "str_replace"),
        ("Glob", "glob_search", "glob_search"),
        ("Grep", "grep_search", "grep_search"),
        ("WebFetch", "http_request", "http_request"),
        ("WebSearch", "duckduckgo_search", "duckduckgo_search"),
        ("LS", "list_dir", "list_dir"),
        ("Write(path:docs/*)", "write_file", "write_file(path:docs/*)"),
    ],
)
def test_mapping(entry: str, tool: str, rule: str) -> None:
    mapped = map_allowed_tool(entry)
    assert (mapped.tool, mapped.rule, mapped.entry) == (tool, rule, entry)


def test_jianmu_names_pass_when_known() -> None:
    assert map_allowed_tool("calculator", lambda n: n == "calculator").tool == "calculator"
    with pytest.raises(ValueError, match="unknown allowed-tools entry 'calculator'"):
        map_allowed_tool("calculator")


def test_bad_pattern_is_explained() -> None:
    with pytest.raises(ValueError, match="parentheses are empty"):
        map_allowed_tool("Bash()")


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
    assert skill.tools == ("calculator", "read_file", "bash")
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


def test_allow_rules_never_loosen_the_config(tmp_path: Path) -> None:
    skill = load_skill(_skill(tmp_path, "allowed-tools: Bash Write\n"))
    config = Constraints(guard=GuardConstraints(tool_policy={"bash": "deny"},
                                                default_policy="confirm"))
    merged = Constraints.merge(config, skill.constraints)
    assert merged.guard.tool_policy["bash"] == "deny"
    assert "write_file" not in merged.guard.tool_policy  # the config's default applies
    assert merged.guard.default_policy == "confirm"


def test_unknown_entry_is_a_load_error_with_line(tmp_path: Path) -> None:
    with pytest.raises(SkillLoadError) as info:
        load_skill(_skill(tmp_path, "allowed-tools: Read\n  Fly\n"))
    assert info.value.field == "allowed-tools" and info.value.line == 4
    assert "'Fly'" in str(info.value)
