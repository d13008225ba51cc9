"""`read_skill_file` and `run_skill_script`: a loaded skill's own files, read and run.

The scripts run in FakeSandbox (what is asked of the sandbox), then for real in LocalSandbox
with bubblewrap and in DockerSandbox (``docker`` marker), where the skill's folder is
mounted read-only and the working folder is the workspace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jianmu.constraints import ExecutionConstraints
from jianmu.errors import ToolExecutionError, ToolInputError, ToolTimeoutError
from jianmu.execution import ExecCall, ExecResult, FakeSandbox, ToolRunner
from jianmu.skills import Skill
from jianmu.skills.skill_tools import ReadSkillFileTool, RunSkillScriptTool
from tests.execution._helpers import local_problem
from tests.skills import _skill_folder
from tests.skills._skill_folder import GUIDE, make_skill

pytestmark = pytest.mark.anyio

# fixtures shared with tests/security/test_skill_files.py
skill_workspace = _skill_folder.skill_workspace
mounting_sandbox = _skill_folder.mounting_sandbox


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module scope, so that one container serves the module's Docker tests."""
    return "asyncio"


@pytest.fixture(scope="module")
def skills(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Skill]:
    """Two loaded skills: ``demo`` (files and scripts) and ``other``."""
    root = tmp_path_factory.mktemp("skills")
    return {s.name: s for s in (make_skill(root), make_skill(root, "other"))}


@pytest.fixture
def reader(skills: dict[str, Skill]) -> ReadSkillFileTool:
    return ReadSkillFileTool(lambda: skills)


def ok(stdout: str = "") -> ExecResult:
    return ExecResult(exit_code=0, stdout=stdout)


# -- read_skill_file ----------------------------------------------------------------------


async def test_read_schema_and_metadata(reader: ReadSkillFileTool) -> None:
    assert reader.name == "read_skill_file"
    assert (reader.category, reader.permission, reader.sandboxed) == ("read", "auto", False)
    props = reader.input_schema["properties"]
    assert list(props) == ["skill", "path", "offset", "limit"]
    assert reader.input_schema["required"] == ["skill", "path"]
    assert "skill's folder" in props["path"]["description"]


async def test_read_a_reference_any_folder_and_skill_md(reader: ReadSkillFileTool) -> None:
    assert await reader.execute({"skill": "demo", "path": "references/guide.md"}) == GUIDE
    assert "One line per change" in await reader.execute(
        {"skill": "demo", "path": "examples/report.md"}
    )
    assert await reader.execute({"skill": "demo", "path": "forms.md"}) == "top-level file\n"
    assert "name: demo" in await reader.execute({"skill": "demo", "path": "SKILL.md"})
    assert await reader.execute({"skill": "demo", "path": "./references//guide.md"}) == GUIDE


async def test_offset_and_limit_are_lines(reader: ReadSkillFileTool) -> None:
    text = await reader.execute(
        {"skill": "demo", "path": "references/guide.md", "offset": 3, "limit": 2}
    )
    assert text.startswith("guide line 3\nguide line 4\n")
    assert "[lines 3-4 of 12; 8 more lines: call again with offset=5]" in text
    with pytest.raises(ToolInputError, match="past the end"):
        await reader.execute({"skill": "demo", "path": "references/guide.md", "offset": 40})
    with pytest.raises(ToolInputError):
        await reader.execute({"skill": "demo", "path": "references/guide.md", "limit": 0})


async def test_a_binary_file_is_answered_with_its_size(reader: ReadSkillFileTool) -> None:
    text = await reader.execute({"skill": "demo", "path": "assets/logo.png"})
    assert text == (
        "[assets/logo.png in skill 'demo' is a binary file of 510 bytes; "
        "its content is not shown]"
    )


