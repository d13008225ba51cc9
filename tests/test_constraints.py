"""Constraints.merge: nearer layers may tighten, never loosen."""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu.constraints import Constraints, ExecutionConstraints, GuardConstraints
from jianmu.errors import ConfigError


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
