"""SKILL.md parsing: every broken skill is a SkillLoadError naming the file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu.config import AppConfig, MCPConfig, MCPServerConfig
from jianmu.errors import SkillLoadError
from jianmu.skills import SkillCatalog, known_tool_checker, load_skill

BROKEN = Path(__file__).parent / "fixtures" / "broken"
SHIPPED = Path(__file__).parents[2] / "skills"


@pytest.mark.parametrize(
    ("folder", "line", "field", "words"),
    [
        ("bad-yaml", 5, None, "YAML syntax error"),
        ("missing-name", 2, "name", "'name' is missing"),
        ("invalid-name", 2, "name", "lowercase letters"),
        ("name-mismatch", 2, "name", "differs from the folder's name 'name-mismatch'"),
        ("long-description", 3, "description", "at most 1024 characters"),
        ("unknown-tool", 6, "tools[1]", "did you mean 'read_file'"),
        ("unknown-key", 4, "execuiton", "did you mean 'execution'"),
        ("missing-tree", 5, "tree", "'tree.py' does not exist"),
        ("no-build-tree", 4, "tree", "defines no build_tree"),
        ("bad-constraints", 7, "constraints.guard.tool_policy.bash", "'confirm' or 'deny'"),
        ("bad-allowed", 4, "allowed-tools", "a space-separated string or a list"),
        ("no-front-matter", 1, None, "must start with a '---' line"),
    ],
)
def test_broken_skill_names_file_line_and_field(
    folder: str, line: int, field: str | None, words: str
) -> None:
    with pytest.raises(SkillLoadError) as info:
        load_skill(BROKEN / folder)
    err = info.value
    assert err.path == str(BROKEN / folder / "SKILL.md")
    assert err.line == line
    assert err.field == field
    assert words in str(err)
    assert str(err).startswith(f"{err.path}:{line}")


def test_every_shipped_skill_loads() -> None:
    catalog = SkillCatalog([SHIPPED])
    assert catalog.errors == []
    assert {"workspace-report", "code-review"} <= set(catalog.names())
    kinds = {s.execution for s in catalog}
    assert kinds == {"prompt", "bt"}
    for skill in catalog:
        assert skill.body  # every shipped skill documents itself
        assert catalog.validate(skill.folder).name == skill.name


def _write(folder: Path, front: str, body: str = "Body.\n") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(f"---\n{front}---\n{body}", encoding="utf-8")
    return folder


def test_field_map_inputs_become_json_schema(tmp_path: Path) -> None:
    skill = load_skill(_write(tmp_path / "mapped", (
        "name: mapped\ndescription: d\n"
        "inputs: {path: string, depth: {type: integer, default: 2}, flags: list}\n"
        "outputs:\n  type: object\n  properties: {count: {type: integer}}\n"
    )))
    assert skill.inputs == {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "depth": {"type": "integer", "default": 2},
            "flags": {"type": "array"},
        },
        "required": ["path", "flags"],
    }
    assert skill.outputs == {"type": "object", "properties": {"count": {"type": "integer"}}}


def test_unknown_type_in_field_map_names_the_field_line(tmp_path: Path) -> None:
    folder = _write(tmp_path / "typo", "name: typo\ndescription: d\ninputs:\n  path: strng\n")
    with pytest.raises(SkillLoadError) as info:
        load_skill(folder)
    assert (info.value.line, info.value.field) == (5, "inputs.path")
    assert "unknown type 'strng'" in str(info.value)


def test_open_format_fields_and_free_metadata(tmp_path: Path) -> None:
    skill = load_skill(_write(tmp_path / "open", (
        "name: open\ndescription: d\nlicense: Apache-2.0\ncompatibility: needs git\n"
        "metadata: {anything: [1, 2], nested: {ok: true}}\nversion: 2\nhistory_limit: 3\n"
    )))
    assert skill.license == "Apache-2.0" and skill.compatibility == "needs git"
    assert skill.metadata == {"anything": [1, 2], "nested": {"ok": True}}
    assert (skill.version, skill.history_limit, skill.execution) == ("2", 3, "prompt")
    assert skill.tree_path is None


def test_tree_on_a_prompt_skill_is_an_error(tmp_path: Path) -> None:
    folder = _write(tmp_path / "odd", "name: odd\ndescription: d\ntree: tree.py\n")
    with pytest.raises(SkillLoadError, match="only used by bt skills") as info:
        load_skill(folder)
    assert info.value.field == "tree"


def test_tree_must_stay_in_the_folder(tmp_path: Path) -> None:
    folder = _write(tmp_path / "esc", "name: esc\ndescription: d\nexecution: bt\ntree: ../x.py\n")
    with pytest.raises(SkillLoadError, match=r"a \.py file in the skill's folder"):
        load_skill(folder)


def test_mcp_and_custom_tool_names_are_known(tmp_path: Path) -> None:
    folder = _write(tmp_path / "remote", (
        "name: remote\ndescription: d\ntools: [files__read, files, my_tool]\n"
    ))
    with pytest.raises(SkillLoadError, match="'files__read'"):
        load_skill(folder)
    config = AppConfig(mcp=MCPConfig(servers={"files": MCPServerConfig(command="srv")}))
    skill = load_skill(folder, is_known_tool=known_tool_checker(config, ["my_tool"]))
    assert skill.tools == ("files__read", "files", "my_tool")


def test_unclosed_front_matter(tmp_path: Path) -> None:
    (tmp_path / "open-end").mkdir()
    (tmp_path / "open-end" / "SKILL.md").write_text("---\nname: open-end\n", encoding="utf-8")
    with pytest.raises(SkillLoadError, match="not closed"):
        load_skill(tmp_path / "open-end")


def test_front_matter_must_be_a_mapping(tmp_path: Path) -> None:
    folder = _write(tmp_path / "listy", "- a\n- b\n")
    with pytest.raises(SkillLoadError, match="must be a mapping"):
        load_skill(folder)


def test_a_front_matter_value_yaml_cannot_convert_is_a_skill_load_error(tmp_path: Path) -> None:
    folder = _write(tmp_path / "digits", "name: digits\ndescription: d\n"
                    f"constraints:\n  max_iterations: {'9' * 5000}\n")
    with pytest.raises(SkillLoadError, match=r"SKILL.md:5: this int cannot be read"):
        load_skill(folder)
    folder = _write(tmp_path / "tagged", "name: tagged\ndescription: d\nmetadata: {a: !!int zz}\n")
    with pytest.raises(SkillLoadError, match=r"SKILL.md:4: this int cannot be read"):
        load_skill(folder)


def test_a_control_character_in_front_matter_names_its_line(tmp_path: Path) -> None:
    """A NUL or ESC in the front matter was an error with no line (and a character offset)."""
    folder = _write(tmp_path / "nul", "name: nul\ndescription: a\x00b\n")
    with pytest.raises(SkillLoadError, match=r"SKILL.md:3: YAML syntax error: unacceptable "
                       r"character #x0000: special characters are not allowed$") as info:
        load_skill(folder)
    assert info.value.line == 3


@pytest.mark.parametrize(("rule", "said"), [
    ('"bash(": deny', "guard.tool_policy"),
    ('"bad name!": deny', "invalid tool rule 'bad name!'"),
])
def test_a_guard_rule_no_call_can_match_is_a_load_error_with_its_line(
    tmp_path: Path, rule: str, said: str
) -> None:
    """A SKILL.md deny rule the guard cannot parse loaded as a working skill (the same rule
    in jianmu.yaml is refused naming its line); it failed only once the skill ran."""
    folder = _write(tmp_path / "ruled", "name: ruled\ndescription: d\nconstraints:\n  guard:\n"
                    f"    tool_policy:\n      read_file: confirm\n      {rule}\n")
    with pytest.raises(SkillLoadError, match=said) as info:
        load_skill(folder)
    assert info.value.line == 8 and info.value.field == "constraints.guard.tool_policy"


def test_a_refused_name_is_said_without_pydantic_wording(tmp_path: Path) -> None:
    """The message began "Value error, the name must be lowercase", pydantic's wording."""
    folder = _write(tmp_path / "Loud", "name: Loud\ndescription: d\n")
    with pytest.raises(SkillLoadError) as info:
        load_skill(folder)
    assert "Value error" not in str(info.value)
    assert "[name]: the name must be lowercase (got 'Loud')" in str(info.value)


