"""ToolExecutor: modes, isolation of failures, the guard, approvals, crash safety, spans."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from jianmu import Constraints, ReactiveRunner, RunStatus, SQLiteCheckpointer, StateManager
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_executor import ToolExecutor, ToolExecutorConfig
from jianmu.runtime.context import RunContext
from jianmu.tools.base import tool

pytestmark = pytest.mark.anyio
REPO = Path(__file__).resolve().parents[2]


@tool
async def echo(text: str) -> str:
    """Echo the text back.

    Args:
        text: what to echo.
    """
    return text


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: first.
        b: second.
    """
    return a + b


@tool
async def explode(reason: str) -> str:
    """Raise an error.

    Args:
        reason: the message.
    """
    raise RuntimeError(reason)


@tool(timeout_seconds=0.3)
async def hang(note: str) -> str:
    """Never finish.

    Args:
        note: ignored.
    """
    await asyncio.Event().wait()
    return note


async def run(
    executor: ToolExecutor, actions: list[dict[str, Any]], **kwargs: Any
) -> tuple[ReactiveRunner, Any]:
    state = StateManager(AgentState, {"actions": actions})
    runner = ReactiveRunner(executor, state, **kwargs)
    result = await runner.run(timeout=30)
    return runner, result


def contents(runner: ReactiveRunner) -> list[tuple[str | None, str | None]]:
    return [(m.tool_call_id, m.content) for m in runner.state.get("messages")]


async def test_serial_batch_in_order_and_effects() -> None:
    @tool(category="write", effect_tags=["file_write"])
    def save(text: str) -> str:
        """Pretend to save.

        Args:
            text: what to save.
        """
        return "saved " + text

    executor = ToolExecutor(tools=[echo, add, save])
    runner, result = await run(executor, [
        {"id": "a", "name": "echo", "arguments": {"text": "hi"}},
        {"id": "b", "name": "add", "arguments": '{"a": 2, "b": "3"}'},
        {"id": "c", "name": "save", "arguments": {"text": "x"}},
    ])
    assert result.status is RunStatus.SUCCESS
    assert contents(runner) == [("a", "hi"), ("b", "5"), ("c", "saved x")]
    assert runner.state.get("actions") == []
    assert runner.state.get("tool_effects") == {"file_write": 1}
    assert set(runner.state.get("completed_call_ids")) == {"a", "b", "c"}
    assert runner.state.get("final_answer") is None and runner.state.get("done") is False


async def test_parallel_mode_runs_calls_at_once() -> None:
    started: list[str] = []
    all_in = asyncio.Event()

    @tool
    async def rendezvous(who: str) -> str:
        """Wait until three calls are inside at the same time.

        Args:
            who: caller name.
        """
        started.append(who)
        if len(started) == 3:
            all_in.set()
        await all_in.wait()  # serial execution would deadlock here (and time out)
        return who

    executor = ToolExecutor(tools=[rendezvous])  # auto: read tools are parallel-safe
    runner, result = await run(executor, [
        {"id": f"r{i}", "name": "rendezvous", "arguments": {"who": f"w{i}"}} for i in range(3)
    ])
    assert result.status is RunStatus.SUCCESS
    assert contents(runner) == [("r0", "w0"), ("r1", "w1"), ("r2", "w2")]


async def test_auto_mode_is_serial_when_a_tool_is_not_parallel_safe() -> None:
    order: list[str] = []

    @tool(category="write")
    async def step(name: str) -> str:
        """Record a step.

        Args:
            name: step name.
        """
        order.append(f"start {name}")
        await asyncio.sleep(0)
        order.append(f"end {name}")
        return name

    executor = ToolExecutor(tools=[step])
    await run(executor, [{"name": "step", "arguments": {"name": n}} for n in "ab"])
    assert order == ["start a", "end a", "start b", "end b"]
    executor = ToolExecutor(tools=[step], config=ToolExecutorConfig(execution_mode="parallel"))
    order.clear()
    await run(executor, [{"name": "step", "arguments": {"name": n}} for n in "ab"])
    assert order == ["start a", "start b", "end a", "end b"]


