"""``jianmu tools``, ``jianmu skills`` and ``jianmu tree`` as subprocesses; ASCII, DOT and
Mermaid of a script's or a BT skill's tree."""

from __future__ import annotations

import json
import re
import sys

import py_trees
import pydot
import pytest

from jianmu._cli.info import to_dot, to_mermaid
from jianmu.tools.providers import DEFAULT_BUILTINS
from tests.cli._helpers import REPO, SHIPPED_SKILLS, Project, assert_clean_error
from tests.support.forked_cli import MCP

BROKEN_SKILL = "---\nname: broken\ndescription: d\nexecution: bt\ntools: [nosuch]\n---\nbody\n"
GOOD_SKILL = "---\nname: notes\ndescription: Take notes. Keep them short.\n---\n# Notes\nWrite.\n"


def test_tools_list_shows_every_builtin_with_its_metadata(project: Project) -> None:
    done = project.jianmu("tools", "list")
    assert done.code == 0, done.text
    for name in DEFAULT_BUILTINS:
        assert re.search(rf"│ {name} +│", done.out), name
    assert re.search(r"│ calculator +│ read +│ auto +│ yes +│ Evaluate a math expression and "
                     r"return its value\. +│", done.out)
    assert re.search(r"│ bash +│ execute +│ user_confirm +│ no +│", done.out)


@pytest.mark.parametrize(("fmt", "check"), [
    ("openai", lambda d: d["type"] == "function" and d["function"]["name"] == "read_file"
     and "path" in d["function"]["parameters"]["properties"]),
    ("anthropic", lambda d: d["name"] == "read_file" and "path" in d["input_schema"]["properties"]),
    ("mcp", lambda d: d["name"] == "read_file" and d["annotations"]["readOnlyHint"] is True
     and "path" in d["inputSchema"]["properties"]),
    ("spec", lambda d: d["category"] == "read" and d["permission"] == "auto"),
])
def test_tools_show_each_format_is_json(project: Project, fmt: str, check) -> None:  # type: ignore[no-untyped-def]
    done = project.jianmu("tools", "show", "read_file", "--format", fmt)
    assert done.code == 0, done.text
    assert check(json.loads(done.out))


def test_tools_show_defaults_to_openai_and_accepts_aliases(project: Project) -> None:
    done = project.jianmu("tools", "show", "file_read")
    assert json.loads(done.out)["function"]["name"] == "read_file"


def test_tools_show_unknown_tool_exits_2(project: Project) -> None:
    assert_clean_error(project.jianmu("tools", "show", "nope"), 2,
                       "no built-in tool named 'nope'", "read_file")


def test_skills_list_shows_skills_and_broken_ones(project: Project) -> None:
    project.write("extra/broken/SKILL.md", BROKEN_SKILL)
    project.write("skills/notes/SKILL.md", GOOD_SKILL)
    done = project.jianmu("skills", "list", "--skills-dir", str(SHIPPED_SKILLS),
                          "--skills-dir", "extra")
    assert done.code == 0, done.text
    assert re.search(r"│ workspace-report +│ bt +│ 1\.0 +│ glob_search, grep_search,", done.out)
    assert "Survey a folder" in done.out
    assert re.search(r"│ code-review +│ prompt +│", done.out)
    assert not re.search(r"│ notes +│", done.out)  # --skills-dir replaces the skills/ folder
    assert "broken: extra/broken/SKILL.md:5 [tools[0]]: unknown tool 'nosuch'" in done.out
    default = project.jianmu("skills", "list")  # ./skills of the project
    assert re.search(r"│ notes +│ prompt +│", default.out)


def test_skills_list_says_where_it_looked_when_empty(project: Project) -> None:
    done = project.jianmu("skills", "list")
    assert done.code == 0 and "no skills found in skills" in done.out


