"""benchmarks/bench_skills.py: its generated skills and prompt texts (no timing asserted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import bench_skills
from jianmu import ReactiveRunner, StateManager
from jianmu.config import parse_config
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState
from jianmu.runtime import RunStatus
from jianmu.skills import SkillCatalog, SkillNode


def test_generated_skills_load_lazily_with_bodies_of_the_asked_size(tmp_path: Path) -> None:
    sizes = [2048, 7000, 12288]
    bench_skills.write_skills(tmp_path, 3, sizes=sizes)
    catalog = SkillCatalog([tmp_path])
    assert len(catalog) == 3 and not catalog.errors
    assert all(s._body is None for s in catalog)  # front matter only
    for skill, size in zip(catalog, sizes, strict=True):
        assert abs(len(skill.body.encode("utf-8")) - size) < 64
        assert "references/guide.md" in skill.body
        assert [a.rule for a in skill.allowed_tools] == [
            "read_file", "grep_search", "glob_search", "bash(python *)"]


@pytest.mark.anyio
async def test_the_eager_text_is_what_a_skill_node_sends(tmp_path: Path) -> None:
    # one skill: eager before and after progressive disclosure, so this pins the mirror
    bench_skills.write_skills(tmp_path / "skills", 1, sizes=[3000])
    skill = SkillCatalog([tmp_path / "skills"]).skills()[0]
    llm = ScriptedLLM(["done"])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    config = parse_config(f"runtime:\n  debug_dir: {tmp_path / 'debug'}\n")
    result = await ReactiveRunner(SkillNode("S", [skill], llm), state, config=config).run(
        timeout=30)
    assert result.status is RunStatus.SUCCESS
    assert llm.requests[0].messages[0].content == bench_skills.eager_prompt([skill])


def test_progressive_listing_is_within_target_for_16_skills(tmp_path: Path) -> None:
    low, high = bench_skills.BODY_RANGE
    sizes = [low + (high - low) * i // 15 for i in range(16)]
    bench_skills.write_skills(tmp_path, 16, sizes=sizes)
    skills = SkillCatalog([tmp_path]).skills()
    progressive = bench_skills.progressive_listing(skills)
    eager = bench_skills.eager_prompt(skills)
    assert all(f"- {s.name}: {s.description}" in progressive for s in skills)
    assert not any(s.body[:200] in progressive for s in skills)
    assert len(progressive) <= bench_skills.TARGET_PROGRESSIVE_SHARE * len(eager)


def test_main_prints_both_tables(monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(bench_skills, "N_FOLDERS", 6)
    bench_skills.main()
    out = capsys.readouterr().out
    assert "catalog, front matter only" in out and "progressive: name + description" in out
    assert "skills-ref" in out
