"""Red team, skills: a SKILL.md whose ``inputs`` or ``outputs`` schema breaks the rules.

A bt skill's ``inputs`` and ``outputs`` are JSON Schemas from the skill's folder, checked by
the lax checker on every run. They are held to the rules of any schema from outside when the
skill is loaded, naming the file, the line and the field: a keyword of the wrong kind
(``anyOf: 5`` failed each run with Python's ``TypeError``), a pattern RE2 cannot match in
linear time (it was silently never checked), NaN or Infinity, a ``$ref`` leaving the schema,
a field written beside ``properties`` (read as an unknown keyword: never asked for).
The other skills of the folder still load.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu.errors import SkillLoadError
from jianmu.skills.catalog import SkillCatalog
from jianmu.skills.loader import load_skill


def _bt_skill(root: Path, name: str, fields: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "tree.py").write_text("def build_tree(ctx):\n    return None\n", encoding="utf-8")
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: A tree.\nexecution: bt\n{fields}---\nBody.\n",
        encoding="utf-8",
    )
    return folder


@pytest.mark.parametrize(("fields", "field", "says"), [
    ("inputs:\n  type: object\n  properties:\n    x: {anyOf: 5}\n", "inputs", "anyOf"),
    ("outputs:\n  y: {type: string, pattern: '(?<=a)b'}\n", "outputs", "RE2"),
    ("inputs:\n  x: {type: number, maximum: .inf}\n", "inputs", "NaN or Infinity"),
    ("inputs:\n  x: {$ref: 'http://evil.example/x.json'}\n", "inputs", "does not point inside"),
    # a field beside `properties`: an unknown keyword, never asked for nor checked
    ("inputs:\n  type: object\n  properties: {a: {type: string}}\n  path: {type: string}\n",
     "inputs", "'path' at the schema's root"),
])
def test_a_schema_breaking_the_rules_is_refused_at_load(
    tmp_path: Path, fields: str, field: str, says: str,
) -> None:
    folder = _bt_skill(tmp_path / "skills", "odd", fields)
    with pytest.raises(SkillLoadError) as refused:
        load_skill(folder)
    text = str(refused.value)
    assert says in text and field in text and "SKILL.md" in text
    assert refused.value.line is not None
    _bt_skill(tmp_path / "skills", "fine", "inputs:\n  x: {type: string, pattern: '^a+$'}\n")
    catalog = SkillCatalog([tmp_path / "skills"])
    assert catalog.names() == ["fine"] and len(catalog.errors) == 1


def test_an_integer_no_json_text_can_carry_is_refused_at_load(tmp_path: Path) -> None:
    """YAML reads ``0xfff…`` as an int of any size, but Python writes none past 4,300 digits
    as text: the skill loaded, every request offering it failed to be written, and a call's
    check raised ValueError writing its message. Refused at load, like NaN."""
    huge = "0x" + "f" * 4_000  # 16,000 bits, about 4,800 digits
    folder = _bt_skill(tmp_path / "skills", "odd",
                       f"inputs:\n  n: {{type: integer, maximum: {huge}}}\n")
    with pytest.raises(SkillLoadError, match="past 4,000 digits") as refused:
        load_skill(folder)
    assert "inputs" in str(refused.value) and len(str(refused.value)) < 1_000
