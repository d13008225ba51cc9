"""Constraints.merge: nearer layers may tighten, never loosen."""

from __future__ import annotations

import copy
import dataclasses
import itertools
from pathlib import Path

import pytest

from jianmu import plugins
from jianmu.constraints import (
    DEFAULT_IMAGE,
    DEFAULT_MAX_ITERATIONS,
    DEFAULT_TIMEOUT_S,
    SANDBOX_DEFAULTS,
    Constraints,
    ExecutionConstraints,
    GuardConstraints,
    SandboxDefaults,
    SkillConstraints,
    _detached,
    is_read_only,
    once_per_read_only,
    read_only,
)
from jianmu.errors import ConfigError
from jianmu.runtime.runner import run_constraints


def layer(**kw: object) -> Constraints:
    return Constraints.model_validate(kw)


def test_numeric_limits_take_the_smallest() -> None:
    merged = Constraints.merge(
        layer(max_iterations=10, timeout=60, max_messages=50,
              guard={"max_tool_calls": 20, "budget": {"total_tokens": 1000}}),
        layer(max_iterations=5, timeout=120, guard={"max_tool_calls": 30}),
        layer(max_messages=10, guard={"budget": {"total_tokens": 5000}}),
    )
    assert merged.max_iterations == 5
    assert merged.timeout == 60
    assert merged.max_messages == 10
    assert merged.guard.max_tool_calls == 20
    assert merged.guard.budget.total_tokens == 1000


def test_policy_takes_the_strictest_over_every_layer() -> None:
    config = layer(guard={"tool_policy": {"write_file": "confirm", "bash": "allow"}})
    skill = layer(guard={"tool_policy": {"write_file": "allow", "bash": "deny"}})
    merged = Constraints.merge(config, skill)
    assert merged.guard.tool_policy == {"write_file": "confirm", "bash": "deny"}


def test_default_policy_counts_for_tools_a_layer_does_not_name() -> None:
    config = layer(guard={"default_policy": "confirm"})
    skill = layer(guard={"tool_policy": {"http_request": "allow"}, "default_policy": "allow"})
    merged = Constraints.merge(config, skill)
    assert merged.guard.tool_policy["http_request"] == "confirm"
    assert merged.guard.default_policy == "confirm"


def test_network_false_and_docker_anywhere_win_and_the_image_stays() -> None:
    merged = ExecutionConstraints.merge(
        ExecutionConstraints(mode="docker", network=False, docker_image="a", memory_mb=512),
        ExecutionConstraints(network=True, docker_image="b", memory_mb=1024, mode="local"),
    )
    assert merged.network is False
    assert merged.docker_image == "a" and merged.mode == "docker"
    assert merged.memory_mb == 512
    assert ExecutionConstraints.merge(ExecutionConstraints(network=True)).network is True
    nearer = ExecutionConstraints.merge(ExecutionConstraints(), ExecutionConstraints(mode="docker"))
    assert nearer.mode == "docker"


