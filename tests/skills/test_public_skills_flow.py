"""Public-format skills run as their authors meant, end to end (issue 14).

Five skills written in the style of the open Agent Skills format (tests/fixtures/public_skills)
go to one SkillNode. The model sees their names and descriptions only, loads `pdf-forms`, reads
the `forms.md` its body points to, runs `scripts/helper.py` (a person approves: the script is
code) and answers. Once with `ScriptedLLM`, once over real HTTP with the OpenAI-compatible
provider against a server on 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jianmu import ReactiveRunner, RunStatus, StateManager
from jianmu.config import AppConfig, parse_config
from jianmu.llm import OpenAIProvider, ScriptedLLM
from jianmu.llm.provider import LLMProvider
from jianmu.nodes import AgentState
from jianmu.skills import SkillCatalog, SkillNode
from tests.execution._helpers import local_problem
from tests.support.fake_openai import FakeOpenAIServer

pytestmark = pytest.mark.anyio

PUBLIC_SKILLS = Path(__file__).resolve().parents[1] / "fixtures" / "public_skills"
NAMES = sorted(p.name for p in PUBLIC_SKILLS.iterdir() if (p / "SKILL.md").is_file())

SCRIPT = [
    [{"name": "load_skill", "arguments": {"name": "pdf-forms"}, "id": "t1"}],
    [{"name": "read_skill_file", "arguments": {"skill": "pdf-forms", "path": "forms.md"},
      "id": "t2"}],
    [{"name": "run_skill_script",
      "arguments": {"skill": "pdf-forms", "path": "scripts/helper.py",
                    "args": ["fields", "form.pdf"]},
      "id": "t3"}],
    "The form has three fields: applicant_name, start_date and agree_terms.",
]


def config(root: Path) -> AppConfig:
    workspace = root / "workspace"
    workspace.mkdir()
    return parse_config(
        f"runtime:\n  debug_dir: {root / 'debug'}\n"
        f"execution:\n  mode: local\n  workdir: {workspace}\n  timeout_s: 60\n"
    )


def bodies() -> list[str]:
    """A line of each skill's body that only the body holds."""
    catalog = SkillCatalog([PUBLIC_SKILLS])
    return [catalog.get(n).body.splitlines()[0] for n in NAMES]


async def run_flow(llm: LLMProvider, root: Path) -> StateManager:
    node = SkillNode("Forms", NAMES, llm, catalog=SkillCatalog([PUBLIC_SKILLS]))
    state = StateManager(AgentState, {"messages": [
        {"role": "user", "content": "Which fields does form.pdf have?"}]})
    runner = ReactiveRunner(node, state, config=config(root))
    result = await runner.run(timeout=60)
    assert result.status is RunStatus.SUSPENDED, result.error  # the script asks first
    [request] = result.pending
    assert request.payload["tool"] == "run_skill_script"
    runner.approve(request.id)
    result = await runner.run(timeout=60)
    assert result.status is RunStatus.SUCCESS, result.error
    return state


def observations(messages: list[Any], name_of: Callable[[Any], str]) -> dict[str, str]:
    return {name_of(m): m["content"] if isinstance(m, dict) else m.content
            for m in messages if (m["role"] if isinstance(m, dict) else m.role) == "tool"}


@pytest.fixture
def sandbox_ready() -> None:
    problem = local_problem("local-bwrap")
    if problem is not None:
        pytest.skip(problem)  # scripts run under bubblewrap, the folder mounted read-only


async def test_with_the_scripted_model(tmp_path: Path, sandbox_ready: None) -> None:
    llm = ScriptedLLM(SCRIPT)
    state = await run_flow(llm, tmp_path)
    first = llm.requests[0]
    system = first.messages[0].content or ""
    for name in NAMES:
        assert f"- {name}: " in system
    assert not any(line in system for line in bodies())  # names and descriptions only
    assert first.tool_names == ["load_skill", "read_skill_file", "run_skill_script"]
    seen = observations(llm.requests[-1].messages, lambda m: m.tool_call_id)
    assert "Work on a form in three passes" in seen["t1"]
    assert "- forms.md (" in seen["t1"] and "- scripts/helper.py (" in seen["t1"]
    assert "Flat forms" in seen["t2"]
    assert "applicant_name\ttext" in seen["t3"] and "agree_terms\tcheckbox\t/Off" in seen["t3"]
    assert state.get("final_answer") == SCRIPT[-1]


async def test_over_http_with_the_openai_compatible_provider(
    tmp_path: Path, sandbox_ready: None
) -> None:
    with FakeOpenAIServer(SCRIPT) as server:
        llm = OpenAIProvider("fake-model", base_url=server.base_url, retry_backoff=0)
        try:
            state = await run_flow(llm, tmp_path)
        finally:
            await llm.close()
        first = server.requests[0]
        assert server.tool_names(0) == ["load_skill", "read_skill_file", "run_skill_script"]
        system = first["messages"][0]["content"]
        assert "- pdf-forms: " in system and not any(line in system for line in bodies())
        # the skill's own tools (read_file, grep_search, bash) arrive once it is loaded
        assert {"read_file", "grep_search", "bash"} <= set(server.tool_names(1))
        seen = observations(server.requests[-1]["messages"], lambda m: m["tool_call_id"])
    assert "Flat forms" in seen["t2"] and "start_date\tdate" in seen["t3"]
    assert state.get("final_answer") == SCRIPT[-1]
