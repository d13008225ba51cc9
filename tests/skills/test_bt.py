"""BT skills: tree loading, inputs and outputs, the guard inside trees, run_bt_skill and the
run_bt_skill tool, and the shipped workspace-report skill end to end."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from jianmu.constraints import Constraints, ExecutionConstraints, GuardConstraints
from jianmu.errors import SkillLoadError, SkillRunError
from jianmu.nodes.state import AgentState
from jianmu.nodes.tool_node import ToolNode
from jianmu.runtime import ReactiveRunner, RunStatus
from jianmu.skills import (
    BTSkillContext,
    GuardedToolNode,
    RunBTSkillTool,
    SkillCatalog,
    SkillTreeLoader,
    load_skill,
    resolve_inputs,
    run_bt_skill,
)
from jianmu.state import StateManager

SHIPPED = Path(__file__).parents[2] / "skills"

ECHO_TREE = '''
import py_trees
from py_trees.common import Status
from jianmu.runtime import AsyncNode

MARK = "{mark}"

class Emit(AsyncNode):
    def __init__(self, key, value):
        super().__init__("emit")
        self.key, self.value = key, value

    async def update_async(self):
        self.state.write_port(self.key, self.value)
        return Status.SUCCESS

def build_tree(ctx):
    return Emit(ctx.skill_result_key, {{"echo": ctx.inputs, "mark": MARK}})
'''


def _bt_skill(root: Path, name: str, tree: str, front: str = "") -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: d\nexecution: bt\n{front}---\n", encoding="utf-8"
    )
    (folder / "tree.py").write_text(tree, encoding="utf-8")
    return folder


def test_inputs_resolve_explicit_then_state_then_default(tmp_path: Path) -> None:
    skill = load_skill(_bt_skill(tmp_path, "order", ECHO_TREE.format(mark="x"), (
        "inputs: {a: string, b: string, c: {type: string, default: dc}, n: integer}\n"
    )))
    state = StateManager(initial={"a": "from-state", "b": "from-state", "n": "7"})
    got = resolve_inputs(skill, {"a": "explicit"}, state.root)
    assert got == {"a": "explicit", "b": "from-state", "c": "dc", "n": 7}
    with pytest.raises(SkillRunError, match="missing required argument 'b'"):
        resolve_inputs(skill, {"a": "x", "n": 1}, StateManager().root)
    with pytest.raises(SkillRunError, match="unknown argument 'zz'"):
        resolve_inputs(skill, {"a": "x", "b": "y", "n": 1, "zz": 1})
    with pytest.raises(SkillRunError, match="n: expected integer"):
        resolve_inputs(skill, {"a": "x", "b": "y", "n": "many"})


def test_a_null_input_takes_the_state_then_the_default(tmp_path: Path) -> None:
    # a model writes null for an input it leaves out; the default used to be dropped with it
    skill = load_skill(_bt_skill(tmp_path, "nulls", ECHO_TREE.format(mark="x"), (
        "inputs: {who: string, times: {type: integer, default: 2},\n"
        "         n: {type: integer, default: 1}, maybe: {type: [string, 'null'], default: d}}\n"
    )))
    state = StateManager(initial={"n": 5})
    got = resolve_inputs(skill, {"who": "b", "times": None, "n": None, "maybe": None}, state.root)
    assert got == {"who": "b", "times": 2, "n": 5, "maybe": None}
    with pytest.raises(SkillRunError, match="missing required argument 'who'"):
        resolve_inputs(skill, {"who": None})


def test_a_null_default_is_a_value(tmp_path: Path) -> None:
    # `default: null` is "none": validation dropped it, and the tree found no key at all
    skill = load_skill(_bt_skill(tmp_path, "none", ECHO_TREE.format(mark="x"), (
        "inputs: {since: {type: string, default: null}}\n"
    )))
    assert resolve_inputs(skill, {}) == {"since": None}
    assert resolve_inputs(skill, {"since": "v1"}) == {"since": "v1"}


@pytest.mark.anyio
async def test_outputs_are_validated(tmp_path: Path) -> None:
    ok = load_skill(_bt_skill(tmp_path, "good-out", ECHO_TREE.format(mark="m"), (
        "outputs: {mark: string}\n"
    )))
    assert await run_bt_skill(ok) == {"echo": {}, "mark": "m"}  # extra fields are allowed
    bad = load_skill(_bt_skill(tmp_path, "bad-out", ECHO_TREE.format(mark="m"), (
        "outputs: {mark: integer, count: integer}\n"
    )))
    with pytest.raises(
        SkillRunError, match=r"mark: expected integer.*missing required field 'count'"
    ):
        await run_bt_skill(bad)


@pytest.mark.anyio
async def test_run_bt_skill_cleans_its_namespace(tmp_path: Path) -> None:
    skill = load_skill(_bt_skill(tmp_path, "clean", ECHO_TREE.format(mark="c")))
    state = StateManager()
    assert (await run_bt_skill(skill, inputs={"q": 1}, state_manager=state))["echo"] == {"q": 1}
    assert state.namespaces() == []


def test_tree_modules_are_isolated_and_reloaded(tmp_path: Path) -> None:
    one = load_skill(_bt_skill(tmp_path / "a", "same-name", ECHO_TREE.format(mark="one")))
    two = load_skill(_bt_skill(tmp_path / "b", "same-name", ECHO_TREE.format(mark="two")))
    loader = SkillTreeLoader()
    first, second = loader.load_module(one), loader.load_module(two)
    assert (first.MARK, second.MARK) == ("one", "two")
    assert first.__name__ != second.__name__
    assert first.__name__.startswith("jianmu._skill_trees.same_name_")
    assert "tree" not in sys.modules or sys.modules["tree"] is not first
    assert loader.load_module(one) is first  # unchanged file: cached
    assert one.tree_path is not None
    one.tree_path.write_text(ECHO_TREE.format(mark="one-edited") + "\n# longer\n", encoding="utf-8")
    assert loader.load_module(one).MARK == "one-edited"


def test_tree_errors_name_the_tree_file(tmp_path: Path) -> None:
    skill = load_skill(_bt_skill(tmp_path, "not-a-tree", "def build_tree(ctx):\n    return 42\n"))
    ctx = BTSkillContext.create(skill, state_manager=StateManager())
    with pytest.raises(SkillLoadError, match="must return a py_trees behaviour, got int"):
        SkillTreeLoader().build(skill, ctx)
    raising = load_skill(_bt_skill(tmp_path, "raising", "def build_tree(ctx):\n    1 / 0\n"))
    ctx = BTSkillContext.create(raising, state_manager=StateManager())
    with pytest.raises(SkillLoadError, match="ZeroDivisionError") as info:
        SkillTreeLoader().build(raising, ctx)
    assert info.value.line == 2 and info.value.path == str(raising.tree_path)


def test_prompt_skill_has_no_tree(tmp_path: Path) -> None:
    skill = SkillCatalog([SHIPPED]).get("code-review")
    with pytest.raises(SkillRunError, match="prompt skill"):
        BTSkillContext.create(skill, state_manager=StateManager())


UNDECLARED = '''
from jianmu.nodes.tool_node import ToolNode
from jianmu.tools.builtin.calculator import CalculatorTool

def build_tree(ctx):
    return ToolNode("calc", CalculatorTool(), input_key="expr", output_key="out")
'''


PLAIN_DEF = """
import py_trees
from py_trees.common import Status
from jianmu.runtime import AsyncNode