async def test_unknown_or_unloaded_skill_names_the_loaded_ones(skills: dict[str, Skill]) -> None:
    only_demo = ReadSkillFileTool(lambda: {"demo": skills["demo"]})
    for name in ("other", "nope"):
        with pytest.raises(ToolInputError, match=r"loaded skills: 'demo'"):
            await only_demo.execute({"skill": name, "path": "SKILL.md"})
    nothing = ReadSkillFileTool(dict)
    with pytest.raises(ToolInputError, match="loaded skills: none"):
        await nothing.execute({"skill": "demo", "path": "SKILL.md"})


async def test_the_lookup_is_asked_at_each_call(skills: dict[str, Skill]) -> None:
    loaded: dict[str, Skill] = {}
    tool = ReadSkillFileTool(lambda: loaded)
    with pytest.raises(ToolInputError):
        await tool.execute({"skill": "demo", "path": "forms.md"})
    loaded["demo"] = skills["demo"]  # loaded later in the run (progressive disclosure)
    assert await tool.execute({"skill": "demo", "path": "forms.md"}) == "top-level file\n"


async def test_missing_file_or_folder_lists_the_skill_files(reader: ReadSkillFileTool) -> None:
    with pytest.raises(ToolExecutionError, match="does not exist") as missing:
        await reader.execute({"skill": "demo", "path": "references/nope.md"})
    assert "references/guide.md" in str(missing.value)
    with pytest.raises(ToolExecutionError, match="is a folder"):
        await reader.execute({"skill": "demo", "path": "references"})
    with pytest.raises(ToolExecutionError, match="is the folder"):
        await reader.execute({"skill": "demo", "path": "."})
    with pytest.raises(ToolInputError):
        await reader.execute({"skill": "demo", "path": "  "})


# -- run_skill_script with FakeSandbox: what is asked of the sandbox --------------------------


def fake(reply: ExecResult | None = None, **options: Any) -> FakeSandbox:
    return FakeSandbox(lambda call: reply or ok("done\n"), **options)


async def test_run_schema_and_metadata(skills: dict[str, Skill]) -> None:
    tool = RunSkillScriptTool(lambda: skills)
    assert tool.name == "run_skill_script"
    assert (tool.category, tool.permission, tool.sandboxed) == ("execute", "user_confirm", True)
    assert not tool.parallel_safe and tool.max_retries == 0
    assert tool.timeout_seconds is None  # the constraints' timeout speaks
    props = tool.input_schema["properties"]
    assert list(props) == ["skill", "path", "args", "stdin"]
    assert props["args"] == {
        "default": [], "description": "Arguments passed to the script, e.g. ['--help'].",
        "items": {"type": "string"}, "type": "array",
    }


@pytest.mark.parametrize(
    ("path", "argv0"),
    [("scripts/echo.py", ["python3"]), ("scripts/hello.sh", ["/bin/sh"]), ("scripts/run", [])],
)
async def test_each_kind_of_script_runs_from_the_read_only_mount(
    skills: dict[str, Skill], path: str, argv0: list[str]
) -> None:
    box = fake()
    tool = RunSkillScriptTool(lambda: skills)
    out = await tool.run_sandboxed(box, skill="demo", path=path, args=["a b", "--x"], stdin="in")
    assert out == "done"
    [call] = box.calls
    assert call == ExecCall(
        argv=[*argv0, f"/skills/demo/{path}", "a b", "--x"], stdin=b"in",
        env={"PYTHONDONTWRITEBYTECODE": "1", "JIANMU_SKILL_DIR": "/skills/demo"},
        ro_mounts={skills["demo"].pinned.fileno(): "/skills/demo"},  # the folder pinned at load
    )


async def test_files_that_cannot_run_are_refused_before_the_sandbox(
    skills: dict[str, Skill],
) -> None:
    box = fake()
    tool = RunSkillScriptTool(lambda: skills)
    with pytest.raises(ToolExecutionError, match="has a #! line but is not executable"):
        await tool.run_sandboxed(box, skill="demo", path="scripts/noexec")
    with pytest.raises(ToolExecutionError, match=r"not a \.py or \.sh file"):
        await tool.run_sandboxed(box, skill="demo", path="scripts/data.txt")
    with pytest.raises(ToolExecutionError, match="does not exist"):
        await tool.run_sandboxed(box, skill="demo", path="scripts/nope.py")
    with pytest.raises(ToolInputError, match="loaded skills"):
        await tool.run_sandboxed(box, skill="ghost", path="scripts/echo.py")
    with pytest.raises(ToolInputError, match="NUL"):
        await tool.run_sandboxed(box, skill="demo", path="scripts/echo.py", args=["a\x00b"])
    assert box.calls == []


