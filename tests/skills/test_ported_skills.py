"""Skills as a user porting Anthropic's Agent Skills meets them: a SKILL.md edited while a run
goes on, and skill names as a model writes them (another case, spaces around)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu.errors import PathEscapeError, SkillLoadError, ToolInputError
from jianmu.nodes import AgentState
from jianmu.skills import SkillCatalog, load_skill
from jianmu.skills.bt import RunBTSkillTool
from jianmu.skills.disclosure import LoadSkillTool
from jianmu.skills.skill_tools import ReadSkillFileTool
from jianmu.state import StateManager
from tests.skills.test_bt import ECHO_TREE, _bt_skill

pytestmark = pytest.mark.anyio


def _pdf(root: Path) -> Path:
    folder = root / "pdf"
    (folder / "reference").mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: pdf\ndescription: 'Fill PDF forms: read forms.md first.'\n---\n"
        "# PDF\nRead [the forms guide](forms.md).\n", encoding="utf-8")
    (folder / "forms.md").write_text("# Forms\nfield rules\n", encoding="utf-8")
    return folder


@pytest.mark.parametrize("front", [
    "name: pdf\ndescription: d\nlicense: MIT\nmetadata: {author: a}\n",  # grown by two lines
    "name: pdf\n",  # shrunk by one
])
def test_the_body_is_what_follows_the_front_matter_as_the_file_is_now(
        tmp_path: Path, front: str) -> None:
    """SKILL.md edited after the skill was loaded (its author at work while an agent runs):
    the body is read later, and it was cut at the line found at load time, so the model read
    the tail of the new front matter as instructions, or lost the body's first line."""
    skill = load_skill(_pdf(tmp_path))
    (tmp_path / "pdf" / "SKILL.md").write_text(
        f"---\n{front}---\n# PDF\nRead [the forms guide](forms.md).\n", encoding="utf-8")
    assert skill.body == "# PDF\nRead [the forms guide](forms.md)."


@pytest.mark.parametrize("spelled", ["PDF", " Pdf\n", "ｐｄｆ"])
async def test_load_skill_takes_the_name_as_a_model_spells_it(
        tmp_path: Path, spelled: str) -> None:
    """Skill names are lowercase, so 'PDF' can only mean 'pdf': it was refused as no skill."""
    skill = load_skill(_pdf(tmp_path))
    loaded: list[str] = []
    tool = LoadSkillTool({"pdf": skill}, lambda s: loaded.append(s.name))
    answer = await tool.run(spelled)
    assert answer.startswith("# Skill: pdf") and loaded == ["pdf"]
    with pytest.raises(ToolInputError, match="no skill 'pdfs' here; load one of: pdf"):
        await tool.run("pdfs")


async def test_read_skill_file_takes_the_name_as_a_model_spells_it(tmp_path: Path) -> None:
    skill = load_skill(_pdf(tmp_path))
    tool = ReadSkillFileTool(lambda: {"pdf": skill})
    out = await tool.execute({"skill": "PDF", "path": "forms.md"})
    assert "field rules" in str(out)
    with pytest.raises(ToolInputError, match="no loaded skill is called 'word'"):
        await tool.execute({"skill": "word", "path": "forms.md"})


async def test_run_bt_skill_called_directly_names_the_skill_it_has(tmp_path: Path) -> None:
    """The tool's run (as a caller without schema validation reaches it) raised KeyError for a
    name in another case or an unknown one; the first now runs, the second is named."""
    _bt_skill(tmp_path, "echo", ECHO_TREE.format(mark="m"))
    tool = RunBTSkillTool(SkillCatalog([tmp_path]))
    state = StateManager(AgentState)
    out = await tool.run(" Echo", {}, state=state.scope("host"), call_id="c1")
    assert out == {"echo": {}, "mark": "m"}
    with pytest.raises(ToolInputError, match="no behaviour-tree skill 'nope' here; run one of: "
                                             "echo"):
        await tool.run("nope", {}, state=state.scope("host"), call_id="c2")


CLAUDE_CODE_SKILL = """\
---
name: deploy
description: >
  Deploy the site: build, then upload.
  Use when "deploy" or "release" is said.
allowed-tools:
  - Bash(npm run:*)
  - Read
disable-model-invocation: true
model: haiku
argument-hint: "[environment]"
context: fork
when_to_use: after a merge
---
Run `npm run build`, then read [the checklist](reference.md).
"""