def test_a_skill_md_saved_with_a_utf8_bom_loads(tmp_path: Path) -> None:
    folder = tmp_path / "bom"
    folder.mkdir()
    (folder / "SKILL.md").write_bytes(
        "\ufeff---\nname: bom\ndescription: Saved by Notepad.\n---\nThe body.\n".encode()
    )
    skill = load_skill(folder)
    assert skill.name == "bom" and skill.body.strip() == "The body."


def test_unknown_keys_get_the_closest_valid_one_at_any_depth(tmp_path: Path) -> None:
    folder = _write(tmp_path / "typo", "name: typo\ndescription: d\n"
                    "constraints:\n  max_iteration: 3\n")
    with pytest.raises(SkillLoadError) as info:
        load_skill(folder)
    assert "did you mean 'max_iterations'" in str(info.value)
    assert info.value.line == 5 and info.value.field == "constraints.max_iteration"


def test_the_version_is_kept_as_written(tmp_path: Path) -> None:
    # YAML reads 1.10 as the number 1.1: `skills list` showed another version
    skill = load_skill(_write(tmp_path / "ten", "name: ten\ndescription: d\nversion: 1.10\n"))
    assert skill.version == "1.10"
    skill = load_skill(_write(tmp_path / "two", "name: two\ndescription: d\nversion: '2.0'\n"))
    assert skill.version == "2.0"


