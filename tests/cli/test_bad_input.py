"""Bad input to the ``jianmu`` command, as a new user gives it: one clear error line, a non-zero
exit, nothing half written; and the right input still works afterwards."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from typing import Any

import pytest

from tests.cli._helpers import (
    REPO,
    Project,
    assert_clean_error,
    ctrl_c_as_in_a_terminal,
    make_config,
    pending_of,
)
from tests.support.forked_cli import MCP

APPROVAL_FLOW = str(REPO / "examples" / "approval_flow.py")


def _read_until(stream: Any, marker: str) -> str:
    """What ``stream`` says up to ``marker``, read a character at a time (the prompt ends with
    no newline); fails with what it said if it ends first."""
    seen = ""
    while marker not in seen:
        char = stream.read(1)
        assert char, seen
        seen += char
    return seen



@pytest.mark.parametrize(("rule", "fragment"), [
    ('"bash(": allow', "bash("),
    ('"bad name!": allow', "bad name!"),
    ('"write_file(path:)": deny', "write_file(path:)"),
])
def test_a_malformed_tool_rule_is_a_config_error_before_any_run(
    project: Project, rule: str, fragment: str
) -> None:
    """A rule no call can match is refused when the config loads, naming file, line and rule,
    instead of failing a run that was already started and saved."""
    make_config(project.root, f"guard:\n  tool_policy:\n    {rule}\n")
    done = project.jianmu("run", APPROVAL_FLOW, "--input", "note=x", "--non-interactive")
    assert_clean_error(done, 2, "jianmu-test.yaml:7", "guard.tool_policy", fragment)
    assert project.jianmu("runs", "list").out.count("approval-flow") == 0


def test_a_rate_limit_for_no_tool_name_is_a_config_error(project: Project) -> None:
    make_config(project.root, 'guard:\n  rate_limits:\n    "bad name!": 3\n')
    done = project.jianmu("run", APPROVAL_FLOW, "--input", "note=x", "--non-interactive")
    assert_clean_error(done, 2, "jianmu-test.yaml:7", "guard.rate_limits", "bad name!")


def test_good_tool_rules_still_load(project: Project) -> None:
    make_config(project.root, "guard:\n  tool_policy:\n    append_note: allow\n"
                "    bash(git status*): allow\n    write_file(path:docs/*): deny\n"
                "  rate_limits:\n    append_note: 5\n")
    done = project.jianmu("run", APPROVAL_FLOW, "--input", "note=x", "--non-interactive")
    assert done.code == 0, done.text


def test_the_same_decision_twice_is_refused_before_anything_is_said_or_saved(
    project: Project,
) -> None:
    first = project.jianmu("run", APPROVAL_FLOW, "--input", "note=twice", "--non-interactive")
    run_id, (call,) = pending_of(first.out)
    done = project.jianmu("resume", run_id, "--approve", call, "--approve", call)
    assert_clean_error(done, 2, call, "twice")
    assert "approved" not in done.out, done.text
    done = project.jianmu("resume", run_id, "--approve", call, "--reject", call)
    assert_clean_error(done, 2, call)
    assert "approved" not in done.out, done.text
    # a decision that fails after another was taken prints neither as taken
    done = project.jianmu("resume", run_id, "--approve", call, "--reject", "nope")
    assert_clean_error(done, 2, "nope")
    assert "approved" not in done.out, done.text
    ok = project.jianmu("resume", run_id, "--approve", call)
    assert ok.code == 0, ok.text
    assert (project.root / ".jianmu" / "notes.txt").read_text().count("twice") == 1


def test_ctrl_c_at_the_approval_prompt_stops_the_run_and_resume_goes_on(
    project: Project,
) -> None:
    """One Ctrl-C at the prompt stops the command (not a second one), keeping the checkpoint."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JIANMU_", "OPENAI_"))}
    env.update(COLUMNS="200", NO_COLOR="1", PYTHONPATH=str(REPO))
    process = subprocess.Popen(
        [sys.executable, "-m", "jianmu.cli", "run", APPROVAL_FLOW, "--input", "note=ctrlc",
         "--config", str(project.config)],
        cwd=project.root, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_as_in_a_terminal,
    )
    assert process.stdout is not None and process.stdin is not None
    seen = _read_until(process.stdout, "approve?")
    process.send_signal(signal.SIGINT)  # standard input stays open: nobody answers
    try:
        code = process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        pytest.fail("one Ctrl-C at the approval prompt did not stop the command")
    finally:
        process.stdin.close()
    rest = process.stdout.read()
    process.stdout.close()
    assert process.stderr is not None
    err = process.stderr.read()
    process.stderr.close()
    assert code == 4, seen + rest + err
    assert "Traceback" not in err and "interrupted" in rest, seen + rest + err
    run_id, call = run_id_of(seen), call_of(seen)
    done = project.jianmu("resume", run_id, "--approve", call)
    assert done.code == 0, done.text
    assert "ctrlc" in (project.root / ".jianmu" / "notes.txt").read_text()


