"""A path rule holds when a link is swapped between the guard's check and the tool's open.

The guard reads a call's path through the links it finds (``docs/link -> pub`` is allowed
under ``read_file(path:secrets/*): deny``), then the tool resolves the path again and opens
what it finds. Code running meanwhile (another run's sandbox on the workspace, or this run's
own `bash`, which may run while an in-process tool does) can point ``docs/link`` at
``../secrets/key`` in between: the tool then read the file the rule denies. The tool must
open only what the guard saw.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jianmu import Constraints, ReactiveRunner, StateManager
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.nodes.tool_node import ToolNode
from jianmu.tools.registry import ToolSet
from tests.support.swapper import Swapper

pytestmark = pytest.mark.anyio

SECRET = "TOPSECRET-race"
CALLS = 300


@pytest.fixture
def racing(tmp_path: Path) -> Iterator[Path]:
    ws = tmp_path / "ws"
    (ws / "secrets").mkdir(parents=True)
    (ws / "secrets" / "key").write_text(SECRET + "\n")
    (ws / "docs").mkdir()
    (ws / "docs" / "pub").write_text("public\n")
    (ws / "docs" / "link").symlink_to("pub")
    (ws / "docs" / "link.alt").symlink_to(Path("..") / "secrets" / "key")
    with Swapper(ws / "docs" / "link", ws / "docs" / "link.alt", tmp_path / "stop"):
        yield ws


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read_file", {"path": "docs/link"}),
        ("grep_search", {"pattern": "TOPSECRET", "path": "docs/link"}),
        ("file_info", {"path": "docs/link"}),
    ],
)
async def test_a_link_swapped_after_the_check_reads_nothing_denied(
    racing: Path, tool: str, args: dict[str, str]
) -> None:
    rule = f"{tool}(path:secrets/*)"
    constraints = Constraints.model_validate(
        {"guard": {"tool_policy": {tool: "allow", rule: "deny"}},
         "execution": {"workdir": str(racing)}}
    )
    actions = [{"id": f"c{i}", "name": tool, "arguments": args} for i in range(CALLS)]
    state = StateManager(AgentState, {"actions": actions})
    executor = ToolExecutor(tools=ToolSet.resolve([tool]), constraints=constraints)
    runner = ReactiveRunner(executor, state, interactive=False)
    await runner.run(timeout=300)
    said = [m.content or "" for m in runner.state.get("messages")]
    assert len(said) == CALLS
    leaked = [s for s in said if SECRET in s or "14 B" in s or '"size": 15' in s]
    assert not leaked, leaked[:3]
    assert any(w in s for s in said for w in ("public", "denied", "7 B", "No matches"))


async def test_a_workflow_step_opens_what_its_guard_saw(racing: Path) -> None:
    constraints = Constraints.model_validate(
        {"guard": {"tool_policy": {"read_file": "allow", "read_file(path:secrets/*)": "deny"}},
         "execution": {"workdir": str(racing)}}
    )
    node = ToolNode("Read", ToolSet.resolve(["read_file"]).get("read_file"), "input", "output",
                    constraints=constraints)
    said = []
    for _ in range(CALLS // 3):
        state = StateManager(AgentState, {"input": {"path": "docs/link"}})
        await ReactiveRunner(node, state, interactive=False).run(timeout=60)
        said.append(f"{state.get('output')!r} {node.feedback_message}")
    assert not [s for s in said if SECRET in s], said[:3]
    assert any("public" in s or "denied" in s for s in said)
