"""Reading a huge file costs no more memory than a small one (issue 27, item 6).

`read_file` and `read_skill_file` once read a whole line before cutting it: a 200 MB file
with no newline grew the host process by about 520 MiB. Every read is now bounded in bytes
before it is split into lines; the answer says what was cut and where to go on.

The measure is the peak resident size of a fresh process (``ru_maxrss``) before and after the
reads, so nothing else in the test run counts.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jianmu.execution.runner import use_workspace
from jianmu.tools.builtin import ReadFileTool
from jianmu.tools.builtin.files import MAX_READ_BYTES

pytestmark = pytest.mark.anyio

HUGE = 200 * 1024 * 1024
ALLOWED_GROWTH_KB = 64 * 1024

CHILD = textwrap.dedent('''\
    import json, resource, sys, asyncio
    from pathlib import Path
    from jianmu.execution.runner import use_workspace
    from jianmu.skills import load_skill
    from jianmu.skills.skill_tools import ReadSkillFileTool
    from jianmu.tools.builtin import GrepSearchTool, ReadFileTool

    workspace, skill_folder = Path(sys.argv[1]), Path(sys.argv[2])
    skill = load_skill(skill_folder)
    reader = ReadSkillFileTool(lambda: {skill.name: skill})

    async def reads():
        with use_workspace(workspace):
            small = await ReadFileTool().execute({"path": "small.txt"})
            assert small == "a small file\\n", small
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            found = {
                "read_file": await ReadFileTool().execute({"path": "huge.txt"}),
                "read_file_lines": await ReadFileTool().execute(
                    {"path": "lines.txt", "offset": 2, "limit": 3}),
                "read_skill_file": await reader.execute(
                    {"skill": skill.name, "path": "references/huge.md"}),
                "grep": await GrepSearchTool().execute({"pattern": "needle", "path": "."}),
            }
            after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return before, after, found

    before, after, found = asyncio.run(reads())
    print(json.dumps({"growth_kb": after - before,
                      "found": {k: [len(v), v[:40], v[-400:]] for k, v in found.items()}}))
''')


def _huge(path: Path, *, lines: bool = False) -> None:
    """200 MB of text: one line with no newline, or a few lines whose second is huge."""
    block = b"x" * (1024 * 1024)
    with path.open("wb") as fh:
        if lines:
            fh.write(b"first\n")
        for _ in range(HUGE // len(block)):
            fh.write(block)
        if lines:
            fh.write(b"\nthird\nfourth needle\n")


@pytest.fixture(scope="module")
def huge_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("bounded")
    workspace = root / "ws"
    workspace.mkdir()
    (workspace / "small.txt").write_text("a small file\n")
    _huge(workspace / "huge.txt")
    _huge(workspace / "lines.txt", lines=True)
    # what grep searches (it skips files over 10 MB): one 8 MB line, then the match
    (workspace / "mid.txt").write_bytes(b"y" * (8 * 1024 * 1024) + b"\nneedle here\n")
    skill = root / "skills" / "bulky"
    (skill / "references").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: bulky\ndescription: A skill with a huge file.\n"
                                    "---\nRead references/huge.md.\n")
    (skill / "references" / "huge.md").hardlink_to(workspace / "huge.txt")
    return workspace, skill


def test_huge_files_are_read_in_flat_memory(huge_files: tuple[Path, Path]) -> None:
    workspace, skill = huge_files
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(workspace), str(skill)],
        capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["growth_kb"] <= ALLOWED_GROWTH_KB, report
    found = report["found"]
    size, head, tail = found["read_file"]
    assert head == "x" * 40 and size < MAX_READ_BYTES + 1000
    assert f"line 1 is {HUGE:,} bytes long and only its first {MAX_READ_BYTES:,} bytes" in tail
    size, head, tail = found["read_skill_file"]
    assert head == "x" * 40 and size < MAX_READ_BYTES + 1000
    assert "only its first" in tail and "[lines 1-1 of 1;" in tail
    _size, head, tail = found["read_file_lines"]
    assert head == "x" * 40  # line 2, cut; lines 3 and 4 wait for the next call
    assert tail.endswith("; 2 more lines: call again with offset=3]"), tail
    assert f"line 2 is {HUGE + 1:,} bytes long" in tail  # its newline counts
    _size, head, _tail = found["grep"]
    assert head == "mid.txt:2:needle here"


async def test_the_cut_is_said_and_the_rest_can_be_read(tmp_path: Path) -> None:
    long_line = "a" + "é" * 200_000  # the byte limit falls inside a character
    (tmp_path / "f.txt").write_text(f"{long_line}\nsecond\n", encoding="utf-8")
    with use_workspace(tmp_path):
        first = await ReadFileTool().execute({"path": "f.txt"})
        second = await ReadFileTool().execute({"path": "f.txt", "offset": 2})
    text, note = first.rsplit("\n", 1)
    shown = len(text.encode())
    assert set(text[1:]) == {"é"} and shown == MAX_READ_BYTES - 1  # whole characters only
    assert note == (f"[lines 1-1 of 2; line 1 is 400,002 bytes long and only its first "
                    f"{shown:,} bytes are shown (the output is limited to "
                    f"{MAX_READ_BYTES:,} bytes); 1 more line: call again with offset=2]")
    assert second == "second\n[lines 2-2 of 2]"