async def test_a_sandbox_without_read_only_mounts_says_so(skills: dict[str, Skill]) -> None:
    box = fake(read_only_mounts=False)
    tool = RunSkillScriptTool(lambda: skills)
    with pytest.raises(ToolExecutionError, match=r"this sandbox \(FakeSandbox\) cannot run skill"):
        await tool.run_sandboxed(box, skill="demo", path="scripts/echo.py")
    assert box.calls == []


async def test_failures_are_reported_like_bash(skills: dict[str, Skill]) -> None:
    tool = RunSkillScriptTool(lambda: skills)
    failed = fake(ExecResult(exit_code=2, stdout="out\n", stderr="usage: echo\n"))
    with pytest.raises(ToolExecutionError, match="script exited with code 2\nout\n"):
        await tool.run_sandboxed(failed, skill="demo", path="scripts/echo.py")
    slow = fake(ExecResult(exit_code=-9, timed_out=True))
    with pytest.raises(ToolTimeoutError, match="ran past the sandbox's timeout"):
        await tool.run_sandboxed(slow, skill="demo", path="scripts/echo.py")
    big = fake(ok("x" * 100_000))
    text = await tool.run_sandboxed(big, skill="demo", path="scripts/echo.py")
    assert len(text) < 20_000 and "truncated" in text


# -- run_skill_script for real -----------------------------------------------------------------


async def test_help_of_a_python_script(mounting_sandbox: Any, skills: dict[str, Skill]) -> None:
    tool = RunSkillScriptTool(lambda: skills)
    out = await tool.run_sandboxed(
        mounting_sandbox, skill="demo", path="scripts/echo.py", args=["--help"]
    )
    assert "Echo what the skill was given." in out and "--stdin" in out


async def test_arguments_stdin_cwd_and_location(
    mounting_sandbox: Any, skills: dict[str, Skill]
) -> None:
    tool = RunSkillScriptTool(lambda: skills)
    out = await tool.run_sandboxed(
        mounting_sandbox, skill="demo", path="scripts/echo.py",
        args=["two words", "ü", "--stdin"],
        stdin="fed in\n",
    )
    lines = out.splitlines()
    assert lines[0] == "args: ['two words', 'ü']"
    assert lines[1] == "stdin: fed in"
    docker = type(mounting_sandbox).__name__ == "DockerSandbox"
    cwd = "/workspace" if docker else str(mounting_sandbox.workspace)
    assert lines[2] == f"cwd: {cwd}"
    assert lines[3:] == ["file: /skills/demo/scripts/echo.py", "skill dir: /skills/demo"]


async def test_sh_and_shebang_scripts(mounting_sandbox: Any, skills: dict[str, Skill]) -> None:
    tool = RunSkillScriptTool(lambda: skills)
    assert await tool.run_sandboxed(
        mounting_sandbox, skill="demo", path="scripts/hello.sh", args=["a", "b"]
    ) == "hello from sh: a b"
    assert await tool.run_sandboxed(
        mounting_sandbox, skill="other", path="scripts/run", args=["x"]
    ) == "ran itself: x"


async def test_the_skill_folder_is_read_only_the_workspace_is_not(
    mounting_sandbox: Any, skills: dict[str, Skill], skill_workspace: Path
) -> None:
    before = sorted(p.name for p in skills["demo"].folder.rglob("*"))
    tool = RunSkillScriptTool(lambda: skills)
    out = await tool.run_sandboxed(mounting_sandbox, skill="demo", path="scripts/write_here.py")
    assert "SUCCEEDED" not in out
    assert out.count("refused") == 4
    assert sorted(p.name for p in skills["demo"].folder.rglob("*")) == before
    assert (skill_workspace / "written-to-workspace.txt").read_text() == "ok"


