"""A scripted tool-calling workload: Jianmu's ReAct loop vs LangGraph's prebuilt agent vs
calling the tools directly.

A small shop domain (users, orders, products in a dict) has thirteen plain sync tools, as a
third-party benchmark's domain has; the model is offered all of them on every turn. Each of
``TASKS`` tasks is a script of ten model turns: nine that call tools (one of them two reads at
once) and a final answer. The script is replayed three ways, with the same tool functions and
the same replies:

- directly: each scripted call is ``fn(**arguments)``, nothing else;
- Jianmu: a fresh `create_react_node` tree under a fresh `ReactiveRunner` per task, its model
  a `ScriptedLLM` of the task's script (no sleep);
- LangGraph: ``create_react_agent`` compiled once, ``ainvoke`` per task, its model a fake chat
  model answering the task's script by turn (no sleep).

Every side must leave the shop in the same state as the direct calls (a hash of the database
after all tasks), so a side that skipped or garbled a call cannot look fast. Rounds of the
three sides are interleaved, their order rotating, so a busy machine slows all alike; the
figures are medians over the rounds. ``--profile`` prints a cProfile of the Jianmu side.
"""

from __future__ import annotations

import asyncio
import copy
import cProfile
import hashlib
import io
import json
import pstats
import statistics
import sys
import time
import warnings
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from benchmarks._util import table, verdict
from jianmu import ReactiveRunner, StateManager
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState, create_react_node
from jianmu.runtime import RunStatus
from jianmu.tools import Tool, ToolSet, tool

TASKS = 20
ROUNDS = 15
TARGET_TURN_RATIO = 0.5
"""Jianmu's time per model turn at most this fraction of LangGraph's."""
TARGET_OVERHEAD_MS = 0.5
"""Jianmu's time per tool call above calling the tool directly, in milliseconds."""

# -- the domain ---------------------------------------------------------------------------------


def _seed_db() -> dict[str, Any]:
    users: dict[str, Any] = {}
    orders: dict[str, Any] = {}
    products = {
        f"p{i}": {"name": f"product {i}", "price": 10 + i, "in_stock": i % 3 != 0}
        for i in range(12)
    }
    for u in range(TASKS):
        user_id = f"u{u}"
        ids = [f"o{u}_{k}" for k in range(3)]
        users[user_id] = {
            "email": f"user{u}@example.com",
            "address": {"address1": f"{u} Main St", "city": "Springfield", "region": "IL",
                        "zip": "62701"},
            "orders": ids,
        }
        for k, order_id in enumerate(ids):
            orders[order_id] = {
                "user_id": user_id, "status": "pending",
                "items": [f"p{(u + k + j) % 12}" for j in range(2)],
            }
    return {"users": users, "orders": orders, "products": products}


SEED = _seed_db()
DB: dict[str, Any] = copy.deepcopy(SEED)


def reset_db() -> None:
    """Put the shop back as it was before any task."""
    global DB
    DB = copy.deepcopy(SEED)


def db_hash() -> str:
    """A hash of the whole database, to compare the sides' end states."""
    return hashlib.sha256(json.dumps(DB, sort_keys=True).encode()).hexdigest()[:16]


def find_user_by_email(email: str) -> str:
    """Find a user's id by their email address.

    Args:
        email: the user's email.
    """
    for user_id, user in DB["users"].items():
        if user["email"] == email:
            return str(user_id)
    return "Error: no user with that email"


def get_user_details(user_id: str) -> dict[str, Any]:
    """The user's address and order ids.

    Args:
        user_id: the user's id.
    """
    return dict(DB["users"][user_id])


def list_user_orders(user_id: str) -> list[str]:
    """The ids of the user's orders.

    Args:
        user_id: the user's id.
    """
    return list(DB["users"][user_id]["orders"])


def get_order_details(order_id: str) -> dict[str, Any]:
    """An order's status and items.

    Args:
        order_id: the order's id.
    """
    return dict(DB["orders"][order_id])