def test_workdir_may_only_narrow(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    outer = ExecutionConstraints(workdir=str(tmp_path))
    narrowed = ExecutionConstraints.merge(outer, ExecutionConstraints(workdir="sub"))
    assert narrowed.workdir == str((tmp_path / "sub").resolve())
    inside = ExecutionConstraints.merge(outer, ExecutionConstraints(workdir=str(tmp_path / "sub")))
    assert inside.workdir == narrowed.workdir
    for escape in ("/", "..", "sub/../..", str(tmp_path.parent)):
        with pytest.raises(ConfigError, match="outside the workspace"):
            ExecutionConstraints.merge(outer, ExecutionConstraints(workdir=escape))


def test_rate_limits_take_the_smallest_per_tool() -> None:
    merged = GuardConstraints.merge(
        GuardConstraints(rate_limits={"http_request": 10}),
        GuardConstraints(rate_limits={"http_request": 30, "bash": 2}),
    )
    assert merged.rate_limits == {"bash": 2, "http_request": 10}


def test_merge_of_nothing_is_empty() -> None:
    assert Constraints.merge() == Constraints()
    assert Constraints.merge(None, layer(max_iterations=3)).max_iterations == 3


# -- the tighter value may sit in any layer -------------------------------------------------

NUMERIC = {
    "max_iterations": ({"max_iterations": 3}, {"max_iterations": 7}, lambda c: c.max_iterations),
    "timeout": ({"timeout": 3}, {"timeout": 7}, lambda c: c.timeout),
    "max_messages": ({"max_messages": 3}, {"max_messages": 7}, lambda c: c.max_messages),
    "max_tool_calls": ({"guard": {"max_tool_calls": 3}}, {"guard": {"max_tool_calls": 7}},
                       lambda c: c.guard.max_tool_calls),
    "total_tokens": ({"guard": {"budget": {"total_tokens": 3}}},
                     {"guard": {"budget": {"total_tokens": 7}}},
                     lambda c: c.guard.budget.total_tokens),
    "rate_limits": ({"guard": {"rate_limits": {"bash": 3}}},
                    {"guard": {"rate_limits": {"bash": 7}}},
                    lambda c: c.guard.rate_limits["bash"]),
    "timeout_s": ({"execution": {"timeout_s": 3}}, {"execution": {"timeout_s": 7}},
                  lambda c: c.execution.timeout_s),
    "memory_mb": ({"execution": {"memory_mb": 3}}, {"execution": {"memory_mb": 7}},
                  lambda c: c.execution.memory_mb),
    "cpus": ({"execution": {"cpus": 3}}, {"execution": {"cpus": 7}}, lambda c: c.execution.cpus),
    "pids": ({"execution": {"pids": 3}}, {"execution": {"pids": 7}}, lambda c: c.execution.pids),
}


@pytest.mark.parametrize("field", sorted(NUMERIC))
@pytest.mark.parametrize("tight_at", [0, 1, 2])
@pytest.mark.parametrize("skill", [False, True])
def test_a_limit_takes_the_smallest_wherever_it_sits(
    field: str, tight_at: int, skill: bool
) -> None:
    tight, loose, read = NUMERIC[field]
    layers = [layer(**loose) for _ in range(3)]
    layers[tight_at] = layer(**tight)
    if skill:  # the nearest layer is a skill's: it may tighten, never loosen
        layers[2] = SkillConstraints.of(layers[2])
    assert read(Constraints.merge(*layers)) == 3
    assert read(Constraints.merge(*layers[tight_at:])) == 3
    if tight_at < 2:
        assert read(Constraints.merge(layers[tight_at], layers[2])) == 3


@pytest.mark.parametrize("order", list(itertools.permutations(["allow", "confirm", "deny"])))
def test_default_policy_is_the_strictest_in_any_order(order: tuple[str, ...]) -> None:
    layers = [layer(guard={"default_policy": p}) for p in order]
    assert Constraints.merge(*layers).guard.default_policy == "deny"
    without_deny = [c for c, p in zip(layers, order, strict=True) if p != "deny"]
    assert Constraints.merge(*without_deny).guard.default_policy == "confirm"
    assert Constraints.merge(None, layers[0], None).guard.default_policy == order[0]


@pytest.mark.parametrize("order", list(itertools.permutations(["allow", "confirm", "deny"])))
def test_a_tool_policy_is_the_strictest_in_any_order(order: tuple[str, ...]) -> None:
    layers = [layer(guard={"tool_policy": {"bash": p}}) for p in order]
    assert Constraints.merge(*layers).guard.tool_policy == {"bash": "deny"}
    # a layer that does not name the tool speaks through its default_policy
    named = layer(guard={"tool_policy": {"bash": order[0]}})
    default = layer(guard={"default_policy": order[1]})
    expected = max(order[:2], key=["allow", "confirm", "deny"].index)
    assert Constraints.merge(named, default).guard.tool_policy == {"bash": expected}
    assert Constraints.merge(default, named).guard.tool_policy == {"bash": expected}


@pytest.mark.parametrize("false_at", [0, 1, 2])
def test_network_false_anywhere_wins_and_otherwise_the_nearest_speaks(false_at: int) -> None:
    layers = [ExecutionConstraints(network=True) for _ in range(3)]
    layers[false_at] = ExecutionConstraints(network=False)
    assert ExecutionConstraints.merge(*layers).network is False
    unset = ExecutionConstraints.merge(ExecutionConstraints(), ExecutionConstraints())
    assert unset.network is None
    assert ExecutionConstraints.merge(ExecutionConstraints(), layers[(false_at + 1) % 3]).network


@pytest.mark.parametrize("docker_at", [0, 1, 2])
def test_docker_anywhere_wins_and_the_farthest_image_stays(docker_at: int) -> None:
    layers = [ExecutionConstraints(mode="local", docker_image=f"img{i}") for i in range(3)]
    layers[docker_at] = ExecutionConstraints(mode="docker")
    merged = ExecutionConstraints.merge(*layers)
    assert merged.mode == "docker"
    assert merged.docker_image == ("img1" if docker_at == 0 else "img0")
    assert ExecutionConstraints.merge(layers[(docker_at + 1) % 3]).mode == "local"


def test_rate_limits_keep_every_tool_of_every_layer() -> None:
    merged = GuardConstraints.merge(
        GuardConstraints(rate_limits={"bash": 5}),
        GuardConstraints(rate_limits={"http_request": 2, "bash": 1}),
        GuardConstraints(rate_limits={"read_file": 9}),
    )
    assert merged.rate_limits == {"bash": 1, "http_request": 2, "read_file": 9}
    assert list(merged.rate_limits) == sorted(merged.rate_limits)


# -- a skill's layer is measured against what would really apply ------------------------------


def skill_layer(**kw: object) -> SkillConstraints:
    return SkillConstraints.of(layer(**kw))


DOCKER = SANDBOX_DEFAULTS["docker"]
LOCAL = SANDBOX_DEFAULTS["local"]


@pytest.mark.parametrize(("mode", "expected"), [
    (None, (DEFAULT_TIMEOUT_S, LOCAL.memory_mb, 64.0, LOCAL.pids)),  # local: no cpu limit
    ("docker", (DEFAULT_TIMEOUT_S, DOCKER.memory_mb, DOCKER.cpus, DOCKER.pids)),
])
def test_a_skill_cannot_raise_a_sandbox_limit_past_the_default(
    mode: str | None, expected: tuple[object, ...]
) -> None:
    greedy = skill_layer(execution={"timeout_s": 100000, "memory_mb": 100000, "cpus": 64,
                                    "pids": 100000})
    e = Constraints.merge(layer(execution={"mode": mode}), greedy).execution
    assert (e.timeout_s, e.memory_mb, e.cpus, e.pids) == expected
    # limits a skill set under local mode (capped by its defaults) stay when another turns
    # docker on: still no looser than what the operator's local mode would apply
    docker = skill_layer(execution={"mode": "docker"})
    e = Constraints.merge(Constraints(), greedy, docker).execution
    assert e.mode == "docker" and e.memory_mb == LOCAL.memory_mb
    # skill layers merged first are measured together, against docker's defaults
    e = Constraints.merge(Constraints(), Constraints.merge(greedy, skill_layer(
        execution={"mode": "docker"}))).execution
    assert (e.mode, e.memory_mb, e.cpus, e.pids) == ("docker", 512, 1.0, 256)


def test_a_skill_cannot_raise_what_the_operator_set_but_may_lower_it() -> None:
    operator = layer(max_iterations=50, timeout=600, max_messages=40,
                     guard={"max_tool_calls": 9, "budget": {"total_tokens": 100},
                            "rate_limits": {"bash": 4}},
                     execution={"mode": "docker", "timeout_s": 300, "memory_mb": 2048,
                                "cpus": 4, "pids": 1000})
    greedy = skill_layer(max_iterations=99, timeout=9999, max_messages=99,
                         guard={"max_tool_calls": 99, "budget": {"total_tokens": 999},
                                "rate_limits": {"bash": 99}},
                         execution={"timeout_s": 9999, "memory_mb": 9999, "cpus": 99,
                                    "pids": 9999})
    merged = Constraints.merge(operator, greedy)
    assert merged == Constraints.merge(operator)  # the operator may go past the defaults
    modest = skill_layer(max_iterations=2, timeout=2, max_messages=2,
                         guard={"max_tool_calls": 2, "budget": {"total_tokens": 2},
                                "rate_limits": {"bash": 2}},
                         execution={"timeout_s": 2, "memory_mb": 2, "cpus": 2, "pids": 2})
    tight = Constraints.merge(operator, modest)
    assert (tight.max_iterations, tight.timeout, tight.max_messages) == (2, 2, 2)
    assert (tight.guard.max_tool_calls, tight.guard.budget.total_tokens) == (2, 2)
    assert tight.guard.rate_limits == {"bash": 2}
    e = tight.execution
    assert (e.timeout_s, e.memory_mb, e.cpus, e.pids) == (2, 2, 2, 2)


def test_a_node_layer_may_set_what_the_config_left_unset() -> None:
    """design.md: the config and a node's layer are the operator's; only a skill's is
    measured against the built-in defaults."""
    node = {"execution": {"memory_mb": 4096, "network": True}, "max_iterations": 500}
    merged = Constraints.merge(layer(), layer(**node))
    assert (merged.execution.memory_mb, merged.execution.network) == (4096, True)
    assert merged.max_iterations == 500
    capped = Constraints.merge(layer(), skill_layer(**node))
    assert (capped.execution.memory_mb, capped.execution.network) == (LOCAL.memory_mb, None)
    assert capped.max_iterations == DEFAULT_MAX_ITERATIONS


def test_loop_limits_of_a_skill_are_measured_against_the_defaults() -> None:
    merged = Constraints.merge(Constraints(), skill_layer(max_iterations=1000, timeout=5,
                                                          max_messages=1000))
    assert merged.max_iterations == DEFAULT_MAX_ITERATIONS
    assert (merged.timeout, merged.max_messages) == (5, 1000)  # no default: any is tighter
    assert Constraints.merge(Constraints(), skill_layer(max_iterations=3)).max_iterations == 3
    unset = Constraints.merge(Constraints(), skill_layer())
    assert unset == Constraints() and type(unset) is Constraints


def test_a_skill_cannot_turn_the_network_on_but_may_turn_it_off() -> None:
    on = skill_layer(execution={"network": True})
    off = skill_layer(execution={"network": False})
    assert Constraints.merge(Constraints(), on).execution.network is None  # unset: off
    assert Constraints.merge(layer(execution={"network": False}), on).execution.network is False
    assert Constraints.merge(layer(execution={"network": True}), on).execution.network is True
    assert Constraints.merge(layer(execution={"network": True}), off).execution.network is False
    assert Constraints.merge(Constraints(), off).execution.network is False


def test_a_skill_cannot_choose_the_image_or_leave_docker() -> None:
    docker = layer(execution={"mode": "docker", "docker_image": "ops/img"})
    with pytest.raises(ConfigError, match="docker_image 'evil/img'"):
        Constraints.merge(docker, skill_layer(execution={"docker_image": "evil/img"}))
    with pytest.raises(ConfigError, match="docker_image 'evil/img'"):
        Constraints.merge(Constraints(), skill_layer(execution={"docker_image": "evil/img"}))
    with pytest.raises(ConfigError, match="mode 'local'"):
        Constraints.merge(docker, skill_layer(execution={"mode": "local"}))
    same = Constraints.merge(docker, skill_layer(execution={"docker_image": "ops/img"}))
    assert same.execution.docker_image == "ops/img" and same.execution.mode == "docker"
    assert Constraints.merge(Constraints(), skill_layer(
        execution={"docker_image": DEFAULT_IMAGE, "mode": "local"})).execution.mode is None
    into = Constraints.merge(Constraints(), skill_layer(execution={"mode": "docker"}))
    assert (into.execution.mode, into.execution.docker_image) == ("docker", None)


def test_a_skill_cannot_allow_anything() -> None:
    base = layer(guard={"tool_policy": {"read_file": "allow"}, "default_policy": "confirm"})
    skill = skill_layer(guard={"tool_policy": {"bash": "allow", "read_file": "confirm",
                                               "write_file": "deny"},
                               "default_policy": "allow"})
    guard = Constraints.merge(base, skill).guard
    assert guard.tool_policy == {"read_file": "confirm", "write_file": "deny"}
    assert guard.default_policy == "confirm"
    guard = Constraints.merge(Constraints(), skill).guard
    assert guard.tool_policy == {"read_file": "confirm", "write_file": "deny"}
    assert guard.default_policy is None
    stricter = Constraints.merge(Constraints(), skill_layer(guard={"default_policy": "deny"}))
    assert stricter.guard.default_policy == "deny"


def test_a_skill_workdir_is_measured_against_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    for escape in ("/", "..", str(tmp_path.parent)):
        with pytest.raises(ConfigError, match="outside the workspace"):
            Constraints.merge(Constraints(), skill_layer(execution={"workdir": escape}))
    inside = Constraints.merge(Constraints(), skill_layer(execution={"workdir": "sub"}))
    assert inside.execution.workdir == str((tmp_path / "sub").resolve())
    base = layer(execution={"workdir": str(tmp_path / "sub")})
    with pytest.raises(ConfigError, match="outside the workspace"):
        Constraints.merge(base, skill_layer(execution={"workdir": str(tmp_path)}))
    assert Constraints.merge(base, skill_layer()).execution.workdir == str(tmp_path / "sub")
    # an operator may point the workspace anywhere
    assert Constraints.merge(layer(execution={"workdir": "/"})).execution.workdir == "/"


def test_skill_layers_merge_among_themselves_then_meet_the_operator(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    pair = Constraints.merge(skill_layer(execution={"network": True, "workdir": "a"}),
                             layer(execution={"workdir": "b"}, max_iterations=50))
    assert isinstance(pair, SkillConstraints)  # still untrusted until measured
    merged = Constraints.merge(layer(execution={"workdir": str(tmp_path)}), pair)
    assert type(merged) is Constraints
    assert merged.execution.network is None and merged.max_iterations == DEFAULT_MAX_ITERATIONS
    assert merged.execution.workdir == str((tmp_path / "a" / "b").resolve())
    assert SkillConstraints.of(pair) is pair
    assert SkillConstraints.of(None) == SkillConstraints()
    lone = Constraints.merge(pair)
    assert lone == pair and lone is not pair and isinstance(lone, SkillConstraints)


def test_the_run_resolves_the_workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    # unset stays unset (the working folder), so an operator's node may still pick its own
    assert run_constraints(None).execution.workdir is None
    node = Constraints.merge(run_constraints(None), layer(execution={"workdir": "/srv"}))
    assert node.execution.workdir == "/srv"
    with pytest.raises(ConfigError):  # while a skill stays inside the working folder
        Constraints.merge(run_constraints(None), SkillConstraints.of(
            layer(execution={"workdir": "/"})))
    assert run_constraints(layer(execution={"workdir": "ws"})).execution.workdir == str(
        tmp_path / "ws")
    assert run_constraints(layer(max_iterations=2)).max_iterations == 2


class _HttpTool:
    """What a ToolRunner needs of a tool (`RunnableTool`), for a tool that talks HTTP."""

    name = "http_request"
    effect_tags = ("http",)
    timeout_seconds = None
    sandboxed = False
    is_async = True

    async def invoke(self, args: dict[str, object], executor: object = None) -> str:
        return "fetched"


@pytest.mark.anyio
async def test_in_process_network_tools_are_refused_only_by_an_explicit_false(
    tmp_path: Path,
) -> None:
    from jianmu.errors import ToolExecutionError
    from jianmu.execution.runner import ToolRunner
    from jianmu.execution.sandbox import FakeSandbox

    fake = FakeSandbox(lambda *args, **kwargs: None)
    async with ToolRunner(ExecutionConstraints(workdir=str(tmp_path)), sandbox=fake) as runner:
        assert await runner.run(_HttpTool(), {}) == "fetched"
    off = ExecutionConstraints(workdir=str(tmp_path), network=False)
    async with ToolRunner(off, sandbox=fake) as runner:
        with pytest.raises(ToolExecutionError, match="network"):
            await runner.run(_HttpTool(), {})


@pytest.mark.parametrize(("network", "expected"), [(None, False), (False, False), (True, True)])
def test_the_sandbox_has_no_network_unless_it_is_turned_on(
    tmp_path: Path, network: bool | None, expected: bool
) -> None:
    from jianmu.execution.local_sandbox import bwrap_available
    from jianmu.execution.runner import ToolRunner

    if not bwrap_available(network=False):
        pytest.skip("cutting the network needs bubblewrap")
    runner = ToolRunner(ExecutionConstraints(workdir=str(tmp_path), network=network))
    assert runner.sandbox.network is expected  # type: ignore[attr-defined]
    assert runner.sandbox.timeout == DEFAULT_TIMEOUT_S  # type: ignore[attr-defined]


@pytest.mark.parametrize(("field", "lowest"), [
    ("max_iterations", 1), ("max_messages", 1), ("timeout", 0.001),
    ("guard.max_tool_calls", 0), ("guard.budget.total_tokens", 0),
    ("execution.timeout_s", 0.001), ("execution.memory_mb", 1), ("execution.cpus", 0.001),
    ("execution.pids", 1),
])
def test_each_limit_accepts_its_lowest_value_and_nothing_below(field: str, lowest: float) -> None:
    def nested(value: float) -> dict[str, object]:
        *path, name = field.split(".")
        tree: dict[str, object] = {name: value}
        for part in reversed(path):
            tree = {part: tree}
        return tree

    assert Constraints.model_validate(nested(lowest))
    if lowest == 0.001:
        assert Constraints.model_validate(nested(1))  # a whole second is fine too
    below = 0 if lowest != 0 else -1
    with pytest.raises(ValueError, match="greater than"):
        Constraints.model_validate(nested(below))


def test_a_layer_without_a_workdir_leaves_the_next_ones(tmp_path: Path) -> None:
    merged = ExecutionConstraints.merge(
        ExecutionConstraints(), ExecutionConstraints(workdir=str(tmp_path)),
        ExecutionConstraints(), ExecutionConstraints(workdir=str(tmp_path)),
    )
    assert merged.workdir == str(tmp_path.resolve())


def test_the_documented_defaults() -> None:
    assert (DEFAULT_TIMEOUT_S, DEFAULT_MAX_ITERATIONS, DEFAULT_IMAGE) == (
        60.0, 10, "jianmu-sandbox:latest")
    assert SANDBOX_DEFAULTS["docker"] == SandboxDefaults(60.0, 512, 1.0, 256)
    assert SANDBOX_DEFAULTS["local"] == SandboxDefaults(60.0, 1024, None, 256)
    with pytest.raises(dataclasses.FrozenInstanceError):
        SANDBOX_DEFAULTS["docker"].pids = 1  # type: ignore[misc]


def test_policies_are_lower_cased_and_assignments_validated() -> None:
    guard = GuardConstraints.model_validate({"tool_policy": {"bash": "DENY", "ls": "Allow"}})
    assert guard.tool_policy == {"bash": "deny", "ls": "allow"}
    with pytest.raises(ValueError):
        GuardConstraints.model_validate({"tool_policy": "bash"})
    with pytest.raises(ValueError):
        guard.max_tool_calls = -1
    with pytest.raises(ValueError):
        ExecutionConstraints().pids = 0


@pytest.mark.parametrize("image", ["evil/img", "zzz/img"])  # before and after the default
def test_any_other_image_is_refused_and_an_equal_one_is_not(image: str) -> None:
    with pytest.raises(ConfigError, match="docker_image"):
        Constraints.merge(Constraints(), skill_layer(execution={"docker_image": image}))
    same = "".join(["jianmu-sandbox", ":latest"])  # equal, not the same object
    merged = Constraints.merge(Constraints(), skill_layer(execution={"docker_image": same}))
    assert merged.execution.docker_image is None


def test_a_merge_never_hands_back_a_callers_layer() -> None:
    mine = layer(guard={"tool_policy": {"bash": "confirm"}})
    merged = Constraints.merge(mine)
    merged.guard.tool_policy["bash"] = "allow"
    merged.execution.pids = 1
    assert mine.guard.tool_policy == {"bash": "confirm"} and mine.execution.pids is None


def test_detached_constraints_equal_a_deep_copy_and_share_nothing() -> None:
    layer = Constraints.model_validate({
        "guard": {"tool_policy": {"bash": "deny"}, "rate_limits": {"x": 3},
                  "checkers": ["policy"], "budget": {"total_tokens": 9}},
        "execution": {"workdir": "/tmp", "network": False}, "max_iterations": 3,
    })
    for original in (layer, SkillConstraints.of(layer)):
        copied = _detached(original)
        assert copied == copy.deepcopy(original) and type(copied) is type(original)
        assert copied.model_fields_set == original.model_fields_set
        copied.guard.tool_policy["bash"] = "allow"
        copied.guard.budget.total_tokens = 1
        assert original.guard.tool_policy["bash"] == "deny"
        assert original.guard.budget.total_tokens == 9


def test_a_read_only_layer_merges_into_a_constraints_of_ones_own() -> None:
    shared = read_only(layer(guard={"tool_policy": {"bash": "confirm"}, "rate_limits": {"x": 3},
                                    "checkers": ["policy"]}))
    with pytest.raises(ConfigError, match="read-only"):
        shared.guard.tool_policy["bash"] = "allow"
    with pytest.raises(ConfigError, match="read-only"):
        shared.guard.checkers.append("confirm")  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="read-only"):
        shared.execution.pids = 1
    merged = Constraints.merge(shared)
    merged.guard.tool_policy["bash"] = "allow"
    merged.guard.checkers.append("confirm")  # type: ignore[union-attr]
    merged.execution.pids = 1
    assert shared.guard.tool_policy == {"bash": "confirm"} and shared.execution.pids is None
    assert shared.guard.checkers == ["policy"]
    assert not is_read_only(merged) and is_read_only(shared)
    assert copy.deepcopy(shared) == shared and not is_read_only(copy.deepcopy(shared))


def test_guardrails_unite_every_layer_in_order_without_repeats() -> None:
    def guarded(**kinds: list[str]) -> Constraints:
        return Constraints.model_validate({"guard": {"guardrails": kinds}})

    with plugins.registered("guardrail", "pii", "jianmu.guard.guardrails:PromptInjectionGuardrail"):
        merged = Constraints.merge(
            guarded(input=["pii"], tool_output=["prompt_injection"]),
            guarded(input=["pii", "prompt_injection"]),
            SkillConstraints.model_validate(
                {"guard": {"guardrails": {"output": ["pii"], "tool_output": []}}}
            ),
        )
    guardrails = merged.guard.guardrails
    assert guardrails.input == ["pii", "prompt_injection"]
    assert guardrails.output == ["pii"]
    assert guardrails.tool_output == ["prompt_injection"]  # an empty list drops nothing


def test_a_skill_adds_guardrails_and_never_removes_the_runs() -> None:
    run = Constraints.model_validate(
        {"guard": {"guardrails": {"tool_output": ["prompt_injection"]}}})
    skill = SkillConstraints.model_validate(
        {"guard": {"guardrails": {"input": ["prompt_injection"]}}})
    merged = Constraints.merge(run, skill)
    assert merged.guard.guardrails.tool_output == ["prompt_injection"]
    assert merged.guard.guardrails.input == ["prompt_injection"]
    unset = Constraints.merge(Constraints(), Constraints())
    assert unset.guard.guardrails.input is None  # nothing configured: nothing to run


def test_an_unknown_guardrail_is_refused_with_the_registered_names() -> None:
    with pytest.raises(ValueError, match=r"'nosuch' is not a registered guardrail.*prompt_inj"):
        Constraints.model_validate({"guard": {"guardrails": {"input": ["nosuch"]}}})


def test_once_per_read_only_keeps_a_read_only_models_result_and_reads_others_anew() -> None:
    kept: dict[int, str] = {}
    made: list[str] = []

    def make(model: ExecutionConstraints) -> str:
        made.append(model.model_dump_json())
        return made[-1]

    shared = read_only(ExecutionConstraints(timeout_s=5))
    assert once_per_read_only(shared, kept, make) == once_per_read_only(shared, kept, make)
    assert len(made) == 1  # worked out once
    plain = ExecutionConstraints(timeout_s=5)
    first = once_per_read_only(plain, kept, make)
    plain.timeout_s = 9  # a plain model may change: its result follows
    assert once_per_read_only(plain, kept, make) != first
    assert len(made) == 3 and id(plain) not in kept