class Sync(AsyncNode):
    def update_async(self):
        self.state.write_port("skill_result", {"done": True})
        return Status.SUCCESS

class Handing(AsyncNode):
    def update_async(self):  # hands over a coroutine: a plain def that is fine
        return self.work()

    async def work(self):
        return Status.SUCCESS

def build_tree(ctx):
    root = py_trees.composites.Sequence("s", memory=True)
    root.add_children([Handing("hand"), *([Sync("sync")] if ctx.inputs["plain"] else [])])
    return root
"""


@pytest.mark.anyio
async def test_a_plain_def_update_async_is_refused_at_build(tmp_path: Path) -> None:
    # it ran at its node's first tick (its write and all), then failed the run without a line
    skill = load_skill(_bt_skill(tmp_path, "plain", PLAIN_DEF, "inputs: {plain: boolean}\n"))
    ctx = BTSkillContext.create(skill, state_manager=StateManager(), inputs={"plain": True})
    with pytest.raises(SkillLoadError, match=r"Sync\.update_async is a plain def") as info:
        SkillTreeLoader().build(skill, ctx)
    assert (info.value.path, info.value.line) == (str(skill.tree_path), 7)
    assert await run_bt_skill(skill, inputs={"plain": False}) is None


def test_tools_must_be_declared_and_tool_nodes_are_guarded(tmp_path: Path) -> None:
    skill = load_skill(_bt_skill(tmp_path, "undeclared", UNDECLARED))
    ctx = BTSkillContext.create(skill, state_manager=StateManager())
    with pytest.raises(SkillLoadError, match=r"uses tool 'calculator'.*add it to 'tools'"):
        SkillTreeLoader().build(skill, ctx)
    declared = load_skill(_bt_skill(tmp_path, "declared", UNDECLARED, (
        "tools: [calculator]\nconstraints: {guard: {tool_policy: {calculator: deny}}}\n"
    )))
    ctx = BTSkillContext.create(declared, state_manager=StateManager())
    node = SkillTreeLoader().build(declared, ctx)
    assert isinstance(node, ToolNode) and node.guarded is True
    assert node.approval_scope == ctx.approval_scope and node.tree_position == "0"
    assert node.bt_skill == "declared" and node.namespace == ctx.namespace
    assert node.constraints is not None
    assert node.constraints.guard.tool_policy == {"calculator": "deny"}


@pytest.mark.anyio
async def test_skill_policy_denies_inside_the_tree(tmp_path: Path) -> None:
    skill = load_skill(_bt_skill(tmp_path, "denied", UNDECLARED, (
        "tools: [calculator]\nconstraints: {guard: {tool_policy: {calculator: deny}}}\n"
    )))
    with pytest.raises(SkillRunError, match="the guard denied calculator"):
        await run_bt_skill(skill, state_manager=StateManager(initial={"expr": "1+1"}))


UNGUARDED = UNDECLARED.replace('output_key="out")', 'output_key="out", guarded=False)')


def test_a_skill_step_cannot_switch_its_guard_off(tmp_path: Path) -> None:
    skill = load_skill(_bt_skill(tmp_path, "loose", UNGUARDED, "tools: [calculator]\n"))
    ctx = BTSkillContext.create(skill, state_manager=StateManager())
    node = SkillTreeLoader().build(skill, ctx)  # the loader switches every step's guard on
    assert type(node) is ToolNode and node.guarded is True
    with pytest.raises(TypeError):  # and a GuardedToolNode has no switch at all
        GuardedToolNode("calc", ctx.tool("calculator"), guarded=False)  # type: ignore[call-arg]
    assert GuardedToolNode("calc", ctx.tool("calculator")).guarded is True


@pytest.mark.anyio
async def test_a_step_built_unguarded_is_still_denied(tmp_path: Path) -> None:
    skill = load_skill(_bt_skill(tmp_path, "denied", UNGUARDED, (
        "tools: [calculator]\nconstraints: {guard: {tool_policy: {calculator: deny}}}\n"
    )))
    with pytest.raises(SkillRunError, match="the guard denied calculator"):
        await run_bt_skill(skill, state_manager=StateManager(initial={"expr": "1+1"}))


# -- the shipped workspace-report skill ------------------------------------------------------


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "app.py").write_text("x = 1  # TODO: rename\nprint(x)\n", encoding="utf-8")
    (ws / "src" / "notes.txt").write_text("ok\nFIXME soon\nbye\n", encoding="utf-8")
    (ws / "README.md").write_text("# demo\n", encoding="utf-8")
    return ws


def _in(ws: Path, **guard: Any) -> Constraints:
    return Constraints(execution=ExecutionConstraints(workdir=str(ws)),
                       guard=GuardConstraints(**guard))


@pytest.mark.anyio
async def test_workspace_report_end_to_end_with_confirmation(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    skill = SkillCatalog([SHIPPED]).get("workspace-report")
    state = StateManager(AgentState, initial={"folder": "src"})  # the global state fills 'folder'
    bt = BTSkillContext.create(skill, state_manager=state, inputs={"report": "out/report.md"})
    assert bt.inputs["folder"] == "src" and bt.inputs["pattern"] == "TODO|FIXME"
    runner = ReactiveRunner(SkillTreeLoader().build(skill, bt), state, constraints=_in(ws))
    bt.run = runner.ctx
    events: list[Any] = []
    runner.ctx.events.subscribe("bt.skill.node.io", events.append)

    first = await runner.run()
    assert first.status is RunStatus.SUSPENDED
    (request,) = first.pending
    assert request.payload["tool"] == "write_file"
    assert request.payload["arguments"]["path"] == "out/report.md"
    assert not (ws / "out" / "report.md").exists()

    runner.approve(request.id)
    second = await runner.run()
    assert second.status is RunStatus.SUCCESS, second.error
    assert bt.result() == {"report": "out/report.md", "files": 2, "matches": 2,
                           "total_bytes": 49, "total_lines": 5}
    report = (ws / "out" / "report.md").read_text(encoding="utf-8")
    assert "| src/app.py | 31 | 2 | ascii |" in report
    assert "`src/notes.txt:2:FIXME soon`" in report
    assert "README" not in report  # outside the surveyed folder
    assert {e.fields["tool_name"] for e in events} == {
        "glob_search", "file_info", "grep_search", "write_file"
    }


@pytest.mark.anyio
async def test_workspace_report_rejected_write_fails(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    skill = SkillCatalog([SHIPPED]).get("workspace-report")
    with pytest.raises(SkillRunError, match="rejected by a person"):
        await run_bt_skill(skill, constraints=_in(ws), approve=lambda request: False)
    assert not (ws / "workspace-report.md").exists()


@pytest.mark.anyio
async def test_workspace_report_runs_unasked_when_the_config_allows_writes(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    skill = SkillCatalog([SHIPPED]).get("workspace-report")
    result = await run_bt_skill(skill, constraints=_in(ws, tool_policy={"write_file": "allow"}))
    assert result["files"] == 3 and (ws / "workspace-report.md").is_file()
    with pytest.raises(SkillRunError, match="waits for approval"):
        await run_bt_skill(skill, constraints=_in(ws))


# -- the run_bt_skill tool ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_tool_schema_and_plain_run(tmp_path: Path) -> None:
    catalog = SkillCatalog([SHIPPED, tmp_path])
    _bt_skill(tmp_path, "echo", ECHO_TREE.format(mark="t"))
    catalog.reload()
    tool = RunBTSkillTool(catalog)
    assert tool.input_schema["properties"]["skill"]["enum"] == ["workspace-report", "echo"]
    assert "workspace-report:" in tool.description
    state = StateManager(AgentState)
    out = await tool.execute({"skill": "echo", "inputs": {"k": "v"}},
                             injected={"state": state.scope("host"), "call_id": "call_1"})
    assert out == {"echo": {"k": "v"}, "mark": "t"}
    assert state.namespaces() == []  # the call's namespace host.bt.echo.call_1 is gone
    with pytest.raises(ValueError, match="at least one skill"):
        RunBTSkillTool([catalog.get("code-review")])


@pytest.mark.anyio
async def test_tool_inside_a_run_suspends_the_outer_run_and_retries(tmp_path: Path) -> None:
    """A confirm inside the tool's tree suspends the outer run; the same call after the
    approval runs through."""
    import asyncio

    import py_trees

    from jianmu.nodes.tool_executor import ToolExecutor
    from jianmu.runtime import AsyncNode

    ws = _workspace(tmp_path)
    tool = RunBTSkillTool(SkillCatalog([SHIPPED]))
    state = StateManager(AgentState)
    class Model(AsyncNode):
        """Stands for the model: it waits for its answer, so it takes a tick of its own."""

        async def update_async(self) -> py_trees.common.Status:
            await asyncio.sleep(0)
            return py_trees.common.Status.SUCCESS

    # like a ReAct loop: after the executor another node runs (the model, there)
    root = py_trees.composites.Sequence("loop", memory=True)
    root.add_children([ToolExecutor("exec", [tool]), Model("model"),
                       ToolExecutor("exec", [tool])])
    runner = ReactiveRunner(root, state, constraints=_in(ws))
    call = {"name": "run_bt_skill", "arguments": {"skill": "workspace-report",
                                                 "inputs": {"folder": "src"}}}
    state.update({"actions": [dict(call, id="c1")]})
    first = await runner.run()
    assert first.status is RunStatus.SUSPENDED
    (request,) = first.pending
    assert request.payload["tool"] == "write_file"
    observation = state.get("messages")[-1].content
    assert "needs a person's approval" in observation
    runner.approve(request.id)

    state.update({"actions": [dict(call, id="c2")]})
    second = await runner.run()
    assert second.status is RunStatus.SUCCESS
    assert '"files": 2' in state.get("messages")[-1].content
    assert (ws / "workspace-report.md").is_file()
    assert state.namespaces() == []


DECORATED_TREE = '''
import asyncio

import py_trees
from py_trees.common import Status
from jianmu.runtime import AsyncNode

class Flaky(AsyncNode):
    def __init__(self, key):
        super().__init__("flaky")
        self.key, self.runs = key, 0

    async def update_async(self):
        self.runs += 1
        if self.runs < 3:
            return Status.FAILURE  # no state written: only the Retry asks for the next tick
        self.state.write_port(self.key, {"runs": self.runs})
        return Status.SUCCESS

class Stuck(AsyncNode):
    async def update_async(self):
        await asyncio.Event().wait()

def build_tree(ctx):
    d = py_trees.decorators
    return py_trees.composites.Sequence("root", memory=True, children=[
        d.FailureIsSuccess("skip", d.Timeout("slow", Stuck("stuck"), duration=0.05)),
        d.Retry("retry", Flaky(ctx.skill_result_key), num_failures=3),
    ])
'''


@pytest.mark.anyio
async def test_the_tool_ticks_a_trees_decorators_as_py_trees_does(tmp_path: Path) -> None:
    """Inside a run (`drive_subtree`), a Timeout's deadline cancels its child and a Retry
    gets its next attempt, though neither brings a task's end or a state write."""
    catalog = SkillCatalog([tmp_path])
    _bt_skill(tmp_path, "decorated", DECORATED_TREE)
    catalog.reload()
    state = StateManager(AgentState)
    out = await RunBTSkillTool(catalog).execute(
        {"skill": "decorated", "inputs": {}},
        injected={"state": state.scope("host"), "call_id": "call_1"},
    )
    assert out == {"runs": 3}