def get_product_details(product_id: str) -> dict[str, Any]:
    """A product's name, price and stock.

    Args:
        product_id: the product's id.
    """
    return dict(DB["products"][product_id])


def modify_user_address(user_id: str, address1: str, city: str, region: str,
                        zip: str) -> dict[str, Any]:
    """Change a user's default address.

    Args:
        user_id: the user's id.
        address1: street and number.
        city: the city.
        region: the state or province.
        zip: the postal code.
    """
    address = {"address1": address1, "city": city, "region": region, "zip": zip}
    DB["users"][user_id]["address"] = address
    return address


def cancel_pending_order(order_id: str, reason: str) -> dict[str, Any]:
    """Cancel an order that has not shipped.

    Args:
        order_id: the order's id.
        reason: why: "no longer needed" or "ordered by mistake".
    """
    order = DB["orders"][order_id]
    if order["status"] != "pending":
        return {"ok": False, "error": f"order {order_id} is {order['status']}"}
    order["status"] = "cancelled"
    order["reason"] = reason
    return order


def list_products() -> list[str]:
    """The ids of every product."""
    return list(DB["products"])


def modify_pending_order_address(order_id: str, address1: str, city: str, region: str,
                                 zip: str) -> dict[str, Any]:
    """Ship a pending order to another address.

    Args:
        order_id: the order's id.
        address1: street and number.
        city: the city.
        region: the state or province.
        zip: the postal code.
    """
    order = DB["orders"][order_id]
    order["address"] = {"address1": address1, "city": city, "region": region, "zip": zip}
    return order


def return_delivered_order_items(order_id: str, item_ids: list[str],
                                 payment_method_id: str) -> dict[str, Any]:
    """Return some items of a delivered order, refunded to a payment method.

    Args:
        order_id: the order's id.
        item_ids: the items to return.
        payment_method_id: where the refund goes.
    """
    order = DB["orders"][order_id]
    if order["status"] != "delivered":
        return {"ok": False, "error": f"order {order_id} is {order['status']}"}
    order["returned"] = {"items": item_ids, "to": payment_method_id}
    return order


def calculate(expression: str) -> str:
    """Evaluate a sum of numbers such as "12 + 30.5".

    Args:
        expression: numbers joined by "+".
    """
    return str(sum(float(x) for x in expression.split("+")))


def think(thought: str) -> str:
    """Think out loud; changes nothing.

    Args:
        thought: the thought.
    """
    return ""


def transfer_to_human_agents(summary: str) -> str:
    """Hand the conversation to a person.

    Args:
        summary: what the user wants.
    """
    return "Transfer successful"


FUNCTIONS: list[Callable[..., Any]] = [
    find_user_by_email, get_user_details, list_user_orders, get_order_details,
    get_product_details, modify_user_address, cancel_pending_order, list_products,
    modify_pending_order_address, return_delivered_order_items, calculate, think,
    transfer_to_human_agents,
]
BY_NAME = {fn.__name__: fn for fn in FUNCTIONS}

Turn = list[dict[str, Any]] | str
"""One scripted model turn: its tool calls (``name``, ``arguments``), or the final answer."""


def script(task: int) -> list[Turn]:
    """Task ``task``'s ten model turns: nine with tool calls, then the answer."""
    user = f"u{task}"
    first, second = f"o{task}_0", f"o{task}_1"

    def call(name: str, **arguments: Any) -> list[dict[str, Any]]:
        return [{"name": name, "arguments": arguments}]

    return [
        call("find_user_by_email", email=f"user{task}@example.com"),
        call("get_user_details", user_id=user),
        call("list_user_orders", user_id=user),
        call("get_order_details", order_id=first),
        [{"name": "get_product_details", "arguments": {"product_id": f"p{task % 12}"}},
         {"name": "get_product_details", "arguments": {"product_id": f"p{(task + 1) % 12}"}}],
        call("get_order_details", order_id=second),
        call("modify_user_address", user_id=user, address1=f"{task} Oak Ave", city="Portland",
             region="OR", zip="97201"),
        call("cancel_pending_order", order_id=first, reason="no longer needed"),
        call("get_order_details", order_id=first),
        f"Done: order {first} is cancelled and the address is updated.",
    ]