async def test_sibling_isolation_in_a_parallel_batch() -> None:
    executor = ToolExecutor(
        tools=[echo, explode, hang, add], config=ToolExecutorConfig(execution_mode="parallel")
    )
    runner, result = await run(executor, [
        {"id": "ok", "name": "echo", "arguments": {"text": "fine"}},
        {"id": "boom", "name": "explode", "arguments": {"reason": "kaput"}},
        {"id": "slow", "name": "hang", "arguments": {"note": "x"}},
        {"id": "bad", "name": "add", "arguments": {"a": "one", "c": 3}},
        {"id": "ghost", "name": "nope", "arguments": {}},
        {"id": "junk", "name": "echo", "arguments": "{not json"},
    ])
    assert result.status is RunStatus.SUCCESS
    got = dict(contents(runner))
    assert list(got) == ["ok", "boom", "slow", "bad", "ghost", "junk"]
    assert got["ok"] == "fine"
    assert got["boom"].startswith("Error:") and "kaput" in got["boom"]
    assert got["slow"].startswith("Error:") and "0.3" in got["slow"]
    assert "a: " in got["bad"] and "'c'" in got["bad"] and "'b'" in got["bad"]
    assert "unknown tool 'nope'" in got["ghost"] and "echo" in got["ghost"]
    assert got["junk"].startswith("Error:")


async def test_retries_idempotent_tools_only() -> None:
    attempts = {"read": 0, "write": 0}

    @tool(max_retries=2)
    async def flaky_read(key: str) -> str:
        """Fail twice, then succeed.

        Args:
            key: anything.
        """
        attempts["read"] += 1
        if attempts["read"] < 3:
            raise ConnectionError("transient")
        return "value"

    @tool(category="write")
    async def flaky_write(key: str) -> str:
        """Always fail.

        Args:
            key: anything.
        """
        attempts["write"] += 1
        raise ConnectionError("transient")

    @tool(max_retries=2)
    async def buggy_read(key: str) -> str:
        """Fail the same way every time.

        Args:
            key: anything.
        """
        attempts["bug"] = attempts.get("bug", 0) + 1
        raise ValueError("always wrong")

    @tool(max_retries=2, timeout_seconds=0.2)
    async def slow_read(key: str) -> str:
        """Hang past the timeout.

        Args:
            key: anything.
        """
        attempts["slow"] = attempts.get("slow", 0) + 1
        await asyncio.Event().wait()
        return key

    executor = ToolExecutor(
        tools=[flaky_read, flaky_write, buggy_read, slow_read],
        config=ToolExecutorConfig(retry_backoff=0, execution_mode="serial"),
    )
    runner, _ = await run(executor, [
        {"id": "r", "name": "flaky_read", "arguments": {"key": "k"}},
        {"id": "w", "name": "flaky_write", "arguments": {"key": "k"}},
        {"id": "b", "name": "buggy_read", "arguments": {"key": "k"}},
        {"id": "s", "name": "slow_read", "arguments": {"key": "k"}},
    ])
    assert dict(contents(runner))["r"] == "value"
    # transient errors are retried; non-idempotent tools, bugs and timeouts are not
    assert attempts == {"read": 3, "write": 1, "bug": 1, "slow": 1}


async def test_denied_tool_gets_a_rejection_observation_and_is_hidden() -> None:
    constraints = Constraints.model_validate({"guard": {"tool_policy": {"add": "deny"}}})
    executor = ToolExecutor(tools=[echo, add], constraints=constraints)
    runner, _ = await run(executor, [{"id": "d", "name": "add", "arguments": {"a": 1, "b": 2}}])
    (message,) = contents(runner)
    assert message[1] is not None and "denied" in message[1]
    assert executor.visible_toolset().names() == ["echo"]


async def test_max_tool_calls_under_a_parallel_batch() -> None:
    constraints = Constraints.model_validate({"guard": {"max_tool_calls": 2}})
    executor = ToolExecutor(tools=[echo], constraints=constraints)
    runner, _ = await run(executor, [
        {"id": f"e{i}", "name": "echo", "arguments": {"text": str(i)}} for i in range(4)
    ])
    got = dict(contents(runner))
    assert [got["e0"], got["e1"]] == ["0", "1"]
    assert all("denied" in (got[k] or "") for k in ("e2", "e3"))