def test_a_tree_that_exits_at_import_or_in_build_tree_is_a_load_error(tmp_path: Path) -> None:
    """``sys.exit()`` in a tree module went through ``except Exception`` and ended the caller
    (``jianmu skills validate`` stopped silently, the skills after it never looked at)."""
    exits = load_skill(_bt_skill(tmp_path, "exits", "import sys\n\nsys.exit(2)\n"
                                 "def build_tree(ctx):\n    pass\n"))
    with pytest.raises(SkillLoadError, match=r"importing the tree module called sys\.exit\(2\)"
                       ) as info:
        SkillTreeLoader().load_module(exits)
    assert info.value.line == 3 and info.value.path == str(exits.tree_path)
    builds = load_skill(_bt_skill(tmp_path, "builds", "import sys\n\n"
                                  "def build_tree(ctx):\n    sys.exit('no')\n"))
    ctx = BTSkillContext.create(builds, state_manager=StateManager())
    with pytest.raises(SkillLoadError, match=r"build_tree called sys\.exit\('no'\)") as info:
        SkillTreeLoader().build(builds, ctx)
    assert info.value.line == 4


def test_a_tree_that_loops_at_import_is_refused_after_the_time_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tree module looping at import held the caller (the event loop, for run_bt_skill)
    for good; it is refused after `TREE_IMPORT_TIMEOUT_S`, the others still load."""
    from jianmu.skills import bt

    monkeypatch.setattr(bt, "TREE_IMPORT_TIMEOUT_S", 0.2)
    release = tmp_path / "release"
    loops = load_skill(_bt_skill(tmp_path, "loops", (
        "import os, time\n\n"
        f"while not os.path.exists({str(release)!r}):\n    time.sleep(0.01)\n"
        "def build_tree(ctx):\n    pass\n")))
    try:
        with pytest.raises(SkillLoadError, match=r"did not finish within 0\.2 s") as info:
            SkillTreeLoader().load_module(loops)
        assert info.value.path == str(loops.tree_path)
        assert not any(name.startswith(bt.TREE_MODULE_PREFIX + ".loops_") for name in sys.modules)
    finally:
        release.touch()  # the import thread ends
    fine = load_skill(_bt_skill(tmp_path, "fine", ECHO_TREE.format(mark="ok")))
    assert SkillTreeLoader().load_module(fine).MARK == "ok"


BASE_EXCEPTION_TREE = (
    "class Failed(BaseException):  # as pytest's Failed, gevent's Timeout\n"
    "    pass\n\n"
    "{at_import}\n"
    "def build_tree(ctx):\n"
    "    {in_build}\n"
)


@pytest.mark.parametrize("raised", ["Failed('gave up')", "GeneratorExit", "KeyboardInterrupt"])
def test_a_tree_raising_a_base_exception_at_import_is_a_load_error(
    tmp_path: Path, raised: str
) -> None:
    """A BaseException that is no Exception, raised by a tree module at import, went past
    ``except Exception``: `jianmu skills validate` stopped with a traceback, a run raised it
    raw, a KeyboardInterrupt of its own read as the user's Ctrl-C; and the module stayed in
    sys.modules. The import runs on a thread of its own, which no signal reaches: whatever
    is raised there is the module's."""
    from jianmu.skills import bt

    folder = _bt_skill(tmp_path, "raises", BASE_EXCEPTION_TREE.format(
        at_import=f"raise {raised}", in_build="pass"))
    skill = load_skill(folder)
    with pytest.raises(SkillLoadError, match=rf"importing the tree module failed: "
                       rf"{raised.split('(')[0]}") as info:
        SkillTreeLoader().load_module(skill)
    assert info.value.line == 4 and info.value.path == str(skill.tree_path)
    assert not any(name.startswith(bt.TREE_MODULE_PREFIX + ".raises_") for name in sys.modules)
    # what `jianmu skills validate` checks, one folder after another
    other = _bt_skill(tmp_path, "fine", ECHO_TREE.format(mark="ok"))
    checker = SkillCatalog([])
    with pytest.raises(SkillLoadError, match="importing the tree module"):
        checker.validate(folder, run_tree=True)
    assert checker.validate(other, run_tree=True).name == "fine"


