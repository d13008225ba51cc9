"""Skills over MCP: prompt skills as prompts, skill files as resources (the SDK's client)."""

from __future__ import annotations

import base64
import shutil
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError as SDKError

from jianmu.mcp import build_mcp_server, skill_resource_uri
from jianmu.mcp.skill_content import skill_files
from jianmu.skills import SkillCatalog
from jianmu.tools.base import tool
from jianmu.tools.registry import ToolSet

pytestmark = pytest.mark.anyio

PUBLIC_SKILLS = Path(__file__).resolve().parents[1] / "fixtures" / "public_skills"
WORKSPACE_REPORT = Path(__file__).resolve().parents[2] / "skills" / "workspace-report"


@tool
def echo(text: str) -> str:
    """Say it back.

    Args:
        text: What to say.
    """
    return text


@pytest.fixture
def skills_dir(tmp_path: Path) -> Path:
    """A copy of three fixture skills and a BT skill, plus a file outside every skill."""
    root = tmp_path / "skills"
    for name in ("pdf-forms", "brand-styling", "release-notes"):
        shutil.copytree(PUBLIC_SKILLS / name, root / name)
    shutil.copytree(WORKSPACE_REPORT, root / "workspace-report")
    (tmp_path / "secret.txt").write_text("top secret", encoding="utf-8")
    return root


def _server(skills_dir: Path) -> Server[Any]:
    catalog = SkillCatalog([skills_dir])
    assert not catalog.errors
    prompts = [s for s in catalog if not s.is_bt]
    return build_mcp_server(ToolSet.from_tools([echo]), prompts=prompts, files=catalog.skills())


async def test_prompt_skills_are_prompts(skills_dir: Path) -> None:
    async with Client(_server(skills_dir)) as client:
        listed = {p.name: p for p in (await client.list_prompts()).prompts}
        assert sorted(listed) == ["brand-styling", "pdf-forms", "release-notes"]  # no BT skill
        assert (listed["pdf-forms"].description or "").startswith("Fill in, check and summarise")
        assert not listed["pdf-forms"].arguments
        got = await client.get_prompt("pdf-forms")
        assert got.description == listed["pdf-forms"].description
        [message] = got.messages
        assert message.role == "user" and message.content.type == "text"
        body = (skills_dir / "pdf-forms" / "SKILL.md").read_text(encoding="utf-8")
        assert message.content.text.startswith("# PDF forms")
        assert message.content.text == body.split("---\n", 2)[2].strip()
        with pytest.raises(SDKError, match=r"unknown prompt 'nope'.*pdf-forms"):
            await client.get_prompt("nope")
        assert [t.name for t in (await client.list_tools()).tools] == ["echo"]


async def test_skill_files_are_resources(skills_dir: Path) -> None:
    (skills_dir / "workspace-report" / "__pycache__").mkdir(exist_ok=True)
    (skills_dir / "workspace-report" / "__pycache__" / "tree.cpython-311.pyc").write_bytes(b"x")
    async with Client(_server(skills_dir)) as client:
        listed = {r.name: r for r in (await client.list_resources()).resources}
        assert "pdf-forms/forms.md" in listed and "pdf-forms/reference/guide.md" in listed
        assert "release-notes/examples/weekly-update.md" in listed
        assert "workspace-report/tree.py" in listed  # a BT skill's files too
        assert not any(n.endswith("/SKILL.md") or "__pycache__" in n for n in listed)
        logo = listed["brand-styling/themes/logo.png"]
        assert logo.uri == "skill://brand-styling/themes/logo.png"
        assert logo.mime_type == "image/png"
        assert logo.size == (PUBLIC_SKILLS / "brand-styling/themes/logo.png").stat().st_size
        guide = listed["pdf-forms/reference/guide.md"]
        assert guide.mime_type == "text/markdown"

        text = (await client.read_resource(guide.uri)).contents
        assert len(text) == 1 and text[0].mime_type == "text/markdown"
        expected = (skills_dir / "pdf-forms/reference/guide.md").read_text(encoding="utf-8")
        assert text[0].text == expected  # type: ignore[union-attr]
        theme = (await client.read_resource("skill://brand-styling/themes/harbor.json")).contents
        assert theme[0].mime_type == "application/json" and '"harbor"' in theme[0].text  # type: ignore[union-attr]
        blob = (await client.read_resource(logo.uri)).contents
        assert blob[0].mime_type == "image/png"
        raw = base64.b64decode(blob[0].blob)  # type: ignore[union-attr]
        assert raw == (PUBLIC_SKILLS / "brand-styling/themes/logo.png").read_bytes()


@pytest.mark.parametrize(
    ("uri", "says"),
    [
        ("skill://pdf-forms/../../secret.txt", "outside the skill's folder"),
        ("skill://pdf-forms/%2E%2E/%2E%2E/secret.txt", "outside the skill's folder"),
        ("skill://pdf-forms//etc/passwd", "outside the skill's folder"),
        ("skill://pdf-forms/reference/leak.md", "through a symbolic link"),
        ("skill://pdf-forms/SKILL.md", "not one of the skill's files"),
        ("skill://pdf-forms/nothing.md", "has no file 'nothing.md'"),
        ("skill://pdf-forms/reference", "'reference' is a folder"),
        ("skill://other/forms.md", "unknown resource"),
        ("file:///etc/passwd", "unknown resource"),
    ],
)
async def test_reads_outside_a_skill_folder_are_refused(
    skills_dir: Path, uri: str, says: str
) -> None:
    leak = skills_dir / "pdf-forms" / "reference" / "leak.md"
    leak.symlink_to(skills_dir.parent / "secret.txt")
    async with Client(_server(skills_dir)) as client:
        listed = [r.name for r in (await client.list_resources()).resources]
        assert "pdf-forms/reference/leak.md" not in listed  # a symlink out is not listed
        with pytest.raises(SDKError, match=says) as caught:
            await client.read_resource(uri)
        assert "top secret" not in str(caught.value)


async def test_a_symlink_inside_the_folder_is_served(tmp_path: Path) -> None:
    folder = tmp_path / "pdf-forms"
    shutil.copytree(PUBLIC_SKILLS / "pdf-forms", folder)
    (folder / "guide.md").symlink_to(folder / "reference" / "guide.md")
    (folder / "outside").symlink_to(tmp_path, target_is_directory=True)
    files = dict(skill_files(folder))
    assert "guide.md" in files and not any(f.startswith("outside") for f in files)
    server = build_mcp_server(ToolSet.from_tools([echo]), files=SkillCatalog([folder]).skills())
    async with Client(server) as client:
        read = await client.read_resource(skill_resource_uri("pdf-forms", "guide.md"))
        assert "helper.py reference" in read.contents[0].text  # type: ignore[union-attr]


async def test_without_skills_no_prompt_or_resource_capability() -> None:
    async with Client(build_mcp_server(ToolSet.from_tools([echo]))) as client:
        caps = client.server_capabilities
        assert caps is not None and caps.prompts is None and caps.resources is None
        with pytest.raises(SDKError):
            await client.list_prompts()


async def test_a_server_of_skill_files_answers_the_template_listing(skills_dir: Path) -> None:
    """It declares the resources capability, whose methods include
    ``resources/templates/list``; hosts ask it after ``resources/list``, and it was refused as
    an unknown method (the SDK's own server answers it, with none)."""
    async with Client(_server(skills_dir)) as client:
        assert (await client.list_resource_templates()).resource_templates == []
        assert (await client.list_resources()).resources
