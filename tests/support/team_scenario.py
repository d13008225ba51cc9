"""Random agent teams for the team fuzz (`tests/nodes/test_team_fuzz.py`).

A `Team` is plain data drawn from a seed: a lead agent whose model asks for batches of 2-4
calls at once, each a plain tool (asking a person first, slow, failing), the built-in
``ask_user``, or a sub-agent (`agent_tool`, a tree per call: parallel) that does the same, up
to three levels deep. `build` turns it into a tree, the same in every process.

What runs is written by the tools and the models into a `Ledger` (a JSON-lines file that a
child process appends to): each tool's start and end, each model call, and each answer an
agent read for its question. Every call has a tag of its own (``<agent>.<turn>.<i>``), so a
call that ran twice, or ran though rejected, is counted outside the engine.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import py_trees

from jianmu.llm.messages import Message
from jianmu.llm.provider import BaseLLMProvider, ChatRequest, LLMResponse, Usage
from jianmu.nodes import Agent, agent_tool, create_react_node
from jianmu.tools import ToolSet, tool
from jianmu.tools.calls import ToolCall

TOKENS_IN, TOKENS_OUT = 10, 5
"""What each model call reports spending."""


class Ledger:
    """What ran, as the tools and the models tell it: one JSON object a line, appended.

    ``phase`` is what the driver is doing (``running``, or ``returned`` once `run()` returned:
    a line written then ran while the run was suspended or stopped)."""

    def __init__(self, path: Path, phase: str = "running", owner: str = "") -> None:
        self.path = path
        self.phase = phase
        self.owner = owner or str(os.getpid())
        """Who runs the run: written on each line (a process, or a runner of one)."""
        self._lock = threading.Lock()
        self.threads = 0
        self.idle = threading.Condition(self._lock)

    def write(self, kind: str, **fields: Any) -> None:
        """Append one line (thread-safe; in any process)."""
        line = json.dumps({"k": kind, "phase": self.phase, "owner": self.owner, **fields})
        with self._lock, open(self.path, "a", encoding="utf-8") as out:
            out.write(line + "\n")

    def lines(self) -> list[dict[str, Any]]:
        """Every line so far, oldest first."""
        if not self.path.exists():
            return []
        text = self.path.read_text(encoding="utf-8")
        return [json.loads(line) for line in text.splitlines() if line.endswith("}")]

    def enter_thread(self) -> None:
        with self._lock:
            self.threads += 1

    def leave_thread(self) -> None:
        with self._lock:
            self.threads -= 1
            self.idle.notify_all()

    def wait_threads(self, timeout: float = 60) -> bool:
        """Wait until no sync tool's body runs in a worker thread."""
        with self._lock:
            return self.idle.wait_for(lambda: self.threads == 0, timeout)


class Gates:
    """What slow tools wait on: open, they go on at once; held, until `release`. Their entry
    is announced to ``on_enter`` (from the loop or a worker thread)."""

    def __init__(self) -> None:
        self.held = False
        self._thread_gate = threading.Event()
        self._thread_gate.set()
        self._async_gate: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.on_enter: list[Any] = []

    def hold(self) -> None:
        """Slow tools wait from now on (call it from the loop that runs the run)."""
        self.held = True
        self._thread_gate.clear()
        self._async_gate = asyncio.Event()
        self._loop = asyncio.get_running_loop()

    def release(self) -> None:
        """Every waiting slow tool goes on."""
        self.held = False
        self._thread_gate.set()
        if self._async_gate is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._async_gate.set)

    def entered(self, tag: str) -> None:
        for hook in list(self.on_enter):
            hook(tag)

    async def wait_async(self) -> None:
        gate = self._async_gate
        if self.held and gate is not None:
            await gate.wait()
        for _ in range(2):
            await asyncio.sleep(0)

    def wait_thread(self) -> None:
        assert self._thread_gate.wait(60), "a slow tool's gate was never released"


# -- the team --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ToolKind:
    """One plain tool of the team."""

    confirm: bool = False
    slow: bool = False
    fails: bool = False
    sync: bool = False
    parallel: bool = False

    @property
    def name(self) -> str:
        flags = [f for f, on in (("confirm", self.confirm), ("slow", self.slow),
                                 ("fails", self.fails), ("sync", self.sync),
                                 ("par", self.parallel)) if on]
        return "act" + "".join("_" + f for f in flags)