def test_a_base_exception_from_build_tree_is_a_load_error_but_a_ctrl_c_still_stops(
    tmp_path: Path
) -> None:
    """build_tree raising a BaseException of its own is a load error naming its line. It runs
    on the caller's thread: on the main thread, where a person's Ctrl-C lands, a
    KeyboardInterrupt still stops the caller; on any other thread it can only be the tree's."""
    import threading

    fails = load_skill(_bt_skill(tmp_path, "fails", BASE_EXCEPTION_TREE.format(
        at_import="", in_build="raise Failed('in build_tree')")))
    with pytest.raises(SkillLoadError, match=r"build_tree raised Failed: in build_tree") as info:
        SkillTreeLoader().build(fails, BTSkillContext.create(fails, state_manager=StateManager()))
    assert info.value.line == 6 and info.value.path == str(fails.tree_path)

    interrupts = load_skill(_bt_skill(tmp_path, "interrupts", BASE_EXCEPTION_TREE.format(
        at_import="", in_build="raise KeyboardInterrupt")))
    ctx = BTSkillContext.create(interrupts, state_manager=StateManager())
    with pytest.raises(KeyboardInterrupt):
        SkillTreeLoader().build(interrupts, ctx)
    outcome: list[BaseException] = []

    def build() -> None:
        try:
            SkillTreeLoader().build(interrupts, ctx)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=build)
    worker.start()
    worker.join()
    (error,) = outcome
    assert isinstance(error, SkillLoadError) and error.line == 6
    assert "build_tree raised KeyboardInterrupt" in str(error)