def test_a_claude_code_skill_loads_with_its_own_keys_warned_of(tmp_path: Path) -> None:
    """Claude Code's keys (the catalog searches .claude/ for its skills) made such a skill a
    SkillLoadError ('unknown key'), so a skill written for it was broken here; a key that is
    no one's (a misspelling) stays an error."""
    folder = tmp_path / ".claude" / "skills" / "deploy"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(CLAUDE_CODE_SKILL, encoding="utf-8")
    catalog = SkillCatalog([tmp_path])
    assert catalog.errors == []
    skill = catalog.get("deploy")
    assert skill.description == ("Deploy the site: build, then upload. Use when \"deploy\" or "
                                 "\"release\" is said.\n")
    assert skill.claude_code == {
        "disable-model-invocation": True, "model": "haiku", "argument-hint": "[environment]",
        "context": "fork", "when_to_use": "after a merge"}
    assert [t.rule for t in skill.allowed_tools] == ["bash(npm run *)", "read_file"]
    warned = {w.partition(":")[0]: w for w in skill.warnings}
    assert set(warned) == set(skill.claude_code)
    assert "offers it to its model all the same" in warned["disable-model-invocation"]
    assert "move this text into the description" in warned["when_to_use"]
    assert "Jianmu has no such setting" in warned["model"]
    assert skill.body.startswith("Run `npm run build`")

    (folder / "SKILL.md").write_text(CLAUDE_CODE_SKILL.replace("model:", "modle:"),
                                     encoding="utf-8")
    with pytest.raises(SkillLoadError, match=r"SKILL.md:10 \[modle\]: unknown key 'modle'"):
        load_skill(folder)



async def test_a_path_under_the_base_directory_is_answered_with_the_path_to_give(
        tmp_path: Path) -> None:
    """load_skill tells the model the folder is /skills/<name>, so it asks read_skill_file for
    /skills/pdf/forms.md. Absolute paths stay refused (tests/security/test_skill_files.py), but
    the answer told it to drop '..' it never wrote and offered 'scripts/run.py', which the skill
    has not: it now names the relative path to give."""
    skill = load_skill(_pdf(tmp_path))
    tool = ReadSkillFileTool(lambda: {"pdf": skill})
    with pytest.raises(PathEscapeError, match=r"outside the folder.*\(for example 'forms.md'\)"):
        await tool.execute({"skill": "pdf", "path": f"{skill.base_dir}/forms.md"})
    for escape in ("/skills/pdf/../../etc/passwd", "/skills/other/forms.md", "/etc/passwd"):
        with pytest.raises(PathEscapeError, match=r"\(for example 'scripts/run.py'\)"):
            await tool.execute({"skill": "pdf", "path": escape})


BT_TREE = "import py_trees\n\ndef build_tree(ctx):\n    return py_trees.behaviours.Success('ok')\n"


async def test_each_bt_skill_is_described_once_a_turn_when_listed(tmp_path: Path) -> None:
    """With progressive disclosure (several skills) each BT skill's description and inputs
    were sent twice every turn: in the prompt's list and in run_bt_skill's description (for
    12 BT skills of 1,000-character descriptions, 13,000 characters more a turn)."""
    from jianmu import ReactiveRunner
    from jianmu.config import parse_config
    from jianmu.llm import ScriptedLLM
    from jianmu.skills.node import SkillNode

    marks = []
    for i in range(3):
        mark = f"DESCRIPTION-MARK-{i}"
        marks.append(mark)
        folder = _bt_skill(tmp_path, f"bt-{i}", BT_TREE, "inputs: {path: string}\n")
        text = (folder / "SKILL.md").read_text(encoding="utf-8")
        (folder / "SKILL.md").write_text(text.replace("description: d", f"description: {mark}"),
                                         encoding="utf-8")
    _pdf(tmp_path)
    llm = ScriptedLLM(["ok"])
    node = SkillNode("Skills", ["pdf", "bt-0", "bt-1", "bt-2"], llm,
                     catalog=SkillCatalog([tmp_path]))
    config = parse_config(f"runtime:\n  debug_dir: {tmp_path / 'debug'}\n")
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    assert (await ReactiveRunner(node, state, config=config).run()).ok
    request = llm.requests[0]
    sent = (request.messages[0].content or "") + str(request.tools)
    for mark in marks:
        assert sent.count(mark) == 1, mark
    (run_bt,) = [t["function"] for t in request.tools if t["function"]["name"] == "run_bt_skill"]
    assert run_bt["description"].endswith("listed under Skills in your instructions: "
                                          "bt-0, bt-1, bt-2")
    # a tool made apart from such a list still describes each skill itself
    alone = RunBTSkillTool(SkillCatalog([tmp_path]))
    assert all(mark in alone.description for mark in marks)