SCRIPTS = [script(t) for t in range(TASKS)]
TURNS = len(SCRIPTS[0])
CALLS = sum(len(turn) for turn in SCRIPTS[0] if not isinstance(turn, str))


def _prompt(task: int) -> str:
    return f"task {task}: cancel my first order and move me to Portland"


def _task_of(text: str) -> int:
    return int(text.split(":", 1)[0].removeprefix("task "))


# -- the three sides ----------------------------------------------------------------------------


def direct_task(task: int) -> None:
    """The floor: the task's calls made directly, in order."""
    for turn in SCRIPTS[task]:
        if isinstance(turn, str):
            return
        for c in turn:
            BY_NAME[c["name"]](**c["arguments"])


JIANMU_TOOLS = [tool(fn) for fn in FUNCTIONS]
DEFINITIONS = [t.to_openai() for t in JIANMU_TOOLS]
"""The domain's OpenAI function definitions, as a third-party benchmark ships them."""
OPENAI_TOOLS = ToolSet.from_openai(DEFINITIONS, FUNCTIONS)
"""The same functions as tools made from those definitions (checked by their JSON Schema)."""


async def run_jianmu(task: int, tools: Sequence[Tool] | ToolSet) -> None:
    """One task through a fresh ReAct tree and runner, its model a `ScriptedLLM`; the runner
    is closed after (its worker threads end), as an agent that is done with should be."""
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": _prompt(task)}]})
    tree = create_react_node(ScriptedLLM(SCRIPTS[task]), tools)
    async with ReactiveRunner(tree, state) as runner:
        result = await runner.run()
    assert result.status is RunStatus.SUCCESS, result
    assert state.get("final_answer") == SCRIPTS[task][-1], state.get("final_answer")


async def jianmu_task(task: int) -> None:
    """One task with the ``@tool`` functions."""
    await run_jianmu(task, JIANMU_TOOLS)


async def jianmu_openai_task(task: int) -> None:
    """One task with the tools made from the OpenAI definitions."""
    await run_jianmu(task, OPENAI_TOOLS)


def _turns_taken(messages: Sequence[Any]) -> int:
    return sum(1 for m in messages if getattr(m, "type", None) == "ai")


def langgraph_side() -> Callable[[int], Awaitable[None]] | None:
    """One task through LangGraph's prebuilt ReAct agent (compiled once), or None."""
    try:
        from langchain_core.language_models.chat_models import BaseChatModel
        from langchain_core.messages import AIMessage
        from langchain_core.outputs import ChatGeneration, ChatResult
        from langchain_core.tools import StructuredTool
        from langgraph.prebuilt import create_react_agent
    except ImportError:
        return None

    class ScriptedChat(BaseChatModel):
        """Answers turn ``n`` of the task named in the first message with its script."""

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                      **kwargs: Any) -> ChatResult:
            raise NotImplementedError("async only")

        async def _agenerate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                             **kwargs: Any) -> ChatResult:
            task = _task_of(messages[0].content)
            turn = _turns_taken(messages)
            entry = SCRIPTS[task][turn]
            if isinstance(entry, str):
                message = AIMessage(content=entry)
            else:
                message = AIMessage(content="", tool_calls=[
                    {"name": c["name"], "args": c["arguments"], "id": f"call_{turn}_{i}"}
                    for i, c in enumerate(entry)])
            return ChatResult(generations=[ChatGeneration(message=message)])

    tools = [StructuredTool.from_function(func=fn) for fn in FUNCTIONS]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated in LangGraph 1.x
        agent = create_react_agent(ScriptedChat(), tools)

    async def one(task: int) -> None:
        out = await agent.ainvoke({"messages": [{"role": "user", "content": _prompt(task)}]})
        assert out["messages"][-1].content == SCRIPTS[task][-1], out["messages"][-1]
        assert _turns_taken(out["messages"]) == TURNS

    return one


# -- measuring ----------------------------------------------------------------------------------