async def test_budget_exhaustion_denies() -> None:
    constraints = Constraints.model_validate({"guard": {"budget": {"total_tokens": 100}}})
    executor = ToolExecutor(tools=[echo], constraints=constraints)
    state = StateManager(AgentState, {
        "actions": [{"id": "x", "name": "echo", "arguments": {"text": "t"}}],
        "usage": {"input_tokens": 90, "output_tokens": 20},
    })
    runner = ReactiveRunner(executor, state)
    await runner.run(timeout=10)
    assert "denied" in (contents(runner)[0][1] or "")


@tool(category="write", permission="user_confirm")
def publish(text: str) -> str:
    """Publish text (asks first).

    Args:
        text: what to publish.
    """
    return "published " + text


async def test_suspend_approve_continue_and_reject() -> None:
    actions = [
        {"id": "e", "name": "echo", "arguments": {"text": "first"}},
        {"id": "p", "name": "publish", "arguments": {"text": "post"}},
    ]
    runner, result = await run(ToolExecutor(tools=[echo, publish]), actions)
    assert result.status is RunStatus.SUSPENDED
    assert [r.id for r in result.pending] == ["p"]
    assert runner.state.get("messages") == []  # nothing in the batch ran
    runner.approve("p")
    done = await runner.run(timeout=10)
    assert done.status is RunStatus.SUCCESS
    assert contents(runner) == [("e", "first"), ("p", "published post")]

    runner, _ = await run(ToolExecutor(tools=[echo, publish]), actions)
    runner.reject("p", "not now")
    await runner.run(timeout=10)
    got = dict(contents(runner))
    assert got["e"] == "first" and "not now" in (got["p"] or "")


async def test_a_call_whose_arguments_do_not_fit_is_refused_not_put_to_a_person() -> None:
    """A person was asked to approve ``publish(text=[1])`` and ``publish("{oops")``, which fail
    their validation whatever the answer: refused at once now, with the reason the model
    reads; a call of the batch that fits is still asked about."""
    actions = [
        {"id": "bad", "name": "publish", "arguments": {"text": [1]}},
        {"id": "raw", "name": "publish", "arguments": "{oops"},
        {"id": "ok", "name": "publish", "arguments": {"text": "post"}},
    ]
    runner, result = await run(ToolExecutor(tools=[publish]), actions)
    assert result.status is RunStatus.SUSPENDED
    assert [r.id for r in result.pending] == ["ok"]
    runner.approve("ok")
    done = await runner.run(timeout=10)
    assert done.status is RunStatus.SUCCESS
    got = dict(contents(runner))
    assert got["ok"] == "published post"
    assert "text" in (got["bad"] or "") and "not valid JSON" in (got["raw"] or ""), got
    runner, result = await run(ToolExecutor(tools=[publish]), actions[:2])
    assert result.status is RunStatus.SUCCESS and not result.pending


async def test_no_interaction_channel_turns_confirm_into_deny() -> None:
    runner, result = await run(
        ToolExecutor(tools=[publish]),
        [{"id": "p", "name": "publish", "arguments": {"text": "x"}}],
        interactive=False,
    )
    assert result.status is RunStatus.SUCCESS
    assert "denied" in (contents(runner)[0][1] or "")


async def test_reused_call_id_gets_a_fresh_one() -> None:
    executor = ToolExecutor(tools=[echo])
    state = StateManager(AgentState, {"actions": [
        {"id": "same", "name": "echo", "arguments": {"text": "1"}},
        {"id": "same", "name": "echo", "arguments": {"text": "2"}},
    ]})
    runner = ReactiveRunner(executor, state)
    await runner.run(timeout=10)
    ids = [m.tool_call_id for m in state.get("messages")]
    assert ids[0] == "same" and ids[1] != "same" and len(set(ids)) == 2


