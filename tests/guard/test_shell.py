"""Reading shell commands with a grammar: forms, wrappers, opacity (jianmu/guard/_shell.py)."""

from __future__ import annotations

import shlex

import pytest

from jianmu.guard import ToolPolicyChecker, parse_rule
from jianmu.guard._rules import shell_parts
from jianmu.guard._shell import MAX_DEPTH, scan
from jianmu.tools.calls import ToolCall
from tests.guard.guard_fakes import FakeTool, bash


def call(command: str) -> ToolCall:
    return ToolCall(name="bash", arguments={"command": command})


@pytest.mark.parametrize(
    ("command", "last"),
    [
        ("timeout 5 rm x", ("rm", "x")),
        ("timeout -s KILL --kill-after=1 5 rm x", ("rm", "x")),
        ("ionice -c3 -n 7 rm x", ("rm", "x")),
        ("taskset -c 0 rm x", ("rm", "x")),
        ("flock -w 3 F rm x", ("rm", "x")),
        ("nice -n5 rm x", ("rm", "x")),
        ("nice -10 rm x", ("rm", "x")),
        ("stdbuf -o0 -e L rm x", ("rm", "x")),
        ("env -u HOME -C /tmp A=1 rm x", ("rm", "x")),
        ("env --split-string='rm x' y", ("rm", "x", "y")),
        ("sudo -u root -- /usr/bin/rm x", ("rm", "x")),
        ("exec -a name rm x", ("rm", "x")),
        ("chroot / rm x", ("rm", "x")),
        ("busybox rm x", ("rm", "x")),
        ("r''m \"x\"", ("rm", "x")),
        ("rm \\\nx", ("rm", "x")),
        ("rm 'a b'", ("rm", "a b")),
        ('rm "a\\"b"', ("rm", 'a"b')),
    ],
)
def test_wrappers_are_seen_through(command: str, last: tuple[str, ...]) -> None:
    found = scan(command)
    assert found.opaque == ()
    assert found.commands[-1].forms[-1] == last


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("$R x", "only known at run time"),
        ("{rm,-rf,x}", "does not parse"),
        ("./x.sh", "runs the file"),
        ("/tmp/rm x", "runs the file"),
        ("sh x.sh", "reads a script"),
        ("sh", "reads a script"),
        ("sh -c", "reads a script"),
        ('bash -c "$S"', "script of bash -c"),
        ("python3 x.py", "runs code"),
        ("python3", "runs code"),
        ("eval x", "runs code"),
        ("echo x | xargs rm", "xargs"),
        ("find . -delete", "find"),
        ("find . -name $N", "find"),
        ("awk -f prog.awk", "run code"),
        ("awk '{print $1 | \"sh\"}'", "run code"),
        ("sed -f s.sed", "run code"),
        ("sed 'e'", "run code"),
        ("git -c core.pager=x log", "run code"),
        ("git --config-env=a=b log", "run code"),
        ("nice --frobnicate rm x", "does not know: --frobnicate"),
        ("nice -z rm x", "does not know: -z"),
        ("nice -n $N rm x", "only known at run time"),
        ("timeout --signal $S 5 rm", "only known at run time"),
        ("timeout $T rm x", "only known at run time"),
        ("env $OPT rm x", "only known at run time"),
        ("env -S 'rm $X'", "env -S"),
        ("env -S 'rm \"x'", "env -S does not parse"),
        ('flock F -c "$S"', "flock -c"),
        ("PATH=. ls", "sets PATH"),
        ("export LD_PRELOAD=./x.so", "sets LD_PRELOAD"),
        ("env BASH_ENV=x bash -c true", "sets BASH_ENV"),
        ("env 'BASH_FUNC_ls%%=() { rm x; }' bash -c ls", "BASH_FUNC"),
        ("A[1]+=x PATH+=:. ls", "sets PATH"),
    ],
)
def test_opaque_commands_say_why(command: str, why: str) -> None:
    assert any(why in reason for reason in scan(command).opaque), scan(command).opaque


@pytest.mark.parametrize(
    "wrap",
    [
        "sh -c {}",
        "eval {}",
        "flock -c {} /tmp/lock",
        "flock /tmp/lock -c {}",
    ],
)
def test_nesting_is_bounded(wrap: str) -> None:
    script = "rm x"
    for _ in range(MAX_DEPTH):
        script = wrap.format(shlex.quote(script))
    found = scan(script)
    assert not any("nested" in why for why in found.opaque)
    assert found.commands[0].forms == (("rm", "x"),)
    assert any("nested" in why for why in scan(wrap.format(shlex.quote(script))).opaque)