def test_a_base_exception_from_a_tree_answers_the_models_run_bt_skill_call(
    tmp_path: Path
) -> None:
    """A SkillNode's run_bt_skill call of a tree raising a BaseException of its own raised it
    out of run_sync; the model never got its answer."""
    from jianmu.llm import ScriptedLLM
    from jianmu.skills import SkillNode

    _bt_skill(tmp_path, "raises", BASE_EXCEPTION_TREE.format(
        at_import="raise Failed('gave up')", in_build="pass"))
    seen: list[str] = []

    def answer(messages: list[Any]) -> str:
        seen.append(str([m.content for m in messages if m.role == "tool"][-1]))
        return "done"

    llm = ScriptedLLM([[{"name": "run_bt_skill", "arguments": {"skill": "raises"}}], answer])
    node = SkillNode("S", ["raises"], llm, catalog=SkillCatalog([tmp_path]))
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    result = ReactiveRunner(node, state).run_sync()
    assert result.status is RunStatus.SUCCESS, result.error
    (observation,) = seen
    assert "importing the tree module failed: Failed: gave up" in observation


GATE_MODULE = "_jianmu_test_tree_gate"
GATED_TREE = f"""
import sys

gate = sys.modules[{GATE_MODULE!r}]
gate.entered.set()
gate.release.wait()  # the test decides when the import ends
"""


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Any:
    """What a gated tree module waits on at import, released (and its threads ended) after."""
    import threading
    import types

    from jianmu.skills import bt

    held = types.SimpleNamespace(entered=threading.Event(), release=threading.Event())
    monkeypatch.setitem(sys.modules, GATE_MODULE, held)
    yield held
    held.release.set()
    for thread in _import_threads(bt.TREE_MODULE_PREFIX + ".gated_"):
        thread.join()