async def test_spans_for_each_call() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    await run(ToolExecutor(tools=[echo, explode]), [
        {"id": "a", "name": "echo", "arguments": {"text": "x"}},
        {"id": "b", "name": "explode", "arguments": {"reason": "y"}},
    ], tracer_provider=provider)
    spans = {s.name: s for s in exporter.get_finished_spans()}
    ok, bad = spans["execute_tool echo"], spans["execute_tool explode"]
    assert ok.attributes["gen_ai.operation.name"] == "execute_tool"
    assert ok.attributes["gen_ai.tool.name"] == "echo"
    assert ok.attributes["gen_ai.tool.call.id"] == "a"
    assert ok.attributes["gen_ai.tool.type"] == "function"
    assert ok.attributes["jianmu.guard.decision"] == "allow"
    assert "gen_ai.tool.call.arguments" not in ok.attributes  # content is opt-in
    assert bad.attributes["error.type"]


def app(*args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "tests.support.executor_app", *args],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_approval_survives_a_restart_in_a_new_process(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.sqlite")
    first = app("start", db, str(tmp_path), "run-1")
    assert first["status"] == "suspended" and first["pending"] == ["c1"]
    assert not (tmp_path / "effects.txt").exists()
    second = app("resume", db, str(tmp_path), "run-1", "approve")
    assert second["status"] == "success"
    assert (tmp_path / "effects.txt").read_text() == "before\ndeploy prod\n"
    assert [m["content"] for m in second["messages"]] == ["wrote before", "deployed to prod"]


def test_rejection_after_restart(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.sqlite")
    app("start", db, str(tmp_path), "run-2")
    second = app("resume", db, str(tmp_path), "run-2", "reject")
    assert (tmp_path / "effects.txt").read_text() == "before\n"
    assert "not today" in second["messages"][1]["content"]


def test_sigkill_mid_batch_then_restore_runs_each_effect_once(tmp_path: Path) -> None:
    """Killed mid-batch: the finished calls are not run again, nor is the call that was under
    way (it may have done its work: it is recorded as maybe done), and the rest run once."""
    db = str(tmp_path / "runs.sqlite")
    effects = tmp_path / "effects.txt"
    (tmp_path / "block").touch()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.executor_app", "crash", db, str(tmp_path), "r"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        # wait (bounded) until the first two calls are done and checkpointed and the third is
        # saved as under way (it is blocked before its side effect: the engine cannot know)
        for _ in range(1200):
            if effects.exists() and effects.read_text().count("\n") == 2 and checkpointed(db):
                break
            if proc.poll() is not None:
                pytest.fail(f"the app exited early: {proc.communicate()}")
            proc_wait(proc, 0.05)
        assert effects.read_text() == "one\ntwo\n"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    (tmp_path / "block").unlink()
    result = app("resume", db, str(tmp_path), "r")
    assert result["status"] == "success"
    assert effects.read_text() == "one\ntwo\nfour\nfive\n"
    assert [m["tool_call_id"] for m in result["messages"]] == ["c0", "c1", "c2", "c3", "c4"]
    assert "whether it did its work is unknown" in result["messages"][2]["content"]
    assert result["effects"] == {"file_write": 4}


def checkpointed(db: str) -> bool:
    """Whether run ``r``'s newest checkpoint records the calls c0 and c1 as finished and c2
    as under way."""
    if not Path(db).exists():
        return False
    store = SQLiteCheckpointer(db)
    try:
        saved = store.load("r")
    finally:
        store.close()
    root = (saved or {}).get("state", {}).get("root", {})
    done = root.get("completed_call_ids", [])
    return {"c0", "c1"} <= set(done) and "c2" in (root.get("calls_under_way") or {})


def proc_wait(proc: subprocess.Popen[bytes], seconds: float) -> None:
    """Wait for the process for a moment (returns early if it exits)."""
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        pass


async def test_a_cancelled_batch_keeps_what_finished_and_runs_it_not_again() -> None:
    """Without a checkpointer a batch's observations are written together; a cancel in the
    middle still writes the finished calls, so the next run of the batch skips them."""
    runs: list[str] = []
    release = asyncio.Event()

    @tool
    async def quick(text: str) -> str:
        """Finish at once.

        Args:
            text: what to return.
        """
        runs.append(text)
        return text

    @tool
    async def stuck(text: str, ctx: RunContext | None = None) -> str:
        """Stop the run once the quick calls are done, then wait to be released.

        Args:
            text: what to return.
        """
        if not release.is_set():
            assert ctx is not None and ctx.runner is not None
            ctx.runner.cancel()
            await release.wait()
        runs.append(text)
        return text

    serial = ToolExecutorConfig(execution_mode="serial")
    executor = ToolExecutor(tools=[quick, stuck], config=serial)
    state = StateManager(AgentState, {"actions": [
        {"id": "a", "name": "quick", "arguments": {"text": "a"}},
        {"id": "b", "name": "stuck", "arguments": {"text": "b"}},
    ]})
    runner = ReactiveRunner(executor, state)
    first = await runner.run(timeout=30)
    assert first.status is RunStatus.CANCELLED
    assert state.get("completed_call_ids") == ["a"]
    assert list(state.get("observations")) == ["a"]
    release.set()
    second = await runner.run(timeout=30)
    assert second.ok, second
    assert runs == ["a", "b"]  # "a" did not run again
    assert [m.tool_call_id for m in state.get("messages")] == ["a", "b"]


async def test_halting_a_parallel_batch_cancels_the_calls_still_running() -> None:
    stopped = asyncio.Event()

    @tool
    async def stuck(text: str, ctx: RunContext | None = None) -> str:
        """Stop the run, then wait until cancelled.

        Args:
            text: ignored.
        """
        assert ctx is not None and ctx.runner is not None
        ctx.runner.cancel()
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()  # the halt reached this call
        return text

    parallel = ToolExecutorConfig(execution_mode="parallel")
    executor = ToolExecutor(tools=[echo, stuck], config=parallel)
    state = StateManager(AgentState, {"actions": [
        {"id": "a", "name": "echo", "arguments": {"text": "a"}},
        {"id": "b", "name": "stuck", "arguments": {"text": "b"}},
        {"id": "c", "name": "echo", "arguments": {"text": "c"}},
    ]})
    result = await ReactiveRunner(executor, state).run(timeout=30)
    assert result.status is RunStatus.CANCELLED
    assert stopped.is_set()
    assert sorted(state.get("completed_call_ids")) == ["a", "c"]


async def test_runs_under_the_shared_defaults_share_one_guard_and_count_apart() -> None:
    """The built-in chain keeps no per-run counts: runs under the read-only defaults share
    it, each counting its own calls; another chain, or constraints of the run's own, are the
    run's alone."""
    from jianmu import plugins
    from jianmu.guard.enforcer import ToolPolicyChecker

    actions = [{"id": "a", "name": "publish", "arguments": {"text": "x"}}]
    first, one = await run(ToolExecutor(tools=[publish]), actions)
    second, two = await run(ToolExecutor(tools=[publish]), actions)
    assert one.status is two.status is RunStatus.SUSPENDED  # each asks, one never approves both
    assert first.root._enforcer is second.root._enforcer
    first.approve("a")
    assert (await first.run(timeout=10)).status is RunStatus.SUCCESS
    assert second.pending and second.state.get("messages") == []
    own, _ = await run(ToolExecutor(tools=[publish]), actions,
                       constraints=Constraints.model_validate({"guard": {"max_tool_calls": 5}}))
    assert own.root._enforcer is not first.root._enforcer

    class Strict(ToolPolicyChecker):
        """A replacement of the built-in policy checker."""

    with plugins.registered("checker", "policy", Strict):
        replaced, _ = await run(ToolExecutor(tools=[publish]), actions)
    assert replaced.root._enforcer is not first.root._enforcer
    assert type(replaced.root._enforcer.checkers[0]) is Strict


async def test_each_call_is_resolved_to_its_tool_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The executor resolves a call's name once and passes the tool down: the guard and the
    run do not look it up again."""
    from jianmu.tools.registry import ToolSet

    looked_up: list[str] = []
    real_get = ToolSet.get

    def counting_get(self: ToolSet, name: str) -> Any:
        looked_up.append(name)
        return real_get(self, name)

    monkeypatch.setattr(ToolSet, "get", counting_get)
    runner, result = await run(ToolExecutor(tools=[echo, add]), [
        {"id": "a", "name": "ECHO", "arguments": {"text": "hi"}},
        {"id": "b", "name": "add", "arguments": {"a": 1, "b": 2}},
    ])
    assert result.status is RunStatus.SUCCESS
    assert contents(runner) == [("a", "hi"), ("b", "3")]
    assert looked_up == ["ECHO", "add"]


@tool
def cli_exits(code: int) -> str:
    """A command-line tool that exits on bad input, as argparse does.

    Args:
        code: the exit code.
    """
    sys.exit(code)


@tool
async def async_exits(code: int) -> str:
    """An async tool that exits.

    Args:
        code: the exit code.
    """
    sys.exit(code)


@tool
def stray_generator_exit(note: str) -> str:
    """Raises GeneratorExit from a worker thread.

    Args:
        note: unused.
    """
    raise GeneratorExit


@tool
async def async_generator_exit(note: str) -> str:
    """Raises GeneratorExit on the loop.

    Args:
        note: unused.
    """
    raise GeneratorExit


@tool
async def inner_task_cancelled(note: str) -> str:
    """Awaits a task of its own that someone else cancelled.

    Args:
        note: unused.
    """
    inner = asyncio.get_running_loop().create_task(asyncio.sleep(60))
    inner.cancel()
    return str(await inner)


@tool
async def cancels_its_own_task(note: str) -> str:
    """Cancels the task it runs in, as a bug in a tool might.

    Args:
        note: unused.
    """
    task = asyncio.current_task()
    assert task is not None
    task.cancel()
    await asyncio.sleep(0)
    return "never"


@pytest.mark.parametrize("mode", ["serial", "parallel"])
async def test_a_tools_exit_or_stray_cancel_is_a_failed_call_not_the_process_end(
    mode: str,
) -> None:
    executor = ToolExecutor(
        tools=[cli_exits, async_exits, stray_generator_exit, async_generator_exit,
               inner_task_cancelled, cancels_its_own_task, echo],
        config=ToolExecutorConfig(execution_mode=mode),  # type: ignore[arg-type]
    )
    runner, result = await run(executor, [
        {"id": "self", "name": "cancels_its_own_task", "arguments": {"note": "x"}},
        {"id": "exit", "name": "cli_exits", "arguments": {"code": 2}},
        {"id": "aexit", "name": "async_exits", "arguments": {"code": 3}},
        {"id": "gen", "name": "stray_generator_exit", "arguments": {"note": "x"}},
        {"id": "agen", "name": "async_generator_exit", "arguments": {"note": "x"}},
        {"id": "cancel", "name": "inner_task_cancelled", "arguments": {"note": "x"}},
        {"id": "ok", "name": "echo", "arguments": {"text": "still here"}},
    ])
    assert result.status is RunStatus.SUCCESS, result.error
    got = dict(contents(runner))
    assert got["exit"] == "Error: the tool called sys.exit(2)"
    assert got["aexit"] == "Error: the tool called sys.exit(3)"
    assert got["gen"] == "Error: RuntimeError: the call raised GeneratorExit"
    assert got["agen"] == "Error: the tool raised GeneratorExit"
    assert got["cancel"] == "Error: the tool raised CancelledError without being cancelled"
    # the run was not stopped: the batch goes on, and the model reads why the call failed
    assert got["self"] == ("Error: the tool cancelled the task it ran in "
                           "(asyncio.current_task().cancel()), so the call did not finish")
    assert got["ok"] == "still here"


@pytest.mark.parametrize("mode", ["serial", "parallel"])
async def test_a_halted_batch_still_cancels_its_calls(mode: str) -> None:
    """A cancel of the run itself is not mistaken for a tool's own CancelledError."""
    started = asyncio.Event()

    @tool
    async def waits(note: str) -> str:
        """Waits until cancelled.

        Args:
            note: unused.
        """
        started.set()
        await asyncio.sleep(60)
        return "never"

    state = StateManager(AgentState, {"actions": [
        {"id": "w", "name": "waits", "arguments": {"note": "x"}},
        {"id": "v", "name": "waits", "arguments": {"note": "y"}}]})
    config = ToolExecutorConfig(execution_mode=mode)  # type: ignore[arg-type]
    runner = ReactiveRunner(ToolExecutor(tools=[waits], config=config), state)
    task = asyncio.get_running_loop().create_task(runner.run(timeout=30))
    await started.wait()
    runner.cancel()
    result = await task
    assert result.status is RunStatus.CANCELLED
    assert state.get("messages") == []  # not recorded: it runs again


async def test_json_observations_give_a_returned_model_as_its_fields() -> None:
    from datetime import datetime

    from pydantic import BaseModel

    class Order(BaseModel):
        order_id: str
        placed: datetime
        total: float

    @tool
    def get_order(order_id: str) -> Order:
        """Look an order up (tau2-bench's retail tools return their pydantic models).

        Args:
            order_id: the order.
        """
        return Order(order_id=order_id, placed=datetime(2024, 5, 1, 9, 30), total=12.5)

    executor = ToolExecutor(tools=[get_order], config=ToolExecutorConfig(
        observation_format="json"))
    runner, result = await run(executor, [
        {"id": "a", "name": "get_order", "arguments": {"order_id": "#W1"}}])
    assert result.status is RunStatus.SUCCESS
    ((_, content),) = contents(runner)
    assert json.loads(content or "") == {"ok": True, "error": None, "output": {
        "order_id": "#W1", "placed": "2024-05-01T09:30:00", "total": 12.5}}


@pytest.mark.parametrize("observation_format", ["text", "json"])
async def test_each_observation_shows_the_result_as_it_was_when_the_call_ended(
        observation_format: str) -> None:
    """A method that returns its object's own list (BFCL's TradingBot.get_watchlist): a later
    call of the same batch that changes the list does not change what the earlier one saw."""
    watchlist = ["NVDA"]

    @tool
    def get_watchlist() -> list[str]:
        """The watchlist."""
        return watchlist

    @tool(read_only=False)
    def add_to_watchlist(stock: str) -> list[str]:
        """Add a stock.

        Args:
            stock: its symbol.
        """
        watchlist.append(stock)
        return watchlist

    executor = ToolExecutor(tools=[get_watchlist, add_to_watchlist], config=ToolExecutorConfig(
        observation_format=observation_format))  # type: ignore[arg-type]
    runner, result = await run(executor, [
        {"id": "a", "name": "get_watchlist", "arguments": {}},
        {"id": "b", "name": "add_to_watchlist", "arguments": {"stock": "AAPL"}},
        {"id": "c", "name": "get_watchlist", "arguments": {}}])
    assert result.status is RunStatus.SUCCESS
    seen = [content or "" for _, content in contents(runner)]
    if observation_format == "json":
        seen = [json.dumps(json.loads(c)["output"]) for c in seen]
    assert seen == ['["NVDA"]', '["NVDA", "AAPL"]', '["NVDA", "AAPL"]']


async def test_an_unknown_tool_near_a_real_name_is_suggested() -> None:
    """The model read only the list of tools; a near miss ('ech' for 'echo') now gets the
    name it meant, among the tools it may see."""
    runner, _ = await run(ToolExecutor(tools=[echo, add]), [
        {"id": "c1", "name": "ech", "arguments": {"text": "x"}},
        {"id": "c2", "name": "zzzzzz", "arguments": {}},
        {"id": "c3", "name": "", "arguments": {}},
    ])
    said = dict(contents(runner))
    assert said["c1"] == ("Error: unknown tool 'ech'; did you mean 'echo'? available tools: "
                          "echo, add"), said
    assert said["c2"] == "Error: unknown tool 'zzzzzz'; available tools: echo, add", said
    assert said["c3"] == "Error: unknown tool '<missing name>'; available tools: echo, add"
