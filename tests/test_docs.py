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


CODE_BLOCK = re.compile(r"```.*?```", re.S)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _anchors(document: Path) -> set[str]:
    """The anchors GitHub gives the document's headings."""
    text = CODE_BLOCK.sub("", document.read_text(encoding="utf-8"))
    headings = re.findall(r"^#+\s+(.*?)\s*$", text, flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


def test_every_relative_link_and_anchor_resolves() -> None:
    broken = []
    for document in DOCUMENTS:
        for target in LINK.findall(CODE_BLOCK.sub("", document.read_text(encoding="utf-8"))):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            linked = (document.parent / path) if path else document
            if not linked.exists():
                broken.append(f"{document.name}: {target} (no such file)")
            elif anchor and anchor not in _anchors(linked):
                broken.append(f"{document.name}: {target} (no such heading)")
    assert broken == []


def test_every_section_the_documents_send_a_reader_to_is_there() -> None:
    """`see "Extending Jianmu"` and `docs/design.md` ("A plain call's path") name headings."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    design = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
    headings = {document: set(re.findall(r"^#+\s+(.*?)\s*$", CODE_BLOCK.sub("", text), re.M))
                for document, text in (("README.md", readme), ("design.md", design))}
    cited = [("README.md", name) for name in re.findall(r'\(see "([^"]+)"\)', readme)]
    cited += [("design.md", name)
              for name in re.findall(r'`docs/design\.md` \("([^"]+)"\)', readme)]
    assert cited, "README sends the reader to sections by name"
    missing = [f"{document}: {name!r}" for document, name in cited
               if " ".join(name.split()) not in headings[document]]  # a name across lines
    assert missing == []