def test_skills_show_prints_front_matter_and_body(project: Project) -> None:
    done = project.jianmu("skills", "show", "workspace-report", "--skills-dir", str(SHIPPED_SKILLS))
    assert done.code == 0, done.text
    out = done.out
    assert "name: workspace-report" in out and "execution: bt" in out and "tree: tree.py" in out
    assert "tools: glob_search, grep_search, file_info, write_file" in out
    assert 'constraints: {"guard": {"max_tool_calls": 400}, "timeout": 120.0}' in out
    assert '"folder": {"type": "string", "default": "."' in out
    assert "# Workspace report" in out and "The result (`skill_result`)" in out


def test_skills_show_unknown_exits_2(project: Project) -> None:
    done = project.jianmu("skills", "show", "workspace-reprot", "--skills-dir", str(SHIPPED_SKILLS))
    assert_clean_error(done, 2, "no skill named 'workspace-reprot'",
                       "did you mean 'workspace-report'?")


def test_skills_validate_good_folder(project: Project) -> None:
    done = project.jianmu("skills", "validate", str(SHIPPED_SKILLS))
    assert done.code == 0, done.text
    assert "ok code-review (prompt)" in done.out and "ok workspace-report (bt)" in done.out
    assert "ok release-notes (prompt)" in done.out and "3 skill(s) valid" in done.out
    single = project.jianmu("skills", "validate", str(SHIPPED_SKILLS / "workspace-report"))
    assert single.code == 0 and "1 skill(s) valid" in single.out


def test_skills_validate_reports_each_error_as_file_line_field_message(project: Project) -> None:
    project.write("skills/broken/SKILL.md", BROKEN_SKILL)
    project.write("skills/notes/SKILL.md", GOOD_SKILL)
    project.write("skills/bad-tree/SKILL.md",
                  "---\nname: bad-tree\ndescription: d\nexecution: bt\n---\n")
    project.write("skills/bad-tree/tree.py",
                  "def build_tree(ctx):\n    pass\n\nraise ValueError('nope')\n")
    project.write("skills/misnamed/SKILL.md", "---\nname: other\ndescription: d\n---\n")
    done = project.jianmu("skills", "validate", "--run-trees")  # default PATH: skills
    assert done.code == 1, done.text
    lines = done.out.splitlines()
    assert "skills/broken/SKILL.md:5: tools[0]: unknown tool 'nosuch'; known tools: ask_user, " \
        "bash, calculator" in done.out
    assert any(re.fullmatch(r"skills/bad-tree/tree\.py:4: build_tree: importing the tree "
                            r"module failed: ValueError: nope", line) for line in lines), lines
    assert any(re.match(r"skills/misnamed/SKILL\.md:2: name: ", line) for line in lines), lines
    assert "ok notes (prompt)" in done.out
    assert "3 of 4 skill(s) have errors" in done.out


CLAUDE_SKILL = (
    "---\nname: pdf\ndescription: Fill PDF forms.\nlicense: Apache-2.0\n"
    "allowed-tools: Read Bash(python:*) Task\nmetadata: {author: someone}\n---\n"
    "See `examples/form.md` and `reference/api.md`.\n"
)


def _repository(project: Project) -> None:
    """A repository of skills two levels deep, with folders a search must skip."""
    project.write("repo/README.md", "# skills\n")
    project.write("repo/skills/documents/pdf/SKILL.md", CLAUDE_SKILL)
    project.write("repo/skills/documents/pdf/examples/form.md", "x" * 2048)
    project.write("repo/skills/documents/pdf/reference/api.md", "api")
    project.write("repo/skills/dev/notes/SKILL.md", GOOD_SKILL)
    for hidden in (".git/hooks", "node_modules/pkg", ".cache/old"):
        project.write(f"repo/{hidden}/SKILL.md", "not a skill at all\n")


def test_skills_validate_finds_skills_at_any_depth(project: Project) -> None:
    _repository(project)
    done = project.jianmu("skills", "validate", "repo")
    assert done.code == 0, done.text
    assert "ok notes (prompt) repo/skills/dev/notes/SKILL.md" in done.out
    assert "ok pdf (prompt) repo/skills/documents/pdf/SKILL.md" in done.out
    assert "warning: allowed-tools: 'Task' is not a tool Jianmu has" in done.out
    assert "2 skill(s) valid, 1 with warnings" in done.out
    project.write("repo/skills/dev/broken/SKILL.md", BROKEN_SKILL)
    broken = project.jianmu("skills", "validate", "repo/skills/documents", "repo/skills/dev")
    assert broken.code == 1, broken.text
    assert "repo/skills/dev/broken/SKILL.md:5: tools[0]: unknown tool 'nosuch'" in broken.out
    assert "1 of 3 skill(s) have errors, 1 with warnings" in broken.out
    same = project.jianmu("skills", "validate", "repo/skills/documents/pdf/SKILL.md", "repo")
    assert "1 of 3 skill(s)" in same.out  # a skill named twice is checked once


