"""Enum-like and boolean settings of jianmu.yaml read one way: a policy in any case is that
policy (``Deny`` under ``default_policy`` was refused while ``tool_policy`` took it), a value
outside the allowed ones is an error naming them, and a safety switch takes ``true`` or
``false`` only: pydantic's lenient booleans read ``"on"``, ``1`` or ``"y"`` as true, so
``network: 1`` (or a ``${VAR}`` set to ``"yes"``) opened the sandbox's network and
``capture_content: y`` sent tool results to the trace backend, without a word."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jianmu.config import parse_config
from jianmu.errors import ConfigError


@pytest.mark.parametrize("spelling", ["deny", "Deny", "DENY", " deny "])
def test_a_policy_in_any_case_is_that_policy(spelling: str) -> None:
    config = parse_config(f"guard:\n  default_policy: '{spelling}'\n"
                          f"  tool_policy:\n    bash: '{spelling}'\n")
    assert config.guard.default_policy == "deny" and config.guard.tool_policy == {"bash": "deny"}


def test_an_mcp_servers_trust_in_any_case_is_that_trust() -> None:
    config = parse_config("mcp:\n  servers:\n    s:\n      command: x\n      trust: READ_ONLY\n")
    assert config.mcp.servers["s"].trust == "read_only"


@pytest.mark.parametrize(("text", "field", "meant"), [
    ("telemetry:\n  exporter: Console\n", ("telemetry", "exporter"), "console"),
    ("llm:\n  on_cut_off: FAIL\n", ("llm", "on_cut_off"), "fail"),
    ("mcp:\n  servers:\n    s:\n      url: https://x\n      auth: {type: Bearer, token: t}\n",
     ("mcp", "servers", "s", "auth", "type"), "bearer"),
])
def test_every_word_from_a_fixed_set_is_read_in_any_case(
    text: str, field: tuple[str, ...], meant: str,
) -> None:
    # the README: "A word from a fixed set (a policy, an MCP server's trust) is read in any case"
    value: object = parse_config(text)
    for name in field:
        value = value[name] if isinstance(value, dict) else getattr(value, name)
    assert value == meant


@pytest.mark.parametrize(("text", "where", "allowed"), [
    ("telemetry:\n  exporter: jaeger\n", "telemetry.exporter", "'none', 'console' or 'otlp'"),
    ("guard:\n  default_policy: denny\n", "guard.default_policy", "'allow', 'confirm' or 'deny'"),
    ("guard:\n  tool_policy:\n    bash: maybe\n", "guard.tool_policy.bash", "'deny'"),
    ("mcp:\n  servers:\n    s:\n      command: x\n      trust: every\n",
     "mcp.servers.s.trust", "'read_only'"),
])
def test_a_value_outside_the_allowed_ones_names_them(text: str, where: str, allowed: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "c.yaml")
    assert where in str(caught.value) and allowed in str(caught.value)


SWITCHES = ["execution:\n  network: {}\n", "telemetry:\n  capture_content: {}\n",
            "telemetry:\n  enabled: {}\n"]


@pytest.mark.parametrize("text", SWITCHES)
@pytest.mark.parametrize("value", ["'on'", "'yes'", "1", "0", "'y'", "'off'", "'no'", "'1'",
                                   "'t'", "'truee'", "2"])
def test_a_switch_takes_true_or_false_only(text: str, value: str) -> None:
    with pytest.raises(ConfigError, match="true or false"):
        parse_config(text.format(value), "c.yaml")


@pytest.mark.parametrize("text", SWITCHES)
@pytest.mark.parametrize(("value", "meant"), [
    ("true", True), ("false", False), ("True", True), ("FALSE", False), ("'false'", False),
    ("'true'", True), ("${JIANMU_TEST_SWITCH:-false}", False),
])
def test_a_switch_reads_true_and_false_also_as_text(text: str, value: str, meant: bool) -> None:
    config = parse_config(text.format(value))
    section, key = (line.strip().rstrip(":") for line in text.split("\n")[:2])
    key = key.split(":")[0]
    assert getattr(getattr(config, section), key) is meant


@pytest.mark.parametrize("text", [
    "guard:\n  max_tool_calls: {}\n", "guard:\n  budget: {{total_tokens: {}}}\n",
    "guard:\n  rate_limits: {{bash: {}}}\n", "runtime:\n  timeout: {}\n",
    "execution:\n  memory_mb: {}\n",
])
@pytest.mark.parametrize("value", ["yes", "false"])
def test_a_limit_takes_a_number_not_true_or_false(text: str, value: str) -> None:
    """pydantic reads true as 1 and false as 0: 'max_tool_calls: yes' allowed one call,
    'timeout: on' stopped every run after a second, 'rate_limits: {bash: no}' blocked it."""
    with pytest.raises(ConfigError, match="must be a number, not true or false"):
        parse_config(text.format(value), "c.yaml")
    assert parse_config(text.format("'3'"), "c.yaml")  # as text (a ${VAR}) a number still reads


@pytest.mark.parametrize("relative", [".", "state", "ws/.state"])
def test_a_relative_state_home_does_not_put_saved_runs_in_the_working_folder(
    relative: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``XDG_STATE_HOME=.`` put checkpoints.sqlite (approvals, user roles) in the current
    folder, most often the workspace that sandboxed code may write. The XDG spec: a relative
    path there is invalid and is ignored."""
    from jianmu.config import AppConfig

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_STATE_HOME", relative)
    config = AppConfig()
    expected = str(tmp_path / "home" / ".local" / "state" / "jianmu")
    assert config.runtime.checkpoint_path == f"{expected}/checkpoints.sqlite"
    assert config.durable.sqlite_path == f"{expected}/durable.sqlite"


@pytest.mark.parametrize("home", ["", "rel"])
def test_an_empty_or_relative_home_does_not_make_the_state_folder_relative(
    home: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``HOME=rel`` made the default ``rel/.local/state/jianmu`` relative: saved runs in the
    current folder; ``HOME=`` (cron, some containers) made it ``/.local/state``."""
    import pwd

    from jianmu.config import AppConfig

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", home)
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    account = pwd.getpwuid(os.getuid()).pw_dir
    assert AppConfig().runtime.checkpoint_path == os.path.join(
        account, ".local", "state", "jianmu", "checkpoints.sqlite")
