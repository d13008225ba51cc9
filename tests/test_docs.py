"""The documents match the project: every path README.md and docs/ name is there, and nothing
cites a document a user of the project cannot open."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
PATH = re.compile(r"`([A-Za-z0-9_.\-]+/[A-Za-z0-9_./\-]*)`")
# named in the text but not files of this project: a user's own file, a folder a run makes,
# a placeholder, an MCP method, a file inside an example of someone else's skill
NOT_PROJECT_PATHS = {"./jianmu.yaml", ".jianmu/", ".jianmu/quarantine", ".jianmu/python_repl/",
                     "NAMESPACE/KEY",
                     "notifications/tools/list_changed", "reference/guide.md"}


def test_every_path_the_documents_name_exists() -> None:
    missing = []
    for document in DOCUMENTS:
        for path in sorted(set(PATH.findall(document.read_text(encoding="utf-8")))):
            if any(c in path for c in "<*{") or path in NOT_PROJECT_PATHS:
                continue
            if not any((base / path).exists() for base in (REPO, REPO / "jianmu")):
                missing.append(f"{document.name}: {path}")
    assert missing == []


def test_the_design_page_is_part_of_the_project_and_nothing_cites_an_outside_one() -> None:
    assert (REPO / "docs" / "design.md").is_file()
    outside = re.compile(r"DESIGN\.md|\bthe seed\b|\bseed 00\d|\bseeds'")
    cited = [
        f"{p.relative_to(REPO)}:{n}" for p in [*REPO.joinpath("jianmu").rglob("*.py"), *DOCUMENTS]
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if outside.search(line)
    ]
    assert cited == []


def _listed(text: str, heading: str) -> list[str]:
    """The module paths a numbered list under ``heading`` names first on each item."""
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    items = re.findall(r"^\d+\. `([a-z_/]+\.py)`", section, flags=re.MULTILINE)
    return ["jianmu." + item.removesuffix(".py").replace("/", ".") for item in items]


def test_the_plain_call_path_in_the_design_page_is_the_traced_one() -> None:
    """docs/design.md lists, in order, exactly the modules `bench_house` traces for a plain
    call; the executor's docstring names none that the call does not run."""
    from benchmarks.bench_house import SANDBOX_MODULES, TARGET_CALL_PATH, call_path

    traced = call_path()
    listed = _listed((REPO / "docs" / "design.md").read_text(encoding="utf-8"),
                     "## A plain call's path")
    assert sorted(listed) == sorted(traced)
    assert len(listed) == len(set(listed)) <= TARGET_CALL_PATH
    assert not set(listed) & set(SANDBOX_MODULES)
    docstring = (REPO / "jianmu" / "nodes" / "tool_executor.py").read_text(encoding="utf-8")
    docstring = docstring.split('"""', 2)[1]
    named = {"jianmu." + m.removesuffix(".py").replace("/", ".")
             for m in re.findall(r"``([a-z_/]+/[a-z_]+\.py)``", docstring)}
    assert named and named <= set(traced)