def test_skills_show_lists_every_file_with_its_size(project: Project) -> None:
    _repository(project)
    done = project.jianmu("skills", "show", "pdf", "--skills-dir", "repo/skills/documents")
    assert done.code == 0, done.text
    assert re.search(r"^files: 2$", done.out, re.M), done.out
    assert re.search(r"^  examples/form\.md  +2\.0 KB$", done.out, re.M), done.out
    assert re.search(r"^  reference/api\.md +3 B$", done.out, re.M), done.out
    assert "tools: read_file, read_skill_file, bash" in done.out
    assert "warning: allowed-tools: 'Task'" in done.out
    notes = project.jianmu("skills", "show", "notes", "--skills-dir", "repo/skills/dev")
    assert "files: none besides SKILL.md" in notes.out
    assert "tools: read_file, list_dir, glob_search, grep_search, file_info, read_skill_file " \
        "(default: the skill names no tools)" in notes.out


def test_skills_validate_bad_path_exits_2(project: Project) -> None:
    assert_clean_error(project.jianmu("skills", "validate", "nowhere"), 2,
                       "'nowhere' does not exist")
    (project.root / "empty").mkdir()
    assert_clean_error(project.jianmu("skills", "validate", "empty"), 2, "no SKILL.md in 'empty'")


def test_tools_list_and_show_with_the_configs_mcp_servers(project: Project) -> None:
    pytest.importorskip("mcp")
    server = REPO / "tests" / "mcp" / "servers" / "weather_server.py"
    project.config.write_text(project.config.read_text() + (
        f"mcp:\n  servers:\n    weather:\n      command: {sys.executable}\n"
        f"      args: [{server}, stdio]\n      trust: read_only\n"
        "    dead:\n      command: /nonexistent/mcp-server\n"
    ), encoding="utf-8")
    plain = project.jianmu("tools", "list")
    assert "weather__" not in plain.out  # only --mcp connects
    done = project.jianmu("tools", "list", "--mcp", preload=MCP)
    assert done.code == 0, done.text
    assert re.search(r"│ weather__get_forecast +│ read +│ auto +│ yes +│ Forecast for", done.out)
    assert re.search(r"│ weather__delete_station +│ dangerous +│ user_confirm +│ no +│", done.out)
    assert "MCP server 'dead' skipped" in done.out and "│ calculator " in done.out
    shown = project.jianmu("tools", "show", "weather__get_forecast", "--format", "mcp",
                           preload=MCP)
    assert shown.code == 0, shown.text
    assert json.loads(shown.out)["annotations"]["readOnlyHint"] is True
    assert_clean_error(project.jianmu("tools", "show", "weather__nope", preload=MCP), 2,
                       "no MCP tool named 'weather__nope'", "weather__get_forecast")



def test_tools_list_shows_a_tool_whose_extra_is_missing_and_says_so(project: Project) -> None:
    done = project.jianmu("tools", "list", without=["ddgs"])
    assert done.code == 0, done.text
    row = _table_rows(done.out)["duckduckgo_search"]
    assert row[-1].endswith("(needs the 'search' extra: not installed)"), row
    assert ("duckduckgo_search needs the 'search' extra, which is not installed: "
            "pip install 'jianmu[search]'") in done.out
    installed = project.jianmu("tools", "list")
    assert "not installed" not in installed.out  # the dev install has every extra