@dataclass
class AgentSpec:
    """One agent: its name (also its tool's name, for a sub-agent), its model's batches of
    calls (``("tool", kind name)``, ``("ask",)``, ``("agent", child name)``) and children."""

    name: str
    batches: list[list[tuple[str, ...]]]
    children: dict[str, AgentSpec] = field(default_factory=dict)
    as_agent: bool = False
    """Built as an `Agent` and given as `Agent.as_tool`, not `create_react_node`."""


@dataclass
class Team:
    """A whole team drawn from ``seed``: plain data."""

    seed: int
    kinds: list[ToolKind]
    lead: AgentSpec
    branches: list[AgentSpec] = field(default_factory=list)
    """Agents beside the lead under a py_trees Parallel, each in a namespace of its name."""

    def agents(self) -> dict[str, AgentSpec]:
        """Every agent by name."""
        found: dict[str, AgentSpec] = {}
        todo = [self.lead, *self.branches]
        while todo:
            spec = todo.pop()
            found[spec.name] = spec
            todo.extend(spec.children.values())
        return found


def _agent(rng: random.Random, name: str, level: int, depth: int,
           kinds: list[ToolKind], budget: list[int]) -> AgentSpec:
    """An agent; ``budget`` holds how many more agents the team may have."""
    spec = AgentSpec(name=name, batches=[], as_agent=rng.random() < 0.3)
    for turn in range(rng.randint(1, 2)):
        batch: list[tuple[str, ...]] = []
        parallel = rng.random() < 0.5  # sub-agents and parallel-safe tools only: run at once
        for i in range(rng.randint(2, 4)):
            roll = rng.random()
            if level < depth and budget[0] > 0 and roll < 0.5:
                budget[0] -= 1
                child = f"{name}_{turn}{i}"
                spec.children[child] = _agent(rng, child, level + 1, depth, kinds, budget)
                batch.append(("agent", child))
                if parallel and rng.random() < 0.3:  # called twice at once: two runs of it
                    batch.append(("agent", child))
            elif roll < 0.65 and not parallel:
                batch.append(("ask",))
            else:
                fit = [k for k in kinds if k.parallel or not parallel]
                batch.append(("tool", rng.choice(fit).name))
        spec.batches.append(batch)
    return spec


def team(seed: int) -> Team:
    """The team of ``seed``: the same in every process."""
    rng = random.Random(f"team-{seed}")
    kinds = sorted({ToolKind(confirm=rng.random() < 0.5, slow=rng.random() < 0.6,
                             fails=rng.random() < 0.2, sync=rng.random() < 0.3,
                             parallel=rng.random() < 0.5)
                    for _ in range(rng.randint(2, 5))}
                   | {ToolKind(confirm=True), ToolKind(confirm=True, parallel=True),
                      ToolKind(slow=True, parallel=rng.random() < 0.5)},
                   key=lambda k: k.name)
    depth = rng.choice([0, 1, 1, 2, 2])  # levels below the lead: 1 to 3 levels in all
    lead = _agent(rng, "lead", 0, depth, kinds, [6])
    branches = [_agent(rng, f"b{n}", 1, depth, kinds, [2])
                for n in range(1, rng.randint(2, 3))] if rng.random() < 0.3 else []
    return Team(seed=seed, kinds=kinds, lead=lead, branches=branches)


# -- the model -------------------------------------------------------------------------------------
def _results(messages: list[Message]) -> dict[str, str]:
    return {m.tool_call_id or "": m.content or "" for m in messages if m.role == "tool"}


class TeamModel(BaseLLMProvider):
    """Plays an agent: its turn is the number of assistant messages; past its batches it
    answers with every result it read, so the answer tells what happened below it."""

    model = "team"

    def __init__(self, spec: AgentSpec, ledger: Ledger) -> None:
        self.spec, self.ledger = spec, ledger

    async def send(self, request: ChatRequest) -> LLMResponse:
        messages = list(request.messages)
        turn = sum(1 for m in messages if m.role == "assistant")
        asked = next((m.content or "" for m in messages if m.role == "user"), "")
        self.given = asked.removeprefix("go ") if asked.startswith("go ") else ""
        self._check_answers(messages)
        if turn < len(self.spec.batches):
            calls = [self._call(turn, i, entry)
                     for i, entry in enumerate(self.spec.batches[turn])]
            message = Message.assistant(tool_calls=[ToolCall.from_dict(c) for c in calls])
        else:
            results = _results(messages)
            said = " | ".join(f"{k}={results[k]}" for k in sorted(results))
            message = Message.assistant(f"{self.spec.name}[{said}]")
        self.ledger.write("model", who=self.spec.name, turn=turn, given=self.given)
        return LLMResponse(message=message,
                           usage=Usage(input_tokens=TOKENS_IN, output_tokens=TOKENS_OUT),
                           finish_reason="tool_calls" if message.tool_calls else "stop",
                           model=self.model)

    def _call(self, turn: int, i: int, entry: tuple[str, ...]) -> dict[str, Any]:
        # a tag of its own for each call of each run (a sub-agent may run twice at once)
        tag, call_id = f"{self.spec.name}@{self.given}.{turn}.{i}", f"c{turn}_{i}"
        if entry[0] == "ask":
            return {"id": call_id, "name": "ask_user", "arguments": {"question": f"Q:{tag}"}}
        if entry[0] == "agent":
            return {"id": call_id, "name": entry[1], "arguments": {"input": f"go {tag}"}}
        return {"id": call_id, "name": entry[1], "arguments": {"tag": tag, "n": 1}}

    def _check_answers(self, messages: list[Message]) -> None:
        """Write what each of its questions was answered (the answer must be its own)."""
        results = _results(messages)
        for message in messages:
            for call in message.tool_calls or ():
                if call.name == "ask_user" and call.id in results:
                    question = (call.arguments or {}).get("question", "")
                    self.ledger.write("answer_read", who=self.spec.name,
                                      tag=question.removeprefix("Q:"),
                                      got=results[call.id])