def _import_threads(module_prefix: str) -> list[Any]:
    """The threads importing tree modules whose names start with ``module_prefix``."""
    import threading

    return [t for t in threading.enumerate()
            if t.name.startswith(f"jianmu-tree-import-{module_prefix}")]


@pytest.mark.anyio
async def test_a_slow_tree_import_leaves_the_event_loop_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gate: Any
) -> None:
    """The model's run_bt_skill call waited for a tree module's import with ``join`` on the
    event loop's thread: every other run, stream and studio page on that loop froze, up to
    `TREE_IMPORT_TIMEOUT_S` per call. The import is awaited: the loop runs on meanwhile."""
    import asyncio

    from jianmu.skills import bt

    monkeypatch.setattr(bt, "TREE_IMPORT_TIMEOUT_S", 120.0)  # the test ends the import itself
    _bt_skill(tmp_path, "gated", GATED_TREE + ECHO_TREE.format(mark="slow"))
    state = StateManager(AgentState)
    call = asyncio.create_task(RunBTSkillTool(SkillCatalog([tmp_path])).execute(
        {"skill": "gated", "inputs": {}},
        injected={"state": state.scope("host"), "call_id": "call_1"}))
    await asyncio.to_thread(gate.entered.wait)  # the loop ran this while the import waits
    assert not call.done()
    gate.release.set()
    assert await call == {"echo": {}, "mark": "slow"}


