"""``run_sync()`` runs on one loop that outlives it; SDK clients are kept per event loop."""

from __future__ import annotations

import asyncio
import gc
import threading
import warnings

import pytest
from py_trees.common import Status

from jianmu import AsyncNode, ReactiveRunner, StateManager
from jianmu.llm._per_loop import PerLoop


class LoopOf(AsyncNode):
    """Records the loop it ran on."""

    async def update_async(self) -> Status:
        self.state.write_port("loops", [*(self.state.read_port("loops") or []),
                                        id(asyncio.get_running_loop())])
        return Status.SUCCESS


def test_every_run_sync_of_a_thread_runs_on_one_loop() -> None:
    state = StateManager()
    runner = ReactiveRunner(LoopOf("a"), state)
    assert runner.run_sync().ok
    state.update({"again": True})  # new input: the next run_sync() runs the tree again
    assert runner.run_sync().ok
    other_state = StateManager()
    assert ReactiveRunner(LoopOf("b"), other_state).run_sync().ok
    loops = state.get("loops") + other_state.get("loops")
    assert len(loops) == 3 and len(set(loops)) == 1


def test_a_runner_keeps_its_loop_when_called_from_another_thread() -> None:
    state = StateManager()
    runner = ReactiveRunner(LoopOf("a"), state)
    assert runner.run_sync().ok
    state.update({"again": True})
    results: list[bool] = []
    worker = threading.Thread(target=lambda: results.append(runner.run_sync().ok))
    worker.start()
    worker.join()
    assert results == [True]
    assert len(set(state.get("loops"))) == 1


def test_run_sync_inside_a_running_loop_is_refused() -> None:
    runner = ReactiveRunner(LoopOf("a"), StateManager())

    async def main() -> None:
        with pytest.raises(RuntimeError, match="await run"):
            runner.run_sync()

    asyncio.run(main())


class Interrupted(AsyncNode):
    """The first run is interrupted from the loop (as Ctrl-C would); later ones succeed."""

    runs = 0

    async def update_async(self) -> Status:
        Interrupted.runs += 1
        if Interrupted.runs == 1:
            def interrupt() -> None:
                raise KeyboardInterrupt

            asyncio.get_running_loop().call_soon(interrupt)
            await asyncio.Event().wait()
        return Status.SUCCESS


def test_an_interrupted_run_sync_leaves_the_runner_usable() -> None:
    Interrupted.runs = 0
    runner = ReactiveRunner(Interrupted("i"), StateManager())
    with pytest.raises(KeyboardInterrupt):
        runner.run_sync()
    assert runner.run_sync().ok and Interrupted.runs == 2


class Client:
    """Stands for an SDK client: remembers the loop it was closed on."""

    def __init__(self) -> None:
        self.closed_on: asyncio.AbstractEventLoop | None = None

    async def close(self) -> None:
        self.closed_on = asyncio.get_running_loop()


async def _close(client: Client) -> None:
    await client.close()


def test_one_client_per_loop_closed_at_that_loops_shutdown() -> None:
    clients: PerLoop[Client] = PerLoop(Client, _close)

    async def use() -> tuple[Client, asyncio.AbstractEventLoop]:
        first = clients.get()
        assert clients.get() is first  # one per loop
        return first, asyncio.get_running_loop()

    one, loop_one = asyncio.run(use())
    two, _ = asyncio.run(use())
    assert one is not two
    assert one.closed_on is loop_one  # closed on its own loop, before that loop closed
    assert two.closed_on is not None and len(clients) == 0


def test_a_client_whose_loop_closed_unshut_is_dropped_untouched() -> None:
    clients: PerLoop[Client] = PerLoop(Client, _close)
    loop = asyncio.new_event_loop()
    first = loop.run_until_complete(_get(clients))
    loop.close()  # no shutdown_asyncgens(): the client could not be closed on it
    second = asyncio.run(_get(clients))
    assert second is not first and first.closed_on is None
    assert second.closed_on is not None and len(clients) == 0


async def _get(clients: PerLoop[Client]) -> Client:
    return clients.get()


def test_a_dropped_providers_client_is_closed_on_its_loop_while_that_loop_lives() -> None:
    # an Agent("openai:gpt-4o") per request, dropped after its run: its provider's client
    # (and its kept-alive sockets) must be closed on its loop, not collected with the
    # sockets open ("unclosed transport") or kept until the loop's shutdown
    loop = asyncio.new_event_loop()
    try:
        clients: PerLoop[Client] = PerLoop(Client, _close)
        client = loop.run_until_complete(_get(clients))
        del clients
        gc.collect()
        assert client.closed_on is None  # nothing awaited outside its loop...
        loop.run_until_complete(asyncio.sleep(0))
        loop.run_until_complete(asyncio.sleep(0))
        assert client.closed_on is loop  # ...closed on it, at its next turn
    finally:
        loop.close()


def test_an_agent_of_a_named_model_leaves_no_socket_open_when_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from jianmu import Agent
    from tests.support.model_server import ModelServer

    with ModelServer("One.", "Two.") as server, warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", ResourceWarning)
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_url)
        monkeypatch.setenv("OPENAI_API_KEY", "not-needed")
        assert Agent("openai:test-model").run_sync("hi", timeout=30).output == "One."
        gc.collect()  # the agent, its provider and its client are garbage now
        assert Agent("openai:test-model").run_sync("hi", timeout=30).output == "Two."
        gc.collect()
    assert [str(w.message) for w in seen if w.category is ResourceWarning] == []