def test_an_input_default_that_does_not_fit_its_type_names_its_line(tmp_path: Path) -> None:
    # it failed every run that left the input out, telling the caller to pass it
    folder = _write(tmp_path / "deft", (
        "name: deft\ndescription: d\ninputs:\n  n: {type: integer, default: 2}\n"
        "  depth:\n    type: integer\n    default: deep\n"
    ))
    with pytest.raises(SkillLoadError) as info:
        load_skill(folder)
    assert (info.value.line, info.value.field) == (8, "inputs.depth.default")
    assert "'depth' does not fit" in str(info.value) and "got 'deep'" in str(info.value)
    schema = "inputs: {properties: {n: {type: integer, default: [1]}, s: {default: null}}}\n"
    with pytest.raises(SkillLoadError, match="input 'n' does not fit") as info:
        load_skill(_write(tmp_path / "full", f"name: full\ndescription: d\n{schema}"))
    assert info.value.line == 4
    ok = load_skill(_write(tmp_path / "none", (
        "name: none\ndescription: d\ninputs: {s: {type: string, default: null}}\n")))
    assert ok.inputs is not None


@pytest.mark.parametrize(
    ("inputs", "line"),
    [
        ("inputs: {type: array, items: {type: string}}\n", 4),  # read as fields type and items
        ("outputs:\n  type: string\n  enum: [a, b]\n", 5),
        ("inputs: {type: integer}\n", 4),
    ],
)
def test_a_schema_of_another_type_than_object_is_refused(
    tmp_path: Path, inputs: str, line: int
) -> None:
    with pytest.raises(SkillLoadError, match="must map each field's name to its type") as info:
        load_skill(_write(tmp_path / "scalar", f"name: scalar\ndescription: d\n{inputs}"))
    assert info.value.line == line and info.value.field.endswith(".type")
    assert "for a field named 'type'" in str(info.value)


def test_a_field_named_type_and_json_schema_keywords_in_the_short_form(tmp_path: Path) -> None:
    skill = load_skill(_write(tmp_path / "kind", (
        "name: kind\ndescription: d\ninputs: {type: string, path: string}\n"
        "outputs: {type: {type: integer}}\n"
    )))
    assert skill.inputs is not None and set(skill.inputs["properties"]) == {"type", "path"}
    assert skill.outputs is not None and skill.outputs["required"] == ["type"]
    with pytest.raises(SkillLoadError, match="'required' is a JSON Schema keyword"):
        load_skill(_write(tmp_path / "half", (
            "name: half\ndescription: d\ninputs: {required: [a], additionalProperties: false}\n"
        )))


def test_inputs_and_outputs_of_a_prompt_skill_are_a_warning(tmp_path: Path) -> None:
    # nothing checks them: an outputs schema a prompt skill's answer never met passed in silence
    skill = load_skill(_write(tmp_path / "asks", (
        "name: asks\ndescription: d\ninputs: {topic: string}\noutputs: {summary: string}\n"
    )))
    assert [w for w in skill.warnings if "used by BT skills only" in w] == [
        "inputs and outputs are used by BT skills only (execution: bt); a prompt skill's are "
        "not checked, nor shown to the model"
    ]
    plain = load_skill(_write(tmp_path / "plain", "name: plain\ndescription: d\n"))
    assert plain.warnings == ()


def test_a_blank_description_is_refused(tmp_path: Path) -> None:
    # it loaded, showed nothing to the model, and Skill.summary() raised IndexError
    with pytest.raises(SkillLoadError, match="the description is blank") as info:
        load_skill(_write(tmp_path / "blank", 'name: blank\ndescription: "  \\n "\n'))
    assert (info.value.line, info.value.field) == (3, "description")
    skill = load_skill(_write(tmp_path / "later", 'name: later\ndescription: "\\nDoes it."\n'))
    assert skill.summary() == "later (prompt): Does it."


def test_a_misspelt_required_key_is_named_as_misspelt(tmp_path: Path) -> None:
    """'descripton:' was reported as "the required field 'description' is missing", on the
    name's line, with the misspelling only in the 'also' list."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "SKILL.md").write_text("---\nname: notes\ndescripton: Takes notes.\n---\nBody.\n",
                                     encoding="utf-8")
    with pytest.raises(SkillLoadError) as info:
        load_skill(folder)
    assert info.value.line == 3 and info.value.field == "descripton", str(info.value)
    assert "unknown key 'descripton'; did you mean 'description'?" in str(info.value)
