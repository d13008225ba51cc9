"""The sandbox image build: mirror discovery, rootfs cache, import, and the cached path."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

import jianmu.execution.image as image_mod
from jianmu.errors import SandboxError
from jianmu.execution.docker_sandbox import DEFAULT_IMAGE
from jianmu.execution.image import DEFAULT_MIRROR, build_image, debian_mirror, image_exists
from tests.execution._helpers import require_docker


def test_mirror_from_deb822_sources(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://security.debian.org/debian-security\nSuites: bookworm\n\n"
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\n"
    )
    assert debian_mirror(tmp_path) == "http://mirror.example/debian"


def test_mirror_from_one_line_sources(tmp_path: Path) -> None:
    (tmp_path / "sources.list").write_text(
        "# comment\ndeb [arch=amd64] http://ftp.example.org/debian bookworm main\n"
    )
    assert debian_mirror(tmp_path) == "http://ftp.example.org/debian"


def test_mirror_default_when_none_configured(tmp_path: Path) -> None:
    assert debian_mirror(tmp_path) == DEFAULT_MIRROR


def test_missing_debootstrap_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(image_mod.shutil, "which", lambda name: None)
    with pytest.raises(SandboxError, match=r"apt-get install debootstrap"):
        image_mod._rootfs_tarball("bookworm", DEFAULT_MIRROR, None, lambda _: None)


def test_rootfs_cache_skips_debootstrap(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cache = tmp_path / "rootfs.tar"
    cache.write_bytes(b"cached")
    monkeypatch.setattr(image_mod.shutil, "which", lambda name: None)  # would fail if called
    lines: list[str] = []
    assert image_mod._rootfs_tarball("bookworm", DEFAULT_MIRROR, cache, lines.append) == cache
    assert lines == [f"reusing the root file system in {cache}"]


@pytest.mark.docker
def test_existing_image_is_reused() -> None:
    require_docker()
    import docker

    client = docker.from_env()
    try:
        expected = client.images.get(DEFAULT_IMAGE).id
    finally:
        client.close()
    lines: list[str] = []
    assert build_image(DEFAULT_IMAGE, log=lines.append) == expected
    assert "is present" in lines[0]
    assert image_exists(DEFAULT_IMAGE) and not image_exists("jianmu-sandbox:no-such-tag")


@pytest.mark.docker
def test_import_from_a_rootfs_tarball(tmp_path: Path) -> None:
    require_docker()
    import docker

    client: Any = docker.from_env(timeout=300)
    name = f"jianmu-sandbox:test-{uuid.uuid4().hex[:8]}"
    tarball = tmp_path / "rootfs.tar"
    source = client.containers.create(DEFAULT_IMAGE, ["true"])
    try:
        with tarball.open("wb") as fh:
            for chunk in source.export():
                fh.write(chunk)
        image_id = build_image(name, rootfs_cache=tarball)  # checks python3 in it, too
        image = client.images.get(name)
        assert image.id == image_id
        assert image.attrs["Config"]["WorkingDir"] == "/workspace"
        assert tarball.exists()  # a cache is kept for the next build
    finally:
        source.remove(force=True)
        try:
            client.images.remove(name, force=True)
        except docker.errors.ImageNotFound:
            pass
        client.close()