@pytest.mark.parametrize(
    "command",
    [
        "ls -la", "git status", "sh --version", "python3 --version", "awk '{print $1}' f",
        "sed -n 1p f", "find . -name '*.py'", "ionice -p 1", "taskset -p 1", "env",
        "timeout 5", "nice", "exec 3>&1", "echo $HOME", "ls *.py", "git log --grep=e",
        "command -v rm", "flock 9",
    ],
)  # fmt: skip
def test_plain_commands_are_not_opaque(command: str) -> None:
    assert scan(command).opaque == ()


def test_write_redirections_are_parts_but_harmless_ones_are_not() -> None:
    assert shell_parts(scan("ls > out.txt")) == ["ls", "> out.txt"]
    assert shell_parts(scan("ls 2>/dev/null >&2 2>&1")) == ["ls"]
    assert shell_parts(scan("")) == [""]


def test_dynamic_words_are_shown_as_written_and_flagged() -> None:
    (command,) = scan("git $X 'a' ~/f *.py").commands
    assert command.forms == (("git", "$X", "a", "~/f", "*.py"),)
    assert command.dynamic == (frozenset({1, 3, 4}),)


@pytest.mark.parametrize(
    ("pattern", "command", "restricts"),
    [
        ("git push*", "git $X", True),
        ("git push*", "git -C $D push", True),
        ("git push*", "echo $X", False),
        ("git push*", "git status $X", False),
        ("rm *", "$X a", False),  # a run-time command word is confirmed, not denied
        ("rm *", "rm $X", True),
        ("git:*", "git $X", True),
        ("rm*", "", False),
        ("*", "", True),
    ],
)
def test_restricting_rules_with_run_time_words(pattern: str, command: str, restricts: bool) -> None:
    assert parse_rule(f"bash({pattern})").matches_any_part(call(command), bash()) is restricts


def test_allow_rule_never_grants_an_opaque_command() -> None:
    assert parse_rule("bash(ls*)").matches(call("ls x"), bash())
    assert not parse_rule("bash(ls*)").matches(call("ls; $X"), bash())
    assert not parse_rule("bash(python3*)").matches(call("python3 x.py"), bash())


def test_opacity_only_for_argument_rules_on_shell_values() -> None:
    tool = bash()
    assert parse_rule("bash(rm *)").opacity(call("$X"), tool) is not None
    assert parse_rule("bash").opacity(call("$X"), tool) is None
    assert parse_rule("other(rm *)").opacity(call("$X"), tool) is None
    assert parse_rule("bash(rm *)").opacity(call("ls"), tool) is None
    assert (
        parse_rule("bash(cwd:x*)").opacity(ToolCall(name="bash", arguments={"command": "$X"}), tool)
        is None
    )
    # a read tool's argument is not a shell command
    read = FakeTool(name="read", input_schema={"type": "object", "properties": {"q": {}}})
    rule = parse_rule("read(q:x*)")
    assert rule.opacity(ToolCall(name="read", arguments={"q": "$X"}), read) is None
    # no main argument: every string argument is a candidate, the JSON of them all is not
    run, rule = FakeTool(name="run", category="execute"), parse_rule("run(rm *)")
    assert rule.opacity(ToolCall(name="run", arguments={"a": "ls", "b": "$X"}), run)
    assert rule.opacity(ToolCall(name="run", arguments={"a": "ls", "b": "x"}), run) is None
    assert rule.opacity(ToolCall(name="run", arguments="$X"), run)


@pytest.mark.parametrize(
    ("policy", "command", "expected"),
    [
        ({"bash": "allow", "bash(rm *)": "deny"}, "$X y", "confirm"),
        ({"bash": "allow", "bash(rm *)": "deny"}, "ls", "allow"),
        ({"bash": "allow", "bash(rm *)": "deny"}, "rm -f y", "deny"),
        ({"bash": "allow"}, "$X y", "allow"),
        ({"bash(ls*)": "allow"}, "ls $(x)", "confirm"),
        ({"bash(ls*)": "allow", "bash": "deny"}, "$X", "deny"),
    ],
)
def test_checker_never_auto_allows_an_opaque_command(
    policy: dict[str, str], command: str, expected: str
) -> None:
    checker = ToolPolicyChecker(policy)  # type: ignore[arg-type]
    got, reason, rule = checker.resolve(call(command), bash(), root="/")
    assert got == expected, reason
    if expected == "confirm" and "$X" in command:
        assert "cannot see through" in reason and rule is not None and rule.text == "bash(rm *)"