def run_id_of(out: str) -> str:
    return out.split("run ", 1)[1].split(":", 1)[0]


def call_of(out: str) -> str:
    return out.split("approval needed ", 1)[1].split(":", 1)[0]


@pytest.mark.parametrize("command", [("studio",), ("mcp", "serve", "--transport", "http")])
def test_a_port_in_use_is_one_error_line_before_any_banner(
    project: Project, command: tuple[str, ...]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = project.jianmu(*command, "--port", str(port))
    # the project has no runs yet: the studio's first start makes the checkpoint folder
    assert_clean_error(done, 1, f"127.0.0.1:{port}", "in use", "give another with --port")
    assert "open:" not in done.out and "serving" not in done.err, done.text
    assert "ERROR" not in done.err, done.text


@pytest.mark.parametrize("command", [("studio",), ("mcp", "serve", "--transport", "http")])
@pytest.mark.parametrize("port", ["99999", "0", "-1"])
def test_a_port_out_of_range_is_a_usage_error(
    project: Project, command: tuple[str, ...], port: str
) -> None:
    done = project.jianmu(*command, "--port", port)
    assert done.code == 2, done.text
    assert "Traceback" not in done.text and "--port" in done.err, done.text
    assert "open:" not in done.out and "serving" not in done.err, done.text


@pytest.mark.parametrize(("args", "option"), [
    (("run", APPROVAL_FLOW, "--timeout", "-1"), "--timeout"),
    (("run", APPROVAL_FLOW, "--timeout", "0"), "--timeout"),
    (("resume", "r1", "--timeout", "-5"), "--timeout"),
    (("run", "--durable", "app:engine", "t", "--wait", "-1"), "--wait"),
    (("worker", "app:engine", "--concurrency", "0"), "--concurrency"),
])
def test_a_negative_or_zero_amount_is_a_usage_error(
    project: Project, args: tuple[str, ...], option: str
) -> None:
    done = project.jianmu(*args)
    assert done.code == 2, done.text
    assert option in done.err and "Traceback" not in done.text, done.text


def test_mcp_serve_with_no_tool_named_is_refused(project: Project) -> None:
    done = project.jianmu("mcp", "serve", "--tools", " , ")
    assert_clean_error(done, 2, "--tools")
    assert "serving" not in done.err, done.text


def test_a_config_that_is_a_directory_says_so(project: Project) -> None:
    (project.root / "conf.d").mkdir()
    done = project.jianmu("tools", "list", "--config", str(project.root / "conf.d"), config=False)
    assert_clean_error(done, 2, "conf.d", "is a directory")
    done = project.jianmu("studio", "--checkpoints", str(project.root / "conf.d"))
    assert_clean_error(done, 2, "conf.d", "is a directory")


@pytest.mark.parametrize("command", [
    ("skills", "list"), ("skills", "show", "review"), ("run", "review"),
    ("tree", "show", "review"), ("mcp", "serve"),
])
def test_a_skills_dir_that_is_not_a_folder_is_named(project: Project,
                                                    command: tuple[str, ...]) -> None:
    done = project.jianmu(*command, "--skills-dir", "no-such-folder")
    assert_clean_error(done, 2, "--skills-dir", "no-such-folder", "no such folder")
    project.write("a-file.txt", "x")
    done = project.jianmu(*command, "--skills-dir", "a-file.txt")
    assert_clean_error(done, 2, "--skills-dir", "a-file.txt", "not a folder")


@pytest.mark.parametrize("action", [("approve", "c1"), ("reject", "c1"), ("answer", "q1", "hi")])
def test_answering_a_saved_run_without_an_app_points_to_resume(
    project: Project, action: tuple[str, ...]
) -> None:
    done = project.jianmu("runs", action[0], "r1", *action[1:])
    assert_clean_error(done, 2, "--app", "jianmu resume RUN_ID --approve ID")


BLOCKING = '''
import asyncio
from pathlib import Path

from py_trees.common import Status
from py_trees.composites import Sequence

from jianmu import AsyncNode


class Step(AsyncNode):
    def __init__(self, name, blocks):
        super().__init__(name)
        self.blocks = blocks

    async def update_async(self):
        if self.blocks and not Path("go").exists():
            print("BLOCKED", flush=True)
            await asyncio.Event().wait()  # until Ctrl-C
        return Status.SUCCESS


def build_tree():
    return Sequence("blocking", memory=True, children=[Step("first", False), Step("second", True)])
'''


def interrupted_blocking_run(project: Project, sent: int = signal.SIGINT, *,
                             ctrl_c: bool = True) -> tuple[int, str, str, str]:
    """``jianmu run`` of `BLOCKING`, Ctrl-C'd (or sent ``sent``) once its node runs: the exit
    code, what it said before the signal, what it said after, and its stderr."""
    project.write("blocking.py", BLOCKING)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JIANMU_", "OPENAI_"))}
    env.update(COLUMNS="200", NO_COLOR="1", PYTHONPATH=str(REPO))
    process = subprocess.Popen(
        [sys.executable, "-m", "jianmu.cli", "run", "blocking.py", "--config",
         str(project.config)],
        cwd=project.root, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
        preexec_fn=ctrl_c_as_in_a_terminal if ctrl_c else ctrl_c_ignored,
    )
    assert process.stdout is not None and process.stderr is not None
    seen = _read_until(process.stdout, "BLOCKED")
    process.send_signal(sent)
    try:  # both pipes read while it ends: one left full would hold the process in a write
        rest, err = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        rest, err = process.communicate()
        raise AssertionError(f"no end 60 s after Ctrl-C:\n{seen}{rest}\n{err}") from None
    return process.returncode, seen, rest, err


def ctrl_c_ignored() -> None:
    """In the child: Ctrl-C ignored, as for a job a script starts in the background."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize(("sent", "ctrl_c"), [
    (signal.SIGINT, True), (signal.SIGTERM, True), (signal.SIGTERM, False),
], ids=["ctrl-c", "sigterm", "sigterm-in-the-background"])
def test_ctrl_c_while_a_node_runs_saves_the_run_and_resume_goes_on(
        project: Project, sent: int, ctrl_c: bool) -> None:
    """Interrupted before any checkpoint, the run is saved where it was stopped, as it says;
    SIGTERM (a process manager's stop) the same, Ctrl-C ignored or not: it killed the
    process, the run unsaved and its servers left running."""
    code, seen, rest, err = interrupted_blocking_run(project, sent, ctrl_c=ctrl_c)
    assert code == 4 and "interrupted" in rest and "Traceback" not in err, seen + rest + err
    run_id = run_id_of(seen)
    (project.root / "go").write_text("")
    done = project.jianmu("resume", run_id)
    assert done.code == 0 and f"success run {run_id}" in done.out, done.text


@pytest.mark.parametrize("command", [("run",), ("tree", "show")])
def test_a_folder_as_target_says_what_to_give(project: Project, command: tuple[str, ...]) -> None:
    project.write("team/notes/SKILL.md",
                  "---\nname: notes\ndescription: Notes.\n---\nTake notes.\n")
    done = project.jianmu(*command, "team/notes")
    assert_clean_error(done, 2, "skill's folder", "notes --skills-dir team")
    (project.root / "plain").mkdir()
    done = project.jianmu(*command, "plain")
    assert_clean_error(done, 2, "'plain' is a folder")


def test_tools_show_of_a_server_tool_without_servers_says_none_are_configured(
    project: Project,
) -> None:
    done = project.jianmu("tools", "show", "files__read")
    assert_clean_error(done, 2, "files__read", "no MCP servers are configured")


def test_an_input_given_twice_is_refused(project: Project) -> None:
    done = project.jianmu("run", APPROVAL_FLOW, "--input", "note=a", "--input", "note:=\"b\"",
                          "--non-interactive")
    assert_clean_error(done, 2, "--input 'note' is given twice")
    assert "approval-flow" not in project.jianmu("runs", "list").out


def test_a_checkpoint_path_whose_folder_cannot_be_made_is_named(project: Project) -> None:
    project.write("blocker", "a file where a folder is needed")
    project.config.write_text(f"runtime:\n  checkpoint_path: {project.root / 'blocker' / 'x.db'}\n",
                              encoding="utf-8")
    done = project.jianmu("run", APPROVAL_FLOW, "--input", "note=x", "--non-interactive")
    assert_clean_error(done, 1, "cannot open checkpoint store", "blocker")
    assert "FileExistsError" not in done.err and "NotADirectoryError" not in done.err, done.err


def test_python_dash_m_jianmu_is_the_command(project: Project) -> None:
    done = subprocess.run([sys.executable, "-m", "jianmu", "--version"], cwd=project.root,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("jianmu "), done.stdout + done.stderr
    done = subprocess.run([sys.executable, "-m", "jianmu", "resume", "nope", "--config",
                           str(project.config)], cwd=project.root,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "jianmu: error: no run 'nope'" in done.stderr, done.stderr


@pytest.mark.parametrize("command", [("run",), ("tree", "show")])
def test_a_script_that_exits_at_import_is_a_clear_error(project: Project,
                                                        command: tuple[str, ...]) -> None:
    """``sys.exit(7)`` at a script's top level ended ``jianmu`` silently with status 7, a code
    the README gives no meaning."""
    script = project.write("exits.py", "import sys\n\nsys.exit(7)\n")
    done = project.jianmu(*command, str(script))
    assert_clean_error(done, 2, "exits.py:3", "sys.exit(7)")


def test_a_script_whose_build_tree_exits_is_a_clear_error(project: Project) -> None:
    script = project.write("exits.py", "import sys\n\n\ndef build_tree():\n    sys.exit()\n")
    done = project.jianmu("run", str(script))
    assert_clean_error(done, 2, "exits.py:5", "build_tree()", "sys.exit()")


def test_skills_validate_goes_on_past_a_tree_that_exits_at_import(project: Project) -> None:
    """A bt skill whose tree.py calls sys.exit() ended ``skills validate`` silently, status 2,
    before the skills after it were looked at."""
    project.write("skills/a-exits/SKILL.md",
                  "---\nname: a-exits\ndescription: d\nexecution: bt\n---\n")
    project.write("skills/a-exits/tree.py",
                  "import sys\n\nsys.exit(2)\n\n\ndef build_tree(ctx):\n    pass\n")
    project.write("skills/b-typo/SKILL.md", "---\nname: b-typo\ndescription: d\ntols: []\n---\n")
    done = project.jianmu("skills", "validate", "--run-trees")
    assert done.code == 1, done.text
    assert "skills/a-exits/tree.py:3: build_tree: importing the tree module called " \
        "sys.exit(2)" in done.out, done.text
    assert "skills/b-typo/SKILL.md:4: tols: unknown key" in done.out, done.text


@pytest.mark.parametrize("command", [("runs", "list"), ("runs", "show", "r1"), ("resume", "r1"),
                                     ("run", APPROVAL_FLOW, "--input", "note=x")])
def test_a_checkpoint_path_that_is_a_folder_or_another_programs_database_says_so(
    project: Project, command: tuple[str, ...]
) -> None:
    """A folder was "no runs saved" to some commands and "unable to open database file" to
    others; another program's SQLite file failed mid-run ("no such column: seq")."""
    import sqlite3

    extra = ("--non-interactive",) if command[0] == "run" else ()
    (project.root / "runs.d").mkdir()
    project.config.write_text(f"runtime:\n  checkpoint_path: {project.root / 'runs.d'}\n",
                              encoding="utf-8")
    done = project.jianmu(*command, *extra)
    assert_clean_error(done, 1, "cannot open checkpoint store", "runs.d", "it is a folder")
    with sqlite3.connect(project.root / "app.db") as other:
        other.execute("CREATE TABLE checkpoints (x)")
    project.config.write_text(f"runtime:\n  checkpoint_path: {project.root / 'app.db'}\n",
                              encoding="utf-8")
    done = project.jianmu(*command, *extra)
    assert_clean_error(done, 1, "app.db", "another program's database")
    assert "run " not in done.out, done.text  # refused before a run began


@pytest.mark.parametrize("app", ["exits:engine", "exits.py:engine"])
def test_a_durable_app_that_exits_at_import_is_a_clear_error(project: Project, app: str) -> None:
    """``--app`` naming a module that calls sys.exit(7) at its top ended jianmu silently with
    status 7."""
    project.write("exits.py", "import sys\n\nsys.exit(7)\n")
    done = project.jianmu("runs", "list", "--app", app)
    assert_clean_error(done, 2, "exits", "called sys.exit(7)")


def test_an_mcp_server_that_prints_to_stdout_is_one_line_not_a_traceback(
    project: Project,
) -> None:
    """A stdio server that prints a banner to stdout (a common slip) made the MCP SDK log
    "Failed to parse JSONRPC message from server" with a pydantic traceback under the error."""
    # it ends once the client's first request came (the banner read or not): no fixed wait
    server = project.write("chatty.py", "import sys\nprint('Server ready!', flush=True)\n"
                           "sys.stdin.readline()\n")
    make_config(project.root, f"mcp:\n  servers:\n    chatty:\n      command: {sys.executable}\n"
                f"      args: [{str(server)!r}]\n      connect_timeout: 10\n")
    done = project.jianmu("tools", "show", "chatty__x", preload=MCP)
    assert_clean_error(done, 2, "MCP server 'chatty'")
    assert "Traceback" not in done.err and "pydantic" not in done.err, done.err
    assert "'Server ready!'" in done.err and "not JSON-RPC" in done.err, done.err
