"""Providers: the protocol, the no-op base, and the lazy built-in registry."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from jianmu.errors import MissingExtraError, ToolNotFoundError, ToolUnavailableWarning
from jianmu.tools import BaseToolProvider, BuiltinToolProvider, Tool, ToolProvider, ToolSet, tool
from jianmu.tools.providers import DEFAULT_ALIASES, DEFAULT_BUILTINS


class Echo(Tool):
    name = "echo"
    description = "Echo the input back."

    def run(self, input: str) -> str:
        return input


@pytest.fixture
def fake_module(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    module = types.ModuleType("jm_fake_tools")
    module.Echo = Echo  # type: ignore[attr-defined]
    module.NotATool = dict  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "jm_fake_tools", module)
    return module


@pytest.fixture
def fresh_default() -> Iterator[None]:
    BuiltinToolProvider.reset_default()
    yield
    BuiltinToolProvider.reset_default()


def test_the_thirteen_builtins_and_aliases_are_registered() -> None:
    provider = BuiltinToolProvider()
    assert provider.list_builtin_names() == list(DEFAULT_BUILTINS)
    assert len(DEFAULT_BUILTINS) == 13
    assert provider.aliases() == DEFAULT_ALIASES
    assert provider.canonical_name("File_Read") == "read_file"
    assert provider.canonical_name("web_search") == "duckduckgo_search"


def test_every_builtin_loads_and_has_its_registered_name() -> None:
    provider = BuiltinToolProvider(strict=True)
    tools = provider.get_tools()
    assert [t.name for t in tools] == list(DEFAULT_BUILTINS)
    for t in tools:
        t.check_definition(require_parameter_descriptions=True)


def test_protocol_and_base_provider() -> None:
    assert isinstance(BaseToolProvider(), ToolProvider)
    assert isinstance(BuiltinToolProvider(), ToolProvider)
    assert BaseToolProvider().get_tools() == []


@pytest.mark.anyio
async def test_base_provider_lifecycle_is_a_no_op_context_manager() -> None:
    async with BaseToolProvider() as provider:
        assert provider.get_tools() == []
    await provider.close()  # idempotent


def test_lazy_string_registration_imports_on_first_use(fake_module: types.ModuleType) -> None:
    provider = BuiltinToolProvider(builtins={}, aliases={})
    provider.register_tool("echo", "jm_fake_tools:Echo")
    provider.register_alias("say", "echo")
    assert isinstance(provider.load("SAY"), Echo)
    assert provider.resolve_named_tools(["echo", "say"])[0].name == "echo"
    assert len(provider.resolve_named_tools(["echo", "say"])) == 1  # alias of the same tool


def test_register_tool_accepts_classes_and_factories() -> None:
    provider = BuiltinToolProvider(builtins={}, aliases={})
    provider.register_tool("echo", Echo)
    provider.register_tool("made", lambda: tool(name="made")(lambda: "x"))
    assert [t.name for t in provider.resolve_named_tools(["echo", "made"])] == ["echo", "made"]
    provider.register_tool("echo", lambda: tool(name="echo")(lambda: "replaced"))
    assert isinstance(provider.load("echo"), Tool) and not isinstance(provider.load("echo"), Echo)


def test_register_tool_refuses_bad_sources() -> None:
    provider = BuiltinToolProvider()
    with pytest.raises(ValueError, match=r"must look like 'package\.module:ClassName'"):
        provider.register_tool("x", "no_colon_here")
    with pytest.raises(TypeError, match="register a Tool class"):
        provider.register_tool("x", Echo())  # type: ignore[arg-type]
    with pytest.raises(ToolNotFoundError, match="cannot alias 'x' to unknown built-in 'nope'"):
        provider.register_alias("x", "nope")


def test_custom_tools_win_over_builtins() -> None:
    provider = BuiltinToolProvider(builtins={"echo": Echo}, aliases={"say": "echo"})
    custom = tool(name="echo")(lambda: "custom")
    assert provider.resolve_named_tools(["echo"], [custom]) == [custom]
    assert provider.resolve_named_tools(["say"], [custom]) == [custom]


def test_missing_extra_is_named_in_the_warning(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "jm_needs_ddgs.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'ddgs'\", name='ddgs')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    provider = BuiltinToolProvider(builtins={"search": "jm_needs_ddgs:Search"}, aliases={})
    with pytest.warns(ToolUnavailableWarning, match=r"pip install 'jianmu\[search\]'"):
        assert provider.resolve_named_tools(["search"]) == []
    with pytest.raises(MissingExtraError) as info:
        provider.resolve_named_tools(["search"], strict=True)
    assert (info.value.package, info.value.extra) == ("ddgs", "search")


def test_construction_failures_are_skipped_or_raised() -> None:
    def needs_docker() -> Tool:
        raise MissingExtraError("docker", "docker")

    def broken() -> Tool:
        raise RuntimeError("no config")

    provider = BuiltinToolProvider(
        builtins={"d": needs_docker, "b": broken, "ok": Echo}, aliases={}
    )
    with pytest.warns(ToolUnavailableWarning) as caught:
        tools = provider.resolve_named_tools(["d", "b", "ok"])
    assert [t.name for t in tools] == ["echo"]
    messages = [str(w.message) for w in caught]
    assert any("pip install 'jianmu[docker]'" in m for m in messages)
    assert any("'b' skipped: it could not be loaded (RuntimeError: no config)" in m
               for m in messages)
    with pytest.raises(RuntimeError, match="no config"):
        BuiltinToolProvider(builtins={"b": broken}, strict=True).get_tools()


def test_bad_module_paths_and_non_tools(fake_module: types.ModuleType) -> None:
    provider = BuiltinToolProvider(
        builtins={"gone": "jm_fake_tools:Gone", "dict": "jm_fake_tools:NotATool",
                  "nomod": "jm_no_such_module_xyz:Tool"},
        aliases={},
    )
    with pytest.raises(ImportError, match="has no 'Gone'"):
        provider.load("gone")
    with pytest.raises(TypeError, match="is not a Tool"):
        provider.load("dict")
    with pytest.raises(ModuleNotFoundError):
        provider.load("nomod")
    with pytest.raises(ToolNotFoundError, match="no built-in tool named 'zzz'"):
        provider.load("zzz")


def test_get_tools_returns_the_names_given_at_construction() -> None:
    provider = BuiltinToolProvider(["calculator", "file_read"], strict=True)
    assert [t.name for t in provider.get_tools()] == ["calculator", "read_file"]


def test_the_shared_default_is_resettable(fresh_default: None) -> None:
    shared = BuiltinToolProvider.default()
    shared.register_tool("echo", Echo)
    shared.register_alias("say", "echo")
    assert "echo" in BuiltinToolProvider.default().list_builtin_names()
    assert isinstance(BuiltinToolProvider.default().resolve_named_tools(["say"])[0], Echo)
    assert ToolSet.resolve(["say"]).names() == ["echo"]  # name resolution reads the same table
    assert BuiltinToolProvider.default() is shared
    BuiltinToolProvider.reset_default()
    assert "echo" not in BuiltinToolProvider.default().list_builtin_names()
    # A new provider never sees what the shared one registered.
    BuiltinToolProvider.default().register_tool("echo", Echo)
    assert "echo" not in BuiltinToolProvider().list_builtin_names()


def test_instances_do_not_share_registries() -> None:
    a, b = BuiltinToolProvider(), BuiltinToolProvider()
    a.register_tool("echo", Echo)
    assert "echo" in a.list_builtin_names() and "echo" not in b.list_builtin_names()
    assert "echo" not in DEFAULT_BUILTINS


