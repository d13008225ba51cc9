"""The `jianmu` entry point: --help everywhere, exit codes, errors without tracebacks."""

from __future__ import annotations

import re

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


# -- what each command needs installed ---------------------------------------------------------

OPENAI_SCRIPT = '''
import py_trees
from jianmu.llm import OpenAIProvider

def build_llm():
    return OpenAIProvider("gpt-4o-mini", api_key="sk-test")

def build_tree(llm):
    return py_trees.behaviours.Success("done")
'''

ANTHROPIC_SCRIPT = OPENAI_SCRIPT.replace("OpenAIProvider", "AnthropicProvider").replace(
    "gpt-4o-mini", "claude-sonnet-4-5")

# (command, the packages taken away, the extra it must name)
NEEDS = [
    (["studio"], ["starlette", "uvicorn"], "studio"),
    (["studio"], ["uvicorn"], "studio"),
    (["studio", "--app", "app.py"], ["dbos"], "dbos"),
    (["mcp", "serve"], ["mcp"], "mcp"),
    (["mcp", "serve", "--transport", "http"], ["mcp"], "mcp"),
    (["worker", "app.py"], ["dbos", "psycopg"], "dbos"),
    (["runs", "list", "--app", "app.py"], ["dbos"], "dbos"),
    (["runs", "approve", "r1", "c1", "--app", "app.py"], ["psycopg"], "dbos"),
    (["run", "--durable", "app.py", "tree"], ["dbos"], "dbos"),
    (["sandbox", "build-image"], ["docker"], "docker"),
    (["run", "uses_openai.py"], ["openai"], "openai"),
    (["run", "uses_anthropic.py"], ["anthropic"], "anthropic"),
]


@pytest.mark.parametrize(("command", "without", "extra"), NEEDS,
                         ids=lambda v: " ".join(v) if isinstance(v, list) else str(v))
def test_a_command_without_its_extra_names_it_and_starts_nothing(
    project: Project, command: list[str], without: list[str], extra: str
) -> None:
    project.write("uses_openai.py", OPENAI_SCRIPT)
    project.write("uses_anthropic.py", ANTHROPIC_SCRIPT)
    done = project.jianmu(*command, without=without, timeout=60)
    assert done.code != 0, done.text
    assert "Traceback" not in done.text, done.text
    assert f"pip install 'jianmu[{extra}]'" in done.err, done.text
    # nothing was started or announced before the error
    assert "serving" not in done.text and "open: http" not in done.text, done.text


def test_mcp_serve_says_nothing_before_the_missing_extra(project: Project) -> None:
    done = project.jianmu("mcp", "serve", "--tools", "calculator", without=["mcp"])
    assert_clean_error(done, 1, "'mcp' is not installed", "pip install 'jianmu[mcp]'")
    assert done.out == "" and done.err.count("\n") == 1, done.text


def test_an_app_that_imports_a_missing_extra_names_it(project: Project) -> None:
    project.write("needs_studio.py", "import starlette\nengine = None\n")
    done = project.jianmu("runs", "list", "--app", "needs_studio.py", without=["starlette"])
    assert_clean_error(done, 1, "'starlette' is not installed", "pip install 'jianmu[studio]'")


def test_the_worker_help_says_it_executes_runs(project: Project) -> None:
    worker = project.jianmu("worker", "--help", config=False)
    assert worker.code == 0, worker.text
    assert "they never execute runs" not in worker.out
    assert "The worker executes the app's runs" in worker.out
    assert "pip install 'jianmu[dbos]'" in worker.out
    runs = project.jianmu("runs", "list", "--help", config=False)
    assert "These commands are clients: they never execute runs." in runs.out
    studio = project.jianmu("studio", "--help", config=False)
    assert "pip install 'jianmu[studio]'" in studio.out


def test_the_tools_help_says_it_shows_the_mcp_servers_tools_too(project: Project) -> None:
    """`tools list --mcp` and `tools show server__tool` reach the config's MCP servers: the
    help said "inspect the built-in tools" only."""
    top = project.jianmu("--help", config=False)
    assert re.search(r"tools\s+inspect the built-in tools and the config's MCP", top.out), top.out
    listing = project.jianmu("tools", "--help", config=False)
    assert "list the built-in tools (with --mcp, the MCP servers' too)" in listing.out


def test_version_prints_the_installed_version(project: Project) -> None:
    from importlib.metadata import version

    done = project.jianmu("--version", config=False)
    assert done.code == 0, done.text
    assert done.out.strip() == f"jianmu {version('jianmu')}"
