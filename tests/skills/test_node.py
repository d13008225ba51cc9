"""SkillNode: prompt and BT skills, namespaces, cleanup, debug snapshots, merged limits."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import py_trees
import pytest

from jianmu import (
    AppConfig,
    Constraints,
    ReactiveRunner,
    RunStatus,
    SQLiteCheckpointer,
    StateManager,
)
from jianmu.config import parse_config
from jianmu.llm import Message, ScriptedLLM
from jianmu.nodes import AgentState
from jianmu.skills import SkillCatalog
from jianmu.skills.node import SkillNode, SkillNodeConfig, merge_skill_constraints
from jianmu.tools import tool
from tests.support.forked_stdio import stdio_command

pytestmark = pytest.mark.anyio
REPO = Path(__file__).resolve().parents[2]


@tool
def ping(host: str) -> str:
    """Ping a host.

    Args:
        host: the host name.
    """
    return f"pong from {host}"


def make_skill(root: Path, name: str, front: str, body: str = "Do the task.") -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: A test skill.\n{textwrap.dedent(front)}---\n{body}\n"
    )
    return folder


def catalog(root: Path) -> SkillCatalog:
    return SkillCatalog([root], custom_tools=[ping])


def state_with(question: str = "go") -> StateManager:
    return StateManager(AgentState, {"messages": [{"role": "user", "content": question}]})


def config(tmp_path: Path, text: str = "") -> AppConfig:
    return parse_config(f"runtime:\n  debug_dir: {tmp_path / 'debug'}\n{text}")


async def test_prompt_skill_runs_in_its_namespace_and_writes_back(tmp_path: Path) -> None:
    make_skill(tmp_path, "pinger", "tools: [ping]\n", body="Ping every host you are asked about.")
    llm = ScriptedLLM([[{"name": "ping", "arguments": {"host": "a"}}], "a answered"])
    node = SkillNode("Pinger", ["pinger"], llm, catalog=catalog(tmp_path), tools=[ping])
    state = state_with("ping a")
    runner = ReactiveRunner(node, state, config=config(tmp_path))
    seen: list[str] = []
    runner.ctx.events.subscribe("skill.compiled", lambda e: seen.append(e.fields["namespace"]))
    result = await runner.run(timeout=30)
    assert result.status is RunStatus.SUCCESS
    assert state.get("final_answer") == "a answered"
    assert seen == ["skill_runtime.Pinger_0"]
    assert state.namespaces() == []  # cleaned up after the run
    # the global conversation gets the answer, not the skill's own tool calls
    assert [(m.role, m.content) for m in state.get("messages")] == [
        ("user", "ping a"), ("assistant", "a answered")]
    system = llm.requests[0].messages[0]
    assert system.role == "system" and "Ping every host" in (system.content or "")
    assert llm.requests[0].messages[1].content == "ping a"  # history copied in
    assert llm.requests[0].tool_names == ["ping", "read_skill_file", "run_skill_script"]


async def test_two_skill_nodes_of_one_skill_are_isolated(tmp_path: Path) -> None:
    make_skill(tmp_path, "pinger", "tools: [ping]\n")
    cat = catalog(tmp_path)
    llm_a = ScriptedLLM([[{"name": "ping", "arguments": {"host": "a"}}], "done a"])
    llm_b = ScriptedLLM(["done b"])
    a = SkillNode("Pinger", ["pinger"], llm_a, catalog=cat, tools=[ping])
    b = SkillNode("Pinger", ["pinger"], llm_b, catalog=cat, tools=[ping])
    tree = py_trees.composites.Parallel(
        "Both", policy=py_trees.common.ParallelPolicy.SuccessOnAll(), children=[a, b]
    )
    state = state_with()
    namespaces: list[str] = []
    runner = ReactiveRunner(tree, state, config=config(tmp_path))
    runner.ctx.events.subscribe(
        "skill.compiled", lambda e: namespaces.append(e.fields["namespace"])
    )
    result = await runner.run(timeout=30)
    assert result.status is RunStatus.SUCCESS
    assert sorted(namespaces) == ["skill_runtime.Pinger_0_0", "skill_runtime.Pinger_0_1"]
    # b's model never saw a's tool call or its result
    assert all(m.role in ("system", "user") for m in llm_b.requests[0].messages)
    assert state.namespaces() == []


async def test_failure_writes_a_debug_snapshot_and_cleans_up(tmp_path: Path) -> None:
    make_skill(tmp_path, "looper", "tools: [ping]\nconstraints:\n  max_iterations: 2\n")
    llm = ScriptedLLM([[{"name": "ping", "arguments": {"host": "x"}}]] * 3)
    node = SkillNode("Looper", ["looper"], llm, catalog=catalog(tmp_path), tools=[ping])
    state = state_with()
    result = await ReactiveRunner(node, state, config=config(tmp_path)).run(timeout=30)
    assert result.status is RunStatus.FAILURE
    assert "max_iterations=2" in node.feedback_message
    assert node.debug_snapshot_path is not None
    snapshot = json.loads(node.debug_snapshot_path.read_text())
    assert snapshot["namespace"] == "skill_runtime.Looper_0"
    assert snapshot["state"]["rounds"] == 2 and "max_iterations" in snapshot["error"]
    assert state.namespaces() == []


async def test_max_iterations_from_skill_md_caps_the_loop(tmp_path: Path) -> None:
    make_skill(tmp_path, "capped", "tools: [ping]\nconstraints:\n  max_iterations: 5\n")
    llm = ScriptedLLM([[{"name": "ping", "arguments": {"host": "x"}}]] * 9)
    node = SkillNode("Capped", ["capped"], llm, catalog=catalog(tmp_path), tools=[ping])
    result = await ReactiveRunner(node, state_with(), config=config(tmp_path)).run(timeout=30)
    assert result.status is RunStatus.FAILURE
    assert len(llm.requests) == 5 and llm.remaining == 4


async def test_max_tool_calls_from_skill_md_stops_the_third_call(tmp_path: Path) -> None:
    make_skill(
        tmp_path, "limited", "tools: [ping]\nconstraints:\n  guard:\n    max_tool_calls: 2\n"
    )
    llm = ScriptedLLM([
        [{"name": "ping", "arguments": {"host": h}} for h in ("a", "b", "c")],
        "done",
    ])
    node = SkillNode("Limited", ["limited"], llm, catalog=catalog(tmp_path), tools=[ping])
    result = await ReactiveRunner(node, state_with(), config=config(tmp_path)).run(timeout=30)
    assert result.status is RunStatus.SUCCESS
    tool_texts = [m.content for m in llm.requests[1].messages if m.role == "tool"]
    assert tool_texts[:2] == ["pong from a", "pong from b"]
    assert "denied" in (tool_texts[2] or "") and "max_tool_calls" in (tool_texts[2] or "")


@tool(category="write", effect_tags=["file_write"])
def save(text: str) -> str:
    """Save text.

    Args:
        text: what to save.
    """
    return "saved"


async def test_confirm_in_skill_md_suspends(tmp_path: Path) -> None:
    make_skill(tmp_path, "saver", "tools: [save]\nconstraints:\n  guard:\n    tool_policy:\n"
               "      save: confirm\n")
    llm = ScriptedLLM([[{"id": "s1", "name": "save", "arguments": {"text": "x"}}], "saved it"])
    node = SkillNode("Saver", ["saver"], llm, catalog=SkillCatalog([tmp_path],
                     custom_tools=[save]), tools=[save])
    state = state_with()
    runner = ReactiveRunner(node, state, config=config(tmp_path))
    first = await runner.run(timeout=30)
    # the call is the skill's namespace's (its id qualified by it); its own id still names it
    assert first.status is RunStatus.SUSPENDED
    assert [r.id for r in first.pending] == ["skill_runtime.Saver_0/s1"]
    assert state.namespaces() == ["skill_runtime.Saver_0"]  # kept while suspended
    runner.approve("s1")
    done = await runner.run(timeout=30)
    assert done.status is RunStatus.SUCCESS and state.get("final_answer") == "saved it"


async def test_skill_allow_cannot_loosen_a_config_confirm(tmp_path: Path) -> None:
    make_skill(tmp_path, "loose", "tools: [save]\nconstraints:\n  guard:\n    tool_policy:\n"
               "      save: allow\n")
    llm = ScriptedLLM([[{"id": "s1", "name": "save", "arguments": {"text": "x"}}], "ok"])
    node = SkillNode("Loose", ["loose"], llm, catalog=SkillCatalog([tmp_path],
                     custom_tools=[save]), tools=[save])
    cfg = config(tmp_path, "guard:\n  tool_policy:\n    save: confirm\n")
    result = await ReactiveRunner(node, state_with(), config=cfg).run(timeout=30)
    assert result.status is RunStatus.SUSPENDED  # still asks


async def test_denied_tool_is_hidden_from_the_model(tmp_path: Path) -> None:
    make_skill(tmp_path, "nosave", "tools: [save, ping]\nconstraints:\n  guard:\n"
               "    tool_policy:\n      save: deny\n")
    llm = ScriptedLLM(["nothing to do"])
    node = SkillNode("NoSave", ["nosave"], llm, catalog=SkillCatalog([tmp_path],
                     custom_tools=[save, ping]), tools=[save, ping])
    await ReactiveRunner(node, state_with(), config=config(tmp_path)).run(timeout=30)
    assert llm.requests[0].tool_names == ["ping", "read_skill_file", "run_skill_script"]


def test_merge_each_field_tightens_only(tmp_path: Path) -> None:
    root = make_skill(tmp_path, "strict", """\
        constraints:
          max_iterations: 3
          timeout: 500
          max_messages: 5
          guard:
            max_tool_calls: 10
            default_policy: confirm
            tool_policy: {ping: allow, bash: deny}
            budget: {total_tokens: 999999}
          execution: {network: true, mode: docker, timeout_s: 5, memory_mb: 4096}
        """).parent
    skill = SkillCatalog([root]).get("strict")
    base = Constraints.model_validate({
        "max_iterations": 8, "timeout": 60, "max_messages": 20,
        "guard": {"max_tool_calls": 4, "tool_policy": {"ping": "confirm"},
                  "budget": {"total_tokens": 1000}},
        "execution": {"network": False, "mode": "local", "timeout_s": 30, "memory_mb": 512},
    })
    merged = merge_skill_constraints(base, [skill])
    assert (merged.max_iterations, merged.timeout, merged.max_messages) == (3, 60, 5)
    assert merged.guard.max_tool_calls == 4
    assert merged.guard.budget.total_tokens == 1000
    assert merged.guard.tool_policy == {"ping": "confirm", "bash": "deny"}
    assert merged.guard.default_policy == "confirm"
    assert merged.execution.network is False  # false anywhere wins
    assert merged.execution.mode == "docker"  # non-safety: nearest layer
    assert (merged.execution.timeout_s, merged.execution.memory_mb) == (5, 512)


async def test_shipped_prompt_and_bt_skills_through_skill_node(tmp_path: Path) -> None:
    (tmp_path / "notes.py").write_text("x = 1  # TODO: rename\n")
    cfg = parse_config(
        f"execution:\n  workdir: {tmp_path}\nguard:\n  tool_policy:\n    write_file: allow\n"
        f"runtime:\n  debug_dir: {tmp_path / 'debug'}\n"
    )
    llm = ScriptedLLM([
        [{"name": "run_bt_skill",
          "arguments": {"skill": "workspace-report", "inputs": {"report": "report.md"}}}],
        lambda messages: f"Report: {[m.content for m in messages if m.role == 'tool'][-1]}",
    ])
    node = SkillNode("Review", ["code-review", "workspace-report"], llm,
                     catalog=SkillCatalog([REPO / "skills"]),
                     config=SkillNodeConfig(disclosure="eager"))
    state = state_with("survey the workspace")
    result = await ReactiveRunner(node, state, config=cfg).run(timeout=60)
    assert result.status is RunStatus.SUCCESS, result.error
    assert (tmp_path / "report.md").exists()
    assert "TODO" in (tmp_path / "report.md").read_text()
    system = llm.requests[0].messages[0].content or ""
    assert "## Skill: code-review" in system and "workspace-report" in system
    assert "run_bt_skill" in llm.requests[0].tool_names
    assert "write_file" not in llm.requests[0].tool_names  # code-review denies it to the model
    answer = state.get("final_answer") or ""
    assert answer.startswith("Report:") and '"matches": 1' in answer
    # written back as documented; it was left in the tool's namespace and cleared with it
    assert state.get("skill_result") == {"report": "report.md", "files": 1, "matches": 1,
                                         "total_bytes": 22, "total_lines": 1}


async def test_seed_messages_and_history_limit(tmp_path: Path) -> None:
    make_skill(tmp_path, "chat", "history_limit: 1\n")
    llm = ScriptedLLM(["hi"])
    node = SkillNode(
        "Chat", ["chat"], llm, catalog=catalog(tmp_path),
        config=SkillNodeConfig(seed_messages=[Message.user("seeded")]),
    )
    state = StateManager(AgentState, {"messages": [
        {"role": "user", "content": "old"}, {"role": "assistant", "content": "older reply"},
        {"role": "user", "content": "latest"},
    ]})
    await ReactiveRunner(node, state, config=config(tmp_path)).run(timeout=30)
    contents = [m.content for m in llm.requests[0].messages[1:]]
    assert contents == ["latest", "seeded"]




async def test_skill_uses_tools_of_a_configured_mcp_server(tmp_path: Path) -> None:
    server = REPO / "tests" / "mcp" / "servers" / "weather_server.py"
    command, args = stdio_command(str(server))  # forked with the MCP SDK imported
    make_skill(tmp_path, "forecaster", "tools: [weather__get_forecast]\n")
    cfg = parse_config(  # trusted for read-only tools: get_forecast runs without asking
        f"runtime:\n  debug_dir: {tmp_path / 'debug'}\n"
        f"mcp:\n  servers:\n    weather:\n      command: {command}\n"
        f"      args: {json.dumps(args)}\n      trust: read_only\n"
    )
    llm = ScriptedLLM([
        [{"name": "weather__get_forecast", "arguments": {"city": "Oslo"}}],
        lambda messages: [m.content for m in messages if m.role == "tool"][-1] or "",
    ])
    node = SkillNode("Forecast", ["forecaster"], llm, catalog=SkillCatalog([tmp_path], config=cfg))
    state = state_with("weather in Oslo?")
    result = await ReactiveRunner(node, state, config=cfg).run(timeout=60)
    assert result.status is RunStatus.SUCCESS, result.error
    # of the server, only the tool it named (the skill-file tools come with every skill)
    assert llm.requests[0].tool_names == [
        "read_skill_file", "run_skill_script", "weather__get_forecast"
    ]
    assert "\"city\": \"oslo\"" in (state.get("final_answer") or "")


async def test_suspended_skill_with_mcp_tools_resumes_in_a_new_runner(tmp_path: Path) -> None:
    server = REPO / "tests" / "mcp" / "servers" / "weather_server.py"
    command, args = stdio_command(str(server))  # forked with the MCP SDK imported
    make_skill(tmp_path, "forecaster", "tools: [weather]\nconstraints:\n  guard:\n"
               "    tool_policy:\n      weather__get_forecast: confirm\n")
    cfg = parse_config(
        f"runtime:\n  debug_dir: {tmp_path / 'debug'}\n"
        f"mcp:\n  servers:\n    weather:\n      command: {command}\n"
        f"      args: {json.dumps(args)}\n"
    )

    def build(*script: Any) -> tuple[SkillNode, ScriptedLLM]:
        llm = ScriptedLLM(list(script))
        catalog = SkillCatalog([tmp_path], config=cfg)
        return SkillNode("Forecast", ["forecaster"], llm, catalog=catalog), llm

    store = SQLiteCheckpointer(tmp_path / "runs.sqlite")
    node, _ = build(
        [{"id": "f1", "name": "weather__get_forecast", "arguments": {"city": "Oslo"}}]
    )
    parked = ReactiveRunner(node, state_with("Oslo?"), config=cfg, checkpointer=store)
    first = await parked.run(timeout=60)
    assert first.status is RunStatus.SUSPENDED
    assert [r.id for r in first.pending] == ["skill_runtime.Forecast_0/f1"]
    await parked.aclose()  # a suspended run keeps its MCP server for the next turn: parked

    # a new tree and model, as a new process would build them; the model is asked only for
    # the turn after the approved call
    node, llm = build(lambda messages: [m.content for m in messages if m.role == "tool"][-1])
    state = StateManager(AgentState)
    runner = ReactiveRunner.restore(node, store, first.run_id, state_manager=state, config=cfg)
    runner.approve("f1")
    done = await runner.run(timeout=60)
    assert done.status is RunStatus.SUCCESS, done.error
    assert '"city": "oslo"' in (state.get("final_answer") or "")
    assert len(llm.requests) == 1  # the approved call ran without asking the model again
    assert [m.role for m in llm.requests[0].messages][-2:] == ["assistant", "tool"]
    assert state.namespaces() == []


def mcp_config(tmp_path: Path) -> AppConfig:
    """The weather server (its read-only tools run freely) and the notes server."""
    servers = REPO / "tests" / "mcp" / "servers"
    weather, weather_args = stdio_command(str(servers / "weather_server.py"))
    notes, notes_args = stdio_command(str(servers / "notes_server.py"), "stdio")
    return parse_config(
        f"runtime:\n  debug_dir: {tmp_path / 'debug'}\n"
        f"mcp:\n  servers:\n    weather:\n      command: {weather}\n"
        f"      args: {json.dumps(weather_args)}\n      trust: read_only\n"
        f"    notes:\n      command: {notes}\n      args: {json.dumps(notes_args)}\n"
    )


def tool_results(messages: list[Message]) -> str:
    """The latest turn's tool results (those after the last user message), one a line."""
    last_user = max(i for i, m in enumerate(messages) if m.role == "user")
    return "\n".join(str(m.content) for m in messages[last_user:] if m.role == "tool")


