"""The `jianmu` entry point: --help everywhere, exit codes, errors without tracebacks."""

from __future__ import annotations

import pytest

from tests.cli._helpers import Project, assert_clean_error

COMMANDS = [
    [], ["run"], ["resume"], ["tools"], ["tools", "list"], ["tools", "show"], ["skills"],
    ["skills", "list"], ["skills", "show"], ["skills", "validate"], ["tree"], ["tree", "show"],
    ["mcp"], ["mcp", "serve"], ["sandbox"], ["sandbox", "build-image"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "jianmu")
def test_every_command_has_help(project: Project, command: list[str]) -> None:
    done = project.jianmu(*command, "--help", config=False)
    assert done.code == 0, done.text
    assert done.out.startswith(f"usage: jianmu {' '.join(command)}".rstrip()), done.out
    assert "--config FILE" in done.out and "--debug" in done.out


def test_help_documents_exit_codes_and_inputs(project: Project) -> None:
    out = project.jianmu("run", "--help", config=False).out
    assert "3 suspended" in out and "4 timeout or cancelled" in out and "2 usage" in out
    assert "key:=JSON" in out and "--non-interactive" in out and "'task'" in out


def test_missing_command_and_bad_arguments_are_usage_errors(project: Project) -> None:
    assert project.jianmu(config=False).code == 2
    done = project.jianmu("tools", "show", "calculator", "--format", "yaml")
    assert done.code == 2 and "invalid choice: 'yaml'" in done.err
    done = project.jianmu("run", "x.py", "--timeout", "soon")
    assert done.code == 2 and "invalid float value" in done.err


def test_global_options_work_before_and_after_the_command(project: Project) -> None:
    before = project.jianmu("--config", str(project.config), "tools", "list", config=False)
    after = project.jianmu("tools", "list")
    assert before.code == after.code == 0
    assert before.out == after.out


def test_bad_config_is_exit_2_with_file_line_and_key(project: Project) -> None:
    project.config.write_text("runtime:\n  checkpoint_pth: x.sqlite\n", encoding="utf-8")
    done = project.jianmu("tools", "list")
    assert_clean_error(done, 2, f"{project.config}:2: runtime.checkpoint_pth: unknown key",
                       "did you mean 'checkpoint_path'?")
    missing = project.jianmu("skills", "list", "--config", "nowhere.yaml", config=False)
    assert_clean_error(missing, 2, "nowhere.yaml: config file not found")


def test_debug_adds_the_traceback(project: Project) -> None:
    quiet = project.jianmu("run", "missing.py")
    assert_clean_error(quiet, 2, "script 'missing.py' not found")
    loud = project.jianmu("--debug", "run", "missing.py")
    assert loud.code == 2 and "Traceback" in loud.err
    assert "script 'missing.py' not found" in loud.err
