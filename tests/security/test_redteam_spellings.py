"""Red team, spellings: calls a deny rule meant to stop that still ran.

Under ``bash: allow`` with ``bash(rm *): deny`` a hostile model ran ``rm`` through bash's
arithmetic in places the guard did not read (``unset 'a[$(rm x)]'``, the indirection
``${!x}``, the index of an array literal ``a=([x]=1)``) and through variables that make a
program run a command (``GIT_CONFIG_COUNT``/``KEY_n``/``VALUE_n`` is ``git -c``,
``GIT_EDITOR``, ``LESSOPEN``, ``TAR_OPTIONS``). Each is now opaque: denied where nobody can
answer. A word only the run knows (``sec*``, ``$D``) may be anything, also for a pattern
that starts with a glob: ``cat sec*/key`` passed ``bash(*secrets*): deny``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jianmu import Constraints, ReactiveRunner, RunStatus, StateManager
from jianmu.guard import ToolPolicyChecker
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor
from jianmu.nodes.tool_node import ToolNode
from jianmu.tools import tool
from jianmu.tools.builtin import BashTool
from jianmu.tools.calls import ToolCall
from jianmu.tools.registry import ToolSet
from tests.security.test_shell_rules import DENY_RM, send, workspace
from tests.support.counting_server import counting_server

pytestmark = pytest.mark.anyio

RM_SPELLINGS = [
    # bash evaluates an array index as arithmetic, which runs $(...) found in a value
    "a=(1); unset -v 'a[$(rm victim)]'",
    "declare -a a; unset 'a[$(rm victim)]'",
    "a=(1); x='a[$(rm victim)]'; unset \"$x\"",
    "x='a[$(rm victim)]'; echo ${!x}",
    "x='a[$(rm victim)]'; echo ${!x:-}",
    "a=(1); x='a[$(rm victim)]'; [[ -n ${!x} ]]",
    "x='a[$(rm victim)]'; a=([x]=1)",
    "x='a[$(rm victim)]'; a+=([x]=1)",
    "x='a[$(rm victim)]'; declare -a a=([x]=1)",
    "f() { x='a[$(rm victim)]'; local a=([x]=1); }; f",
    # variables that make a program run a command
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.st GIT_CONFIG_VALUE_0='!rm victim' git st",
    "env GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.st GIT_CONFIG_VALUE_0='!rm victim' git st",
    "git init -q . && GIT_EDITOR='rm victim' git commit -q --allow-empty",
    "git init -q . && export GIT_EDITOR='rm victim' && git commit -q --allow-empty",
    "LESSOPEN='|rm victim %s' less victim",
    "TAR_OPTIONS='--checkpoint=1 --checkpoint-action=exec=rm\\ victim' tar cf /dev/null victim",
    # the grammar reads the words after a redirection's target as the redirection's
    "rm 2>/dev/null victim",
    "rm >/dev/null victim",
    "rm </dev/null victim",
    "rm 2>&1 victim",
    "rm >&2 victim",
    "rm &>/dev/null victim",
    "! rm 2>/dev/null -f victim",
    "sudo rm 2>/dev/null victim | cat",
    "rm >&- victim",
    "rm 2<&- victim",
    "rm >/dev/null <<EOF victim\nx\nEOF",
    "rm <<EOF >/dev/null victim\nx\nEOF",
    "echo hi |& rm 2>/dev/null victim",
    "[[ -e victim ]] && rm 2>/dev/null victim",
    "true && echo | rm 2>/dev/null victim",
    # bash ends a heredoc where the grammar does not: the hidden lines run
    "cat <<E\"O\"F\nx\nEOF\nrm victim\nE\"O\"F",
    "cat <<E'O'F\nx\nEOF\nrm victim\nE'O'F",
    "cat <<EOF\n\\\nEOF\nrm victim\nEOF",
]


@pytest.mark.parametrize("command", RM_SPELLINGS)
async def test_rm_spelling_is_refused_when_nobody_can_answer(tmp_path: Path, command: str) -> None:
    ws = workspace(tmp_path)
    result, said = await send(ws, command, DENY_RM, interactive=False)
    assert result.status is RunStatus.SUCCESS
    assert "denied" in said, said
    assert (ws / "victim").read_text() == "keep me\n"


@pytest.mark.parametrize(
    "command",
    ["unset x y", "a=(1 2); unset 'a[0]' a[1]", "a=([0]=x [1]=y); echo ${a[@]} ${!a[@]}",
     "echo ${!BASH*}", "GIT_AUTHOR_NAME=x git --version", "LESS=-R less victim",
     "cat <<EOF\nhello\nEOF", "cat <<'EOF'\n$x\nEOF", "cat <<-EOF\n\thi\n\tEOF",
     "cat <<EOF\na\\\nb\nEOF"],
)  # fmt: skip
async def test_ordinary_spellings_still_run(tmp_path: Path, command: str) -> None:
    ws = workspace(tmp_path)
    result, said = await send(ws, command, DENY_RM, interactive=False)
    assert result.status is RunStatus.SUCCESS
    assert "denied" not in said, said


def decide(policy: dict[str, str], command: str) -> str:
    checker = ToolPolicyChecker(policy)
    call = ToolCall(name="bash", arguments={"command": command})
    return checker.resolve(call, BashTool().tool_spec)[0]


@pytest.mark.parametrize(
    "command",
    ["cat secrets/key", "cat sec*/key", "cat secret?/key", "cat secret[s]/key",
     "D=secrets; cat $D/key", "cat s{ecrets,x}/key", "cat \"$D\"/key"],
)  # fmt: skip
def test_a_run_time_word_may_be_what_a_leading_glob_pattern_denies(command: str) -> None:
    assert decide({"bash": "allow", "bash(*secrets*)": "deny"}, command) == "deny"


@pytest.mark.parametrize(
    "command", ["cat < secrets/key", "<secrets/key cat", "cat 2>/dev/null secrets/key",
                "cat 3<secrets/key -n <&3"],
)  # fmt: skip
def test_a_file_read_through_a_redirection_is_read_by_the_command(command: str) -> None:
    assert decide({"bash": "allow", "bash(cat secrets/*)": "deny"}, command) == "deny"


@pytest.mark.parametrize("command", ["git $X", "git push $X", "git -C $D push", "sudo $X"])
def test_a_run_time_word_may_complete_a_command_pattern(command: str) -> None:
    # `sudo $X` may be `sudo git push`; a run-time command word alone is asked about
    assert decide({"bash": "allow", "bash(git push*)": "deny", "bash(*git push*)": "deny"},
                  command) == "deny"  # fmt: skip


@pytest.mark.parametrize("command", ["echo $HOME", "ls *.py", "cat $D/key"])
def test_a_run_time_word_cannot_make_another_command_match(command: str) -> None:
    assert decide({"bash": "allow", "bash(rm *)": "deny", "bash(git push*)": "deny"},
                  command) == "allow"  # fmt: skip


# -- URLs: other spellings of an IP address ----------------------------------------------------


@pytest.fixture
def loopback() -> Iterator[tuple[int, list[str]]]:
    """A real HTTP server on 127.0.0.1 (and ::ffff:127.0.0.1): its port and the requests."""
    with counting_server(b"INSIDE-ONLY") as served:
        yield served


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "127.1", "2130706433", "0x7f.1", "0x7f000001", "127.0.1",
             "[::ffff:127.0.0.1]", "[::ffff:7f00:1]"],
)  # fmt: skip
async def test_every_spelling_of_a_denied_address_is_denied(
    tmp_path: Path, loopback: tuple[int, list[str]], host: str
) -> None:
    port, hits = loopback
    policy = {"http_request": "allow", "http_request(url:http://127.0.0.1*)": "deny"}
    constraints = Constraints.model_validate(
        {"guard": {"tool_policy": policy}, "execution": {"workdir": str(tmp_path)}}
    )
    call = {"id": "c", "name": "http_request", "arguments": {"url": f"http://{host}:{port}/x"}}
    state = StateManager(AgentState, {"actions": [call]})
    executor = ToolExecutor(tools=ToolSet.resolve(["http_request"]), constraints=constraints)
    runner = ReactiveRunner(executor, state, interactive=False)
    await runner.run(timeout=60)
    said = runner.state.get("messages")[0].content or ""
    assert "denied" in said and "INSIDE-ONLY" not in said and hits == [], said


@pytest.mark.parametrize(
    "url", ["http://127.0.0.2/x", "http://[::1]/x", "http://10.0.0.1/x", "http://localhost/x"]
)
def test_other_addresses_are_not_caught(url: str) -> None:
    tool = ToolSet.resolve(["http_request"]).get("http_request")
    checker = ToolPolicyChecker({"http_request": "allow",
                                 "http_request(url:http://127.0.0.1*)": "deny"})  # fmt: skip
    assert checker.resolve(ToolCall(name="http_request", arguments={"url": url}), tool)[0] == (
        "allow"
    )


@pytest.mark.parametrize("url", ["http://[::1]/x", "http://[0:0::1]/x", "http://[0::0:1]:80/x"])
def test_an_ipv6_address_is_matched_in_its_usual_spelling(url: str) -> None:
    tool = ToolSet.resolve(["http_request"]).get("http_request")
    checker = ToolPolicyChecker({"http_request": "allow",
                                 "http_request(url:http://[[]::1]*)": "deny"})  # fmt: skip
    assert checker.resolve(ToolCall(name="http_request", arguments={"url": url}), tool)[0] == (
        "deny"
    )


# -- a batch: a link made by an earlier call of the same batch ----------------------------------


@pytest.mark.parametrize(
    ("made", "policy"),
    [("ln -s secrets l", {"bash(ln *)": "allow", "read_file(path:secrets/*)": "deny"}),
     ("ln -s secret? l", {"bash": "allow", "bash(cat *secrets*)": "deny",
                          "read_file(path:secrets/*)": "deny"})],
)  # fmt: skip
async def test_a_link_made_earlier_in_the_batch_is_seen(
    tmp_path: Path, made: str, policy: dict[str, str]
) -> None:
    # the batch was checked before its first call ran: `l` did not exist yet
    ws = tmp_path / "ws"
    (ws / "secrets").mkdir(parents=True)
    (ws / "secrets" / "key").write_text("KEY-MATERIAL\n")
    constraints = Constraints.model_validate(
        {"guard": {"tool_policy": policy}, "execution": {"workdir": str(ws)}}
    )
    actions = [{"id": "a", "name": "bash", "arguments": {"command": made}},
               {"id": "b", "name": "read_file", "arguments": {"path": "l/key"}}]  # fmt: skip
    state = StateManager(AgentState, {"actions": actions})
    executor = ToolExecutor(tools=ToolSet.resolve(["bash", "read_file"]), constraints=constraints)
    runner = ReactiveRunner(executor, state, interactive=False)
    await runner.run(timeout=60)
    said = [m.content or "" for m in runner.state.get("messages")]
    assert (ws / "l").is_symlink(), said  # the first call ran
    assert "KEY-MATERIAL" not in said[1] and "denied" in said[1], said


@tool(effects="write", parallel_safe=True)
async def make_link(target: str, name: str) -> str:
    """Make a symbolic link (async and parallel-safe: it runs beside the batch's reads).

    Args:
        target: what the link points to.
        name: the link's path.
    """
    from jianmu.execution.runner import effective_root

    link = Path(effective_root(None)) / name
    link.symlink_to(target)
    return f"linked {name}"


async def test_a_link_made_by_a_parallel_safe_call_is_seen_by_the_batchs_reads(
    tmp_path: Path,
) -> None:
    """A batch of parallel-safe calls ran at once, checked before any ran: a writer beside a
    read made the link the read then followed. Its reads now run after its writes, checked
    again."""
    ws = tmp_path / "ws"
    (ws / "secrets").mkdir(parents=True)
    (ws / "secrets" / "key").write_text("KEY-MATERIAL\n")
    constraints = Constraints.model_validate(
        {"guard": {"tool_policy": {"read_file(path:secrets/*)": "deny"}},
         "execution": {"workdir": str(ws)}}
    )  # fmt: skip
    actions = [{"id": "a", "name": "make_link", "arguments": {"target": "secrets", "name": "l"}},
               {"id": "b", "name": "read_file", "arguments": {"path": "l/key"}}]  # fmt: skip
    state = StateManager(AgentState, {"actions": actions})
    tools = [make_link, *ToolSet.resolve(["read_file"]).tools]
    executor = ToolExecutor(tools=tools, constraints=constraints)
    assert executor._mode(tools) == "parallel"
    runner = ReactiveRunner(executor, state, interactive=False)
    await runner.run(timeout=60)
    said = [m.content or "" for m in runner.state.get("messages")]
    assert said[0] == "linked l" and (ws / "l").is_symlink(), said
    assert "KEY-MATERIAL" not in said[1] and "checked again" in said[1], said


async def test_calls_after_a_read_are_not_checked_again(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("alpha\n")
    constraints = Constraints.model_validate(
        {"guard": {"tool_policy": {"read_file(path:secrets/*)": "deny"}},
         "execution": {"workdir": str(ws)}}
    )  # fmt: skip
    actions = [{"id": "a", "name": "read_file", "arguments": {"path": "a.txt"}},
               {"id": "b", "name": "write_file", "arguments": {"path": "b.txt", "content": "x"}},
               {"id": "c", "name": "read_file", "arguments": {"path": "b.txt"}}]  # fmt: skip
    state = StateManager(AgentState, {"actions": actions})
    executor = ToolExecutor(tools=ToolSet.resolve(["read_file", "write_file"]),
                            constraints=constraints)  # fmt: skip
    runner = ReactiveRunner(executor, state, interactive=False)
    await runner.run(timeout=60)
    said = [m.content or "" for m in runner.state.get("messages")]
    assert "alpha" in said[0] and "denied" not in said[1] and said[2].strip() == "x", said


async def test_an_approved_call_after_a_write_still_runs(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "docs").mkdir(parents=True)
    (ws / "docs" / "a.txt").write_text("alpha\n")
    policy = {"bash(ln *)": "allow", "read_file": "confirm", "read_file(path:secrets/*)": "deny"}
    constraints = Constraints.model_validate(
        {"guard": {"tool_policy": policy}, "execution": {"workdir": str(ws)}}
    )
    actions = [{"id": "a", "name": "bash", "arguments": {"command": "ln -s docs l"}},
               {"id": "b", "name": "read_file", "arguments": {"path": "l/a.txt"}}]  # fmt: skip
    state = StateManager(AgentState, {"actions": actions})
    executor = ToolExecutor(tools=ToolSet.resolve(["bash", "read_file"]), constraints=constraints)
    runner = ReactiveRunner(executor, state)
    first = await runner.run(timeout=60)
    assert first.status is RunStatus.SUSPENDED and [r.id for r in first.pending] == ["b"]
    runner.approve("b")
    result = await runner.run(timeout=60)
    assert result.status is RunStatus.SUCCESS, result.error
    said = [m.content or "" for m in runner.state.get("messages")]
    assert "alpha" in said[1], said


# -- paths in the arguments of a move: `source`, `destination` -----------------------------------

MOVED: list[tuple[str, str]] = []


@tool(effects="write")
def move_file(source: str, destination: str) -> str:
    """Move a file (as an MCP filesystem server's tool names its arguments).

    Args:
        source: the file to move.
        destination: where it goes.
    """
    MOVED.append((source, destination))
    return "moved"


async def send_move(ws: Path, args: dict[str, str], guard: dict[str, Any]) -> str:
    MOVED.clear()
    constraints = Constraints.model_validate({"guard": guard, "execution": {"workdir": str(ws)}})
    state = StateManager(AgentState, {"actions": [{"id": "c", "name": "move_file",
                                                   "arguments": args}]})  # fmt: skip
    runner = ReactiveRunner(ToolExecutor(tools=[move_file], constraints=constraints), state,
                            interactive=False)  # fmt: skip
    await runner.run(timeout=60)
    return runner.state.get("messages")[0].content or ""


@pytest.mark.parametrize(
    "args",
    [{"source": "a", "destination": "secrets/x"}, {"source": "a", "destination": "./secrets/x"},
     {"source": "a", "destination": "b/../secrets/x"},
     {"source": "a", "destination": "@/secrets/x"},
     {"source": "a", "destination": "link/x"}, {"source": "./secrets/k", "destination": "b"},
     {"source": "secrets\\k", "destination": "b"}],
)  # fmt: skip
async def test_a_path_in_an_end_of_a_move_meets_a_deny_rule(
    tmp_path: Path, args: dict[str, str]
) -> None:
    ws = tmp_path / "ws"
    (ws / "secrets").mkdir(parents=True)
    (ws / "link").symlink_to(ws / "secrets", target_is_directory=True)
    args = {k: v.replace("@", str(ws)) for k, v in args.items()}
    policy = {"move_file(destination:secrets/*)": "deny", "move_file(source:secrets/*)": "deny"}
    said = await send_move(ws, args, {"tool_policy": policy})
    assert "denied" in said and MOVED == [], said


@pytest.mark.parametrize("destination", ["docs/../secrets/x", "docs/link/x", "./docs/../../x"])
async def test_a_grant_for_a_folder_does_not_cover_a_path_that_leaves_it(
    tmp_path: Path, destination: str
) -> None:
    ws = tmp_path / "ws"
    (ws / "docs").mkdir(parents=True)
    (ws / "secrets").mkdir()
    (ws / "docs" / "link").symlink_to(ws / "secrets", target_is_directory=True)
    guard = {"default_policy": "deny", "tool_policy": {"move_file(destination:docs/*)": "allow"}}
    said = await send_move(ws, {"source": "docs/a", "destination": destination}, guard)
    assert "denied" in said and MOVED == [], said
    said = await send_move(ws, {"source": "docs/a", "destination": "docs/b"}, guard)
    assert said == "moved" and MOVED == [("docs/a", "docs/b")], said


# -- a redirect to a URL the policy refuses -----------------------------------------------------


@pytest.fixture
def two_servers() -> Iterator[tuple[int, int, list[str]]]:
    """Two real HTTP servers on 127.0.0.1 that redirect ``/go?to=URL``: ports and requests."""
    hits: list[str] = []
    with (counting_server(b"INSIDE-ONLY", hits=hits, redirects=True) as (first, _),
          counting_server(b"INSIDE-ONLY", hits=hits, redirects=True) as (second, _)):
        yield first, second, hits


async def fetch(ws: Path, url: str, policy: dict[str, str], default: str | None = None) -> str:
    constraints = Constraints.model_validate(
        {"guard": {"tool_policy": policy, "default_policy": default},
         "execution": {"workdir": str(ws)}}
    )  # fmt: skip
    call = {"id": "c", "name": "http_request", "arguments": {"url": url}}
    state = StateManager(AgentState, {"actions": [call]})
    executor = ToolExecutor(tools=ToolSet.resolve(["http_request"]), constraints=constraints)
    runner = ReactiveRunner(executor, state, interactive=False)
    await runner.run(timeout=60)
    return runner.state.get("messages")[0].content or ""


async def test_a_redirect_to_a_denied_url_is_not_followed(
    tmp_path: Path, two_servers: tuple[int, int, list[str]]
) -> None:
    allowed, denied, hits = two_servers
    policy = {"http_request": "allow", f"http_request(url:http://127.0.0.1:{denied}/*)": "deny"}
    said = await fetch(tmp_path, f"http://127.0.0.1:{allowed}/go?to=http://127.0.0.1:{denied}/x",
                       policy)  # fmt: skip
    assert "INSIDE-ONLY" not in said and "refuses" in said, said
    assert hits == [f"/go?to=http://127.0.0.1:{denied}/x"], hits


async def test_a_redirect_to_a_url_needing_a_person_is_not_followed(
    tmp_path: Path, two_servers: tuple[int, int, list[str]]
) -> None:
    allowed, other, hits = two_servers
    policy = {f"http_request(url:http://127.0.0.1:{allowed}/*)": "allow"}
    said = await fetch(tmp_path, f"http://127.0.0.1:{allowed}/go?to=http://127.0.0.1:{other}/x",
                       policy, "confirm")  # fmt: skip
    assert "INSIDE-ONLY" not in said and "refuses" in said and len(hits) == 1, said


async def test_a_redirect_within_what_the_policy_allows_is_followed(
    tmp_path: Path, two_servers: tuple[int, int, list[str]]
) -> None:
    first, second, _hits = two_servers
    said = await fetch(tmp_path, f"http://127.0.0.1:{first}/go?to=http://127.0.0.1:{second}/x",
                       {"http_request": "allow", "http_request(url:https://evil.com/*)": "deny"})
    assert "INSIDE-ONLY" in said and f"final-url: http://127.0.0.1:{second}/x" in said, said


async def test_a_workflow_step_does_not_follow_a_redirect_to_a_denied_url(
    two_servers: tuple[int, int, list[str]]
) -> None:
    allowed, denied, hits = two_servers
    policy = {"http_request": "allow", f"http_request(url:http://127.0.0.1:{denied}/*)": "deny"}
    constraints = Constraints.model_validate({"guard": {"tool_policy": policy}})
    state = StateManager(initial={"req": {"url": f"http://127.0.0.1:{allowed}/go?to="
                                                 f"http://127.0.0.1:{denied}/x"}})  # fmt: skip
    node = ToolNode("Fetch", ToolSet.resolve(["http_request"]).get("http_request"), "req", "out")
    await ReactiveRunner(node, state, constraints=constraints).run(timeout=30)
    assert "INSIDE-ONLY" not in str(state.get("out")) and len(hits) == 1, state.get("out")
