"""A nearer layer's `guard.checkers` (and `execution.read_only_paths`) adds to what is in
force, it never replaces it.

The README: "a nearer layer (including a SKILL.md) can add checkers but never remove one. If no
layer sets the list, the four built-in checkers run". A node that named only its own checker
under a run whose config set no list used to run that checker alone: the config's deny rules
went unchecked and a tool that asks first ran without asking. Likewise a node listing one more
read-only path (`.envrc`) made `jianmu.yaml`, `skills` and `.venv` writable again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jianmu import Constraints, ReactiveRunner, StateManager, plugins, tool
from jianmu.constraints import DEFAULT_READ_ONLY_PATHS, ExecutionConstraints, GuardConstraints
from jianmu.guard import BaseChecker, Decision, GuardContext
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.tools.providers import BuiltinToolProvider

CHAIN = ["policy", "rate_limit", "budget", "confirm"]


class AuditChecker(BaseChecker):
    """Looks at every call, decides nothing."""

    def check(self, context: GuardContext, previous: Decision) -> Decision:
        return previous


@pytest.fixture
def audit() -> Iterator[None]:
    with plugins.registered("checker", "audit", AuditChecker):
        yield


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@tool(read_only=False, confirm=True)
def save_note(text: str) -> str:
    """Save a note (a person approves first).

    Args:
        text: the note.
    """
    return f"saved {text}"


async def _run(run_layer: dict[str, Any], node_layer: dict[str, Any]) -> tuple[str, list[str]]:
    actions = [{"id": "1", "name": "save_note", "arguments": {"text": "x"}}]
    executor = ToolExecutor(tools=[save_note], constraints=Constraints.model_validate(node_layer))
    runner = ReactiveRunner(executor, StateManager(AgentState, {"actions": actions}),
                            constraints=Constraints.model_validate(run_layer))
    result = await runner.run(timeout=30)
    return result.status.value, [m.content for m in runner.state.get("messages") or []]


def test_a_nearer_list_adds_to_the_default_chain(audit: None) -> None:
    config, node = Constraints(), Constraints(guard=GuardConstraints(checkers=["audit"]))
    assert Constraints.merge(config, node).guard.checkers == [*CHAIN, "audit"]
    # a list in the farthest layer names the chain; nearer lists add to it
    chosen = Constraints(guard=GuardConstraints(checkers=["policy", "audit"]))
    assert Constraints.merge(chosen, Constraints()).guard.checkers == ["policy", "audit"]
    assert Constraints.merge(chosen, node).guard.checkers == ["policy", "audit"]
    assert Constraints.merge(Constraints(), Constraints()).guard.checkers is None


@pytest.mark.anyio
async def test_a_node_checker_does_not_skip_the_approval_of_a_tool_that_asks(audit: None) -> None:
    status, messages = await _run({}, {"guard": {"checkers": ["audit"]}})
    assert (status, messages) == ("suspended", [])


@pytest.mark.anyio
async def test_a_node_checker_does_not_lift_the_configs_deny(audit: None) -> None:
    status, messages = await _run({"guard": {"tool_policy": {"save_note": "deny"}}},
                                  {"guard": {"checkers": ["audit"]}})
    assert status == "success" and len(messages) == 1 and "denied" in messages[0], messages


def test_a_nearer_read_only_list_adds_to_the_default_paths() -> None:
    config = Constraints()
    node = Constraints(execution=ExecutionConstraints(read_only_paths=[".envrc"]))
    merged = Constraints.merge(config, node).execution.read_only_paths
    assert merged == [*DEFAULT_READ_ONLY_PATHS, ".envrc"]
    # the farthest layer's own list (the config's) may still leave a default out
    chosen = Constraints(execution=ExecutionConstraints(read_only_paths=[".git"]))
    assert Constraints.merge(chosen, node).execution.read_only_paths == [".git", ".envrc"]


@pytest.mark.anyio
async def test_a_node_read_only_path_does_not_unprotect_the_config_file(tmp_path: Path) -> None:
    actions = [{"id": "1", "name": "write_file",
                "arguments": {"path": "jianmu.yaml", "content": "mcp: {}\n"}}]
    node = Constraints.model_validate({"execution": {"read_only_paths": [".envrc"]}})
    executor = ToolExecutor(tools=BuiltinToolProvider(["write_file"]).get_tools(),
                            constraints=node)
    run = Constraints.model_validate({"execution": {"workdir": str(tmp_path)},
                                      "guard": {"tool_policy": {"write_file": "allow"}}})
    runner = ReactiveRunner(executor, StateManager(AgentState, {"actions": actions}),
                            constraints=run)
    await runner.run(timeout=30)
    (message,) = runner.state.get("messages")
    assert "refused" in message.content and not (tmp_path / "jianmu.yaml").exists(), message
