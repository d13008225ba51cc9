"""Plug-ins by name (jianmu/plugins.py): a toy sandbox, checker and provider from outside the
package, registered by "module:Class", by class and through a real entry point, and run by a
real ToolExecutor; and the errors for names and paths that do not resolve."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jianmu import Constraints, ReactiveRunner, StateManager, plugins
from jianmu.config import LLMConfig
from jianmu.constraints import ExecutionConstraints, GuardConstraints, SkillConstraints
from jianmu.errors import ConfigError, MissingExtraError
from jianmu.execution import ToolRunner
from jianmu.guard import GuardEnforcer, build_chain
from jianmu.llm import from_config
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.tools.providers import BuiltinToolProvider

HERE = Path(__file__).parent
CHAIN = ["policy", "rate_limit", "budget", "confirm"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def toy_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The toy plug-ins' folder on sys.path: importable as ``toy_plugins``, outside jianmu."""
    monkeypatch.syspath_prepend(str(HERE))
    yield


@pytest.fixture
def toys(toy_path: None) -> Iterator[None]:
    """The toy sandbox and checker registered by "module:Class" for one test."""
    with plugins.registered("sandbox", "toy", "toy_plugins:ToySandbox"), \
            plugins.registered("checker", "no_rm", "toy_plugins:NoRemoveChecker"):
        yield