def test_a_tree_import_that_timed_out_is_not_started_again_until_the_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gate: Any
) -> None:
    """Each retry of a tree module looping at import started one more thread looping for
    good. One still running after its time is refused at once for the same file (each run
    makes its own loader); an edited file is tried again; once that import ends, too."""
    import asyncio

    from jianmu.skills import bt

    monkeypatch.setattr(bt, "TREE_IMPORT_TIMEOUT_S", 0.05)
    folder = _bt_skill(tmp_path, "gated", GATED_TREE + ECHO_TREE.format(mark="one"))
    skill = load_skill(folder)
    prefix = bt.TREE_MODULE_PREFIX + ".gated_"
    stuck = r"did not finish within 0\.05 s and is still running in a thread that cannot be"
    for _ in range(3):  # the model tries again; a run's loader is its own
        with pytest.raises(SkillLoadError, match=stuck):
            SkillTreeLoader().load_module(skill)
        with pytest.raises(SkillLoadError, match=stuck):
            asyncio.run(SkillTreeLoader().load_module_async(skill))
    assert len(_import_threads(prefix)) == 1
    assert SkillTreeLoader.module_name(skill) not in sys.modules

    (folder / "tree.py").write_text(GATED_TREE + ECHO_TREE.format(mark="two"), encoding="utf-8")
    for _ in range(2):
        with pytest.raises(SkillLoadError, match=stuck):
            SkillTreeLoader().load_module(skill)
    assert len(_import_threads(prefix)) == 2

    gate.release.set()
    for thread in _import_threads(prefix):
        thread.join()
    assert SkillTreeLoader().load_module(skill).MARK == "two"


