"""Skills disclosed on demand: the model sees two skills by name, loads `code-review`, opens the
checklist its body points to (`references/checklist.md`), reads the code and answers.

Offline, with a scripted model. Run it with ``python examples/skill_review.py [FOLDER]``: it
reviews ``app.py`` in FOLDER (a temporary folder with a small sample by default).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

from jianmu import ReactiveRunner, StateManager
from jianmu.config import parse_config
from jianmu.llm import Message, ScriptedLLM
from jianmu.nodes import AgentState
from jianmu.skills import SkillCatalog, SkillNode
from jianmu.skills.disclosure import eager_prompt

SKILLS = ["code-review", "workspace-report"]
SAMPLE = '''def load(path):
    try:
        return open(path).read()
    except:
        return None
'''


def scripted() -> ScriptedLLM:
    """The turns a model might take; the answer quotes the checklist it was shown."""

    def answer(messages: list[Message]) -> str:
        checklist = next(m.content or "" for m in messages
                         if m.role == "tool" and "Review checklist" in (m.content or ""))
        rule = next(line for line in checklist.splitlines() if "bare `except:`" in line)
        return ("app.py, line 4: a bare `except:` hides every error, and the file is never "
                f"closed. The checklist says:{rule.removeprefix('-')}")

    return ScriptedLLM([
        [{"name": "load_skill", "arguments": {"name": "code-review"}}],
        [{"name": "read_skill_file",
          "arguments": {"skill": "code-review", "path": "references/checklist.md"}}],
        [{"name": "read_file", "arguments": {"path": "app.py"}}],
        answer,
    ])


def show(event: Any) -> None:
    fields = event.fields
    if event.name == "skill.loaded":
        print(f"  loaded skill {fields['skill']!r}: its tools and constraints are active now")
    elif event.name == "tool.call.started":
        print(f"  → {fields['tool']}({fields['args_preview']})")
    elif event.name == "tool.call.failed":
        print(f"  ✗ {fields['tool']}: {fields['error']}")


async def main(folder: str | None = None) -> None:
    """Review ``app.py`` in ``folder`` (a sample in a temporary folder by default)."""
    with tempfile.TemporaryDirectory() as scratch:
        workspace = Path(folder or scratch).resolve()
        if folder is None:
            (workspace / "app.py").write_text(SAMPLE, encoding="utf-8")
        catalog = SkillCatalog([Path(__file__).resolve().parents[1] / "skills"])
        llm = scripted()
        node = SkillNode("Review", SKILLS, llm, catalog=catalog)
        state = StateManager(AgentState, {"messages": [
            {"role": "user", "content": "Review app.py."}]})
        config = parse_config(f"execution:\n  workdir: {workspace}\n")
        runner = ReactiveRunner(node, state, config=config)
        runner.ctx.events.subscribe("*", show)
        result = await runner.run(timeout=60)
        system = llm.requests[0].messages[0].content or ""
        eager = eager_prompt([catalog.get(n) for n in SKILLS])
        print(f"first system prompt: {len(system)} characters, names and descriptions only "
              f"(with the bodies in, the skills' part alone would be {len(eager)})")
        print(f"answer: {state.get('final_answer')}")
        print(f"result: {result.status.value}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else None))