async def test_a_conversations_next_turn_connects_the_skills_mcp_servers_again(
    tmp_path: Path,
) -> None:
    # the first run's end closed its servers; the node stays compiled, and the next turn's
    # calls reach servers of its own, under the same names
    make_skill(tmp_path, "forecaster", "tools: [weather, notes]\n")
    cfg = mcp_config(tmp_path)
    turn = [
        [{"name": "weather__server_pid", "arguments": {}},
         {"name": "mcp_read_resource", "arguments": {"server": "notes", "uri": "notes://readme"}}],
        tool_results,
    ]
    llm = ScriptedLLM([*turn, *turn])
    node = SkillNode("Forecast", ["forecaster"], llm, catalog=SkillCatalog([tmp_path], config=cfg))
    state = state_with("which server?")
    async with ReactiveRunner(node, state, config=cfg) as runner:
        first = await runner.run(timeout=60)
        assert first.status is RunStatus.SUCCESS, first.error
        answers = [state.get("final_answer") or ""]
        runner.send("and now?")
        second = await runner.run(timeout=60)
        assert second.status is RunStatus.SUCCESS, second.error
        answers.append(state.get("final_answer") or "")
    for answer in answers:
        assert "closed" not in answer and "Read me first." in answer, answer
    pids = [answer.splitlines()[0] for answer in answers]
    assert all(pid.isdigit() for pid in pids) and pids[0] != pids[1], pids
    assert llm.requests[2].tool_names == llm.requests[0].tool_names
    assert "weather__server_pid" in llm.requests[2].tool_names