def test_tools_list_mcp_without_the_extra_names_it(project: Project) -> None:
    project.config.write_text(project.config.read_text() + (
        "mcp:\n  servers:\n    dead:\n      command: /nonexistent/mcp-server\n"
    ), encoding="utf-8")
    for command in (["tools", "list", "--mcp"], ["tools", "list", "--mcp", "dead"],
                    ["tools", "show", "dead__tool"]):
        done = project.jianmu(*command, without=["mcp"])
        assert_clean_error(done, 1, "pip install 'jianmu[mcp]'")
        assert done.out == "", done.text


def _table_rows(out: str) -> dict[str, list[str]]:
    """A rich table's rows by first cell, wrapped cells joined (the other cells in order)."""
    rows: dict[str, list[str]] = {}
    last: list[str] = []
    for line in out.splitlines():
        if not line.startswith("│"):
            continue
        cells = [c.strip() for c in line.strip("│").split("│")]
        if cells[0]:
            last = rows[cells[0]] = cells[1:]
        else:
            last[:] = [f"{a} {b}".strip() for a, b in zip(last, cells[1:], strict=True)]
    return rows


def test_tools_list_mcp_server_shows_the_guards_view_of_each_tool(project: Project) -> None:
    pytest.importorskip("mcp")
    server = REPO / "tests" / "mcp" / "servers" / "weather_server.py"
    project.config.write_text(project.config.read_text() + (
        f"mcp:\n  servers:\n    weather:\n      command: {sys.executable}\n"
        f"      args: [{server}, stdio]\n      trust: read_only\n"
        "    other:\n      command: /nonexistent/mcp-server\n"
        "guard:\n  tool_policy:\n    weather__echo: allow\n    weather__delete_station: deny\n"
        "  rate_limits:\n    weather__get_forecast: 5\n"
    ), encoding="utf-8")
    done = project.jianmu("tools", "list", "--mcp", "weather", preload=MCP)
    assert done.code == 0, done.text
    assert "MCP server weather (trust: read_only)" in done.out
    assert "calculator" not in done.out and "other" not in done.out  # that server only
    rows = _table_rows(done.out)
    # read-only hint believed: runs without asking; its rate limit is shown
    assert rows["weather__get_forecast"][:4] == ["read", "auto", "no", "read-only, open-world"]
    assert "at most 5 call(s) a minute" in rows["weather__get_forecast"][4]
    # no believed hint: dangerous, asks first, unless a rule allows or denies it
    assert rows["weather__alerts_list"][:3] == ["dangerous", "user_confirm", "yes"]
    assert rows["weather__echo"][2:4] == ["no", "none"]
    assert "'weather__echo' allows" in rows["weather__echo"][4]
    assert rows["weather__delete_station"][2:4] == ["denied", "destructive"]
    assert_clean_error(project.jianmu("tools", "list", "--mcp", "nosuch"), 2,
                       "--mcp nosuch: no such server in mcp.servers (configured: weather, other)")
    assert_clean_error(project.jianmu("tools", "list", "--mcp", "other", preload=MCP), 1,
                       "MCP server 'other' skipped")


def test_tools_list_mcp_names_a_servers_skipped_tools_in_its_notes(project: Project) -> None:
    """A tool the server lists but Jianmu skips (the SDK cannot read it) is a note of the
    command, on stdout with the others, not a Python warning naming a line of Jianmu's."""
    pytest.importorskip("mcp")
    server = REPO / "tests" / "mcp" / "servers" / "sloppy_server.py"
    project.config.write_text(project.config.read_text() + (
        f"mcp:\n  servers:\n    sloppy:\n      command: {sys.executable}\n"
        f"      args: [{server}]\n"
    ), encoding="utf-8")
    for command in (["tools", "list", "--mcp", "sloppy"], ["tools", "list", "--mcp"]):
        done = project.jianmu(*command, preload=MCP)
        assert done.code == 0, done.text
        assert "sloppy__good_one" in done.out and "sloppy__good_two" in done.out
        assert "schema_string" in done.out and "not a valid MCP tool" in done.out
        assert "Warning" not in done.err and "info.py" not in done.err, done.err


# -- jianmu tree show --------------------------------------------------------------------------

