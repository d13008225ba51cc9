"""A finished run is freed once its caller drops it, while the process's loop goes on serving
others: nothing the run set up (a timer, a cache, a registry) keeps its runner, tree or state.
Counted with weak references after a collection, never timed."""

from __future__ import annotations

import asyncio
import gc
import weakref

import py_trees
from py_trees.common import Status

from jianmu import Agent, OpenAIProvider, ReactiveRunner, ScriptedLLM, StateManager
from jianmu.llm import ChatRequest, FallbackLLM, LLMResponse
from jianmu.nodes import AgentState, create_react_node
from jianmu.runtime import AsyncNode
from jianmu.tools import tool
from tests.support.raw_http import RawServer, completion, json_reply

RUNS = 40


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: the key.
    """
    return key.upper()


@tool(read_only=False, confirm=True)
def save(text: str) -> str:
    """Save a note (a person approves first).

    Args:
        text: the note.
    """
    return "saved"


def _alive_after(runs: int, make_and_run: object) -> int:
    """How many of ``runs`` runners are still reachable after a collection, the loop running."""

    async def main() -> int:
        alive: weakref.WeakSet[ReactiveRunner] = weakref.WeakSet()
        for _ in range(runs):
            alive.add(await make_and_run())  # type: ignore[operator]
        for _ in range(3):  # callbacks already queued on the loop run first
            await asyncio.sleep(0)
        gc.collect()
        return len(alive)

    return asyncio.run(main())


def test_finished_runs_with_timed_calls_are_freed_while_the_loop_runs() -> None:
    # a tool call and a model call run under deadlines (the tool's timeout, llm_timeout): the
    # loop's timer for a deadline kept the context it was set in, and with it the run, until
    # the deadline passed (30-60 s later: thousands of finished runs in a busy service)
    async def one() -> ReactiveRunner:
        llm = ScriptedLLM([[{"name": "lookup", "arguments": {"key": "a"}}], "done"])
        state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
        runner = ReactiveRunner(create_react_node(llm, [lookup]), state)
        result = await runner.run()
        assert result.ok, result.error
        return runner

    assert _alive_after(RUNS, one) <= 1


def test_a_loop_per_request_is_freed_once_it_closes() -> None:
    # a service that answers each request with asyncio.run: the per-loop timers and the inbox
    # of results from tool threads, kept in dicts keyed weakly by the loop, held their loop
    # strongly, so every loop that ever ran a tool call was kept for good
    loops: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()

    async def request() -> None:
        loops.add(asyncio.get_running_loop())
        llm = ScriptedLLM([[{"name": "lookup", "arguments": {"key": "a"}}], "done"])
        state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
        result = await ReactiveRunner(create_react_node(llm, [lookup]), state).run()
        assert result.ok, result.error

    for _ in range(RUNS):
        asyncio.run(request())
    gc.collect()
    assert len(loops) == 0


def test_runs_of_a_shared_http_provider_are_freed_after_their_calls() -> None:
    # the HTTP client sets timers (its read timeout) during a model call, each keeping a copy
    # of the task's context: the call in flight there held the messages, the tools and the
    # node, so a finished run stayed until the client's timeout passed
    alive: weakref.WeakSet[ReactiveRunner] = weakref.WeakSet()
    with RawServer(lambda _request: json_reply(completion("done"))) as server:
        llm = OpenAIProvider("m", base_url=server.url + "/v1", max_retries=0)
        for _ in range(RUNS):
            state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
            runner = ReactiveRunner(create_react_node(llm, []), state)
            assert runner.run_sync().ok
            alive.add(runner)
        del runner, state
        gc.collect()
        assert len(alive) == 0
        assert server.connections == 1  # one kept-alive connection served them all


def test_runs_suspended_in_a_sub_agent_and_dropped_are_freed() -> None:
    # a service asks, the sub-agent's call waits for a person who never answers, the request
    # is dropped: the agent tool, shared by every run of the lead agent, kept each such call's
    # sub-run, and through it the whole calling run, for good
    def step(first: object) -> ScriptedLLM:
        return ScriptedLLM([lambda m: first if m[-1].role == "user" else "done"] * 200)

    researcher = Agent(step([{"name": "save", "arguments": {"text": "a"}}]), tools=[save],
                       name="researcher")
    lead = Agent(step([{"name": "researcher", "arguments": {"input": "q"}}]),
                 tools=[researcher.as_tool()], name="lead")

    async def one() -> ReactiveRunner:
        result = await lead.run("go")
        assert result.status.value == "suspended", result.error
        return result.runner

    assert _alive_after(RUNS, one) <= 1


def _a_library_timer() -> None:
    """What an HTTP client or a subprocess wait does in a call: a timer for its timeout, set
    and cancelled; the loop keeps a cancelled timer, and the copy of the context it was set
    in, until its deadline."""
    asyncio.get_running_loop().call_later(3600, lambda: None).cancel()


@tool
async def fetch(url: str) -> str:
    """Fetch a page.

    Args:
        url: the page.
    """
    _a_library_timer()
    return "page"


class _TimedLLM(ScriptedLLM):
    async def send(self, request: ChatRequest) -> LLMResponse:
        _a_library_timer()
        return await super().send(request)


def test_timers_set_in_a_call_keep_nothing_of_the_run() -> None:
    # the call's redirect check, in the context a timer of the call copied, led to the
    # executor and its whole run (a model behind a fallback, its switches heard, as well)
    async def one() -> ReactiveRunner:
        llm = FallbackLLM([_TimedLLM([[{"name": "fetch", "arguments": {"url": "u"}}], "done"])])
        state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
        runner = ReactiveRunner(create_react_node(llm, [fetch]), state)
        async for _event in runner.stream():  # someone hears the run's events
            pass
        assert runner.state.get("final_answer") == "done"
        return runner

    assert _alive_after(RUNS, one) <= 1


def test_node_classes_made_per_run_are_freed_with_their_trees() -> None:
    # a skill's tree module, imported again for each SkillNode, makes its node classes anew:
    # what the runner remembers of each class kept it (and its module) alive
    classes: weakref.WeakSet[type] = weakref.WeakSet()

    async def one() -> None:
        async def update_async(self: AsyncNode) -> Status:
            return Status.SUCCESS

        made = type("Step", (AsyncNode,), {"update_async": update_async})
        classes.add(made)
        tree = py_trees.composites.Sequence("s", memory=True, children=[made("a"), made("b")])
        result = await ReactiveRunner(tree, StateManager(AgentState)).run()
        assert result.ok, result.error

    async def main() -> None:
        for _ in range(RUNS):
            await one()

    asyncio.run(main())
    gc.collect()
    assert len(classes) == 0


def test_runners_over_one_kept_state_are_freed_and_no_longer_woken() -> None:
    # a chat that keeps one state and builds a runner per message: the state's subscription
    # kept every old runner (its tree, its context) alive, and each write woke all of them
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "hi"}]})
    woken: list[int] = []

    async def one() -> ReactiveRunner:
        runner = ReactiveRunner(create_react_node(ScriptedLLM(["ok"] * (RUNS + 1)), []), state)
        result = await runner.run()
        assert result.ok, result.error
        number = len(woken)
        original = runner._state_changed
        runner._state_changed = lambda keys: (woken.append(number), original(keys))  # type: ignore[method-assign]
        state.update({"messages": [{"role": "user", "content": "again"}]})
        return runner

    assert _alive_after(RUNS, one) <= 1
    before = len(woken)
    state.update({"messages": [{"role": "user", "content": "once more"}]})
    assert len(woken) - before <= 1  # no freed runner is called
    assert len(state._subscribers) <= 1  # the freed ones' subscriptions left at that write
