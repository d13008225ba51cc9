"""A callable that says what it takes (``__signature__``, ``__wrapped__``, a `functools.partial`)
becomes a tool as `inspect.signature` describes it: name, parameters, types and docstring of
what it describes; the arguments a partial binds are the author's, not the model's.

tau2-bench hands its tools over as such objects (a pydantic ``Tool`` with ``__call__(*args,
**kwargs)`` that sets ``__name__``, ``__signature__`` and ``__doc__`` on itself); a class-based
decorator made with `functools.update_wrapper` is the other common shape.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from jianmu.errors import ToolInputError
from jianmu.tools import tool


class Logged:
    """A class-based decorator: it records each call, then calls the function it wraps."""

    def __init__(self, fn: Any) -> None:
        functools.update_wrapper(self, fn)
        self.calls: list[dict[str, Any]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        return self.__wrapped__(*args, **kwargs)  # type: ignore[attr-defined]


def refund(order_id: str, amount: int, reason: Literal["late", "broken"] = "late") -> str:
    """Refund part of an order.

    Args:
        order_id: The order, such as '#W1'.
        amount: Dollars to refund.
        reason: Why.
    """
    return f"{order_id}: {amount + 1} ({reason})"


async def refund_later(order_id: str, amount: int) -> str:
    """Refund part of an order, asynchronously.

    Args:
        order_id: The order.
        amount: Dollars to refund.
    """
    return f"{order_id}: {amount * 2}"


class SelfDescribed:
    """A tool object in tau2-bench's shape: one generic ``__call__``, described per instance."""

    def __init__(self, fn: Any) -> None:
        self._fn = fn
        self.__name__ = fn.__name__
        self.__signature__ = inspect.signature(fn)
        self.__doc__ = fn.__doc__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._fn(*args, **kwargs)


def run(made: Any, args: dict[str, Any]) -> Any:
    return asyncio.run(made.execute(args))


def test_a_class_based_decorator_is_described_by_the_function_it_wraps() -> None:
    logged = Logged(refund)
    made = tool(logged)
    assert made.name == "refund"
    assert made.description == "Refund part of an order."
    props = made.parameters["properties"]
    assert props["amount"] == {"type": "integer", "description": "Dollars to refund."}
    assert props["reason"]["enum"] == ["late", "broken"]
    assert made.parameters["required"] == ["order_id", "amount"]
    assert run(made, {"order_id": "#W1", "amount": "4"}) == "#W1: 5 (late)"
    assert logged.calls == [{"order_id": "#W1", "amount": 4, "reason": "late"}]  # it ran


def test_a_class_based_decorator_of_a_coroutine_function_is_awaited() -> None:
    made = tool(Logged(refund_later))
    assert made.is_async and made.name == "refund_later"
    assert run(made, {"order_id": "#W2", "amount": 3}) == "#W2: 6"


def test_an_object_with_its_own_signature_name_and_docstring_is_described_by_them() -> None:
    made = tool(SelfDescribed(refund))
    assert made.name == "refund"
    assert made.description == "Refund part of an order."
    assert made.parameters["properties"]["amount"]["type"] == "integer"
    assert made.parameters["properties"]["order_id"]["description"] == "The order, such as '#W1'."
    assert run(made, {"order_id": "#W3", "amount": 1, "reason": "broken"}) == "#W3: 2 (broken)"


def test_a_function_whose_signature_is_set_takes_the_types_of_that_signature() -> None:
    def double(*args: Any, **kwargs: Any) -> Any:
        """Double a number.

        Args:
            n: The number.
        """
        return kwargs["n"] * 2

    double.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("n", inspect.Parameter.KEYWORD_ONLY, annotation=int)],
        return_annotation=int,
    )
    made = tool(double)
    assert made.parameters["properties"]["n"] == {"type": "integer", "description": "The number."}
    assert run(made, {"n": "3"}) == 6  # not "33": the declared int, not a string


class Ledger(BaseModel):
    """An environment a tool works on, bound by its author (AgentDojo's ``Depends`` shape)."""

    balance: float
    paid: list[str] = []


def pay(ledger: Ledger, to: str, amount: float, memo: str | None = None) -> str:
    """Pay someone from the ledger.

    Args:
        to: Who is paid.
        amount: How much.
        memo: A note, if any.
    """
    ledger.balance -= amount
    ledger.paid.append(to)
    return f"paid {to} {amount}; {ledger.balance} left"


def test_a_partial_is_described_by_its_function_without_the_arguments_it_binds() -> None:
    for bind in ({"ledger": Ledger(balance=10)}, {}):
        ledger = bind.get("ledger") or Ledger(balance=10)
        made = tool(functools.partial(pay, **bind) if bind else functools.partial(pay, ledger))
        assert made.name == "pay"
        assert made.description == "Pay someone from the ledger."
        assert made.parameters["required"] == ["to", "amount"]
        assert list(made.parameters["properties"]) == ["to", "amount", "memo"]
        assert made.parameters["properties"]["amount"] == {
            "type": "number", "description": "How much."}
        assert "$defs" not in made.parameters  # nothing of the bound Ledger is shown
        assert run(made, {"to": "bob", "amount": "2.5"}) == "paid bob 2.5; 7.5 left"
        assert ledger.paid == ["bob"]
        with pytest.raises(ToolInputError, match="unknown argument 'ledger'"):
            run(made, {"to": "eve", "amount": 1, "ledger": {"balance": 0}})
        assert ledger.paid == ["bob"]  # the model cannot rebind it
