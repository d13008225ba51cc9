"""A shop workload: nine tools as OpenAI function definitions over a shop's data, and 24
scripted tasks of ground-truth calls. `bench_whole_runs` replays it against LangGraph, and
``tests/nodes/test_replay_shop.py`` holds Jianmu's replay to the data of direct calls.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from typing import Any

ADDRESS = {
    "address1": {"type": "string", "description": "First line, such as '123 Main St'."},
    "address2": {"type": "string", "description": "Second line, such as 'Apt 1' or ''."},
    "city": {"type": "string", "description": "The city."},
    "state": {"type": "string", "description": "The state, such as 'NY'."},
    "country": {"type": "string", "description": "The country, such as 'USA'."},
    "zip": {"type": "string", "description": "The zip code, such as '12345'."},
}


def _function(name: str, description: str, properties: dict[str, Any],
              required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": properties,
                       "required": list(properties) if required is None else required},
    }}


DEFINITIONS = [
    _function("get_user_details", "The user's profile, addresses and orders.",
              {"user_id": {"type": "string", "description": "The user's id."}}),
    _function("get_order_details", "An order's status, items and address.",
              {"order_id": {"type": "string", "description": "The order id, '#W...'."}}),
    _function("modify_user_address", "Change the user's default address.",
              {"user_id": {"type": "string", "description": "The user's id."}, **ADDRESS}),
    _function("modify_pending_order_address", "Change a pending order's shipping address.",
              {"order_id": {"type": "string", "description": "The order id."}, **ADDRESS}),
    _function("cancel_pending_order", "Cancel a pending order.", {
        "order_id": {"type": "string", "description": "The order id."},
        "reason": {"type": "string", "enum": ["no longer needed", "ordered by mistake"],
                   "description": "Why."},
    }),
    _function("exchange_items", "Exchange delivered items for others of the same product.", {
        "order_id": {"type": "string", "description": "The order id."},
        "item_ids": {"type": "array", "items": {"type": "string"}, "description": "Old items."},
        "new_item_ids": {"type": "array", "items": {"type": "string"},
                         "description": "New items, position by position."},
        "payment_method_id": {"type": "string", "description": "Pays the difference."},
    }),
    _function("add_order_note", "Attach a note to an order.", {
        "order_id": {"type": "string", "description": "The order id."},
        "context": {"type": "string", "description": "What the note is about."},
        "call_id": {"type": "string", "description": "The phone call it came from."},
    }),
    _function("set_gift_options", "Gift-wrap an order.", {
        "order_id": {"type": "string", "description": "The order id."},
        "ctx": {"type": "object", "description": "The gift options.",
                "properties": {"wrap": {"type": "boolean"}, "message": {"type": "string"}},
                "required": ["wrap"], "additionalProperties": False},
    }),
    _function("calculate", "Evaluate an arithmetic expression.",
              {"expression": {"type": "string", "description": "Such as '2 + 2'."}}),
]
READ_ONLY = {"get_user_details", "get_order_details", "calculate"}


def make_shop(seed: int = 3) -> dict[str, Any]:
    """Users with addresses and payment methods, orders in several states, products."""
    rng = random.Random(seed)
    products = {
        f"P{p}": {"variants": {f"{p}{v:02d}": {"price": round(10 + rng.random() * 90, 2),
                                              "available": v != 3} for v in range(5)}}
        for p in range(1, 5)
    }
    users: dict[str, Any] = {}
    orders: dict[str, Any] = {}
    for u in range(8):
        uid = f"user_{u}"
        users[uid] = {
            "address": {"address1": f"{u} Main St", "address2": "", "city": "Austin",
                        "state": "TX", "country": "USA", "zip": f"7870{u}"},
            "payment_methods": {f"card_{u}": {"source": "credit_card"}},
            "orders": [],
        }
        for k in range(3):
            oid = f"#W{u}{k}"
            product = f"P{1 + (u + k) % 4}"
            items = [{"item_id": f"{product[1:]}{v:02d}", "product_id": product,
                      "price": products[product]["variants"][f"{product[1:]}{v:02d}"]["price"]}
                     for v in (0, 1)]
            orders[oid] = {"user_id": uid, "status": ("pending", "delivered", "pending")[k],
                           "items": items, "address": dict(users[uid]["address"]), "notes": []}
            users[uid]["orders"].append(oid)
    return {"users": users, "orders": orders, "products": products}


def make_functions(data: dict[str, Any]) -> dict[str, Callable[..., Any]]:
    """The tools' implementations over ``data`` (they change it, as a shop's backend would)."""

    def get_user_details(user_id: str) -> str:
        return json.dumps(data["users"].get(user_id) or "Error: user not found")

    def get_order_details(order_id: str) -> str:
        return json.dumps(data["orders"].get(order_id) or "Error: order not found")

    def modify_user_address(user_id: str, address1: str, address2: str, city: str, state: str,
                            country: str, zip: str) -> str:
        user = data["users"][user_id]
        user["address"] = {"address1": address1, "address2": address2, "city": city,
                           "state": state, "country": country, "zip": zip}
        return json.dumps(user)

    def modify_pending_order_address(order_id: str, address1: str, address2: str, city: str,
                                     state: str, country: str, zip: str) -> str:
        order = data["orders"][order_id]
        if order["status"] != "pending":
            return "Error: non-pending order cannot be modified"
        order["address"] = {"address1": address1, "address2": address2, "city": city,
                            "state": state, "country": country, "zip": zip}
        return json.dumps(order)

    def cancel_pending_order(order_id: str, reason: str) -> str:
        order = data["orders"][order_id]
        if order["status"] != "pending":
            return "Error: non-pending order cannot be cancelled"
        order["status"], order["cancel_reason"] = "cancelled", reason
        return json.dumps(order)

    def exchange_items(order_id: str, item_ids: list[str], new_item_ids: list[str],
                       payment_method_id: str) -> str:
        order = data["orders"][order_id]
        if order["status"] != "delivered":
            return "Error: non-delivered order cannot be exchanged"
        order["status"] = "exchange requested"
        order["exchange"] = {"items": sorted(item_ids), "new_items": sorted(new_item_ids),
                             "payment_method_id": payment_method_id}
        return json.dumps(order)

    def add_order_note(order_id: str, context: str, call_id: str) -> str:
        data["orders"][order_id]["notes"].append({"context": context, "call_id": call_id})
        return "noted"

    def set_gift_options(order_id: str, ctx: dict[str, Any]) -> str:
        data["orders"][order_id]["gift"] = dict(ctx)
        return "gift options set"

    def calculate(expression: str) -> str:
        allowed = set("0123456789+-*/. ()")
        if not set(expression) <= allowed:
            return "Error: invalid characters"
        return str(round(eval(expression), 2))

    return {f.__name__: f for f in (
        get_user_details, get_order_details, modify_user_address, modify_pending_order_address,
        cancel_pending_order, exchange_items, add_order_note, set_gift_options, calculate)}


Call = tuple[str, dict[str, Any]]


def make_tasks(data: dict[str, Any], count: int = 24, seed: int = 11) -> list[list[list[Call]]]:
    """``count`` tasks, each a list of model turns, each turn a list of ground-truth calls."""
    rng = random.Random(seed)
    states = ["NY", "CA", "WA", "IL", "MA"]
    tasks: list[list[list[Call]]] = []
    for t in range(count):
        uid = f"user_{t % 8}"
        pending, delivered, other = (f"#W{t % 8}{k}" for k in range(3))
        new_address = {"address1": f"{rng.randint(1, 999)} Elm St", "address2": "Apt 2",
                       "city": "Springfield", "state": rng.choice(states), "country": "USA",
                       "zip": f"{rng.randint(10000, 99999)}"}
        turns: list[list[Call]] = [[("get_user_details", {"user_id": uid})]]
        kind = t % 6
        if kind == 0:
            turns += [[("modify_user_address", {"user_id": uid, **new_address})],
                      [("modify_pending_order_address", {"order_id": pending, **new_address})]]
        elif kind == 1:
            turns += [[("get_order_details", {"order_id": pending}),
                       ("get_order_details", {"order_id": other})],
                      [("cancel_pending_order", {"order_id": pending,
                                                 "reason": "ordered by mistake"})]]
        elif kind == 2:
            items = [i["item_id"] for i in data["orders"][delivered]["items"]]
            new = [f"{i[:-2]}{(int(i[-2:]) + 2) % 5:02d}" for i in items]
            turns += [[("get_order_details", {"order_id": delivered})],
                      [("calculate", {"expression": "12.5 * 2 - 3"})],
                      [("exchange_items", {"order_id": delivered, "item_ids": items,
                                           "new_item_ids": new,
                                           "payment_method_id": f"card_{t % 8}"})]]
        elif kind == 3:
            turns += [[("add_order_note", {"order_id": other, "context": "customer called",
                                           "call_id": f"phone-{t}"}),
                       ("set_gift_options", {"order_id": other,
                                             "ctx": {"wrap": True, "message": f"for {t}"}})]]
        elif kind == 4:
            turns += [[("modify_pending_order_address", {"order_id": other, **new_address})],
                      [("add_order_note", {"order_id": other, "context": "address changed",
                                           "call_id": f"c{t}"})]]
        else:
            turns += [[("cancel_pending_order", {"order_id": other,
                                                 "reason": "no longer needed"})],
                      [("modify_user_address", {"user_id": uid, **new_address})],
                      [("set_gift_options", {"order_id": pending, "ctx": {"wrap": False}})]]
        tasks.append(turns)
    return tasks


def digest(data: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
