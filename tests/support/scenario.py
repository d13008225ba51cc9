"""Random agent scenarios for the scenario fuzz (`tests/runtime/test_scenario_fuzz.py`).

A `Scenario` is plain data drawn from a seed: the tools (read or write, sync or async, asking a
person first, failing, slow), the scripts of a lead agent, of a helper agent it calls as a tool
and of an expert it may hand the conversation to. `build_tree` turns it into a tree, the same
in every process, so a run restored in a fresh interpreter goes on with the same tree.

What happens is written by the tools and the model themselves into a `Ledger` (a JSON-lines
file, so a child process adds to it): every start and end of a tool's body, every model call.
The model (`FuzzModel`) is a function of the conversation: its turn is the number of assistant
messages so far, so a restored run, or a turn asked again, gets the same reply.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from jianmu import Constraints, StateManager
from jianmu.llm.messages import Message
from jianmu.llm.provider import BaseLLMProvider, ChatRequest, LLMResponse, Usage
from jianmu.nodes import AgentState, agent_tool, create_react_node, handoff
from jianmu.tools import tool
from jianmu.tools.calls import ToolCall

BAD = "x"
"""The first letter of the tag of a call whose arguments do not fit: it must never run."""


class Verdict(BaseModel):
    """The typed answer of an agent with an ``output_type``."""

    text: str


# -- the ledger ------------------------------------------------------------------------------------
class Ledger:
    """What ran, as the tools and the model tell it: one JSON object a line, appended.

    ``phase`` is what the driver is doing (``running``, ``returned`` once `run()` returned,
    ``left`` once a stream's loop was left); each line carries the phase it was written in.
    """

    def __init__(self, path: Path, phase: str = "idle") -> None:
        self.path = path
        self.phase = phase
        self._lock = threading.Lock()
        self.threads_in_flight = 0
        self.threads_idle = threading.Condition(self._lock)

    def write(self, kind: str, **fields: Any) -> None:
        """Append one line (thread-safe; in any process)."""
        line = json.dumps({"k": kind, "phase": self.phase, "pid": os.getpid(), **fields})
        with self._lock, open(self.path, "a", encoding="utf-8") as out:
            out.write(line + "\n")

    def lines(self) -> list[dict[str, Any]]:
        """Every line so far, oldest first."""
        if not self.path.exists():
            return []
        with self._lock:
            text = self.path.read_text(encoding="utf-8")
        return [json.loads(line) for line in text.splitlines() if line]

    def thread_started(self) -> None:
        with self._lock:
            self.threads_in_flight += 1

    def thread_ended(self) -> None:
        with self._lock:
            self.threads_in_flight -= 1
            self.threads_idle.notify_all()

    def wait_threads(self, timeout: float = 60) -> bool:
        """Wait until no sync tool's body runs in a worker thread."""
        with self._lock:
            return self.threads_idle.wait_for(lambda: self.threads_in_flight == 0, timeout)


class Gates:
    """What slow tools wait on: open, they go on at once (after giving the loop a turn);
    held, they wait until `release`. Their entry is announced to ``on_enter``."""

    def __init__(self) -> None:
        self.held = False
        self._thread_gate = threading.Event()
        self._thread_gate.set()
        self._async_gate: asyncio.Event | None = None
        self.on_enter: list[Any] = []

    def hold(self) -> None:
        self.held = True
        self._thread_gate.clear()
        self._async_gate = asyncio.Event()

    def release(self) -> None:
        self.held = False
        self._thread_gate.set()
        if self._async_gate is not None:
            self._async_gate.set()

    def entered(self, tag: str) -> None:
        for hook in list(self.on_enter):
            hook(tag)

    async def wait_async(self) -> None:
        for _ in range(3):
            await asyncio.sleep(0)
        gate = self._async_gate
        if self.held and gate is not None:
            await gate.wait()

    def wait_thread(self) -> None:
        assert self._thread_gate.wait(60), "a slow tool's gate was never released"


# -- the scenario ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ToolSpec:
    """One tool of the scenario."""

    read: bool
    sync: bool
    confirm: bool = False
    fails: bool = False
    slow: bool = False

    @property
    def name(self) -> str:
        flags = "".join(f for f, on in (("_confirm", self.confirm), ("_fails", self.fails),
                                        ("_slow", self.slow)) if on)
        return f"{'read' if self.read else 'write'}_{'sync' if self.sync else 'async'}{flags}"


@dataclass
class Scenario:
    """A whole scenario, drawn from ``seed``: plain data."""

    seed: int
    tools: list[ToolSpec]
    lead: list[dict[str, Any]]  # the team's script (lead and expert share the conversation)
    helper: list[dict[str, Any]]
    helper_tools: list[ToolSpec]
    helper_factory: bool = True
    team: bool = False  # an expert the lead may hand the conversation to
    expert_typed: bool = False
    lead_typed: bool = False
    uses_helper: bool = False
    slow_model: bool = False
    denied: str | None = None  # a tool the run's policy denies: it never runs
    edits_denied: bool = False  # a rule denies the calls a person edited (their tags end in e)

    def constraints(self) -> Constraints | None:
        """The run's constraints: the denials, if the scenario has any."""
        policy = {self.denied: "deny"} if self.denied else {}
        if self.edits_denied:
            policy.update({f"{s.name}(tag:*e)": "deny"
                           for s in [*self.tools, *self.helper_tools] if s.confirm})
        return Constraints.model_validate({"guard": {"tool_policy": policy}}) if policy else None
    notes: list[str] = field(default_factory=list)


def _tool_specs(rng: random.Random) -> list[ToolSpec]:
    specs = {
        ToolSpec(read=True, sync=rng.random() < 0.5),
        ToolSpec(read=False, sync=rng.random() < 0.5),
        ToolSpec(read=False, sync=rng.random() < 0.5, confirm=True),
    }
    for _ in range(rng.randint(0, 3)):
        read = rng.random() < 0.4
        specs.add(ToolSpec(read=read, sync=rng.random() < 0.5,
                           confirm=not read and rng.random() < 0.3,
                           fails=rng.random() < 0.3, slow=rng.random() < 0.5))
    if rng.random() < 0.7:
        specs.add(ToolSpec(read=rng.random() < 0.5, sync=rng.random() < 0.5, slow=True))
    return sorted(specs, key=lambda s: s.name)


def _call(rng: random.Random, name: str, tag: str, call_id: str) -> dict[str, Any]:
    """One call of ``name`` tagged ``tag``; sometimes with arguments that do not fit."""
    roll = rng.random()
    if roll < 0.08:
        return {"id": call_id, "name": name, "arguments": {"tag": BAD + tag, "n": "many"}}
    if roll < 0.12:
        return {"id": call_id, "name": name, "arguments": {"tag": BAD + tag, "extra": 1}}
    if roll < 0.15:
        return {"id": call_id, "name": name, "arguments": '{"tag": "' + BAD + tag + '", '}
    if roll < 0.17:
        return {"id": call_id, "name": "no_such_tool", "arguments": {"tag": BAD + tag}}
    return {"id": call_id, "name": name, "arguments": {"tag": tag, "n": rng.randint(0, 9)}}


def _turns(rng: random.Random, tools: list[ToolSpec], who: str, segments: int, *,
           helper: bool, team: bool, typed: tuple[bool, bool]) -> list[dict[str, Any]]:
    """A script: ``segments`` user turns' worth of tool turns, each ending with an answer."""
    script: list[dict[str, Any]] = []
    active = 0  # 0: the lead, 1: the expert (who answers after a hand-off)
    for segment in range(segments):
        for _ in range(rng.randint(0, 3)):
            turn = len(script)
            if team and rng.random() < 0.25:
                target = "expert" if active == 0 else "lead"
                if active == 1 and rng.random() < 0.5:
                    target = ""
                if target:
                    script.append({"calls": [{"id": f"h{turn}", "name": f"transfer_to_{target}",
                                              "arguments": {}}]})
                    active = 1 - active
                    continue
            calls = []
            unique = rng.random() < 0.5
            for i in range(rng.randint(1, 3)):
                call_id = f"u{turn}_{i}" if unique else f"call_{i}"
                tag = f"{who}{turn}.{i}"
                if helper and active == 0 and rng.random() < 0.3:
                    calls.append({"id": call_id, "name": "helper",
                                  "arguments": {"input": tag}})
                    continue
                calls.append(_call(rng, rng.choice(tools).name, tag, call_id))
            script.append({"calls": calls})
        if typed[active]:
            turn = len(script)
            if rng.random() < 0.3:  # a typed answer that does not fit first
                script.append({"calls": [{"id": f"f{turn}", "name": "final_result",
                                          "arguments": {"text": 5}}]})
            script.append({"calls": [{"id": f"f{len(script)}", "name": "final_result",
                                      "arguments": {"text": f"{who} verdict {segment}"}}]})
        else:
            script.append({"answer": f"{who} answer {segment}"})
    return script


def scenario(seed: int) -> Scenario:
    """The scenario of ``seed``: the same in every process."""
    rng = random.Random(f"scenario-{seed}")
    tools = _tool_specs(rng)
    helper_tools = [s for s in _tool_specs(rng) if rng.random() < 0.8] or tools[:1]
    team = rng.random() < 0.35
    uses_helper = rng.random() < 0.5
    lead_typed = rng.random() < 0.2
    expert_typed = team and rng.random() < 0.5
    lead = _turns(rng, tools, "m", 4, helper=uses_helper, team=team,
                  typed=(lead_typed, expert_typed))
    helper = _turns(rng, helper_tools, "", 1, helper=False, team=False, typed=(False, False))
    return Scenario(seed=seed, tools=tools, lead=lead, helper=helper,
                    helper_tools=helper_tools, helper_factory=rng.random() < 0.8, team=team,
                    expert_typed=expert_typed, lead_typed=lead_typed, uses_helper=uses_helper,
                    slow_model=rng.random() < 0.3,
                    denied=rng.choice([s.name for s in tools + helper_tools])
                    if rng.random() < 0.3 else None, edits_denied=rng.random() < 0.3)


# -- the model -------------------------------------------------------------------------------------
class FuzzModel(BaseLLMProvider):
    """Plays ``script``: its turn is the number of assistant messages in the conversation.

    A helper's tags start with its input (the first user message), so every call of the whole
    run has a tag of its own. Each call is written to the ledger with the tags it asked for.
    """

    model = "fuzz"

    def __init__(self, script: list[dict[str, Any]], ledger: Ledger, who: str,
                 gates: Gates | None = None) -> None:
        self.script, self.ledger, self.who = script, ledger, who
        self.gates = gates  # a slow model waits on them as a slow tool does

    async def send(self, request: ChatRequest) -> LLMResponse:
        messages = list(request.messages)
        turn = sum(1 for m in messages if m.role == "assistant")
        prefix = ""
        if self.who == "helper":
            prefix = next((m.content or "" for m in messages if m.role == "user"), "") + ":"
        entry = self.script[turn] if turn < len(self.script) else {"answer": f"late {turn}"}
        if "answer" in entry:
            message = Message.assistant(f"{prefix}{entry['answer']}")
            tags: list[str] = []
        else:
            calls = [_prefixed(call, prefix) for call in entry["calls"]]
            message = Message.assistant(tool_calls=[ToolCall.from_dict(c) for c in calls])
            tags = [c["arguments"].get("tag") or c["arguments"].get("input") or ""
                    for c in calls if isinstance(c["arguments"], dict)]
        self.ledger.write("model", who=self.who, turn=turn, tags=tags,
                          unpaired=unpaired_calls(messages))
        if self.gates is not None:  # the request went out: a stop now may not lose its count
            self.gates.entered(f"model:{self.who}:{turn}")
            await self.gates.wait_async()
        return LLMResponse(message=message, usage=Usage(input_tokens=10, output_tokens=5),
                           finish_reason="tool_calls" if message.tool_calls else "stop",
                           model=self.model)


def unpaired_calls(messages: list[Message]) -> list[str]:
    """What breaks OpenAI's rule in ``messages``: each assistant turn's calls are answered by
    one tool message each, right after it; no tool message answers nothing."""
    problems: list[str] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        if message.role == "tool":
            problems.append(f"an orphan result at {i} ({message.tool_call_id})")
            i += 1
            continue
        i += 1
        if message.role != "assistant" or not message.tool_calls:
            continue
        wanted = sorted(c.id or "" for c in message.tool_calls)
        got = []
        while i < len(messages) and messages[i].role == "tool":
            got.append(messages[i].tool_call_id or "")
            i += 1
        if sorted(got) != wanted:
            problems.append(f"the calls {wanted} at {i} got results {got}")
    return problems


def _prefixed(call: dict[str, Any], prefix: str) -> dict[str, Any]:
    arguments = call["arguments"]
    if not prefix or not isinstance(arguments, dict) or "tag" not in arguments:
        return call
    tag = arguments["tag"]
    bad = tag.startswith(BAD)
    tag = (BAD if bad else "") + prefix + tag.removeprefix(BAD)
    return {**call, "arguments": {**arguments, "tag": tag}}


# -- the tools -------------------------------------------------------------------------------------
def make_tool(spec: ToolSpec, ledger: Ledger, gates: Gates) -> Any:
    """The tool of ``spec``: it writes its start and end to the ledger (not a stopped end)."""
    options: dict[str, Any] = {
        "name": spec.name, "description": f"The {spec.name} tool.",
        "category": "read" if spec.read else "write", "injected": ["call_id"],
    }
    if spec.confirm:
        options["permission"] = "user_confirm"

    def finish(tag: str, call_id: str, n: int) -> str:
        if spec.fails:
            ledger.write("end", tool=spec.name, tag=tag, call_id=call_id, raised=True)
            raise RuntimeError(f"{spec.name} failed on {tag}")
        ledger.write("end", tool=spec.name, tag=tag, call_id=call_id, raised=False)
        return f"{spec.name} did {tag} ({n})"

    if spec.sync:
        def run_sync(tag: str, n: int = 0, call_id: str = "") -> str:
            ledger.thread_started()
            try:
                ledger.write("start", tool=spec.name, tag=tag, call_id=call_id)
                if spec.slow:
                    gates.entered(tag)
                    gates.wait_thread()
                return finish(tag, call_id, n)
            finally:
                ledger.thread_ended()

        return tool(**options)(run_sync)

    async def run_async(tag: str, n: int = 0, call_id: str = "") -> str:
        ledger.write("start", tool=spec.name, tag=tag, call_id=call_id)
        if spec.slow:
            gates.entered(tag)
            await gates.wait_async()
        else:
            await asyncio.sleep(0)
        return finish(tag, call_id, n)

    return tool(**options)(run_async)


# -- the tree --------------------------------------------------------------------------------------
def build_tree(sc: Scenario, ledger: Ledger, gates: Gates) -> Any:
    """The scenario's tree: a lead agent (with its helper and expert, if it has them)."""
    tools = [make_tool(s, ledger, gates) for s in sc.tools]
    slow = gates if sc.slow_model else None

    def helper_tree() -> Any:
        own = [make_tool(s, ledger, gates) for s in sc.helper_tools]
        return create_react_node(FuzzModel(sc.helper, ledger, "helper", slow), own, name="helper",
                                 max_iterations=20)

    lead_tools: list[Any] = list(tools)
    if sc.uses_helper:
        lead_tools.append(agent_tool(helper_tree if sc.helper_factory else helper_tree(),
                                     name="helper", description="Helps."))
    typed = {"output_type": Verdict} if sc.lead_typed else {}
    if not sc.team:
        return create_react_node(FuzzModel(sc.lead, ledger, "lead", slow), lead_tools, name="lead",
                                 max_iterations=60, **typed)
    expert_typed = {"output_type": Verdict} if sc.expert_typed else {}
    expert = create_react_node(
        FuzzModel(sc.lead, ledger, "expert", slow), [*tools, handoff("lead", description="Back.")],
        name="expert", max_iterations=60, **expert_typed)
    return create_react_node(
        FuzzModel(sc.lead, ledger, "lead", slow),
        [*lead_tools, handoff(expert, description="Hard questions.")],
        name="lead", max_iterations=60, **typed)


def fresh_state() -> StateManager:
    """The state a scenario's run starts with."""
    return StateManager(AgentState, {"messages": [{"role": "user", "content": "Begin."}]})