KINDS_SCRIPT = '''
import py_trees

def build_tree():
    b = py_trees.behaviours
    guarded = py_trees.decorators.Inverter("not", child=b.Failure("fail"))
    either = py_trees.composites.Selector("either", memory=False,
                                          children=[guarded, b.Success("fallback")])
    both = py_trees.composites.Parallel(
        "both", policy=py_trees.common.ParallelPolicy.SuccessOnAll(),
        children=[b.Success("left"), b.Success('say "hi"')])
    return py_trees.composites.Sequence("root", memory=True, children=[either, both])
'''


def _kinds_tree() -> py_trees.behaviour.Behaviour:
    namespace: dict[str, object] = {}
    exec(KINDS_SCRIPT, namespace)
    return namespace["build_tree"]()  # type: ignore[operator,no-any-return]


def test_mermaid_shapes_composites_by_kind() -> None:
    assert to_mermaid(_kinds_tree()).splitlines() == [
        "graph TD",
        '    n0{{"→ root"}}',
        '    n1{"? either"}',
        '    n2(["◇ not"])',
        '    n3["fail"]',
        '    n4["fallback"]',
        '    n5[["⇉ both"]]',
        '    n6["left"]',
        '    n7["say #quot;hi#quot;"]',
        "    n0 --> n1",
        "    n1 --> n2",
        "    n2 --> n3",
        "    n1 --> n4",
        "    n0 --> n5",
        "    n5 --> n6",
        "    n5 --> n7",
    ]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # pydot's parser uses old pyparsing names
def test_dot_is_valid_graphviz_with_unique_ids() -> None:
    text = to_dot(_kinds_tree())
    (graph,) = pydot.graph_from_dot_data(text)
    nodes = {n.get_name(): n for n in graph.get_nodes() if n.get_name() != "node"}
    assert len(nodes) == 8
    assert nodes["n0"].get("shape") == "box" and nodes["n0"].get("label") == '"→ root"'
    assert nodes["n1"].get("shape") == "octagon"
    assert nodes["n7"].get("label") == '"say \\"hi\\""'
    edges = {(e.get_source(), e.get_destination()) for e in graph.get_edges()}
    assert edges == {("n0", "n1"), ("n1", "n2"), ("n2", "n3"), ("n1", "n4"), ("n0", "n5"),
                     ("n5", "n6"), ("n5", "n7")}


@pytest.mark.parametrize(("fmt", "expected"), [
    ("ascii", ["{-} root", "    [o] either", "        -^- not", "            --> fail"]),
    ("dot", ["digraph tree {", '    n0 [label="→ root", shape=box];', "    n0 -> n1;"]),
    ("mermaid", ["graph TD", '    n0{{"→ root"}}', "    n0 --> n1"]),
])
def test_tree_show_each_format(project: Project, fmt: str, expected: list[str]) -> None:
    project.write("kinds.py", KINDS_SCRIPT)
    done = project.jianmu("tree", "show", "kinds.py", "--format", fmt)
    assert done.code == 0, done.text
    lines = done.out.splitlines()
    for line in expected:
        assert line in lines, (line, lines)


def test_tree_show_defaults_to_ascii_and_shows_examples_and_bt_skills(project: Project) -> None:
    done = project.jianmu("tree", "show", str(REPO / "examples" / "approval_flow.py"))
    assert done.out.splitlines()[:2] == ["{-} approval-flow", "    --> plan_note"]
    skill = project.jianmu("tree", "show", "workspace-report", "--skills-dir", str(SHIPPED_SKILLS),
                           "--format", "mermaid")
    assert skill.code == 0, skill.text
    assert '    n0{{"→ workspace-report"}}' in skill.out and '["write_report"]' in skill.out


def test_tree_show_bad_script_exits_2(project: Project) -> None:
    project.write("empty.py", "x = 1\n")
    assert_clean_error(project.jianmu("tree", "show", "empty.py"), 2, "defines neither")