RAISING_TREE = '''
import asyncio
from pathlib import Path

import py_trees
from py_trees.common import ParallelPolicy, Status
from jianmu.runtime import AsyncNode

NOTES = Path({notes!r})

class Waits(AsyncNode):
    async def update_async(self):
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            with NOTES.open("a") as notes:
                notes.write("cancelled\\n")
            raise

    def terminate(self, new_status):
        with NOTES.open("a") as notes:
            notes.write(f"terminate {{self.status.name}} {{new_status.name}}\\n")
        super().terminate(new_status)

class Raises(py_trees.behaviour.Behaviour):
    def update(self):
        raise RuntimeError("raised mid-tick")

def build_tree(ctx):
    d = py_trees.decorators
    return py_trees.composites.Parallel(
        "root", policy=ParallelPolicy.SuccessOnAll(synchronise=False), children=[
            py_trees.composites.Sequence("first", memory=True, children=[
                d.PassThrough("pass", Waits("waits"))]),
            Raises("raises"),
        ])
'''


@pytest.mark.anyio
async def test_a_tick_that_raises_inside_the_tool_stops_the_trees_running_leaves(
    tmp_path: Path,
) -> None:
    """A plain leaf raising in the subtree's first tick left the statuses above it unset:
    stopping the root alone (not RUNNING) reached nothing, and the async leaf started before
    the raise went on running after the tool had failed. Each running leaf is stopped once,
    its coroutine cancelled and awaited before the tool returns."""
    import asyncio

    notes = tmp_path / "notes.txt"
    catalog = SkillCatalog([tmp_path])
    _bt_skill(tmp_path, "raising", RAISING_TREE.format(notes=str(notes)))
    catalog.reload()
    with pytest.raises(RuntimeError, match="raised mid-tick"):
        await RunBTSkillTool(catalog).execute(
            {"skill": "raising", "inputs": {}},
            injected={"state": StateManager(AgentState).scope("host"), "call_id": "call_1"},
        )
    assert notes.read_text().splitlines() == ["terminate RUNNING INVALID", "cancelled"]
    assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("jianmu:")]
