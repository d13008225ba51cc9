"""The house's shape: modules per 1,000 lines, the modules one plain tool call runs through,
and what a script's realistic import costs beside the engine's own dependencies.

``python -m benchmarks bench_house`` prints three rows with their targets:

- modules per 1,000 non-blank lines of ``jianmu/`` (≤ 4.5), and the longest module (≤ 1,000);
- the jianmu modules whose code runs during one whole run of a plain ``@tool`` call through a
  `ToolExecutor` (≤ 18, and none of them a sandbox's);
- ``from jianmu import AgentState, ReactiveRunner, ScriptedLLM, SkillNode, StateManager,
  ToolExecutor, tool`` against ``import py_trees, pydantic, anyio, yaml, opentelemetry`` in
  fresh interpreters (≤ 1.5×).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks._util import table, verdict

PACKAGE = Path(__file__).resolve().parents[1] / "jianmu"
TARGET_DENSITY = 4.5
TARGET_LONGEST = 1000
TARGET_CALL_PATH = 18
TARGET_IMPORT = 1.5
ROUNDS = 9
SANDBOX_MODULES = ("jianmu.execution.local_sandbox", "jianmu.execution.docker_sandbox",
                   "jianmu.execution.sandbox", "jianmu.execution._cgroup")

# One plain call, as README's first ToolExecutor snippet makes it; the trace starts after the
# imports, so it lists the modules whose code the run itself executes.
CALL = """
import json, sys
from jianmu import AgentState, ReactiveRunner, StateManager, ToolExecutor, tool

@tool
def forecast(city: str, days: int = 1) -> str:
    '''Give the weather forecast.

    Args:
        city: The city's name.
        days: How many days ahead.
    '''
    return f"{city}: sunny for {days} day(s)"

ran = set()

def profile(frame, event, arg):
    name = frame.f_globals.get("__name__", "")
    if name.startswith("jianmu"):
        ran.add(name)

sys.setprofile(profile)
import threading
threading.setprofile(profile)
state = StateManager(AgentState, {"actions": [
    {"id": "c1", "name": "forecast", "arguments": {"city": "Paris", "days": 2}}]})
result = ReactiveRunner(ToolExecutor(tools=[forecast]), state).run_sync()
sys.setprofile(None)
threading.setprofile(None)
assert result.ok and state.get("messages")[0].content == "Paris: sunny for 2 day(s)"
print(json.dumps(sorted(ran)))
"""

IMPORTS = {
    "the engine's dependencies": "import py_trees, pydantic, anyio, yaml, opentelemetry.trace",
    "a script's jianmu import": ("from jianmu import AgentState, ReactiveRunner, ScriptedLLM, "
                                 "SkillNode, StateManager, ToolExecutor, tool"),
}
PROBE = "import time; t = time.process_time(); {stmt}; print(time.process_time() - t)"
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def density() -> tuple[int, int, float, tuple[str, int]]:
    """Modules, non-blank lines, modules per 1,000 lines, and the longest module."""
    modules = sorted(PACKAGE.rglob("*.py"))
    lines = {p: sum(1 for line in p.read_text(encoding="utf-8").splitlines() if line.strip())
             for p in modules}
    longest = max(modules, key=lambda p: len(p.read_text(encoding="utf-8").splitlines()))
    total = sum(lines.values())
    return (len(modules), total, len(modules) / total * 1000,
            (str(longest.relative_to(PACKAGE.parent)),
             len(longest.read_text(encoding="utf-8").splitlines())))


def call_path() -> list[str]:
    """The jianmu modules whose code runs during one plain tool call's whole run."""
    out = subprocess.run([sys.executable, "-c", CALL], capture_output=True, text=True,
                         check=True, env=ENV, cwd=PACKAGE.parent)
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def import_ratio(rounds: int = ROUNDS) -> tuple[float, float]:
    """Median CPU seconds of each import statement, in fresh interpreters, interleaved."""
    samples: dict[str, list[float]] = {name: [] for name in IMPORTS}

    def once(stmt: str) -> float:
        done = subprocess.run([sys.executable, "-c", PROBE.format(stmt=stmt)],
                              capture_output=True, text=True, check=True, env=ENV)
        return float(done.stdout.strip())

    for stmt in IMPORTS.values():
        once(stmt)  # bytecode and file caches
    for _ in range(rounds):
        for name, stmt in IMPORTS.items():
            samples[name].append(once(stmt))
    base, ours = (statistics.median(samples[name]) for name in IMPORTS)
    return base, ours


def main() -> None:
    """Print the three figures and their targets."""
    count, total, per_k, (longest, longest_lines) = density()
    path = call_path()
    sandboxes = [m for m in path if m in SANDBOX_MODULES]
    base, ours = import_ratio()
    rows = [
        ("modules per 1,000 lines", f"{count} modules, {total} lines", f"{per_k:.2f}",
         f"<= {TARGET_DENSITY}", verdict(per_k <= TARGET_DENSITY)),
        ("longest module", longest, str(longest_lines), f"<= {TARGET_LONGEST}",
         verdict(longest_lines <= TARGET_LONGEST)),
        ("modules a plain call runs", f"sandbox modules: {', '.join(sandboxes) or 'none'}",
         str(len(path)), f"<= {TARGET_CALL_PATH}, none a sandbox's",
         verdict(len(path) <= TARGET_CALL_PATH and not sandboxes)),
        ("script import vs dependencies", f"{ours * 1e3:.0f} vs {base * 1e3:.0f} ms CPU",
         f"{ours / base:.2f}x", f"<= {TARGET_IMPORT}x", verdict(ours / base <= TARGET_IMPORT)),
    ]
    table(rows, ("figure", "measured", "value", "target", ""))
    print("the plain call's modules, in name order:", ", ".join(path))


if __name__ == "__main__":
    main()