def test_a_tab_inside_a_description_is_told_as_such(tmp_path: Path) -> None:
    """A description pasted with a tab in it ('Use for\\tPDFs') was refused with 'YAML indents
    with spaces, never tabs', though nothing there is indented; a tab that indents still is."""
    folder = tmp_path / "pdf"
    folder.mkdir()
    (folder / "SKILL.md").write_text("---\nname: pdf\ndescription: Use for\tPDFs\n---\n",
                                     encoding="utf-8")
    with pytest.raises(SkillLoadError, match=r"SKILL.md:3: .*\(a tab inside an unquoted value: "
                                             r"quote the value, or write spaces\)"):
        load_skill(folder)
    (folder / "SKILL.md").write_text("---\nname: pdf\ndescription: 'Use for\tPDFs'\n---\n",
                                     encoding="utf-8")
    assert load_skill(folder).description == "Use for\tPDFs"
    (folder / "SKILL.md").write_text("---\nname: pdf\n\tdescription: x\n---\n",
                                     encoding="utf-8")
    with pytest.raises(SkillLoadError, match=r"SKILL.md:3: .*\(YAML indents with spaces, never "
                                             r"tabs\)"):
        load_skill(folder)


async def test_load_skill_names_the_tools_the_run_withholds(tmp_path: Path) -> None:
    """A skill written for Claude Code asks for Bash(git:*); a run that denies bash hid it,
    and load_skill said nothing: the model learnt it only from a failed call ('unknown tool
    bash'), after planning with it. A skill whose tools are all there gets no such note."""
    from jianmu import ReactiveRunner
    from jianmu.config import parse_config
    from jianmu.llm import ScriptedLLM
    from jianmu.skills.node import SkillNode

    folder = tmp_path / "gitter"
    folder.mkdir()
    (folder / "SKILL.md").write_text(
        "---\nname: gitter\ndescription: Git status.\nallowed-tools: Bash(git:*) Grep\n---\n"
        "Run `git status`.\n", encoding="utf-8")
    _pdf(tmp_path)
    llm = ScriptedLLM([[{"name": "load_skill", "arguments": {"name": "gitter"}}],
                       [{"name": "load_skill", "arguments": {"name": "pdf"}}], "done"])
    node = SkillNode("Skills", ["gitter", "pdf"], llm, catalog=SkillCatalog([tmp_path]))
    config = parse_config(f"runtime:\n  debug_dir: {tmp_path / 'debug'}\n"
                          "guard:\n  tool_policy:\n    bash: deny\n")
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    assert (await ReactiveRunner(node, state, config=config).run()).ok
    answers = [m.content or "" for m in llm.requests[-1].messages if m.role == "tool"]
    assert answers[0].endswith(
        "## Tools\nNot available in this run, though the skill names them: bash (the run's "
        "policy denies them or they are not set up here); do without them, or tell the user "
        "what you could not do.")
    assert "grep_search" in llm.requests[1].tool_names
    assert "bash" not in llm.requests[1].tool_names
    assert answers[1].startswith("# Skill: pdf") and "## Tools" not in answers[1]


NESTING_TREE = '''
import pathlib

import py_trees
from py_trees.common import Status

from jianmu.llm import ScriptedLLM
from jianmu.runtime import AsyncNode
from jianmu.skills import SkillCatalog
from jianmu.skills.node import SkillNode

ROOT = pathlib.Path({root!r})


class Emit(AsyncNode):
    def __init__(self, key):
        super().__init__("emit")
        self.key = key

    async def update_async(self):
        self.state.write_port(self.key, {{"inner": "ran"}})
        return Status.SUCCESS


def build_tree(ctx):
    with open(ROOT / "builds.txt", "a") as log:
        log.write("x")
    call = [{{"name": {tool!r}, "arguments": {args!r}}}]
    inner = SkillNode("Inner", [{skill!r}], ScriptedLLM([call, "inner done"]),
                      catalog=SkillCatalog([ROOT / "skills"]))
    return py_trees.composites.Sequence("s", memory=True,
                                        children=[inner, Emit(ctx.skill_result_key)])
'''


async def _run_outer(tmp_path: Path, skill: str) -> str:
    from jianmu import ReactiveRunner
    from jianmu.config import parse_config
    from jianmu.llm import ScriptedLLM
    from jianmu.skills.node import SkillNode

    call = [{"name": "run_bt_skill", "arguments": {"skill": skill, "inputs": {}}}]
    llm = ScriptedLLM([call, "outer done"])
    node = SkillNode("Outer", [skill], llm, catalog=SkillCatalog([tmp_path / "skills"]))
    config = parse_config(f"runtime:\n  debug_dir: {tmp_path / 'debug'}\n")
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    assert (await ReactiveRunner(node, state, config=config).run()).ok
    return [m.content or "" for m in llm.requests[-1].messages if m.role == "tool"][-1]


async def test_a_bt_skills_tree_may_hold_a_skill_node(tmp_path: Path) -> None:
    """A BT skill calling another skill through a SkillNode in its tree: run by run_bt_skill
    (no runner), the SkillNode's compiled subtree was never bound, and the call failed with
    'PrepareSkillContext ... has no state yet'."""
    _pdf(tmp_path / "skills")
    _bt_skill(tmp_path / "skills", "wrapper", NESTING_TREE.format(
        root=str(tmp_path), tool="load_skill", args={"name": "pdf"}, skill="pdf"))
    answer = await _run_outer(tmp_path, "wrapper")
    assert answer == '{"inner": "ran"}'