@pytest.fixture
def entry_points(toy_path: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An installed distribution (a dist-info folder on sys.path) declaring the toys."""
    info = tmp_path / "site" / "toy_plugins_dist-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-plugins-dist\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[jianmu.plugins]\n"
        "sandbox.toy_ep = toy_plugins:ToySandbox\n"
        "checker.no_rm_ep = toy_plugins:NoRemoveChecker\n"
        "llm.echo_ep = toy_plugins:EchoLLM\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    plugins.reload_entry_points()
    yield
    monkeypatch.undo()
    plugins.reload_entry_points()


async def _run(mode: str, checker: str, workdir: Path) -> list[str]:
    constraints = Constraints.model_validate({
        "guard": {"tool_policy": {"bash": "allow"}, "checkers": [*CHAIN, checker]},
        "execution": {"mode": mode, "workdir": str(workdir)},
    })
    actions = [
        {"id": "a", "name": "bash", "arguments": {"command": "echo hello"}},
        {"id": "b", "name": "bash", "arguments": {"command": "rm -rf data"}},
    ]
    executor = ToolExecutor(tools=BuiltinToolProvider(["bash"]).get_tools(),
                            constraints=constraints)
    runner = ReactiveRunner(executor, StateManager(AgentState, {"actions": actions}))
    await runner.run(timeout=60)
    return [m.content or "" for m in runner.state.get("messages")]


@pytest.mark.anyio
async def test_a_toy_sandbox_and_checker_by_module_and_class(toys: None, tmp_path: Path) -> None:
    ran, denied = await _run("toy", "no_rm", tmp_path)
    assert "toy sandbox ran: echo hello" in ran
    assert "the toy checker forbids rm" in denied
    assert "toy sandbox ran" not in denied


@pytest.mark.anyio
async def test_a_toy_sandbox_and_checker_through_an_entry_point(
    entry_points: None, tmp_path: Path
) -> None:
    assert "toy_ep" in plugins.names("sandbox") and "no_rm_ep" in plugins.names("checker")
    ran, denied = await _run("toy_ep", "no_rm_ep", tmp_path)
    assert "toy sandbox ran: echo hello" in ran
    assert "the toy checker forbids rm" in denied


@pytest.mark.anyio
async def test_a_provider_plug_in_through_an_entry_point(entry_points: None) -> None:
    llm = from_config(LLMConfig(provider="echo_ep", model="e"))
    assert type(llm).__name__ == "EchoLLM" and llm.model == "e"
    reply = await llm.complete([{"role": "user", "content": "ping"}])
    assert reply.text == "ping"


def test_a_class_registers_as_itself(toy_path: None, tmp_path: Path) -> None:
    from toy_plugins import ToySandbox  # type: ignore[import-not-found]

    with plugins.registered("sandbox", "toy_cls", ToySandbox):
        runner = ToolRunner(ExecutionConstraints(mode="toy_cls", workdir=str(tmp_path)))
        assert isinstance(runner.sandbox, ToySandbox)
        assert runner.signature()[:2] == ("toy_cls", None)  # takes no image
    assert not plugins.is_registered("sandbox", "toy_cls")  # undone on leaving


def test_register_and_unregister(toy_path: None) -> None:
    plugins.register("checker", "no_rm_2", "toy_plugins:NoRemoveChecker")
    try:
        with pytest.raises(ConfigError, match="already registered"):
            plugins.register("checker", "no_rm_2", "toy_plugins:NoRemoveChecker")
        assert plugins.resolve("checker", "no_rm_2").__name__ == "NoRemoveChecker"
    finally:
        plugins.unregister("checker", "no_rm_2")
    assert "no_rm_2" not in plugins.names("checker")


def test_builtins_are_names_not_imports() -> None:
    assert plugins.names("checker")[:4] == tuple(CHAIN) == plugins.DEFAULT_CHECKERS
    assert {"local", "docker"} <= set(plugins.names("sandbox"))
    assert {"openai", "scripted"} <= set(plugins.names("llm"))
    chain = GuardEnforcer.from_guard_constraints(GuardConstraints()).checkers
    assert [c.name for c in chain] == [
        "ToolPolicyChecker", "RateLimitChecker", "BudgetChecker", "ConfirmChecker"
    ]


# -- merging across layers: tighten only ------------------------------------------------------


def test_a_plug_in_sandbox_takes_part_in_the_mode_merge(toys: None) -> None:
    local, docker, toy = (ExecutionConstraints(mode=m) for m in ("local", "docker", "toy"))
    assert ExecutionConstraints.merge(toy, docker, local).mode == "toy"  # highest rank wins
    assert ExecutionConstraints.merge(local, docker).mode == "docker"
    # a skill may move to a sandbox that isolates more, never to one that isolates less
    skill_toy = SkillConstraints(execution=ExecutionConstraints(mode="toy"))
    assert Constraints.merge(Constraints(execution=docker), skill_toy).execution.mode == "toy"
    skill_local = SkillConstraints(execution=ExecutionConstraints(mode="local"))
    with pytest.raises(ConfigError, match="cannot take code out of the 'toy' sandbox"):
        Constraints.merge(Constraints(execution=toy), skill_local)


def test_checkers_merge_by_union_so_a_layer_cannot_drop_one(toys: None) -> None:
    config = Constraints(guard=GuardConstraints(checkers=["policy", "budget"]))
    node = Constraints(guard=GuardConstraints(checkers=["no_rm", "policy"]))
    assert Constraints.merge(config, node).guard.checkers == ["policy", "budget", "no_rm"]
    # a skill measured against the default chain can only add to it
    skill = SkillConstraints(guard=GuardConstraints(checkers=["no_rm"]))
    assert Constraints.merge(Constraints(), skill).guard.checkers == [*CHAIN, "no_rm"]
    assert Constraints.merge(Constraints(), Constraints()).guard.checkers is None


def test_a_checker_reads_the_guard_settings_when_built(toy_path: None) -> None:
    with plugins.registered("checker", "max_tokens", "toy_plugins:MaxTokensChecker"):
        guard = GuardConstraints(checkers=["max_tokens"], budget={"total_tokens": 7})
        (checker,) = build_chain(guard)
    assert checker.name == "MaxTokensChecker" and checker.budget == 7  # type: ignore[attr-defined]


# -- errors -----------------------------------------------------------------------------------


def test_an_unknown_name_lists_the_registered_ones() -> None:
    with pytest.raises(ConfigError, match=r"'nope' is not a registered sandbox; registered: "
                                          r"local, docker"):
        plugins.resolve("sandbox", "nope")
    with pytest.raises(ValueError, match=r"execution.mode: 'nope' is not a registered sandbox"):
        ExecutionConstraints(mode="nope")
    with pytest.raises(ValueError, match=r"guard.checkers: 'nope' is not a registered checker; "
                                         r"registered: policy, rate_limit, budget, confirm"):
        GuardConstraints(checkers=["policy", "nope"])
    with pytest.raises(ValueError, match=r"llm.provider: 'nope' is not a registered llm"):
        LLMConfig(provider="nope")
    with pytest.raises(ConfigError, match="unknown plug-in kind 'widget'"):
        plugins.names("widget")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("jianmu_no_such_module:Thing", "module 'jianmu_no_such_module' cannot be imported"),
        ("toy_plugins:Missing", "module 'toy_plugins' has no 'Missing'"),
        ("toy_plugins:", "write the target as 'module:Class'"),
        ("toy_plugins:CHAIN_NAME", "is 'x', not a class"),
        ("toy_plugins:NotAChecker", "NotAChecker is not a checker: it lacks check"),
    ],
)
def test_a_bad_target_names_the_kind_the_name_and_the_path(
    toy_path: None, monkeypatch: pytest.MonkeyPatch, target: str, message: str
) -> None:
    import toy_plugins

    monkeypatch.setattr(toy_plugins, "CHAIN_NAME", "x", raising=False)
    with plugins.registered("checker", "broken", target), \
            pytest.raises(ConfigError, match=message) as caught:
        plugins.resolve("checker", "broken")
    assert "checker 'broken'" in str(caught.value)


def test_register_refuses_what_cannot_be_a_target() -> None:
    with pytest.raises(ConfigError, match="must be a class or a 'module:Class' string"):
        plugins.register("checker", "bad", "no colon")
    with pytest.raises(ConfigError, match=r"without '\.'"):
        plugins.register("checker", "a.b", "m:C")


def test_a_checker_class_that_builds_no_checker_is_refused(toy_path: None) -> None:
    with plugins.registered("checker", "nothing", "toy_plugins:BuildsNothing"), \
            pytest.raises(ConfigError, match=r"'nothing' built .* which is not a guard checker"):
        GuardEnforcer.from_guard_constraints(GuardConstraints(checkers=["nothing"]))


def test_a_missing_dependency_of_a_built_in_names_the_extra(toy_path: None) -> None:
    with plugins.registered("sandbox", "docker", "toy_needs_extra:Sandbox"), \
            pytest.raises(MissingExtraError, match=r"pip install 'jianmu\[docker\]'"):
        plugins.resolve("sandbox", "docker")


def test_an_entry_point_cannot_replace_a_built_in(
    toy_path: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = tmp_path / "evil-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: evil\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[jianmu.plugins]\nsandbox.docker = toy_plugins:ToySandbox\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    plugins.reload_entry_points()
    try:
        with pytest.warns(UserWarning, match="built-in sandbox and cannot be replaced"):
            names: Any = plugins.names("sandbox")
        assert plugins.resolve("sandbox", "docker").__name__ == "DockerSandbox"
        assert list(names).count("docker") == 1
    finally:
        monkeypatch.undo()
        plugins.reload_entry_points()


def test_resolve_follows_what_is_registered_now() -> None:
    class First:
        name = "first"

        @classmethod
        def from_setup(cls, setup: Any) -> Any:
            return cls()

        def check(self, context: Any, previous: Any) -> Any:
            return previous

    class Second(First):
        name = "second"

    with plugins.registered("checker", "perf_probe", First):
        assert plugins.resolve("checker", "perf_probe") is First
        assert plugins.resolve("checker", "perf_probe") is First
        plugins.register("checker", "perf_probe", Second, replace=True)
        assert plugins.resolve("checker", "perf_probe") is Second


def test_is_builtin_until_a_registration_replaces_it() -> None:
    assert plugins.is_builtin("checker", "policy")
    assert not plugins.is_builtin("checker", "no_such_checker")
    with plugins.registered("checker", "policy", "jianmu.guard.checkers:BudgetChecker"):
        assert not plugins.is_builtin("checker", "policy")
    assert plugins.is_builtin("checker", "policy")
    with pytest.raises(ConfigError, match="unknown plug-in kind"):
        plugins.is_builtin("nope", "policy")  # type: ignore[arg-type]


@pytest.mark.parametrize(("code", "message"), [
    ("raise RuntimeError('boom at import')",
     r"importing module 'jianmu_toy_broken_\d' failed: RuntimeError: boom at import"),
    ("import sys\nsys.exit(7)", r"importing module 'jianmu_toy_broken_\d' called sys.exit\(7\)"),
])
def test_a_plug_in_whose_module_fails_at_import_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: str, message: str
) -> None:
    """A plug-in module raising at import went out as its own error (a traceback from the
    CLI), and a sys.exit() there ended the process."""
    name = f"jianmu_toy_broken_{len(code) % 10}"
    (tmp_path / f"{name}.py").write_text(code + "\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    with plugins.registered("checker", "broken", f"{name}:Thing"), \
            pytest.raises(ConfigError, match=message) as caught:
        plugins.resolve("checker", "broken")
    assert "checker 'broken'" in str(caught.value)
    assert name not in sys.modules
