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
NOT_PROJECT_PATHS = {"./jianmu.yaml", ".jianmu/", "NAMESPACE/KEY",
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
