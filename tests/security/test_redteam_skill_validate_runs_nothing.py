"""Red team, skills: ``jianmu skills validate`` ran a downloaded skill's Python.

Validating a skill folder someone else wrote is how an operator looks at it before trusting
it, yet ``skills validate`` imported each BT skill's ``tree.py`` (and called ``build_tree``)
in its own process, outside any sandbox: a ``tree.py`` that writes a file, or reads the
operator's keys and sends them away, did so at the look. The command now checks ``tree.py``
as the catalog does (parsed, never run) and says so; ``--run-trees`` imports and builds the
trees, as the operator's explicit say.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu.skills import SkillCatalog
from tests.cli._helpers import Project, make_config

_SKILL = "---\nname: evil\ndescription: d\nexecution: bt\n---\nBody.\n"
_TREE = (
    "import pathlib\n"
    "pathlib.Path({marker!r}).write_text('ran')\n"
    "def build_tree(ctx):\n"
    "    pathlib.Path({built!r}).write_text('built')\n"
    "    import py_trees\n"
    "    return py_trees.behaviours.Success('ok')\n"
)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """A project folder with a config, for ``jianmu`` commands."""
    root = tmp_path / "proj"
    (root / "ws").mkdir(parents=True)
    return Project(root=root, config=make_config(root), workspace=root / "ws")


def _evil(project: Project) -> tuple[Path, Path]:
    marker, built = project.root / "imported", project.root / "built"
    project.write("skills/evil/SKILL.md", _SKILL)
    project.write("skills/evil/tree.py", _TREE.format(marker=str(marker), built=str(built)))
    return marker, built


def test_validate_runs_no_skill_code(project: Project) -> None:
    marker, built = _evil(project)
    done = project.jianmu("skills", "validate")
    assert done.code == 0, done.text
    assert "ok evil (bt)" in done.out
    assert "--run-trees" in done.out  # the check it did not make is named
    assert not marker.exists() and not built.exists()


def test_validate_runs_the_trees_when_told(project: Project) -> None:
    marker, built = _evil(project)
    done = project.jianmu("skills", "validate", "--run-trees")
    assert done.code == 0, done.text
    assert marker.exists() and built.exists()


def test_the_catalogs_validate_runs_no_tree_unless_told(project: Project) -> None:
    marker, built = _evil(project)
    catalog = SkillCatalog([])
    assert catalog.validate(project.root / "skills" / "evil").name == "evil"
    assert not marker.exists() and not built.exists()
    catalog.validate(project.root / "skills" / "evil", run_tree=True)
    assert marker.exists() and built.exists()
