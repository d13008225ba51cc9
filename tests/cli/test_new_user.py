"""A new user's slips, met in-process (``jianmu.cli.main``): each is one error line that says
what is wrong (a config error at a secret's key in full, a script's own mistake as its own, a
run's script that is gone as gone), and a script that defines two trees is refused."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from jianmu.cli import main
from tests.cli._helpers import REPO, pending_of


def test_a_config_error_at_a_secret_key_keeps_its_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """'llm.api_key: environment variable ...' was shown as 'llm.api_key: *** variable ...':
    the masking of 'key: value' secrets took the key path for a key and the next word for it."""
    monkeypatch.delenv("NO_SUCH_KEY_HERE", raising=False)
    config = tmp_path / "c.yaml"
    config.write_text("llm:\n  api_key: ${NO_SUCH_KEY_HERE}\n", encoding="utf-8")
    assert main(["tools", "list", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "llm.api_key: environment variable 'NO_SUCH_KEY_HERE' is not set" in err, err
    config.write_text("llm:\n  api_key: [sk-live-0123456789]\n", encoding="utf-8")
    assert main(["tools", "list", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert ": llm.api_key: Input should be" in err, err  # not '*** should be'
    assert "sk-live" not in err, err  # the value itself is still never shown
    config.write_text("llm:\n  api_key: ${sk-live-0123456789}\n", encoding="utf-8")
    assert main(["tools", "list", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "llm.api_key: '***' is not a ${VAR} reference" in err and "sk-live" not in err, err


def test_a_script_with_both_build_tree_and_tree_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """build_tree() ran and the module-level 'tree' was silently ignored."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.yaml").write_text(
        f"runtime:\n  checkpoint_path: {tmp_path / 'runs.sqlite'}\n", encoding="utf-8")
    (tmp_path / "two.py").write_text(
        "import py_trees\ntree = py_trees.behaviours.Success('module_level')\n"
        "def build_tree():\n    return py_trees.behaviours.Success('built')\n", encoding="utf-8")
    assert main(["run", "two.py", "--config", "c.yaml"]) == 2
    captured = capsys.readouterr()
    assert "jianmu: error: two.py: defines both build_tree() and a module-level 'tree'" in \
        captured.err, captured
    assert "success" not in captured.out, captured.out


@pytest.mark.parametrize(("source", "said"), [
    ("def build_state():\n    raise RuntimeError('no state')\n",
     "two.py:3: build_state() raised RuntimeError: no state"),
    ("def build_state():\n    return 5\n",
     "two.py: build_state() must return a jianmu StateManager, got int"),
    ("STATE_SCHEMA = dict\n", "two.py: STATE_SCHEMA must be a pydantic model class"),
    ("build_tree = 5\n", "two.py: build_tree must be a function that returns the tree, got int"),
])
def test_a_scripts_own_mistake_is_not_blamed_on_the_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    source: str, said: str,
) -> None:
    """Each said 'the state does not accept the inputs: ...' (of a run given no input at all),
    and 'build_tree = 5' said the script 'defines neither build_tree() nor ... tree'."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.yaml").write_text(
        f"runtime:\n  checkpoint_path: {tmp_path / 'runs.sqlite'}\n", encoding="utf-8")
    tree = "" if "build_tree" in source else "tree = py_trees.behaviours.Success('s')\n"
    (tmp_path / "two.py").write_text(f"import py_trees\n{source}{tree}", encoding="utf-8")
    assert main(["run", "two.py", "--config", "c.yaml"]) == 2
    err = capsys.readouterr().err
    assert f"jianmu: error: {said}" in err or f"jianmu: error: {tmp_path}/{said}" in err, err
    assert "does not accept the inputs" not in err and "defines neither" not in err, err


def test_resuming_a_run_whose_script_is_gone_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """It said "script '...' not found; give the path of a .py file" to a command given a run
    id and no path."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.yaml").write_text(
        f"runtime:\n  checkpoint_path: {tmp_path / 'runs.sqlite'}\n", encoding="utf-8")
    script = tmp_path / "flow.py"
    script.write_text((REPO / "examples" / "approval_flow.py").read_text(), encoding="utf-8")
    assert main(["run", "flow.py", "-i", "note=milk", "--non-interactive",
                 "--config", "c.yaml"]) == 3
    run_id, pending = pending_of(capsys.readouterr().out)
    script.unlink()
    assert main(["resume", run_id, "--approve", pending[0], "--config", "c.yaml"]) == 2
    err = capsys.readouterr().err
    assert f"run {run_id!r} runs the script {str(script)!r}, which is gone" in err, err