async def test_skills_calling_each_other_stop_at_the_depth_limit(tmp_path: Path) -> None:
    """A BT skill whose tree runs itself went on until Python's recursion limit (about 980
    nested runs, each with its model calls); the run_bt_skill MAX_SKILL_DEPTH deep is refused
    with a reason the model reads, and the runs above it end."""
    from jianmu.skills.bt import MAX_SKILL_DEPTH

    _bt_skill(tmp_path / "skills", "loop", NESTING_TREE.format(
        root=str(tmp_path), tool="run_bt_skill", args={"skill": "loop", "inputs": {}},
        skill="loop"))
    answer = await _run_outer(tmp_path, "loop")
    assert answer == '{"inner": "ran"}'
    assert (tmp_path / "builds.txt").read_text() == "x" * MAX_SKILL_DEPTH


async def test_two_calls_at_once_of_a_bt_skill_holding_a_skill_node_keep_apart(
        tmp_path: Path) -> None:
    """Without a runner, each SkillNode in a run_bt_skill tree was 'skill_runtime.Inner_0':
    two calls running at once shared one namespace, so one conversation. (Two calls with the
    same inputs share the approvals of their tree, as GuardedToolNode's do.)"""
    from jianmu import ReactiveRunner
    from jianmu.config import parse_config
    from jianmu.llm import ScriptedLLM
    from jianmu.nodes.tool_executor import ToolExecutorConfig
    from jianmu.skills.node import SkillNode, SkillNodeConfig

    _pdf(tmp_path / "skills")
    _bt_skill(tmp_path / "skills", "wrapper", NESTING_TREE.format(
        root=str(tmp_path), tool="load_skill", args={"name": "pdf"}, skill="pdf"),
        "inputs: {tag: {type: string, default: x}}\n")
    calls = [{"name": "run_bt_skill", "id": tag,
              "arguments": {"skill": "wrapper", "inputs": {"tag": tag}}} for tag in "ab"]
    llm = ScriptedLLM([calls, "outer done"])
    node = SkillNode("Outer", ["wrapper"], llm, catalog=SkillCatalog([tmp_path / "skills"]),
                     config=SkillNodeConfig(
                         executor=ToolExecutorConfig(execution_mode="parallel")))
    config = parse_config(f"runtime:\n  debug_dir: {tmp_path / 'debug'}\n")
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    runner = ReactiveRunner(node, state, config=config)
    seen: list[str] = []
    runner.ctx.events.subscribe("skill.compiled", lambda e: seen.append(e.fields["namespace"]))
    assert (await runner.run()).ok
    inner = [n for n in seen if "Inner" in n]
    assert len(inner) == 2 and len(set(inner)) == 2, seen
    answers = [m.content for m in llm.requests[-1].messages if m.role == "tool"]
    assert answers == ['{"inner": "ran"}', '{"inner": "ran"}']


async def test_an_approval_inside_a_skill_node_of_a_bt_skill_carries_to_the_call_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """run_bt_skill says: once approved, call again with the same skill and inputs. For a
    SkillNode's tool in the tree the request was tied to the first call (its path held the
    call id): the call again asked anew (or, its namespace shared, was denied as 'asked about
    a call of another node'), and the approved command never ran."""
    from jianmu import ReactiveRunner
    from jianmu.config import parse_config
    from jianmu.llm import ScriptedLLM
    from jianmu.skills.node import SkillNode

    folder = tmp_path / "skills" / "writer"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: writer\ndescription: w\ntools: [bash]\n---\n"
                                     "Write.\n", encoding="utf-8")
    _bt_skill(tmp_path / "skills", "wrapper", NESTING_TREE.format(
        root=str(tmp_path), tool="bash", args={"command": "echo hi > out.txt"},
        skill="writer"))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    monkeypatch.chdir(workspace)
    call = {"name": "run_bt_skill", "arguments": {"skill": "wrapper", "inputs": {}}}
    llm = ScriptedLLM([[call], [call], "outer done"])
    node = SkillNode("Outer", ["wrapper"], llm, catalog=SkillCatalog([tmp_path / "skills"]))
    config = parse_config(f"runtime:\n  debug_dir: {tmp_path / 'debug'}\n")
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    runner = ReactiveRunner(node, state, config=config)
    first = await runner.run()
    assert first.status.value == "suspended" and len(first.pending) == 1
    runner.approve(first.pending[0].id)
    second = await runner.run()
    assert second.ok and not second.pending
    assert (workspace / "out.txt").read_text() == "hi\n"
