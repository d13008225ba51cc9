"""A new user's slips, met in-process (``jianmu.cli.main``): a config error at a secret's key
says what is wrong in full, and a script that defines two trees is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu.cli import main


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