# -- the tools -------------------------------------------------------------------------------------
def make_tool(kind: ToolKind, ledger: Ledger, gates: Gates) -> Any:
    """The tool of ``kind``: it writes its start and end to the ledger (not a stopped end)."""
    options: dict[str, Any] = {"name": kind.name, "description": f"The {kind.name} tool.",
                               "category": "write", "parallel_safe": kind.parallel}
    if kind.confirm:
        options["permission"] = "user_confirm"

    def finish(tag: str, n: int) -> str:
        ledger.write("end", tool=kind.name, tag=tag, n=n, raised=kind.fails)
        if kind.fails:
            raise RuntimeError(f"{kind.name} failed on {tag}")
        return f"did {tag} n={n}"

    if kind.sync:
        def body_sync(tag: str, n: int = 0) -> str:
            ledger.enter_thread()
            try:
                ledger.write("start", tool=kind.name, tag=tag, n=n)
                if kind.slow:
                    gates.entered(tag)
                    gates.wait_thread()
                return finish(tag, n)
            finally:
                ledger.leave_thread()

        return tool(**options)(body_sync)

    async def body_async(tag: str, n: int = 0) -> str:
        ledger.write("start", tool=kind.name, tag=tag, n=n)
        if kind.slow:
            gates.entered(tag)
            await gates.wait_async()
        else:
            await asyncio.sleep(0)
        return finish(tag, n)

    return tool(**options)(body_async)


def build(sc: Team, ledger: Ledger, gates: Gates) -> Any:
    """The team's tree: the lead agent, its sub-agents as tools (a tree per call)."""
    by_kind = {k.name: make_tool(k, ledger, gates) for k in sc.kinds}

    def tools_of(spec: AgentSpec) -> list[Any]:
        tools: list[Any] = [*by_kind.values(), *ToolSet.resolve(["ask_user"])]
        for child in spec.children.values():
            if child.as_agent:
                tools.append(Agent(TeamModel(child, ledger), tools=tools_of(child),
                                   name=child.name, max_iterations=20).as_tool(
                    description=f"The {child.name} agent."))
                continue
            tools.append(agent_tool(_factory(child), name=child.name,
                                    description=f"The {child.name} agent."))
        return tools

    def agent(spec: AgentSpec) -> Any:
        return create_react_node(TeamModel(spec, ledger), tools_of(spec), name=spec.name,
                                 max_iterations=20)

    def _factory(spec: AgentSpec) -> Any:
        return lambda: agent(spec)

    if not sc.branches:
        return agent(sc.lead)
    nodes = [agent(sc.lead)]
    for spec in sc.branches:  # an agent's nodes in a py_trees tree, in a namespace of its own
        branch = agent(spec)
        for node in branch.iterate():
            node.namespace = spec.name
        nodes.append(branch)
    return py_trees.composites.Parallel(
        "team", policy=py_trees.common.ParallelPolicy.SuccessOnAll(), children=nodes)


def decision(seed: int, request_id: str) -> str:
    """What a person decides on ``request_id`` (the same in every process and order):
    ``approve``, ``reject`` or ``edit``."""
    roll = int(hashlib.sha256(f"{seed}:{request_id}".encode()).hexdigest()[:8], 16) % 100
    return "approve" if roll < 55 else "reject" if roll < 80 else "edit"


EDITED_N = 7
"""The ``n`` a person's edit gives a call."""