def test_skills_validate_warns_of_a_body_it_cuts_or_cannot_decode(project: Project) -> None:
    # both were "ok" without a word: the model then got a body cut at 1 MB, or one with
    # U+FFFD where the author's bytes were
    from jianmu.skills.skill import MAX_BODY_BYTES

    project.write("skills/notes/SKILL.md", GOOD_SKILL)
    big = project.write("skills/big/SKILL.md", "")
    big.write_bytes(b"---\nname: big\ndescription: d\n---\n" + b"a" * (MAX_BODY_BYTES + 10))
    latin = project.write("skills/latin/SKILL.md", "")
    latin.write_bytes(b"---\nname: latin\ndescription: d\n---\n# Caf\xe9\nok\n")
    done = project.jianmu("skills", "validate")
    assert done.code == 0, done.text
    assert ("warning: SKILL.md is larger than 1,048,576 bytes: the model reads its body only "
            "up to there") in done.out
    assert ("warning: SKILL.md is not UTF-8 text from line 5 (byte 0xe9): the model reads "
            "U+FFFD there; save the file as UTF-8") in done.out
    assert "3 skill(s) valid, 2 with warnings" in done.out


def test_skills_validate_names_the_line_of_front_matter_that_is_not_utf8(
    project: Project,
) -> None:
    # the message was Python's codec error, whose "position" counts from a read buffer's
    # start, not from the file's
    latin = project.write("skills/latin/SKILL.md", "")
    latin.write_bytes(b"---\nname: latin\nlicense: x\ndescription: caf\xe9\n---\nbody\n")
    project.write("skills/notes/SKILL.md", GOOD_SKILL)
    done = project.jianmu("skills", "validate")
    assert done.code == 1, done.text
    assert ("skills/latin/SKILL.md:4: skill: the file is not UTF-8 text: line 4 holds byte "
            "0xe9; save the file as UTF-8") in done.out
    assert "ok notes (prompt)" in done.out


def test_skills_validate_flags_two_skills_of_one_name(project: Project) -> None:
    # each was "ok", and "2 skill(s) valid"; a catalog over both folders (skills.paths)
    # refuses the second as a duplicate
    project.write("team/notes/SKILL.md", GOOD_SKILL)
    project.write("mine/notes/SKILL.md", GOOD_SKILL.replace("Take notes", "Jot things"))
    done = project.jianmu("skills", "validate", "team", "mine")
    assert done.code == 1, done.text
    assert ("mine/notes/SKILL.md:2: name: duplicate skill 'notes': already found at "
            "team/notes/SKILL.md; rename one of them") in done.out
    assert "1 of 2 skill(s) have errors" in done.out


def test_skills_validate_warns_of_a_link_that_leads_out_of_the_skill(project: Project) -> None:
    # "ok", without a word: `skills show` then left the file out, and read_skill_file
    # refused it at run time
    project.write("skills/notes/SKILL.md", GOOD_SKILL)
    secret = project.write("elsewhere/secret.md", "x")
    (project.root / "skills" / "notes" / "refs").mkdir()
    (project.root / "skills" / "notes" / "refs" / "secret.md").symlink_to(secret)
    (project.root / "skills" / "notes" / "inside.md").symlink_to("SKILL.md")
    done = project.jianmu("skills", "validate")
    assert done.code == 0, done.text
    assert ("warning: refs/secret.md is a link to outside the skill's folder: the skill's "
            "tools cannot read it; copy the file in") in done.out
    assert "inside.md" not in done.out  # a link within the folder is fine
    assert "1 skill(s) valid, 1 with warnings" in done.out


def test_skills_validate_warns_of_a_script_with_a_shebang_that_is_not_executable(
    project: Project,
) -> None:
    # "ok" without a word, and run_skill_script refused the script at run time (a zip or a
    # checkout on Windows drops the executable bit)
    project.write("skills/notes/SKILL.md", GOOD_SKILL)
    script = project.write("skills/notes/scripts/extract", "#!/usr/bin/env python3\nprint(1)\n")
    script.chmod(0o644)
    project.write("skills/notes/scripts/plain.sh", "echo hi\n").chmod(0o644)  # runs with sh
    done = project.jianmu("skills", "validate")
    assert done.code == 0, done.text
    assert ("warning: scripts/extract has a #! line but is not executable: run_skill_script "
            "refuses it; chmod +x it") in done.out
    assert "plain.sh" not in done.out