async def test_a_loaded_skills_mcp_tools_work_in_the_run_after_a_cancel(tmp_path: Path) -> None:
    # progressive: the model loads the skill mid-run, the run is cancelled while a call of it
    # runs; the next run goes on with the skill loaded and its server connected anew
    import asyncio

    started = asyncio.Event()

    @tool(category="write", permission="auto")
    async def hold() -> str:
        """Wait for a signal that never comes."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    make_skill(tmp_path, "forecaster", "tools: [weather, hold]\n")
    make_skill(tmp_path, "other", "tools: []\n")
    cfg = mcp_config(tmp_path)
    llm = ScriptedLLM([
        [{"name": "load_skill", "arguments": {"name": "forecaster"}}],
        [{"name": "weather__server_pid", "arguments": {}}],
        [{"name": "hold", "arguments": {}}],
        [{"name": "weather__server_pid", "arguments": {}}],
        lambda messages: "\n".join(str(m.content) for m in messages if m.role == "tool"),
    ])
    catalog = SkillCatalog([tmp_path], config=cfg, custom_tools=[hold])
    node = SkillNode("Forecast", ["forecaster", "other"], llm, catalog=catalog, tools=[hold])
    state = state_with("which server?")
    async with ReactiveRunner(node, state, config=cfg) as runner:
        going = asyncio.ensure_future(runner.run(timeout=60))
        await started.wait()
        runner.cancel()
        assert (await going).status is RunStatus.CANCELLED
        done = await runner.run(timeout=60)
    assert done.status is RunStatus.SUCCESS, done.error
    assert node.progressive
    results = (state.get("final_answer") or "").splitlines()
    assert "closed" not in "".join(results), results
    pids = [line for line in results if line.isdigit()]
    assert len(pids) == 2 and pids[0] != pids[1], results
    assert "weather__server_pid" in llm.requests[-2].tool_names


async def test_a_skill_cannot_move_the_workspace_out(tmp_path: Path) -> None:
    make_skill(tmp_path, "mover", "tools: [ping]\nconstraints:\n  execution:\n    workdir: /\n")
    llm = ScriptedLLM(["never asked"])
    node = SkillNode("Mover", ["mover"], llm, catalog=catalog(tmp_path), tools=[ping])
    cfg = parse_config(f"execution:\n  workdir: {tmp_path}\nruntime:\n  debug_dir: {tmp_path}/d\n")
    result = await ReactiveRunner(node, state_with(), config=cfg).run(timeout=30)
    assert result.status is RunStatus.FAILURE
    assert "outside the workspace" in (result.error or "") and llm.requests == []


def two_skill_nodes(tmp_path: Path, scripts: list[list[Any]]) -> Any:
    cat = SkillCatalog([tmp_path], custom_tools=[save, ping])
    nodes = [
        SkillNode(f"S{i}", ["two"], ScriptedLLM(script), catalog=cat, tools=[save, ping])
        for i, script in enumerate(scripts)
    ]
    return py_trees.composites.Sequence("Both", memory=True, children=nodes)


async def test_an_approval_is_used_once_across_skill_namespaces(tmp_path: Path) -> None:
    make_skill(tmp_path, "two", "tools: [save]\nconstraints:\n  guard:\n    tool_policy:\n"
               "      save: confirm\n")
    call = [{"id": "s1", "name": "save", "arguments": {"text": "pay bob"}}]
    tree = two_skill_nodes(tmp_path, [[call, "one"], [call, "two"]])
    runner = ReactiveRunner(tree, state_with(), config=config(tmp_path))
    first = await runner.run(timeout=30)
    assert [r.id for r in first.pending] == ["skill_runtime.S0_0_0/s1"]
    runner.approve("s1")
    second = await runner.run(timeout=30)
    # the second skill replays the approved id: its call is its own namespace's, asked anew
    assert second.status is RunStatus.SUSPENDED
    assert [r.id for r in second.pending] == ["skill_runtime.S1_0_1/s1"]


async def test_max_tool_calls_counts_over_the_whole_run(tmp_path: Path) -> None:
    make_skill(tmp_path, "two", "tools: [ping]\n")
    calls = [{"name": "ping", "arguments": {"host": h}} for h in ("a", "b")]
    tree = two_skill_nodes(tmp_path, [[calls, "one"], [calls, "two"]])
    cfg = config(tmp_path, "guard:\n  max_tool_calls: 2\n")
    state = state_with()
    runner = ReactiveRunner(tree, state, config=cfg)
    seen: list[Any] = []
    runner.ctx.events.subscribe("tool.call.*", seen.append)
    assert (await runner.run(timeout=30)).ok
    done = [e for e in seen if e.name == "tool.call.completed"]
    failed = [e for e in seen if e.name == "tool.call.failed"]
    assert len(done) == 2 and len(failed) == 2
    assert all("max_tool_calls" in e.fields["error"] for e in failed)


async def test_a_skill_nodes_agent_is_named_after_it_in_spans_and_once_as_a_sub_agent(
    tmp_path: Path,
) -> None:
    """The spans named the skill's inner loop (``invoke_agent Pinger.react``, and the model
    calls' ``gen_ai.agent.name``), and a skill node called as a tool (`agent_tool`) was two
    agent spans, the sub-agent's and its loop's, one inside the other."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from jianmu.nodes import agent_tool, create_react_node

    make_skill(tmp_path, "pinger", "tools: [ping]\n", body="Ping.")

    def skill() -> SkillNode:
        return SkillNode("Pinger", ["pinger"], ScriptedLLM(
            [[{"name": "ping", "arguments": {"host": "a"}}], "a answered"]),
            catalog=catalog(tmp_path), tools=[ping])

    def traced() -> tuple[InMemorySpanExporter, TracerProvider]:
        exporter, provider = InMemorySpanExporter(), TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        return exporter, provider

    exporter, provider = traced()
    runner = ReactiveRunner(skill(), state_with("ping a"), config=config(tmp_path),
                            tracer_provider=provider)
    assert (await runner.run(timeout=30)).ok
    agents = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]
    assert [s.name for s in agents] == ["invoke_agent Pinger"]
    assert {s.attributes["gen_ai.agent.name"] for s in exporter.get_finished_spans()
            if s.name.startswith("chat ")} == {"Pinger"}

    exporter, provider = traced()
    lead = create_react_node(
        ScriptedLLM([[{"name": "pinger", "arguments": {"input": "ping a"}}], "Done."]),
        [agent_tool(skill(), name="pinger", description="Pings.")], name="lead")
    runner = ReactiveRunner(lead, state_with("go"), config=config(tmp_path),
                            tracer_provider=provider)
    assert (await runner.run(timeout=30)).ok
    spans = exporter.get_finished_spans()
    names = {s.context.span_id: s.name for s in spans if s.context is not None}
    agents = sorted(s.name for s in spans if s.name.startswith("invoke_agent"))
    assert agents == ["invoke_agent lead", "invoke_agent pinger"]
    (ping_call,) = [s for s in spans if s.name == "execute_tool ping"]
    assert ping_call.parent is not None and names[ping_call.parent.span_id] == (
        "invoke_agent pinger")
