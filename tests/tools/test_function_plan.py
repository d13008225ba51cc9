"""`ArgumentPlan`, the shortcut past a tool's pydantic model, and the typed-dict validator that
stands for the model give exactly what the model gives: the same values, types and order, and
the same refusals."""

from __future__ import annotations

import datetime
import random
from typing import Annotated, Any, Literal

import pytest

from jianmu.errors import ToolInputError
from jianmu.tools import tool
from jianmu.tools.schema import function_schema


def plain(name: str, count: int, ratio: float, exact: bool, tags: list[str],
          note: str | None = None, limit: int = 10, scale: float = 1.5,
          flag: bool = False, label: str = "x") -> str:
    """A tool of plain parameters.

    Args:
        name: a name.
        count: a count.
        ratio: a ratio.
        exact: whether exact.
        tags: tags.
        note: a note.
        limit: a limit.
        scale: a scale.
        flag: a flag.
        label: a label.
    """
    return name


def mixed(when: str, ids: list[int], extra: dict[str, int] | None = None,
          maybe: int | None = None, model_config: str = "m") -> str:
    """A tool with parameters the plan leaves to the model.

    Args:
        when: a time.
        ids: some ids.
        extra: more.
        maybe: maybe a number.
        model_config: a name pydantic reserves.
    """
    return when


def typed(mode: Literal["a", "b"], day: datetime.date | None = None,
          pair: tuple[int, str] | None = None, size: Annotated[int, "bytes"] = 1) -> None:
    """A tool of other types.

    Args:
        mode: a mode.
        day: a day.
        pair: a pair.
        size: a size.
    """


_VALUES: list[Any] = [
    "s", "", "3", 0, 3, -7, 2**70, 1.5, 3.0, float("inf"), True, False, None, [], ["a"],
    ["a", 1], [1, 2], [True], {"a": 1}, {}, ("a",), "a", "b", "2024-01-02", [1, "x"],
    "2024-13-01",
]


def _outcome(schema: Any, args: dict[str, Any]) -> Any:
    try:
        out = schema.validate("t", args)
    except ToolInputError as exc:
        return ("refused", str(exc))
    return ("ok", list(out.items()), [type(v) for v in out.values()])


@pytest.mark.parametrize("fn", [plain, mixed, typed])
def test_the_plan_and_the_model_agree_on_random_arguments(fn: Any) -> None:
    with_plan = function_schema(fn)
    without = function_schema(fn)  # the typed-dict validator decides every call
    without._plan = None
    model_only = function_schema(fn)
    model_only._plan = model_only._validator = None
    assert with_plan._plan is not None
    assert not isinstance(without.validator, type)
    assert isinstance(model_only.validator, type)
    names = list(with_plan.parameters["properties"])
    rng = random.Random(33)
    taken = 0
    for _ in range(2000):
        args = {n: rng.choice(_VALUES) for n in rng.sample(names, rng.randint(0, len(names)))}
        if rng.random() < 0.1:
            args["unknown"] = 1
        if rng.random() < 0.5:  # most calls a model sends are well typed
            args = _well_typed(fn, names, rng)
        planned = with_plan._plan.take(dict(args), with_plan._fields)
        taken += planned is not None
        expected = _outcome(model_only, dict(args))
        assert _outcome(with_plan, dict(args)) == expected, args
        assert _outcome(without, dict(args)) == expected, args
    assert taken > 200 or fn is typed  # the shortcut was exercised (typed's mode has none)


def _well_typed(fn: Any, names: list[str], rng: random.Random) -> dict[str, Any]:
    typed = {"name": "n", "count": 4, "ratio": 0.5, "exact": True, "tags": ["a", "b"],
             "note": rng.choice([None, "hi"]), "limit": 3, "scale": 2.5, "flag": True,
             "label": "y", "when": "now", "ids": [1, 2], "maybe": rng.choice([None, 4]),
             "model_config": "c", "mode": "a", "day": "2024-01-02", "pair": [1, "x"],
             "size": 3}
    required = {"name", "count", "ratio", "exact", "tags", "when", "ids", "mode"}
    return {n: typed[n] for n in names
            if n in typed and (n in required or rng.random() < 0.5)}


def test_a_list_argument_is_copied_and_defaults_are_filled() -> None:
    t = tool(plain)
    tags = ["a"]
    bound = t.bind_args({"name": "n", "count": 1, "ratio": 0.5, "exact": False, "tags": tags})
    assert bound == {"name": "n", "count": 1, "ratio": 0.5, "exact": False, "tags": ["a"],
                     "note": None, "limit": 10, "scale": 1.5, "flag": False, "label": "x"}
    assert bound["tags"] is not tags


def test_a_value_the_plan_does_not_take_is_still_coerced_or_refused_by_the_model() -> None:
    t = tool(plain)
    base = {"name": "n", "count": 1, "ratio": 0.5, "exact": False, "tags": []}
    assert t.bind_args({**base, "ratio": 2})["ratio"] == 2.0
    assert type(t.bind_args({**base, "ratio": 2})["ratio"]) is float
    with pytest.raises(ToolInputError, match="count"):
        t.bind_args({**base, "count": "many"})
    with pytest.raises(ToolInputError, match="unknown argument"):
        t.bind_args({**base, "other": 1})
    with pytest.raises(ToolInputError, match="missing required argument 'tags'"):
        t.bind_args({k: v for k, v in base.items() if k != "tags"})