async def _all_tasks(side: Callable[[int], Any]) -> tuple[float, str]:
    """Seconds for every task on one side (the database reset before each, untimed), and the
    hash of the database after the last."""
    reset_db()
    total = 0.0
    for task in range(TASKS):
        start = time.perf_counter()
        done = side(task)
        if asyncio.iscoroutine(done):
            await done
        total += time.perf_counter() - start
    return total, db_hash()


async def measure(rounds: int = ROUNDS) -> dict[str, list[float]]:
    """Seconds per task of each side, per round; the rounds interleaved, their order rotating."""
    sides: dict[str, Callable[[int], Any]] = {
        "direct": direct_task, "jianmu": jianmu_task, "jianmu_openai": jianmu_openai_task,
    }
    peer = langgraph_side()
    if peer is not None:
        sides["langgraph"] = peer
    expected = None
    for name, side in sides.items():  # warm up (imports, caches, worker threads)
        for _ in range(2):
            _, digest = await _all_tasks(side)
        expected = expected or digest
        if digest != expected:
            raise AssertionError(f"{name} left the shop in another state than the direct calls")
    names = list(sides)
    out: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            seconds, digest = await _all_tasks(sides[name])
            assert digest == expected, name
            out[name].append(seconds / TASKS)
    return out


def report(rounds: int = ROUNDS) -> None:
    """Measure and print the table."""
    times = asyncio.run(measure(rounds))
    direct = statistics.median(times["direct"])
    ours = statistics.median(times["jianmu"])
    rows: list[tuple[str, ...]] = [
        ("time per task", f"direct calls {direct * 1e3:.3f} ms", f"{ours * 1e3:.2f} ms",
         f"{ours / direct:.0f}x", "", ""),
    ]
    for side, how in (("jianmu", "@tool functions"), ("jianmu_openai", "OpenAI definitions")):
        overhead = (statistics.median(times[side]) - direct) / CALLS
        rows.append((f"overhead per tool call, {how}", "above calling the tool directly",
                     f"{overhead * 1e3:.3f} ms", "", f"<= {TARGET_OVERHEAD_MS} ms",
                     verdict(overhead * 1e3 <= TARGET_OVERHEAD_MS)))
    if "langgraph" in times:
        theirs = statistics.median(times["langgraph"])
        ratios = [j / g for j, g in zip(times["jianmu"], times["langgraph"], strict=True)]
        ratio = statistics.median(ratios)
        rows.insert(1, ("time per model turn", f"LangGraph {theirs / TURNS * 1e3:.3f} ms",
                        f"{ours / TURNS * 1e3:.3f} ms", f"{ratio:.2f}x",
                        f"<= {TARGET_TURN_RATIO}x", verdict(ratio <= TARGET_TURN_RATIO)))
    else:
        rows.insert(1, ("time per model turn", "LangGraph not installed",
                        f"{ours / TURNS * 1e3:.3f} ms", "", "", ""))
    table(rows, ("measure", "baseline", "jianmu", "ratio", "target", ""))
    print(f"({TASKS} tasks of {TURNS} model turns and {CALLS} calls to {len(FUNCTIONS)} sync "
          "tools, scripted models answering at once; a fresh Jianmu tree and runner per task, "
          "closed after it (the @tool tools, or the same functions as Tool.from_openai tools "
          "of the domain's OpenAI definitions); every side leaves the same database; medians "
          f"of {rounds} interleaved rounds, the turn ratio per round)")


def profile(rounds: int = 20) -> None:
    """Print where the Jianmu side spends its time (after a warm-up)."""
    async def run() -> None:
        await _all_tasks(jianmu_task)
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(rounds):
            await _all_tasks(jianmu_task)
        profiler.disable()
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats("tottime").print_stats(40)
        stats.sort_stats("cumulative").print_stats(40)
        print(out.getvalue())

    asyncio.run(run())


def main() -> None:
    """Print the workload's figures; ``--profile`` adds a cProfile of the Jianmu side."""
    if "--profile" in sys.argv:
        profile()
    report()


if __name__ == "__main__":
    main()
