"""SkillCatalog: scanning, broken skills kept apart, lazy bodies and resources."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from jianmu.config import AppConfig, SkillsConfig
from jianmu.errors import SkillLoadError, SkillNotFoundError
from jianmu.skills import SkillCatalog, find_skill_folders
from jianmu.tools.builtin._paths import PinnedFolder

BROKEN = Path(__file__).parent / "fixtures" / "broken"


def _skill(root: Path, name: str, extra: str = "", body: str = "Do the thing.\n") -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: skill {name}\n{extra}---\n{body}", encoding="utf-8"
    )
    return folder


def test_broken_skills_do_not_stop_the_others(tmp_path: Path) -> None:
    _skill(tmp_path, "good-one")
    catalog = SkillCatalog([tmp_path, BROKEN])
    assert catalog.names() == ["good-one"]
    assert len(catalog.errors) == len(list(BROKEN.iterdir()))
    assert all(isinstance(e, SkillLoadError) and e.path for e in catalog.errors)


def test_get_lists_known_skills_and_load_errors(tmp_path: Path) -> None:
    _skill(tmp_path, "review")
    catalog = SkillCatalog([tmp_path, BROKEN])
    assert catalog.get("review").name == "review"
    assert "review" in catalog and len(catalog) == 1
    with pytest.raises(
        SkillNotFoundError, match=r"did you mean 'review'\? \(known skills: review\)"
    ):
        catalog.get("reviw")
    with pytest.raises(KeyError, match=r"failed to load: .*bad-yaml"):
        catalog.get("bad-yaml")


def test_default_paths_come_from_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _skill(tmp_path / "skills", "shipped")
    _skill(tmp_path / "mine", "custom")
    config = AppConfig(skills=SkillsConfig(paths=["mine", "missing"]))
    catalog = SkillCatalog(config=config)
    assert catalog.names() == ["shipped", "custom"]
    assert len(catalog.errors) == 1 and "missing" in str(catalog.errors[0])


def test_a_name_two_folders_hold_names_no_skill(tmp_path: Path) -> None:
    _skill(tmp_path / "a", "same")
    _skill(tmp_path / "b", "same")
    catalog = SkillCatalog([tmp_path / "a", tmp_path / "b"])
    with pytest.raises(SkillNotFoundError, match="more than one folder"):
        catalog.get("same")
    assert "duplicate skill 'same'" in str(catalog.errors[0])


def test_a_path_may_be_one_skill(tmp_path: Path) -> None:
    folder = _skill(tmp_path, "single")
    assert SkillCatalog([folder]).names() == ["single"]


def test_body_is_read_only_when_used(tmp_path: Path) -> None:
    _skill(tmp_path, "lazy", body="# Lazy\n\nThe instructions.\n")
    original = PinnedFolder.read_bytes
    reads: list[str] = []

    def counting(self: PinnedFolder, rel: str, limit: int) -> bytes:
        reads.append(rel)
        return original(self, rel, limit)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(PinnedFolder, "read_bytes", counting)
        catalog = SkillCatalog([tmp_path])
        skill = catalog.get("lazy")
        assert reads == []  # scanning read the front matter line by line, not the file
        assert skill.body == "# Lazy\n\nThe instructions."
        assert skill.body  # cached
    assert reads == ["SKILL.md"]  # from the folder pinned at load


def test_body_comes_from_the_file_at_first_use(tmp_path: Path) -> None:
    folder = _skill(tmp_path, "later", body="old instructions\n")
    skill = SkillCatalog([tmp_path]).get("later")
    text = (folder / "SKILL.md").read_text(encoding="utf-8")
    (folder / "SKILL.md").write_text(text.replace("old", "new"), encoding="utf-8")
    assert skill.body == "new instructions"  # scanning did not keep the body
    (folder / "SKILL.md").unlink()
    assert skill.body == "new instructions"  # read once, then cached


def test_resources_on_demand_and_confined(tmp_path: Path) -> None:
    folder = _skill(tmp_path, "res")
    (folder / "references").mkdir()
    (folder / "references" / "guide.md").write_text("guide", encoding="utf-8")
    (folder / "scripts" / "sub").mkdir(parents=True)
    (folder / "scripts" / "sub" / "run.sh").write_text("echo", encoding="utf-8")
    (folder / "notes.txt").write_text("any file of the folder", encoding="utf-8")
    (tmp_path / "outside.txt").write_text("outside", encoding="utf-8")
    skill = SkillCatalog([tmp_path]).get("res")
    assert skill.resources() == ["notes.txt", "references/guide.md", "scripts/sub/run.sh"]
    assert skill.read_resource("references/guide.md") == "guide"
    with pytest.raises(ValueError, match="outside the skill's folder"):
        skill.read_resource("../outside.txt")
    with pytest.raises(FileNotFoundError, match=r"its resources: notes\.txt, references/guide"):
        skill.read_resource("references/nope.md")


def test_validate_raises_for_a_broken_tree(tmp_path: Path) -> None:
    folder = _skill(tmp_path, "boom", "execution: bt\n")
    (folder / "tree.py").write_text("raise RuntimeError('bad import')\ndef build_tree(ctx): ...\n",
                                    encoding="utf-8")
    catalog = SkillCatalog([tmp_path])
    assert catalog.names() == ["boom"]  # the scan never imports tree modules
    with pytest.raises(SkillLoadError, match="bad import") as info:
        catalog.validate(folder, run_tree=True)
    assert info.value.line == 1 and info.value.field == "build_tree"


def test_validate_builds_the_tree_when_the_inputs_have_defaults(tmp_path: Path) -> None:
    # `jianmu skills validate` said ok, and the first run failed at build_tree
    catalog = SkillCatalog([])
    cases = {
        "empty": ("def build_tree(ctx):\n    pass\n", "got NoneType", 1),
        "raises": ("def build_tree(ctx):\n    raise KeyError(ctx.inputs['n'])\n", "KeyError", 2),
        "undeclared": ("from jianmu.nodes.tool_node import ToolNode\n"
                       "from jianmu.tools.builtin.calculator import CalculatorTool\n"
                       "def build_tree(ctx):\n"
                       "    return ToolNode('calc', CalculatorTool())\n", "add it to 'tools'",
                       None),
    }
    for name, (tree, words, line) in cases.items():
        folder = _skill(tmp_path, name, "execution: bt\ninputs: {n: {type: integer, default: 1}}\n")
        (folder / "tree.py").write_text(tree, encoding="utf-8")
        with pytest.raises(SkillLoadError, match=words) as info:
            catalog.validate(folder, run_tree=True)
        assert info.value.line == line, name
    # an input without a default: the tree is built when it runs, with the caller's inputs
    folder = _skill(tmp_path, "needs", "execution: bt\ninputs: {n: integer}\n")
    (folder / "tree.py").write_text(cases["raises"][0], encoding="utf-8")
    assert catalog.validate(folder, run_tree=True).name == "needs"


def test_find_skill_folders_at_any_depth(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    deep = [_skill(repo / "skills" / "docs", "pdf"), _skill(repo / "skills" / "dev", "review"),
            _skill(repo, "top"), _skill(repo / ".claude" / "skills", "claude-kept")]
    for skipped in (".git", "node_modules", ".hidden", "__pycache__"):
        _skill(repo / skipped, "nope")
    _skill(deep[0] / "examples", "inner")  # inside a skill: one of its files, not a skill
    assert find_skill_folders(repo) == sorted(deep)
    assert find_skill_folders(deep[0]) == [deep[0]]
    assert find_skill_folders(deep[0] / "SKILL.md") == [deep[0]]
    assert find_skill_folders(repo / "README.md") == []
    assert find_skill_folders(tmp_path / "missing") == []


def test_the_catalog_finds_skills_at_any_depth_as_validate_does(tmp_path: Path) -> None:
    # `jianmu skills validate` said ok for skills/team/deep, which no catalog loaded
    skills = tmp_path / "skills"
    deep = _skill(skills / "team", "deep")
    _skill(skills, "top")
    _skill(deep / "examples", "inner")  # inside a skill: one of its files
    _skill(skills / ".git", "hidden")
    catalog = SkillCatalog([skills])
    assert (sorted(catalog.names()), catalog.errors) == (["deep", "top"], [])
    assert catalog.get("deep").folder == deep


def test_a_skill_folder_that_may_not_be_looked_into_is_not_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # as root, chmod 000 changes nothing: a look into the folder is refused as it would be
    _skill(tmp_path / "skills", "open")
    locked = _skill(tmp_path / "skills", "locked")
    real_lstat = os.lstat

    def lstat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if Path(path) == locked / "SKILL.md":
            raise PermissionError(13, "Permission denied", str(path))
        return real_lstat(path, *args, **kwargs)

    monkeypatch.setattr(os, "lstat", lstat)
    catalog = SkillCatalog([tmp_path / "skills"])
    # listed, so the load names what is wrong (here, as root, it then loads)
    assert sorted(catalog.names()) == ["locked", "open"]
    assert find_skill_folders(tmp_path / "skills") == [locked, locked.parent / "open"]


def test_a_skill_md_that_is_a_link_out_or_a_folder_is_named_not_hidden(tmp_path: Path) -> None:
    """A SKILL.md linking out of its folder was reported as "no SKILL.md", and one that is a
    folder (or a dangling link) was skipped without a word."""
    _skill(tmp_path / "skills", "good-one")
    outside = _skill(tmp_path / "elsewhere", "linked") / "SKILL.md"
    (tmp_path / "skills" / "linked").mkdir()
    (tmp_path / "skills" / "linked" / "SKILL.md").symlink_to(outside)
    (tmp_path / "skills" / "dangling").mkdir()
    (tmp_path / "skills" / "dangling" / "SKILL.md").symlink_to("gone.md")  # inside
    (tmp_path / "skills" / "folder" / "SKILL.md").mkdir(parents=True)
    catalog = SkillCatalog([tmp_path / "skills"])
    assert catalog.names() == ["good-one"]
    errors = {Path(str(e.path)).parent.name: str(e) for e in catalog.errors}
    assert "leads outside the skill's folder" in errors["linked"], errors
    assert "SKILL.md is a folder" in errors["folder"], errors
    assert "SKILL.md is a link to nothing" in errors["dangling"], errors
    assert [p.name for p in find_skill_folders(tmp_path / "skills")] == [
        "dangling", "folder", "good-one", "linked"]


def test_a_skills_path_that_is_a_file_says_so(tmp_path: Path) -> None:
    """``skills.paths`` naming a SKILL.md (as ``skills validate`` takes) was "not found", and
    so was any other file."""
    skill_file = _skill(tmp_path, "single") / "SKILL.md"
    (tmp_path / "notes.txt").write_text("x", encoding="utf-8")
    catalog = SkillCatalog([skill_file, tmp_path / "notes.txt"])
    assert catalog.names() == ["single"]
    assert len(catalog.errors) == 1
    assert "is a file, not a folder of skills" in str(catalog.errors[0])


def test_a_relative_skills_path_not_found_says_where_it_was_looked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A config's ``skills.paths: [myskills]`` used from another folder said only "not found":
    the path is read from the current folder, not the config file's."""
    monkeypatch.chdir(tmp_path)
    catalog = SkillCatalog(config=AppConfig(skills=SkillsConfig(paths=["myskills"])))
    (error,) = catalog.errors
    assert f"looked for in {str(tmp_path)!r}: a relative path is read from the folder the " \
        "command runs in" in str(error), error
    absolute = SkillCatalog(config=AppConfig(skills=SkillsConfig(paths=[str(tmp_path / "x")])))
    assert "looked for in" not in str(absolute.errors[0])  # an absolute path says it all
