"""Every snippet in README.md runs, in order, in a fresh copy of the project's folder, and prints
what README says it prints."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from jianmu.config import parse_config
from jianmu.skills import SkillCatalog

REPO = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)
EXPECTED_EXIT = re.compile(r"#\s*exit (\d+)\s*$")
RESUME_HINT = re.compile(r"jianmu resume (\S+) --approve (\S+)")


def blocks() -> list[tuple[str, str]]:
    return BLOCK.findall((REPO / "README.md").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("readme")
    shutil.copytree(REPO / "skills", root / "skills")
    shutil.copytree(REPO / "examples", root / "examples")
    # the shipped config too: a user runs the snippets from the repository's root
    shutil.copytree(REPO / "configs", root / "configs")
    return root


def environment(project: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JIANMU_", "OPENAI_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["XDG_STATE_HOME"] = str(project / ".state")  # the snippets' checkpoints stay out of ~
    return env


PRINT = re.compile(r"^\s*print\(")
TRAILING = re.compile(r"#\s*(.+?)\s*$")


def stated_outputs(code: str) -> list[str]:
    """What README says each ``print`` of a snippet prints, in order.

    The output is the print line's trailing comment, or, when the line has none, the comment
    line right below it. A stated output ending in ``...`` is a prefix of the printed line.
    Every print must state its output: a snippet whose output nobody checks proves nothing.
    """
    lines = code.splitlines()
    stated: list[str] = []
    for i, line in enumerate(lines):
        if not PRINT.match(line):
            continue
        _code, hash_, comment = line.partition("  # ")
        if hash_:
            stated.append(comment.strip())
            continue
        below = lines[i + 1].strip() if i + 1 < len(lines) else ""
        assert below.startswith("# "), f"README print without its output stated: {line.strip()}"
        stated.append(below[2:].strip())
    return stated


def matches(printed: str, stated: str) -> bool:
    if stated.endswith("..."):
        return printed.startswith(stated[:-3].rstrip())
    return printed == stated


def run_python(code: str, cwd: Path) -> None:
    out = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=environment(cwd),
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, f"snippet failed:\n{code}\n{out.stdout}\n{out.stderr}"
    printed = [line.rstrip() for line in out.stdout.splitlines() if line.strip()]
    stated = stated_outputs(code)
    assert len(printed) == len(stated), (
        f"the snippet printed {printed!r}, README states {stated!r}:\n{code}")
    for got, want in zip(printed, stated, strict=True):
        assert matches(got, want), f"README says {want!r}, the snippet printed {got!r}:\n{code}"


def run_console(block: str, cwd: Path) -> None:
    last_output = ""
    for line in block.splitlines():
        if not line.startswith("$ ") or line[2:].startswith("make "):
            continue  # `make demo` / `make test` are what CI itself runs
        command = EXPECTED_EXIT.sub("", line[2:]).strip()
        match = EXPECTED_EXIT.search(line)
        expected = int(match.group(1)) if match else 0
        if "RUN_ID" in command:
            hint = RESUME_HINT.search(last_output)
            assert hint, f"no run to resume in:\n{last_output}"
            command = command.replace("RUN_ID", hint.group(1)).replace("CALL_ID", hint.group(2))
        out = subprocess.run(["bash", "-c", command], cwd=cwd, env=environment(cwd),
                             capture_output=True, text=True, timeout=180,
                             stdin=subprocess.DEVNULL)
        assert out.returncode == expected, f"{command!r}:\n{out.stdout}\n{out.stderr}"
        last_output = out.stdout + out.stderr


def check_skill(text: str, cwd: Path) -> None:
    name = re.search(r"^name: (\S+)$", text, re.M)
    assert name, "a SKILL.md snippet needs a name"
    folder = cwd / "skills" / name.group(1)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(text, encoding="utf-8")
    catalog = SkillCatalog([cwd / "skills"])
    assert not catalog.errors, catalog.errors
    assert name.group(1) in catalog.names()


def test_readme_starts_with_the_two_setup_commands() -> None:
    head = "\n".join((REPO / "README.md").read_text().splitlines()[:10])
    assert "make demo" in head and "make test" in head


def test_the_extras_line_names_every_extra() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    text = (REPO / "README.md").read_text(encoding="utf-8")
    found = re.search(r"^Python 3\.11\+\. Extras: (.*?)\n\n", text, re.S | re.M)
    assert found, "README names the extras in one paragraph: 'Python 3.11+. Extras: ...'"
    named = set(re.findall(r"`(\w+)`", found.group(1)))
    assert set(extras) <= named, sorted(set(extras) - named)


# every snippet in turn (each builds on the last: the runs to resume, the skill's report), some
# of them subprocesses: about 20 s on a quiet machine, more than the default 120 s on a loaded one
@pytest.mark.timeout(600)
def test_every_snippet_runs(project: Path) -> None:
    kinds = set()
    for kind, body in blocks():
        kinds.add(kind)
        if kind == "python":
            run_python(body, project)
        elif kind == "console":
            run_console(body, project)
        elif kind == "yaml":
            parse_config(body, "README.md")
        elif kind == "markdown":
            check_skill(body, project)
        elif kind == "bash":  # a script from examples/, shown whole and run by its own test
            scripts = {p.read_text().strip() for p in (REPO / "examples").glob("*.sh")}
            assert body.strip() in scripts, "a bash block must be a script of examples/"
        else:
            pytest.fail(f"README has a {kind!r} block the test does not know how to run")
    assert kinds == {"python", "console", "yaml", "markdown", "bash"}
    assert (project / "out" / "report.md").is_file()  # the skill run by `jianmu run`
    assert (project / ".jianmu" / "notes.txt").read_text().strip() == "buy milk"


def test_inline_yaml_mappings_in_the_prose_parse() -> None:
    import yaml

    text = (REPO / "README.md").read_text(encoding="utf-8")
    prose = BLOCK.sub("", text).replace("\n", " ")
    spans = [s for s in re.findall(r"`([a-z_]+: \{[^`]*\})`", prose)]
    assert spans, "README shows inline YAML like `auth: {type: bearer, ...}`"
    for span in spans:
        parsed = yaml.safe_load(span)
        assert isinstance(parsed, dict) and len(parsed) == 1, span
        (value,) = parsed.values()
        assert isinstance(value, dict), span
