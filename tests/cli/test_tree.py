"""``jianmu tree show``: ASCII, DOT and Mermaid of a script's or a BT skill's tree."""

from __future__ import annotations

import py_trees
import pydot
import pytest

from jianmu._cli.tree import to_dot, to_mermaid
from tests.cli._helpers import REPO, SHIPPED_SKILLS, Project, assert_clean_error

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