def test_opaque_confirm_keeps_a_stricter_default() -> None:
    checker = ToolPolicyChecker({"bash(ls*)": "allow"}, "deny")
    assert checker.resolve(call("$X"), bash(), root="/")[0] == "deny"


# --- edges pinned by mutation testing (mutation/guard_shell.toml) -----------------------------


def test_a_herestring_is_input_not_a_written_file() -> None:
    assert [c.forms for c in scan("cat <<< hi").commands] == [(("cat",),)]


def test_an_escaped_glob_is_a_literal_word() -> None:
    (command,) = scan(r"rm \*").commands
    assert command.forms == (("rm", "*"),) and command.dynamic == (frozenset(),)


def test_find_forms() -> None:
    # an empty -exec runs nothing, and -delete is an action with no command after it
    assert scan(r"find . -exec \;").commands[0].forms == (("find", ".", "-exec", ";"),)
    assert scan("find . -delete -print").commands[0].forms == (("find", ".", "-delete", "-print"),)


def test_wrapper_edges() -> None:
    assert "an option of 'sudo' is only known at run time" in scan("sudo $OPTS rm x").opaque
    assert scan("env --unset").opaque == ()  # a valued option with no value: nothing runs
    why = "the script of flock -c is only known at run time"
    assert scan("flock /tmp/lock -c").opaque == (why,)
    assert scan("env - rm x").commands[0].forms[-1] == ("rm", "x")
    assert scan("env -- rm x").commands[0].forms[-1] == ("rm", "x")


def test_env_split_string_is_bounded_too() -> None:
    script = "env -S 'rm x'"
    for _ in range(MAX_DEPTH):
        script = f"sh -c {shlex.quote(script)}"
    assert "the string of env -S is only known at run time" in scan(script).opaque


def test_find_exec_commands_are_forms_of_find() -> None:
    for path in (".", "+"):  # `+` is a folder name here, not the end of an -exec
        (command,) = scan(rf"find {path} -exec rm {{}} \;").commands
        assert command.forms[-1] == ("rm", "{}")


def test_only_commands_are_commands() -> None:
    assert [c.forms for c in scan("case x in y) ls;; esac").commands] == [(("ls",),)]
    assert [c.forms for c in scan("(( x = 1 )); [ -f a ] && ls").commands][-1] == (("ls",),)


def test_more_assignments() -> None:
    assert "it sets PATH, which changes what later commands run" in scan("PATH[0]=. ls").opaque
    assert scan("env A=1 B=2 rm x").commands[0].forms[-1] == ("rm", "x")


@pytest.mark.parametrize("wrapper", ["env", "nohup"])
def test_a_wrapper_runs_its_first_plain_word(wrapper: str) -> None:
    assert scan(f"{wrapper} +x y").commands[0].forms[-1] == ("+x", "y")


def test_more_wrapper_and_shell_options() -> None:
    assert scan(r"find -exec rm x \;").commands[0].forms[-1] == ("rm", "x")
    assert scan("env --unset X").commands[0].forms == (("env", "--unset", "X"),)
    assert scan("nohup -- -x").commands[0].forms[-1] == ("-x",)
    found = scan("bash --rcfile x -c 'rm y'")
    assert found.opaque == () and found.commands[0].forms == (("rm", "y"),)
    assert scan("yes | head -1").opaque == ()  # not xargs


def test_a_redirection_to_a_run_time_name_is_a_part() -> None:
    assert len(scan('echo hi > "$D"/f').commands) == 2


def test_shell_and_wrapper_option_edges() -> None:
    assert scan("sh -x s.sh").opaque  # an option without c: the shell reads a file
    found = scan("sh -e -c 'rm x'")
    assert found.opaque == () and found.commands[0].forms == (("rm", "x"),)
    assert scan("nohup - x").commands[0].forms[-1] == ("-", "x")
    assert scan("nice -n").commands[0].forms == (("nice", "-n"),)
