"""Red team, URL rules: ``http_request(url:https://evil.com/*): deny`` against other spellings.

The URL was matched only as written, so ``HTTPS://EVIL.COM/x``, ``https://evil.com:443/x``,
``https://user@evil.com/x``, ``https://evil.com./x`` or ``https://evil.com`` reached the
host a rule denied. A URL argument is now matched also as the HTTP client will send it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu import Constraints, ReactiveRunner, StateManager
from jianmu.guard import ToolPolicyChecker
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.tools.calls import ToolCall
from jianmu.tools.registry import ToolSet

pytestmark = pytest.mark.anyio

POLICY = {"http_request": "allow", "http_request(url:https://evil.com/*)": "deny"}
SPELLINGS = [
    "https://evil.com/x", "HTTPS://evil.com/x", "https://EVIL.COM/x", "https://evil.com:443/x",
    "https://u:p@evil.com/x", "https://evil.com./x", "https://evil.com", "https://evil.com?x=1",
    "https://evil.com#top", " https://evil.com/x", "https://evil\u3002com/x",
    "https://evil.com/a/../x",
]  # fmt: skip


@pytest.mark.parametrize("url", SPELLINGS)
async def test_every_spelling_of_a_denied_host_is_denied(tmp_path: Path, url: str) -> None:
    constraints = Constraints.model_validate(
        {"guard": {"tool_policy": POLICY}, "execution": {"workdir": str(tmp_path)}}
    )
    state = StateManager(AgentState, {"actions": [
        {"id": "c", "name": "http_request", "arguments": {"url": url, "method": "GET"}}
    ]})  # fmt: skip
    executor = ToolExecutor(tools=ToolSet.resolve(["http_request"]), constraints=constraints)
    runner = ReactiveRunner(executor, state, interactive=False)
    await runner.run(timeout=60)
    said = runner.state.get("messages")[0].content or ""
    assert "denied" in said and "http_request(url:https://evil.com/*)" in said, said


@pytest.mark.parametrize(
    "url", ["https://good.com/x", "https://evil.com.example.org/x", "http://good.com/evil.com/"]
)
def test_other_hosts_are_not_caught(url: str) -> None:
    tool = ToolSet.resolve(["http_request"]).get("http_request")
    checker = ToolPolicyChecker(POLICY)
    policy, _, _ = checker.resolve(ToolCall(name="http_request", arguments={"url": url}), tool)
    assert policy == "allow"
