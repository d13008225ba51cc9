"""Progressive disclosure in SkillNode: the skill list, `load_skill`, activation on load."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from jianmu import Constraints, ReactiveRunner, RunStatus, SQLiteCheckpointer, StateManager
from jianmu.config import AppConfig, parse_config
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState
from jianmu.skills import SkillCatalog, load_skill
from jianmu.skills.bt import describe_inputs
from jianmu.skills.disclosure import LoadSkillTool
from jianmu.skills.node import SkillNode, SkillNodeConfig
from jianmu.tools import tool

pytestmark = pytest.mark.anyio

ENGINE_TOOLS = ["load_skill", "read_skill_file", "run_skill_script"]


@tool
def ping(host: str) -> str:
    """Ping a host.

    Args:
        host: the host name.
    """
    return f"pong from {host}"


@tool(category="write", effect_tags=["file_write"])
def save(text: str) -> str:
    """Save text.

    Args:
        text: what to save.
    """
    return f"saved {text}"


def make_skill(
    root: Path, name: str, front: str = "", body: str = "Do the task.",
    files: dict[str, str] | None = None,
) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: The {name} skill.\n{textwrap.dedent(front)}---\n"
        f"{body}\n"
    )
    for relative, text in (files or {}).items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text)
    return folder


def two_skills(root: Path) -> None:
    make_skill(
        root, "pinger", "tools: [ping]\n", body="PINGER-BODY: ping every host, see examples/x.md.",
        files={"examples/x.md": "an example\n", "reference/api.md": "api\n"},
    )
    make_skill(root, "saver", "tools: [save]\n", body="SAVER-BODY: save what you are told.")


def node(root: Path, llm: ScriptedLLM, *names: str, **config: Any) -> SkillNode:
    return SkillNode(
        "Skills", list(names), llm, catalog=SkillCatalog([root], custom_tools=[ping, save]),
        tools=[ping, save], config=SkillNodeConfig(**config),
    )


def state_with(question: str = "go") -> StateManager:
    return StateManager(AgentState, {"messages": [{"role": "user", "content": question}]})


def cfg(root: Path, text: str = "") -> AppConfig:
    return parse_config(f"runtime:\n  debug_dir: {root / 'debug'}\n{text}")


def last_tool_text(messages: list[Any]) -> str:
    return [m.content for m in messages if m.role == "tool"][-1] or ""


async def test_the_model_sees_the_list_loads_a_skill_and_gets_its_tools(tmp_path: Path) -> None:
    two_skills(tmp_path)
    llm = ScriptedLLM([
        [{"name": "load_skill", "arguments": {"name": "pinger"}}],
        [{"name": "ping", "arguments": {"host": "a"}}],
        last_tool_text,
    ])
    state = state_with("ping a")
    runner = ReactiveRunner(node(tmp_path, llm, "pinger", "saver"), state, config=cfg(tmp_path))
    loaded: list[str] = []
    runner.ctx.events.subscribe("skill.loaded", lambda e: loaded.append(e.fields["skill"]))
    result = await runner.run(timeout=30)
    assert result.status is RunStatus.SUCCESS, result.error
    first = llm.requests[0]
    system = first.messages[0].content or ""
    assert "- pinger: The pinger skill." in system and "- saver: The saver skill." in system
    assert "BODY" not in system  # names and descriptions only
    assert first.tool_names == ENGINE_TOOLS
    observation = last_tool_text(llm.requests[1].messages)
    assert "PINGER-BODY" in observation and "SAVER-BODY" not in observation
    assert "- examples/x.md (11 bytes)" in observation
    assert "- reference/api.md (4 bytes)" in observation and "SKILL.md" not in observation
    assert llm.requests[1].tool_names == [*ENGINE_TOOLS, "ping"]  # from the next turn
    assert state.get("final_answer") == "pong from a"
    assert loaded == ["pinger"]


async def test_unknown_names_are_told_and_loading_twice_is_harmless(tmp_path: Path) -> None:
    two_skills(tmp_path)
    llm = ScriptedLLM([
        [{"name": "load_skill", "arguments": {"name": "nope"}}],
        [{"name": "load_skill", "arguments": {"name": "saver"}}],
        [{"name": "load_skill", "arguments": {"name": "saver"}}],
        "done",
    ])
    skill_node = node(tmp_path, llm, "pinger", "saver")
    state = state_with()
    runner = ReactiveRunner(skill_node, state, config=cfg(tmp_path))
    loaded: list[str] = []
    runner.ctx.events.subscribe("skill.loaded", lambda e: loaded.append(e.fields["skill"]))
    assert (await runner.run(timeout=30)).ok
    unknown = last_tool_text(llm.requests[1].messages)
    assert unknown == "Error: no skill 'nope' here; load one of: pinger, saver"
    once, twice = (last_tool_text(r.messages) for r in llm.requests[2:4])
    assert once == twice and "SAVER-BODY" in once
    assert llm.requests[3].tool_names == [*ENGINE_TOOLS, "save"]
    assert loaded == ["saver"]


async def test_a_loaded_skill_tightens_the_guard_from_then_on(tmp_path: Path) -> None:
    two_skills(tmp_path)
    make_skill(tmp_path, "careful", "constraints:\n  guard:\n    tool_policy:\n"
               "      save: deny\n    max_tool_calls: 4\n")
    llm = ScriptedLLM([
        [{"name": "load_skill", "arguments": {"name": "saver"}}],
        [{"name": "save", "arguments": {"text": "one"}}],
        [{"name": "load_skill", "arguments": {"name": "careful"}}],
        [{"name": "save", "arguments": {"text": "two"}}],
        "done",
    ])
    skill_node = node(tmp_path, llm, "saver", "careful")
    state = state_with()
    config = cfg(tmp_path, "guard:\n  tool_policy:\n    save: allow\n")
    assert (await ReactiveRunner(skill_node, state, config=config).run(timeout=30)).ok
    assert last_tool_text(llm.requests[2].messages) == "saved one"
    assert "save" not in llm.requests[3].tool_names  # deny: hidden once careful is loaded
    denied = last_tool_text(llm.requests[4].messages)
    assert denied == "Error: the guard denied this call: tool_policy rule 'save' denies this call"
    assert skill_node.constraints is not None
    assert skill_node.constraints.guard.max_tool_calls == 4
    assert skill_node.react is not None and skill_node.react.llm_node is not None
    assert skill_node.react.llm_node.constraints is skill_node.constraints


async def test_a_skill_whose_constraints_would_loosen_is_not_loaded(tmp_path: Path) -> None:
    two_skills(tmp_path)
    make_skill(tmp_path, "mover", "tools: [ping]\nconstraints:\n  execution:\n    workdir: /\n")
    llm = ScriptedLLM([[{"name": "load_skill", "arguments": {"name": "mover"}}], "gave up"])
    config = parse_config(f"execution:\n  workdir: {tmp_path}\nruntime:\n"
                          f"  debug_dir: {tmp_path}/d\n")
    state = state_with()
    result = await ReactiveRunner(node(tmp_path, llm, "pinger", "mover"), state,
                                  config=config).run(timeout=30)
    assert result.ok
    told = last_tool_text(llm.requests[1].messages)
    assert "skill 'mover' cannot be loaded" in told and "outside the workspace" in told
    assert llm.requests[1].tool_names == ENGINE_TOOLS


async def test_eager_puts_every_body_in_the_prompt(tmp_path: Path) -> None:
    two_skills(tmp_path)
    llm = ScriptedLLM(["ok"])
    skill_node = node(tmp_path, llm, "pinger", "saver", disclosure="eager")
    assert (await ReactiveRunner(skill_node, state_with(), config=cfg(tmp_path)).run()).ok
    system = llm.requests[0].messages[0].content or ""
    assert "PINGER-BODY" in system and "SAVER-BODY" in system
    assert llm.requests[0].tool_names == ["ping", "save", "read_skill_file", "run_skill_script"]
    assert sorted(skill_node.loaded) == ["pinger", "saver"]  # the skill-file tools reach both


async def test_auto_goes_progressive_for_one_long_body(tmp_path: Path) -> None:
    make_skill(tmp_path, "long", "tools: [ping]\n", body="LONG " * 100)
    for limit, progressive in ((498, True), (499, False)):  # the body is 499 characters
        llm = ScriptedLLM(["ok"])
        skill_node = node(tmp_path, llm, "long", eager_max_chars=limit)
        assert (await ReactiveRunner(skill_node, state_with(), config=cfg(tmp_path)).run()).ok
        assert skill_node.progressive is progressive
        assert ("LONG LONG" in (llm.requests[0].messages[0].content or "")) is not progressive


async def test_bt_skills_are_listed_with_their_inputs(tmp_path: Path) -> None:
    two_skills(tmp_path)
    make_skill(tmp_path, "counter", "execution: bt\ninputs:\n  path: string\n",
               files={"tree.py": "import py_trees\n\ndef build_tree(ctx):\n"
                                 "    return py_trees.behaviours.Success('ok')\n"})
    llm = ScriptedLLM(["ok"])
    assert (await ReactiveRunner(node(tmp_path, llm, "pinger", "counter"), state_with(),
                                 config=cfg(tmp_path)).run()).ok
    system = llm.requests[0].messages[0].content or ""
    assert "- counter: The counter skill. (behaviour tree: run it with run_bt_skill; " \
           "inputs: {path: string})" in system
    assert llm.requests[0].tool_names == [*ENGINE_TOOLS, "run_bt_skill"]


def test_the_inputs_shown_to_the_model_say_which_may_be_left_out(tmp_path: Path) -> None:
    # every field read "name: type", so a model could not tell a required one from a default
    folder = make_skill(tmp_path, "survey", (
        "execution: bt\ninputs:\n  path: string\n  depth: {type: integer, default: 2}\n"
        "  since: {type: string, default: null}\n"
    ), files={"tree.py": "def build_tree(ctx): ...\n"})
    assert describe_inputs(load_skill(folder)) == (
        "{path: string, depth: integer = 2, since: string = null}")


async def test_a_new_run_of_the_node_starts_with_nothing_loaded(tmp_path: Path) -> None:
    two_skills(tmp_path)
    llm = ScriptedLLM([
        [{"name": "load_skill", "arguments": {"name": "pinger"}}], "first",
        "second",
    ])
    skill_node = node(tmp_path, llm, "pinger", "saver")
    runner = ReactiveRunner(skill_node, state_with(), config=cfg(tmp_path))
    assert (await runner.run(timeout=30)).ok
    runner.send("And again.")  # a finished run runs again only with new input
    assert (await runner.run(timeout=30)).ok
    assert llm.requests[1].tool_names == [*ENGINE_TOOLS, "ping"]
    assert llm.requests[2].tool_names == ENGINE_TOOLS
    assert skill_node.loaded == {}


async def test_a_restored_run_has_its_loaded_skills_again(tmp_path: Path) -> None:
    two_skills(tmp_path)
    make_skill(tmp_path, "asker", "tools: [save]\nconstraints:\n  guard:\n    tool_policy:\n"
               "      save: confirm\n")
    config = cfg(tmp_path)
    store = SQLiteCheckpointer(tmp_path / "runs.sqlite")
    first_llm = ScriptedLLM([
        [{"name": "load_skill", "arguments": {"name": "asker"}}],
        [{"id": "s1", "name": "save", "arguments": {"text": "x"}}],
    ])
    state = state_with()
    first = await ReactiveRunner(node(tmp_path, first_llm, "pinger", "asker"), state,
                                 config=config, checkpointer=store).run(timeout=30)
    # the skill's confirm is in force: loading it tightened the guard
    (namespace,) = state.namespaces()
    assert first.status is RunStatus.SUSPENDED
    assert [r.id for r in first.pending] == [f"{namespace}/s1"]  # the skill's namespace's call
    assert state.get("loaded_skills") == []  # the root's is untouched
    assert state.scope(namespace).get("loaded_skills") == ["asker"]

    # a new tree, model and state, as a new process would build them
    llm = ScriptedLLM([last_tool_text])
    skill_node = node(tmp_path, llm, "pinger", "asker")
    restored = StateManager(AgentState)
    runner = ReactiveRunner.restore(skill_node, store, first.run_id, state_manager=restored,
                                    config=config)
    runner.approve("s1")
    done = await runner.run(timeout=30)
    assert done.status is RunStatus.SUCCESS, done.error
    assert restored.get("final_answer") == "saved x"  # the restored executor knew save
    assert list(skill_node.loaded) == ["asker"]
    assert llm.requests[0].tool_names == [*ENGINE_TOOLS, "save"]


async def test_load_skill_lists_every_file_but_links_and_caches(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("outside")
    folder = make_skill(tmp_path / "s", "lister", body="Read forms.md.", files={
        "forms.md": "abc", "themes/dark/colors.css": "x" * 10, "__pycache__/m.pyc": "c",
    })
    (folder / "link.txt").symlink_to(tmp_path / "secret.txt")
    (folder / "linked").symlink_to(tmp_path, target_is_directory=True)
    loaded: list[str] = []
    skill = SkillCatalog([tmp_path / "s"]).get("lister")
    load_skill = LoadSkillTool({"lister": skill}, lambda s: loaded.append(s.name))
    text = await load_skill.run("lister")
    assert text.endswith("\n- forms.md (3 bytes)\n- themes/dark/colors.css (10 bytes)")
    assert text.startswith("# Skill: lister\n\nBase directory for this skill: /skills/lister")
    assert "\n\nRead forms.md." in text and loaded == ["lister"]


async def test_a_loaded_skills_shorter_timeout_counts_from_the_nodes_start(tmp_path: Path) -> None:
    two_skills(tmp_path)
    make_skill(tmp_path, "quick", "constraints:\n  timeout: 500\n")
    deadlines: list[float] = []

    def noting(reply: Any) -> Any:
        def respond(messages: list[Any]) -> Any:
            timer = skill_node._timer
            assert timer is not None and skill_node._started_at is not None
            deadlines.append(timer.when() - skill_node._started_at)
            return reply
        return respond

    llm = ScriptedLLM([
        noting([{"name": "load_skill", "arguments": {"name": "quick"}}]), noting("done"),
    ])
    skill_node = node(tmp_path, llm, "pinger", "quick", constraints=Constraints(timeout=900))
    assert (await ReactiveRunner(skill_node, state_with(), config=cfg(tmp_path)).run()).ok
    assert deadlines == pytest.approx([900, 500])  # loop time plus 900, less loop time


async def test_a_long_skill_list_keeps_to_its_budget_and_names_every_skill(
        tmp_path: Path) -> None:
    """Hundreds of skills: the prompt holds the descriptions up to `listing_max_chars`, the
    rest by name only, in order; `load_skill` loads one of those, and its own description and
    an unknown name's error stay short."""
    long = "Handles one kind of document in great detail. " * 19  # ~900 characters
    names = [f"skill-{i:03d}" for i in range(300)]
    for name in names:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: {long.strip()} ({name})\n---\nBODY OF {name}\n")
    llm = ScriptedLLM([
        [{"name": "load_skill", "arguments": {"name": "skill-29"}}],
        [{"name": "load_skill", "arguments": {"name": "skill-290"}}],
        last_tool_text,
    ])
    runner = ReactiveRunner(node(tmp_path, llm, *names, listing_max_chars=8000), state_with(),
                            config=cfg(tmp_path))
    result = await runner.run(timeout=60)
    assert result.status is RunStatus.SUCCESS, result.error
    system = llm.requests[0].messages[0].content or ""
    listed = [n for n in names if f"- {n}: " in system]
    assert listed == names[:len(listed)] and 5 <= len(listed) < 10  # ~900 chars each
    tail = system.split(f"{300 - len(listed)} more skills, by name only", 1)[1]
    assert tail.count("skill-") == 300 - len(listed)
    assert all(n in tail for n in names[len(listed):])
    assert len(system) < 8000 + 300 * 12 + 1500  # descriptions kept to the budget
    tools = {t["function"]["name"]: t["function"] for t in llm.requests[0].tools}
    assert len(tools["load_skill"]["description"]) < 1200
    assert "and 260 more" in tools["load_skill"]["description"]
    unknown = last_tool_text(llm.requests[1].messages)
    assert unknown.startswith("Error: no skill 'skill-29' here; load one of: skill-29")
    assert unknown.endswith(", and 260 more (the list in your instructions names them all)")
    assert len(unknown) < 1200
    assert "BODY OF skill-290" in (runner.state.get("final_answer") or "")


def test_a_zero_budget_lists_names_only() -> None:
    from types import SimpleNamespace

    from jianmu.skills.disclosure import listing_prompt

    skills: Any = [SimpleNamespace(name=f"s{i}", description=f"does {i}", is_bt=False)
                   for i in range(3)]
    text = listing_prompt(skills, 0)
    assert "- s0:" not in text and text.endswith("3 more skills, by name only (their "
                                                  "descriptions would make this list too long; "
                                                  "load_skill tells what one is for): s0, s1, s2")
    assert "- s2: does 2" in listing_prompt(skills)
