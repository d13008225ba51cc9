"""load_config: search order, env interpolation and each kind of bad config."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jianmu.config import AppConfig, load_config, parse_config
from jianmu.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]


def write(tmp_path: Path, text: str, name: str = "jianmu.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_defaults_load_with_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JIANMU_CONFIG", raising=False)
    config = load_config()
    assert config == AppConfig()
    assert config.guard.default_policy is None


def test_search_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JIANMU_CONFIG", raising=False)
    (tmp_path / "configs").mkdir()
    write(tmp_path, "runtime: {max_iterations: 3}\n", "configs/jianmu.yaml")
    assert load_config().runtime.max_iterations == 3
    write(tmp_path, "runtime: {max_iterations: 4}\n")
    assert load_config().runtime.max_iterations == 4
    env_file = write(tmp_path, "runtime: {max_iterations: 5}\n", "env.yaml")
    monkeypatch.setenv("JIANMU_CONFIG", str(env_file))
    assert load_config().runtime.max_iterations == 5
    explicit = write(tmp_path, "runtime: {max_iterations: 6}\n", "explicit.yaml")
    assert load_config(explicit).runtime.max_iterations == 6


def test_env_interpolation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_URL", "http://127.0.0.1:9/v1")
    path = write(tmp_path, "llm:\n  base_url: ${LLM_URL}\n  model: ${MODEL:-tiny}\n")
    config = load_config(path)
    assert config.llm.base_url == "http://127.0.0.1:9/v1"
    assert config.llm.model == "tiny"


def test_missing_env_var(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_KEY", raising=False)
    path = write(tmp_path, "llm:\n  provider: openai\n  api_key: ${NO_SUCH_KEY}\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert f"{path}:3" in str(info.value) and "NO_SUCH_KEY" in str(info.value)
    assert "llm.api_key" in str(info.value)


@pytest.mark.parametrize(("value", "said"), [
    ("${OPENAI_API_KEY", "'${OPENAI_API_KEY' is not a ${VAR} reference"),
    ("${1KEY}", "'${1KEY}' is not a ${VAR} reference"),
    ("${KEY-x}", "'${KEY-x}' is not a ${VAR} reference"),
    ("${A:-${B}}", "a default cannot hold another ${...}"),
])
def test_a_malformed_variable_reference_is_an_error_not_a_literal_value(
    monkeypatch: pytest.MonkeyPatch, value: str, said: str
) -> None:
    """``${OPENAI_API_KEY`` (a brace left out) was kept as the literal key, and ``${A:-${B}}``
    became the text ``${B}``: each sent on as if it were the setting."""
    for name in ("OPENAI_API_KEY", "KEY", "A", "B"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigError, match=r"^f\.yaml:3: llm\.api_key: ") as info:
        parse_config(f"llm:\n  provider: openai\n  api_key: \"{value}\"\n", "f.yaml")
    assert said in str(info.value)
    assert "write ${NAME} or ${NAME:-default}" in str(info.value)


def test_a_dollar_that_is_no_reference_stays_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PART", "x${Y")  # a variable's value is never read again
    config = parse_config("llm:\n  model: \"$5 {a} ${PART} $HOME $${HOME}\"\n", "f.yaml")
    assert config.llm.model == "$5 {a} x${Y $HOME ${HOME}"


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "guard:\n  tool_policy:\n    bash: [confirm\n")
    with pytest.raises(ConfigError, match=rf"{path}:\d+: YAML syntax error"):
        load_config(path)


@pytest.mark.parametrize(("value", "said"), [
    ("9" * 5000, "int cannot be read: Exceeds the limit"),
    ("!!int zz", "int cannot be read"),
    ("!!float zz", "float cannot be read"),
    ("!!timestamp 2020-13-45", "timestamp cannot be read: month must be in 1..12"),
])
def test_a_value_yaml_cannot_convert_names_the_file_and_line(
    tmp_path: Path, value: str, said: str
) -> None:
    path = write(tmp_path, f"runtime:\n  max_iterations: {value}\n")
    with pytest.raises(ConfigError, match=rf"{path}:2: this {said}"):
        load_config(path)


@pytest.mark.parametrize(("data", "line", "byte"), [
    (b"guard: \xff\xfe\n", 1, "ff"), (bytes(range(256)), 2, "80"),
    (b"llm:\n  model: caf\xe9\n", 2, "e9"),
])
def test_a_file_that_is_not_utf8_names_the_file_and_line(
    tmp_path: Path, data: bytes, line: int, byte: str
) -> None:
    """The error named a byte offset ("position 14"), not the line to fix."""
    path = tmp_path / "jianmu.yaml"
    path.write_bytes(data)
    with pytest.raises(ConfigError, match=rf"^{path}:{line}: the file is not UTF-8 text: "
                       rf"line {line} holds byte 0x{byte}; save the file as UTF-8$"):
        load_config(path)


@pytest.mark.parametrize(("text", "line", "char"), [
    ("llm:\n  model: a\x00b\n", 2, "#x0000"),
    ("llm:\n  provider: openai\n  model: a\x07b\n", 3, "#x0007"),
    ("\x1b[31m: red\n", 1, "#x001b"),
])
def test_a_character_yaml_refuses_names_the_line(text: str, line: int, char: str) -> None:
    """A NUL or control character was reported at line '?', with a character offset."""
    with pytest.raises(ConfigError, match=rf"^f\.yaml:{line}: YAML syntax error: unacceptable "
                       rf"character {char}: special characters are not allowed$"):
        parse_config(text, "f.yaml")


@pytest.mark.parametrize("key", ["source", "key_lines"])
def test_the_configs_own_bookkeeping_is_not_a_key_of_the_file(key: str) -> None:
    """``source`` and ``key_lines`` (where the config came from) were offered as valid keys
    and taken from the file, then silently replaced."""
    with pytest.raises(ConfigError, match=rf"^f\.yaml:1: {key}: unknown key"):
        parse_config(f"{key}: {{}}\n", "f.yaml")
    with pytest.raises(ConfigError) as info:
        parse_config("lm: {}\n", "f.yaml")
    assert "valid keys" not in str(info.value) or key not in str(info.value)
    with pytest.raises(ConfigError) as info:
        parse_config("zzzzz: {}\n", "f.yaml")
    assert "valid keys: guard, execution, llm, skills, telemetry, runtime, mcp, durable" \
        in str(info.value) and key not in str(info.value)


def test_unknown_key_suggests_the_closest(tmp_path: Path) -> None:
    path = write(tmp_path, "guard:\n  max_tool_cals: 3\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    text = str(info.value)
    assert f"{path}:2" in text and "guard.max_tool_cals" in text
    assert "did you mean 'max_tool_calls'" in text


def test_wrong_type_names_key_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "execution:\n  mode: local\n  timeout_s: soon\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert f"{path}:3" in str(info.value) and "execution.timeout_s" in str(info.value)
    assert "'soon'" in str(info.value)


def test_bad_policy_value(tmp_path: Path) -> None:
    path = write(tmp_path, "guard:\n  tool_policy:\n    bash: maybe\n")
    with pytest.raises(ConfigError, match=r"guard\.tool_policy\.bash"):
        load_config(path)


def test_missing_explicit_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.yaml")


def test_shipped_config_loads() -> None:
    config = load_config(REPO / "configs" / "jianmu.yaml")
    assert config.source is not None


def test_a_blank_setting_means_unset_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """``${VAR:-}`` of an unset variable, or ``""``, leaves a setting at its default."""
    monkeypatch.delenv("JIANMU_DATABASE_URL", raising=False)
    config = parse_config(
        "durable:\n  database_url: ${JIANMU_DATABASE_URL:-}\n"
        "llm:\n  base_url: ''\n  api_key: '  '\n"
        "execution:\n  workdir: ''\n  docker_image: ${NO_SUCH_IMAGE_VAR:-}\n"
        "runtime:\n  checkpoint_path: ''\n"
    )
    assert config.durable.database_url is None
    assert config.llm.base_url is None and config.llm.api_key is None
    assert config.execution.workdir is None and config.execution.docker_image is None
    assert config.runtime.checkpoint_path == AppConfig().runtime.checkpoint_path


def test_the_shipped_config_leaves_the_durable_database_unset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("JIANMU_DATABASE_URL", raising=False)
    config = load_config(Path(__file__).resolve().parents[1] / "configs" / "jianmu.yaml")
    assert config.durable.database_url is None


# -- the shared default ------------------------------------------------------------------------
def test_the_default_config_is_built_once_and_equals_the_defaults() -> None:
    from jianmu.config import default_config

    assert default_config() is default_config()
    assert default_config() == AppConfig()


@pytest.mark.parametrize("change", [
    lambda c: setattr(c.runtime, "poll_interval", 0.01),
    lambda c: setattr(c, "source", "mine.yaml"),
    lambda c: setattr(c.guard, "default_policy", "allow"),
    lambda c: setattr(c.guard.budget, "total_tokens", 1),
    lambda c: c.guard.tool_policy.__setitem__("bash", "allow"),
    lambda c: c.guard.tool_policy.update({"bash": "allow"}),
    lambda c: c.guard.rate_limits.setdefault("x", 1),
    lambda c: c.llm.params.update(temperature=2),
    lambda c: c.skills.paths.append("/elsewhere"),
    lambda c: c.mcp.servers.__setitem__("x", None),
    lambda c: delattr(c.runtime, "poll_interval"),
])
def test_the_shared_default_cannot_change(change: object) -> None:
    """Every run given no configuration reads the same object: no one may change it."""
    from jianmu.config import default_config

    config = default_config()
    with pytest.raises(ConfigError, match="shared, read-only default"):
        change(config)  # type: ignore[operator]
    assert config == AppConfig()


def test_a_copy_of_the_default_is_a_config_of_ones_own() -> None:
    from jianmu.config import default_config

    mine = default_config().model_copy(deep=True)
    mine.runtime.poll_interval = 0.01
    mine.guard.tool_policy["bash"] = "deny"
    mine.skills.paths.append("/elsewhere")
    assert default_config() == AppConfig()
    assert type(mine.guard.tool_policy) is dict and type(mine.skills.paths) is list
    assert AppConfig.model_validate(mine.model_dump()) == mine


def test_the_default_follows_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from jianmu.config import default_config

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "one"))
    one = default_config()
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "two"))
    two = default_config()
    assert one.runtime.checkpoint_path.startswith(str(tmp_path / "one"))
    assert two.runtime.checkpoint_path.startswith(str(tmp_path / "two"))


# -- what a new user writes --------------------------------------------------------------------
def test_a_section_or_setting_left_empty_takes_its_defaults() -> None:
    """``guard:`` with every line under it commented out is YAML null: the section's defaults,
    as a blank value already is, not a type error."""
    config = parse_config("guard:\n  # default_policy: allow\nllm:\n  timeout:\n"
                          "execution:\n  timeout_s:\nruntime:\n")
    assert config.guard == AppConfig().guard and config.runtime == AppConfig().runtime
    assert config.llm.timeout == AppConfig().llm.timeout
    assert config.execution.timeout_s == AppConfig().execution.timeout_s


def test_a_refused_value_is_named_once_without_pydantic_wording() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config("llm:\n  fallback:\n    - provider: nope\n", "c.yaml")
    message = str(caught.value)
    assert message.startswith("c.yaml:3: llm.fallback.0.provider: 'nope' is not a registered"), \
        message
    assert "Value error" not in message and "llm.provider" not in message, message


def test_malformed_tool_rules_name_the_file_and_line() -> None:
    from jianmu.guard.enforcer import check_config_rules

    with pytest.raises(ConfigError, match=r"^c\.yaml:4: guard\.tool_policy: invalid tool rule"):
        check_config_rules(parse_config(
            "guard:\n  tool_policy:\n    bash: allow\n    'bash(git': deny\n", "c.yaml"))


@pytest.mark.parametrize(("provider", "variable"), [
    (None, "OPENAI_API_KEY"), ("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY"),
])
def test_a_providers_own_key_variable_configures_it(
    monkeypatch: pytest.MonkeyPatch, provider: str | None, variable: str
) -> None:
    """As the shipped config says: an empty ``api_key`` lets the provider read its variable."""
    from jianmu.config import LLMConfig

    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert not LLMConfig(provider=provider, model="m").endpoint_configured
    monkeypatch.setenv(variable, "sk-test")
    assert LLMConfig(provider=provider, model="m").endpoint_configured
    assert not LLMConfig(provider="scripted").endpoint_configured


@pytest.mark.parametrize(("entry", "problem"), [
    ("{}", "exactly one of command"),
    ("{command: srv, url: 'http://127.0.0.1:9/mcp'}", "exactly one of command"),
    ("{url: 'ftp://host/mcp'}", "http:// or https://"),
    ("{command: srv, headers: {X-Key: k}}", "headers and auth are for a url server"),
])
def test_an_mcp_server_no_client_could_reach_names_the_file_and_line(
    entry: str, problem: str
) -> None:
    pattern = rf"^c\.yaml:4: mcp\.servers\.bad: .*{re.escape(problem)}"
    with pytest.raises(ConfigError, match=pattern):
        parse_config(f"mcp:\n  servers:\n    good: {{command: srv}}\n    bad: {entry}\n", "c.yaml")


@pytest.mark.parametrize("url", ["not a url", "127.0.0.1:8000/v1", "ftp://host/v1", "localhost"])
def test_a_model_url_that_is_no_http_url_is_refused_with_its_line(url: str) -> None:
    """``llm.base_url: 127.0.0.1:8000/v1`` (the scheme left out) loaded, then every run
    failed at its first model call as a "connection failed" retried as transient."""
    with pytest.raises(ConfigError, match=r"^f\.yaml:3: llm\.base_url: .*must start with "
                       r"http:// or https://"):
        parse_config(f"llm:\n  provider: openai\n  base_url: {url!r}\n", "f.yaml")
    with pytest.raises(ConfigError, match=r"^f\.yaml:4: llm\.fallback\.0\.base_url: "):
        parse_config(f"llm:\n  provider: openai\n  fallback:\n  - base_url: {url!r}\n",
                     "f.yaml")
    assert parse_config("llm:\n  base_url: HTTP://127.0.0.1:8000/v1\n").llm.base_url
    with pytest.raises(ConfigError) as info:  # a URL may hold a password: never echoed
        parse_config("llm:\n  base_url: user:s3cret@host/v1\n", "f.yaml")
    assert "s3cret" not in str(info.value)


def test_an_empty_config_name_says_so_not_that_a_folder_was_named() -> None:
    """``--config "$UNSET"`` read as Path(''), the folder '.': ".: config file is a directory"."""
    with pytest.raises(ConfigError, match=r"^the config file's name is empty; name a YAML file$"):
        load_config("")


def test_a_tab_in_the_indentation_says_to_indent_with_spaces() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config("runtime:\n\ttimeout: 3\n", "f.yaml")
    assert str(info.value).startswith("f.yaml:2: YAML syntax error: found character '\\t'")
    assert str(info.value).endswith("(YAML indents with spaces, never tabs)")


@pytest.mark.parametrize("limit", ["-3", "-1"])
def test_a_negative_rate_limit_is_refused_at_load_naming_its_line(
    tmp_path: Path, limit: str
) -> None:
    # it passed the load and failed mid-run, after a paid model call, with no file or line
    path = write(tmp_path, f"guard:\n  rate_limits:\n    calculator: {limit}\n")
    with pytest.raises(ConfigError, match=rf"{path}:3: guard.rate_limits.calculator: .*"
                                          r"greater than or equal to 0"):
        load_config(path)


@pytest.mark.parametrize(("key", "read"), [("5", "5 as int"), ("~", "null as NoneType"),
                                           ("1.5", "1.5 as float"), ("true", "True as bool")])
def test_a_key_yaml_reads_as_no_text_names_its_line_and_says_to_quote_it(
    tmp_path: Path, key: str, read: str
) -> None:
    # the line was '?' and the words pydantic's ("guard.tool_policy.5.[key]: Input should be
    # a valid string")
    path = write(tmp_path, f"guard:\n  tool_policy:\n    {key}: deny\n")
    with pytest.raises(ConfigError, match=rf"{path}:3: guard\.tool_policy\.\S+: a key here is "
                                          rf"text, and YAML reads {re.escape(read)}: quote it"):
        load_config(path)
