"""YAML bombs in SKILL.md front matter and jianmu.yaml: refused before expansion, memory flat.

A hostile skill folder (or config) carries "billion laughs" aliases, a 10,000-deep nesting or
a megabyte-long front matter. Each must fail with a clear error naming the file and line,
with a bounded peak of memory (measured with tracemalloc, never with a clock).
"""

from __future__ import annotations

import textwrap
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from jianmu import ReactiveRunner, RunStatus, StateManager
from jianmu.config import load_config, parse_config
from jianmu.errors import ConfigError, SkillLoadError
from jianmu.llm import ScriptedLLM
from jianmu.nodes import AgentState
from jianmu.skills import SkillCatalog, load_skill
from jianmu.skills.node import SkillNode
from tests.cli._helpers import Project, make_config

MAX_PEAK = 4 * 1024 * 1024  # bytes; the bomb below expands to ~10**9 strings without a guard

LAUGHS = textwrap.dedent("""\
    metadata:
      a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
      b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
      c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
      d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
      e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
      f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
      g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
      h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
      i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
    """)
DEEP = "metadata: " + "[" * 10_000 + "]" * 10_000 + "\n"
DEEP_BLOCK = "metadata:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 200))
HUGE = "metadata:\n" + "".join(f"  key{i}: {'x' * 80}\n" for i in range(1500)) + (
    "  long: " + "y" * 5_000_000 + "\n"
)
ALIAS_ONLY = "metadata:\n  a: &x {k: v}\n  b: *x\n"


@contextmanager
def bounded_memory() -> Iterator[None]:
    """Fail if the block's peak of traced memory exceeds `MAX_PEAK`."""
    tracemalloc.start()
    try:
        yield
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MAX_PEAK, f"peak {peak} bytes"


def write_skill(root: Path, name: str, front: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: A hostile skill.\n{front}---\nBody.\n",
        encoding="utf-8",
    )
    return folder


BOMBS = {
    "laughs": (LAUGHS, r"SKILL\.md:5: YAML anchors \(&a\) are not allowed"),
    "alias": (ALIAS_ONLY, r"SKILL\.md:5: YAML anchors \(&x\) are not allowed"),
    "deep-flow": (DEEP, r"SKILL\.md:4: the YAML is nested more than 64 levels deep"),
    "deep-block": (DEEP_BLOCK, r"SKILL\.md:\d+: the YAML is nested more than 64 levels deep"),
    "huge": (HUGE, r"the front matter is longer than 262144 characters"),
}


@pytest.mark.parametrize("kind", list(BOMBS))
def test_load_skill_refuses_the_bomb_with_memory_flat(tmp_path: Path, kind: str) -> None:
    front, message = BOMBS[kind]
    folder = write_skill(tmp_path, "bomb", front)
    with bounded_memory(), pytest.raises(SkillLoadError, match=message) as caught:
        load_skill(folder)
    assert caught.value.path == str(folder / "SKILL.md")


def test_an_alias_alone_is_refused_at_its_line(tmp_path: Path) -> None:
    # an anchor-free alias is a YAML error anyway; an anchor is refused where it stands
    folder = write_skill(tmp_path, "alias", "metadata:\n  a: x\n  b: *nowhere\n")
    with pytest.raises(SkillLoadError, match=r"SKILL\.md:6: YAML aliases \(\*nowhere\)"):
        load_skill(folder)


def test_catalog_keeps_the_bomb_apart_and_loads_the_others(tmp_path: Path) -> None:
    write_skill(tmp_path, "bomb", LAUGHS)
    write_skill(tmp_path, "fine", "metadata:\n  owner: me\n")
    with bounded_memory():
        catalog = SkillCatalog([tmp_path])
    assert catalog.names() == ["fine"]
    assert len(catalog.errors) == 1 and "anchors" in str(catalog.errors[0])


@pytest.mark.anyio
async def test_skill_node_fails_on_the_bomb_without_expanding_it(tmp_path: Path) -> None:
    write_skill(tmp_path, "bomb", LAUGHS)
    node = SkillNode("Bomb", ["bomb"], ScriptedLLM(["never asked"]),
                     catalog=SkillCatalog([tmp_path]))
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    with bounded_memory():
        result = await ReactiveRunner(node, state).run(max_ticks=5)
    assert result.status == RunStatus.FAILURE
    assert result.error is not None
    assert "bomb/SKILL.md:5: YAML anchors (&a) are not allowed" in result.error


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """A project folder with a config, for ``jianmu`` commands."""
    root = tmp_path / "proj"
    (root / "ws").mkdir(parents=True)
    return Project(root=root, config=make_config(root), workspace=root / "ws")


def test_cli_validate_exits_non_zero_naming_file_and_line(project: Project) -> None:
    project.write("skills/bomb/SKILL.md",
                  f"---\nname: bomb\ndescription: d\n{LAUGHS}---\nBody\n")
    project.write("skills/deep/SKILL.md", f"---\nname: deep\ndescription: d\n{DEEP}---\nBody\n")
    done = project.jianmu("skills", "validate")
    assert done.code == 1, done.text
    assert "skills/bomb/SKILL.md:5: skill: YAML anchors (&a) are not allowed" in done.out, done.out
    assert "skills/deep/SKILL.md:4: skill: the YAML is nested more than 64 levels deep" in done.out
    assert "2 of 2 skill(s) have errors" in done.out


CONFIG_BOMBS: dict[str, tuple[str, str]] = {
    "laughs": ("guard:\n  tool_policy: {}\nx-" + LAUGHS, r"cfg\.yaml:4: YAML anchors \(&a\)"),
    "deep": (DEEP.replace("metadata", "guard"), r"cfg\.yaml:1: the YAML is nested"),
    "huge": ("guard: {}\n# " + "z" * 2_000_000 + "\n", r"cfg\.yaml:\?: the YAML is 2000013"),
}


@pytest.mark.parametrize("kind", list(CONFIG_BOMBS))
def test_config_refuses_the_bomb_with_memory_flat(tmp_path: Path, kind: str) -> None:
    text, message = CONFIG_BOMBS[kind]
    path = tmp_path / "cfg.yaml"
    path.write_text(text, encoding="utf-8")
    with bounded_memory(), pytest.raises(ConfigError, match=message):
        load_config(path)


def test_config_merge_keys_need_aliases_and_are_refused() -> None:
    text = "defaults: &d {timeout: 5}\nllm:\n  <<: *d\n"
    with pytest.raises(ConfigError, match=r"<config>:1: YAML anchors \(&d\) are not allowed"):
        parse_config(text)


def test_plain_configs_and_skills_still_load(tmp_path: Path) -> None:
    loaders: list[Callable[[], Any]] = [
        lambda: parse_config("guard:\n  tool_policy: {bash: confirm}\nllm: {model: m}\n"),
        lambda: load_skill(write_skill(tmp_path, "ok", "metadata: {a: [1, {b: 2}]}\n")),
    ]
    for load in loaders:
        assert load() is not None
