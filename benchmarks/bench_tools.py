"""Tool definition speed: 200 functions of five typed parameters -> OpenAI tool schemas.

Each library turns the same kind of function (Google docstring, five typed parameters) into a
tool and exports its OpenAI definition; the peers are timed in the same run:

- jianmu: ``tool(fn).to_openai()`` (and ``strict=True``; "+validator" also builds the
  validator that checks a call's arguments (``function_schema.validator``: pydantic-core's,
  of the parameters as a typed dict), which jianmu otherwise builds on a tool's first call)
- langchain-core: ``convert_to_openai_tool(tool(parse_docstring=True)(fn))``
- openai-agents: ``function_tool(fn)`` (strict schema, built at decoration)
- pydantic-ai: ``Tool(fn).tool_def``

Every round builds fresh functions with unique docstrings, so no library profits from a
cache filled by an earlier round. The figure is the median of the rounds.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

__all__ = ("main",)

N_TOOLS = 200
ROUNDS = 7
TARGET_VS_PYDANTIC_AI = 0.4
"""jianmu's time with validators at most this fraction of pydantic-ai's."""

_TEMPLATE = '''
def {name}(query: str, limit: int, ratio: float, exact: bool, tags: list[str]) -> str:
    """Search collection {i} (round {r}) for matching records.

    Args:
        query: Words to look for in collection {i}.
        limit: Maximum number of records to return.
        ratio: Minimum similarity between 0 and 1.
        exact: Whether to match the words exactly.
        tags: Tags that every record must carry.

    Returns:
        The matching records as text.
    """
    return query
'''


def make_functions(round_no: int, n: int = N_TOOLS) -> list[Callable[..., Any]]:
    """``n`` fresh functions with unique names and docstrings."""
    namespace: dict[str, Any] = {}
    source = "".join(
        _TEMPLATE.format(name=f"search_{round_no}_{i}", i=i, r=round_no) for i in range(n)
    )
    exec(compile(source, f"<bench round {round_no}>", "exec"), namespace)
    return [namespace[f"search_{round_no}_{i}"] for i in range(n)]


def _jianmu(
    strict: bool, validator: bool = False
) -> Callable[[list[Callable[..., Any]]], list[dict[str, Any]]]:
    from jianmu.tools import tool

    def build(fns: list[Callable[..., Any]]) -> list[dict[str, Any]]:
        out = []
        for fn in fns:
            t = tool(fn)
            if validator:  # the peers build their validators eagerly; jianmu on first call
                t.function_schema.validator  # noqa: B018  # what checks its arguments
            out.append(t.to_openai(strict=strict))
        return out

    return build


def _langchain() -> Callable[[list[Callable[..., Any]]], list[dict[str, Any]]]:
    from langchain_core.tools import tool as lc_tool
    from langchain_core.utils.function_calling import convert_to_openai_tool

    def build(fns: list[Callable[..., Any]]) -> list[dict[str, Any]]:
        return [convert_to_openai_tool(lc_tool(parse_docstring=True)(fn)) for fn in fns]

    return build


def _openai_agents() -> Callable[[list[Callable[..., Any]]], list[dict[str, Any]]]:
    from agents import function_tool

    def build(fns: list[Callable[..., Any]]) -> list[dict[str, Any]]:
        out = []
        for fn in fns:
            t = function_tool(fn)
            out.append({"type": "function", "function": {
                "name": t.name, "description": t.description,
                "parameters": t.params_json_schema, "strict": t.strict_json_schema,
            }})
        return out

    return build


def _pydantic_ai() -> Callable[[list[Callable[..., Any]]], list[dict[str, Any]]]:
    from pydantic_ai import Tool as PATool

    def build(fns: list[Callable[..., Any]]) -> list[dict[str, Any]]:
        out = []
        for fn in fns:
            d = PATool(fn, takes_ctx=False).tool_def
            out.append({"type": "function", "function": {
                "name": d.name, "description": d.description,
                "parameters": d.parameters_json_schema,
            }})
        return out

    return build


def _check(defs: list[dict[str, Any]]) -> None:
    """Every library must produce the same information, or the timing means nothing."""
    assert len(defs) == N_TOOLS
    params = defs[0]["function"]["parameters"]
    assert set(params["properties"]) == {"query", "limit", "ratio", "exact", "tags"}, params
    for prop in params["properties"].values():
        assert prop.get("description"), f"missing parameter description in {params}"


def _measure(builds: dict[str, Callable[[list[Callable[..., Any]]], list[dict[str, Any]]]]
             ) -> dict[str, list[float]]:
    """Seconds per round of each library, the rounds interleaved (their order rotating) so a
    busy machine slows all alike; every library gets fresh functions each round."""
    times: dict[str, list[float]] = {label: [] for label in builds}
    labels = list(builds)
    for r in range(ROUNDS):
        for label in labels[r % len(labels):] + labels[:r % len(labels)]:
            fns = make_functions(r * len(labels) + labels.index(label))
            start = time.perf_counter()
            defs = builds[label](fns)
            times[label].append(time.perf_counter() - start)
            if r == 0:
                _check(defs)
    return times


def main() -> None:
    """Print the table: ms per 200 tools and each peer's time relative to jianmu."""
    contenders: list[tuple[str, Callable[[], Callable[..., Any]]]] = [
        ("jianmu", lambda: _jianmu(False)),
        ("jianmu (strict)", lambda: _jianmu(True)),
        ("jianmu +validator", lambda: _jianmu(False, validator=True)),
        ("langchain-core", _langchain),
        ("openai-agents", _openai_agents),
        ("pydantic-ai", _pydantic_ai),
    ]
    builds: dict[str, Callable[[list[Callable[..., Any]]], list[dict[str, Any]]]] = {}
    missing: list[str] = []
    for label, factory in contenders:
        try:
            builds[label] = factory()
        except ImportError:
            missing.append(label)
            continue
        builds[label](make_functions(999, 5))  # warm up imports and pydantic's caches
    times = _measure(builds)
    results = {label: statistics.median(t) for label, t in times.items()}
    base = results["jianmu"]
    print(f"{N_TOOLS} tools x 5 typed params, Google docstrings -> OpenAI schema "
          f"(median of {ROUNDS} interleaved rounds)")
    print(f"{'library':<18}{'ms / 200 tools':>16}{'us / tool':>12}{'vs jianmu':>12}")
    for label, value in results.items():
        ratio = value / base
        print(f"{label:<18}{value * 1e3:>16.1f}{value / N_TOOLS * 1e6:>12.0f}"
              f"{ratio:>11.2f}x")
    for label in missing:
        print(f"{label:<18}{'not installed':>16}")
    print("(vs jianmu > 1.00x: slower than jianmu)")
    if "pydantic-ai" in times:
        for label, target in (("jianmu", None), ("jianmu +validator", TARGET_VS_PYDANTIC_AI)):
            ratio = statistics.median(
                j / p for j, p in zip(times[label], times["pydantic-ai"], strict=True))
            goal = "" if target is None else \
                f"  target <= {target}x  {'PASS' if ratio <= target else 'MISS'}"
            print(f"{label} vs pydantic-ai (which builds its validator): {ratio:.2f}x "
                  f"(median of per-round ratios){goal}")


if __name__ == "__main__":
    main()
