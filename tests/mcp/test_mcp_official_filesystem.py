"""Jianmu's MCP client against the official ``@modelcontextprotocol/server-filesystem`` (npm).

The package is installed once into a cache folder (the ``filesystem_script`` fixture of
conftest.py); the tests skip, saying why, when ``npm`` is absent or the registry cannot be
reached.
"""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from jianmu.mcp import MCPToolProvider
from jianmu.tools.registry import ToolSet

pytestmark = pytest.mark.anyio
PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5"
       "ErkJggg==")


@pytest.fixture
async def filesystem(filesystem_script: Path, tmp_path: Path) -> AsyncIterator[ToolSet]:
    (tmp_path / "notes.txt").write_text("hello from the filesystem server\n", encoding="utf-8")
    provider = MCPToolProvider("fs", command=str(shutil.which("node")),
                               args=[str(filesystem_script), str(tmp_path)], trust="read_only",
                               timeout=30, connect_timeout=60)
    toolset = await ToolSet.from_providers([provider])
    try:
        yield toolset
    finally:
        await provider.close()


async def test_lists_strict_exports_and_calls_the_official_server(
    filesystem: ToolSet, tmp_path: Path
) -> None:
    names = filesystem.names()
    assert {"fs__read_text_file", "fs__write_file", "fs__list_allowed_directories"} <= set(names)
    assert len(names) >= 10
    # every tool exports strictly, the one without parameters too
    exported = {e["function"]["name"]: e["function"] for e in filesystem.to_openai(strict=True)}
    assert set(exported) == set(names)
    assert exported["fs__list_allowed_directories"]["parameters"] == {
        "type": "object", "properties": {}, "required": [], "additionalProperties": False,
    }
    assert all(f["strict"] is True for f in exported.values())
    # the server's hints, believed for reading: a read tool runs freely, a write one asks
    assert filesystem.get("fs__read_text_file").permission == "auto"  # type: ignore[union-attr]
    assert filesystem.get("fs__write_file").permission == "user_confirm"  # type: ignore[union-attr]
    listed = await filesystem.execute("fs__list_allowed_directories", {})
    assert listed.ok and str(tmp_path.resolve()) in str(listed.output)
    read = await filesystem.execute("fs__read_text_file", {"path": str(tmp_path / "notes.txt")})
    assert read.ok, read.error
    assert "hello from the filesystem server" in str(read.output)
    outside = await filesystem.execute("fs__read_text_file", {"path": "/etc/hostname"})
    assert not outside.ok and "denied" in (outside.error or "").lower()


async def test_a_picture_it_reads_reaches_the_model_once_as_an_image_not_as_base64_text(
    filesystem: ToolSet, tmp_path: Path
) -> None:
    """``read_media_file`` answers with an image block and the same block again in its
    ``structuredContent`` (its output schema's ``content``): the structured content, which
    the model reads, carried the image's base64 as text, cut to the result limit, beside the
    image that travels whole. In the text the image is its one-line stand-in."""
    picture = base64.b64decode(PNG) + bytes(30_000)  # past the result limit as base64
    (tmp_path / "chart.png").write_bytes(picture)
    read = await filesystem.execute("fs__read_media_file", {"path": str(tmp_path / "chart.png")})
    assert read.ok, read.error
    assert [(m.kind, m.mime_type) for m in read.media] == [("image", "image/png")]
    assert base64.b64decode(read.media[0].data) == picture
    shown = json.dumps(read.output)
    assert read.media[0].data[:100] not in shown, shown[:300]
    assert read.output == {"content": [{"type": "image", "data": read.media[0].describe(),
                                        "mimeType": "image/png"}]}
    assert not read.truncated