def test_a_question_given_as_target_says_how_to_ask_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """'jianmu run "What is 2+2?"' said only that no skill has that name."""
    monkeypatch.chdir(tmp_path)
    assert main(["run", "What is 2+2?"]) == 2
    err = capsys.readouterr().err
    assert "no skill named 'What is 2+2?'" in err, err
    assert "not a question" in err and "jianmu run SKILL --input task='What is 2+2?'" in err, err
    assert main(["run", "reveiw"]) == 2  # a skill's name misspelt is no question
    assert "not a question" not in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "said"), [
    (["tools", "show", "calculater"],
     "no built-in tool named 'calculater' (did you mean 'calculator'?); built-ins: "),
    (["mcp", "serve", "--tools", "read_fle"], "did you mean 'read_file'?"),
])
def test_a_misspelt_tool_name_is_met_with_the_closest(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert said in err, err


def test_a_misspelt_provider_is_met_with_the_closest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from jianmu import Agent
    from jianmu.errors import ConfigError

    with pytest.raises(ConfigError, match=r"did you mean 'openai:gpt-4o'\?"):
        Agent("opnai:gpt-4o")
    config = tmp_path / "c.yaml"
    config.write_text("llm:\n  provider: opnai\n", encoding="utf-8")
    assert main(["tools", "list", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "'opnai' is not a registered llm (did you mean 'openai'?); registered: " in err, err


def test_the_resume_hint_works_from_another_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hint said '--config my config.yaml': relative (not found from another folder) and
    unquoted (two words for the shell)."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir(), elsewhere.mkdir()
    monkeypatch.chdir(project)
    (project / "my config.yaml").write_text(
        f"runtime:\n  checkpoint_path: {tmp_path / 'runs.sqlite'}\n", encoding="utf-8")
    assert main(["run", str(REPO / "examples" / "approval_flow.py"), "-i", "note=milk",
                 "--non-interactive", "--config", "my config.yaml"]) == 3
    hint = next(line for line in capsys.readouterr().out.splitlines()
                if line.startswith("resume with: "))
    command = shlex.split(hint.removeprefix("resume with: ").split("   (or ")[0])
    monkeypatch.chdir(elsewhere)
    assert command[0] == "jianmu" and main(command[1:]) == 0, capsys.readouterr()
    # the script's own relative path: in the folder the resume runs in (README says so)
    assert (elsewhere / ".jianmu" / "notes.txt").read_text(encoding="utf-8") == "milk\n"


def test_tree_show_of_a_prompt_skill_says_it_has_no_tree(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """It asked for a task, then for a model, as running the skill would."""
    monkeypatch.chdir(REPO)
    assert main(["tree", "show", "code-review", "--input", "task=x"]) == 2
    err = capsys.readouterr().err
    assert "skill 'code-review' is a prompt skill: it has no tree to show" in err, err
    assert "jianmu skills show code-review" in err and "needs a model" not in err, err
    assert main(["tree", "show", "workspace-report"]) == 0  # a BT skill's tree
    assert "--> list_files" in capsys.readouterr().out


def test_a_script_that_runs_itself_is_pointed_to_python(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """'jianmu run examples/skill_report.py' (a script with a main, no tree) said only to add
    build_tree()."""
    monkeypatch.chdir(REPO)
    assert main(["run", "examples/skill_report.py"]) == 2
    err = capsys.readouterr().err
    assert "defines neither build_tree() nor a module-level 'tree'" in err, err
    assert "or run it as it runs itself: python examples/skill_report.py" in err, err
    (tmp_path / "plain.py").write_text("x = 1\n", encoding="utf-8")
    assert main(["run", str(tmp_path / "plain.py")]) == 2
    assert "runs itself" not in capsys.readouterr().err  # no main: nothing else to run


def test_jianmu_alone_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    """It said only 'the following arguments are required: COMMAND'."""
    assert main([]) == 2
    err = capsys.readouterr().err
    assert "Jianmu: behaviour-tree workflows" in err and "    run " in err, err
    assert "exit codes:" in err and "required" not in err, err


@pytest.mark.parametrize(("llm", "said", "not_said"), [
    ("provider: anthropic\n  model: claude-sonnet-4-5",
     "llm names 'claude-sonnet-4-5' of provider 'anthropic', with no API key: set "
     "$ANTHROPIC_API_KEY (or llm.api_key)", "none is configured"),
    ("model: gpt-4o", "llm names 'gpt-4o' with no server and no API key: set llm.base_url",
     "set llm.model"),
    ("timeout: 30", "none is configured: set llm.model in the config", "llm names"),
])
def test_a_model_without_its_key_is_told_what_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    llm: str, said: str, not_said: str,
) -> None:
    """A config naming its provider and model (the key alone missing) was told that no model
    was configured, and to set llm.model."""
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(variable, raising=False)
    config = tmp_path / "c.yaml"
    config.write_text(f"llm:\n  {llm}\n", encoding="utf-8")
    assert main(["run", "code-review", "--skills-dir", str(REPO / "skills"), "-i", "task=x",
                 "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert said in err and not_said not in err, err


def test_runs_show_hints_name_the_config_they_need(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """'jianmu runs show RUN --config C' hinted 'jianmu resume RUN --approve ID' without the
    config, whose checkpoint file alone holds the run: pasted, it found no run."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir(), elsewhere.mkdir()
    monkeypatch.chdir(project)
    (project / "my config.yaml").write_text(
        f"runtime:\n  checkpoint_path: {tmp_path / 'runs.sqlite'}\n", encoding="utf-8")
    assert main(["run", str(REPO / "examples" / "approval_flow.py"), "-i", "note=milk",
                 "--non-interactive", "--config", "my config.yaml"]) == 3
    run_id, _pending = pending_of(capsys.readouterr().out)
    assert main(["runs", "show", run_id, "--config", "my config.yaml"]) == 0
    lines = capsys.readouterr().out.splitlines()
    hint = next(line for line in lines if line.startswith("resume with: "))
    forked = next(line for line in lines if line.startswith("fork with: "))
    assert forked.endswith(f"--config {shlex.quote(str(project / 'my config.yaml'))}"), forked
    monkeypatch.chdir(elsewhere)
    command = shlex.split(hint.removeprefix("resume with: "))
    assert command[0] == "jianmu" and main(command[1:]) == 0, capsys.readouterr()