async def test_each_run_sees_the_folder_as_it_is_now_and_only_its_own(
    mounting_sandbox: Any, tmp_path: Path
) -> None:
    first, second = make_skill(tmp_path, "first"), make_skill(tmp_path, "second")
    script = first.folder / "scripts" / "version.sh"
    tool = RunSkillScriptTool(lambda: {"first": first, "second": second})
    for version in ("v1", "v2"):
        script.write_text(f"echo {version}; ls /skills\n")
        script.chmod(0o644)
        out = await tool.run_sandboxed(mounting_sandbox, skill="first", path="scripts/version.sh")
        assert out == f"{version}\nfirst"
    out = await tool.run_sandboxed(mounting_sandbox, skill="second", path="scripts/hello.sh")
    assert out == "hello from sh: "
    listing = await mounting_sandbox.exec(
        "ls /skills", ro_mounts={str(second.folder.resolve()): "/skills/second"}
    )
    assert listing.stdout == "second\n"


async def test_through_a_tool_runner(skills: dict[str, Skill], skill_workspace: Path) -> None:
    if (problem := local_problem("local-bwrap")) is not None:
        pytest.skip(problem)
    tool = RunSkillScriptTool(lambda: skills)
    execution = ExecutionConstraints(workdir=str(skill_workspace), timeout_s=20)
    async with ToolRunner(execution) as runner:
        out = await tool.execute(
            {"skill": "demo", "path": "scripts/echo.py", "args": ["hi"]}, runner=runner
        )
    assert out.splitlines()[0] == "args: ['hi']"


@pytest.mark.parametrize(("first_line", "argv0"), [
    ("#!/bin/bash", ["/bin/bash"]),
    ("#!/usr/bin/env bash", ["/usr/bin/env", "bash"]),
    ("#! /bin/bash -e", ["/bin/bash", "-e"]),
    ("# no #! line", ["/bin/sh"]),
])
async def test_a_sh_script_runs_through_the_interpreter_its_first_line_names(
    tmp_path: Path, first_line: str, argv0: list[str]
) -> None:
    # a .sh file always ran under /bin/sh (dash on Debian): a #!/bin/bash script's arrays and
    # [[ ]] failed there with a syntax error, though its author named bash
    from jianmu.skills import load_skill

    folder = tmp_path / "bashy"
    (folder / "scripts").mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: bashy\ndescription: d\n---\nbody\n")
    (folder / "scripts" / "go.sh").write_text(f"{first_line}\nwords=(a b); echo ${{words[1]}}\n")
    skill = load_skill(folder)
    box = fake()
    tool = RunSkillScriptTool(lambda: {"bashy": skill})
    await tool.run_sandboxed(box, skill="bashy", path="scripts/go.sh")
    [call] = box.calls
    assert call.argv == [*argv0, "/skills/bashy/scripts/go.sh"]


async def test_a_text_file_that_is_not_utf8_is_named_so_not_binary(tmp_path: Path) -> None:
    # a Latin-1 reference (saved on Windows) was "a binary file of 12 bytes": the model and
    # the skill's author were told the wrong thing
    from jianmu.skills import load_skill

    folder = tmp_path / "latin"
    folder.mkdir()
    (folder / "SKILL.md").write_text("---\nname: latin\ndescription: d\n---\nbody\n")
    (folder / "ref.md").write_bytes(b"menu\ncaf\xe9 au lait\n")
    reader = ReadSkillFileTool(lambda: {"latin": load_skill(folder)})
    text = await reader.execute({"skill": "latin", "path": "ref.md"})
    assert text == ("[ref.md in skill 'latin' is not UTF-8 text (byte 0xe9 on line 2); its "
                    "content is not shown: the skill's author should save it as UTF-8]")
