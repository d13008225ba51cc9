"""Skills: catalog load of 500 skill folders, and the system prompt for 16 skills.

(a) ``SkillCatalog`` over 500 generated skill folders in the public Agent Skills format
(front matter with ``license``, ``metadata``, ``allowed-tools``; a 2–12 KB body; files under
``references/``, ``examples/``, ``scripts/``). Only the front matter may be read: the figure
is ms per skill folder, target ≤ 3 ms. Side by side: the same catalog with every body read,
and the reference library ``skills-ref`` (``read_properties``, which reads the whole file).

(b) The system prompt a SkillNode holding 16 skills (realistic bodies of 2–12 KB) gives its
model: eager (every body, the seed's behaviour) against progressive (a line
``name: description`` per skill, bodies loaded on demand), target progressive ≤ 10% of eager;
``skills-ref``'s ``<available_skills>`` block is shown beside them.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks._util import best_of, table, verdict
from jianmu.skills import Skill, SkillCatalog, SkillNodeConfig, disclosure

__all__ = ("eager_prompt", "main", "progressive_listing", "realistic_body", "write_skills")

N_FOLDERS = 500
N_PROMPT_SKILLS = 16
TARGET_MS_PER_FOLDER = 3.0
TARGET_PROGRESSIVE_SHARE = 0.10
BODY_RANGE = (2 * 1024, 12 * 1024)
"""Body sizes in bytes, spread evenly over the skills (public skills run from 1 to 20 KB)."""

_TOPICS = ("invoices", "release notes", "spreadsheets", "slide decks", "API clients",
           "incident reports", "data audits", "PDF forms", "brand themes", "test plans",
           "migrations", "changelogs", "dashboards", "contracts", "onboarding", "code review")
_STEP_WORDS = ("Read", "Check", "List", "Compare", "Write", "Confirm", "Summarise", "Verify")


def _description(i: int) -> str:
    topic = _TOPICS[i % len(_TOPICS)]
    return (
        f"Create, edit and check {topic} (variant {i}): gather the inputs, follow the house "
        f"format for {topic}, and verify the result against the checklist before handing it "
        f"over. Use when the user asks for {topic}, mentions a {topic.rstrip('s')} file, or "
        "wants an existing one reviewed or converted."
    )


def realistic_body(i: int, size: int) -> str:
    """A Markdown body of about ``size`` bytes: steps, a code block, a table, file pointers."""
    topic = _TOPICS[i % len(_TOPICS)]
    parts = [
        f"# {topic.capitalize()} ({i})\n\n"
        f"Load `references/guide.md` for the format rules and `examples/sample.md` for a "
        f"finished {topic.rstrip('s')}. Run `python scripts/run.py --help` once to see the "
        "helper's options.\n"
    ]
    section = 0
    while sum(len(p) for p in parts) < size:
        section += 1
        steps = "\n".join(
            f"{n}. {_STEP_WORDS[(section + n) % len(_STEP_WORDS)]} the {topic} field "
            f"group {section}.{n}; note anything that does not match the template, and keep "
            f"the original values in a table so that the user can compare them afterwards."
            for n in range(1, 6)
        )
        parts.append(
            f"\n## Step {section}: part {section} of the {topic}\n\n{steps}\n\n"
            f"```bash\npython scripts/run.py check --section {section} input.txt\n```\n\n"
            "| field | rule | example |\n|-------|------|---------|\n"
            f"| name  | trimmed, as given | `Ada {section}` |\n"
            f"| date  | ISO 8601 | `2024-0{section % 9 + 1}-15` |\n"
        )
    return "".join(parts)[:size].rstrip() + "\n"


def write_skills(root: Path, n: int, *, sizes: Sequence[int] | None = None) -> list[Path]:
    """``n`` skill folders ``skill-0000``... under ``root``; bodies of the given sizes."""
    low, high = BODY_RANGE
    folders = []
    for i in range(n):
        size = sizes[i] if sizes is not None else low + (high - low) * (i % 11) // 10
        name = f"skill-{i:04d}"
        folder = root / name
        (folder / "references").mkdir(parents=True)
        (folder / "examples").mkdir()
        (folder / "scripts").mkdir()
        front = (
            f"---\nname: {name}\ndescription: >-\n  {_description(i)}\nlicense: Apache-2.0\n"
            f"allowed-tools: Read Grep Glob Bash(python:*)\nmetadata:\n  author: bench\n"
            f"  version: \"1.{i % 7}\"\n---\n\n"
        )
        (folder / "SKILL.md").write_text(front + realistic_body(i, size), encoding="utf-8")
        (folder / "references" / "guide.md").write_text(f"# Guide {i}\n", encoding="utf-8")
        (folder / "examples" / "sample.md").write_text(f"# Sample {i}\n", encoding="utf-8")
        (folder / "scripts" / "run.py").write_text("print('ok')\n", encoding="utf-8")
        folders.append(folder)
    return folders


def eager_prompt(skills: Sequence[Skill]) -> str:
    """The system prompt of a SkillNode that puts every body in (``disclosure="eager"``)."""
    return "\n\n".join([SkillNodeConfig().system_prompt, disclosure.eager_prompt(skills)])


def progressive_listing(skills: Sequence[Skill]) -> str:
    """The system prompt of a progressive SkillNode: names and descriptions, no body."""
    return "\n\n".join([SkillNodeConfig().system_prompt, disclosure.listing_prompt(skills)])


def _peer_listing(folders: Sequence[Path]) -> str | None:
    try:
        from skills_ref import to_prompt
    except ImportError:
        return None
    return "\n\n".join([SkillNodeConfig().system_prompt, to_prompt(list(folders))])


def _peer_load(root: Path) -> Callable[[], object] | None:
    try:
        from skills_ref import read_properties
    except ImportError:
        return None
    folders = sorted(p for p in root.iterdir() if (p / "SKILL.md").is_file())
    return lambda: [read_properties(f) for f in folders]


def _catalog_rows(root: Path) -> list[tuple[str, ...]]:
    """(a): ms per folder for the lazy catalog, the catalog plus every body, and skills-ref."""
    write_skills(root, N_FOLDERS)
    catalog = SkillCatalog([root])  # warm-up: imports, the built-in tool names, the OS cache
    assert len(catalog) == N_FOLDERS and not catalog.errors, catalog.errors
    assert all(s._body is None for s in catalog), "a body was read at load time"

    def with_bodies() -> None:
        for skill in SkillCatalog([root]):
            assert skill.body

    lazy = best_of(lambda: SkillCatalog([root]), repeat=5) / N_FOLDERS
    full = best_of(with_bodies, repeat=5) / N_FOLDERS
    rows: list[tuple[str, ...]] = [
        ("catalog, front matter only", f"{lazy * 1e3:.3f} ms", "1.00x",
         f"<= {TARGET_MS_PER_FOLDER:g} ms", verdict(lazy * 1e3 <= TARGET_MS_PER_FOLDER)),
        ("catalog + every body read", f"{full * 1e3:.3f} ms", f"{full / lazy:.2f}x", "", ""),
    ]
    peer = _peer_load(root)
    if peer is None:
        rows.append(("skills-ref read_properties", "not installed", "", "", ""))
    else:
        ref = best_of(peer, repeat=5) / N_FOLDERS
        rows.append(("skills-ref read_properties", f"{ref * 1e3:.3f} ms", f"{ref / lazy:.2f}x",
                     "", ""))
    return rows


def _prompt_rows(root: Path) -> list[tuple[str, ...]]:
    """(b): the system prompt for 16 skills, eager against progressive (and skills-ref's)."""
    low, high = BODY_RANGE
    sizes = [low + (high - low) * i // (N_PROMPT_SKILLS - 1) for i in range(N_PROMPT_SKILLS)]
    folders = write_skills(root, N_PROMPT_SKILLS, sizes=sizes)
    skills = SkillCatalog([root]).skills()
    eager = len(eager_prompt(skills).encode("utf-8"))
    progressive = len(progressive_listing(skills).encode("utf-8"))
    share = progressive / eager
    rows: list[tuple[str, ...]] = [
        ("eager: every body", f"{eager / 1024:.1f} KB", f"~{eager // 4:,}", "1.000", "", ""),
        ("progressive: name + description", f"{progressive / 1024:.1f} KB",
         f"~{progressive // 4:,}", f"{share:.3f}", f"<= {TARGET_PROGRESSIVE_SHARE:.2f}",
         verdict(share <= TARGET_PROGRESSIVE_SHARE)),
    ]
    peer = _peer_listing(folders)
    if peer is None:
        rows.append(("skills-ref <available_skills>", "not installed", "", "", "", ""))
    else:
        size = len(peer.encode("utf-8"))
        rows.append(("skills-ref <available_skills>", f"{size / 1024:.1f} KB", f"~{size // 4:,}",
                     f"{size / eager:.3f}", "", ""))
    body_kb = [len(s.body.encode("utf-8")) / 1024 for s in skills]
    print(f"{N_PROMPT_SKILLS} prompt skills, bodies {min(body_kb):.1f}-{max(body_kb):.1f} KB "
          f"(median {statistics.median(body_kb):.1f} KB); tokens estimated as bytes / 4")
    return rows


def main() -> None:
    """Print the two tables with their targets."""
    with tempfile.TemporaryDirectory(prefix="jianmu-bench-skills-") as tmp:
        started = time.perf_counter()
        load = _catalog_rows(Path(tmp) / "catalog")
        print(f"{N_FOLDERS} skill folders (bodies 2-12 KB, 3 files each), best of 5 rounds "
              f"({time.perf_counter() - started:.1f} s in all)")
        table(load, ("load", "per skill folder", "vs lazy", "target", ""))
        print()
        prompt = _prompt_rows(Path(tmp) / "prompt")
        table(prompt, ("system prompt", "size", "tokens", "vs eager", "target", ""))


if __name__ == "__main__":
    main()
