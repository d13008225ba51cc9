"""Build the sandbox image locally: debootstrap a small Debian with Python 3, then docker import.

Docker Hub may be unreachable, but a Debian mirror usually is (it is a package registry), so the
image is made from a root file system: ``debootstrap --variant=minbase
--include=python3``, trimmed, packed with ``tar`` and imported. Where debootstrap is
missing or fails, a Dockerfile build from ``debian:bookworm-slim`` is tried, which needs a
registry. `jianmu sandbox build-image` and ``make sandbox-image`` call `build_image`.

The image answers to ``python`` as well as ``python3`` (skills' instructions say ``python
scripts/x.py``): a one-line layer links it, added to an image that lacks it, offline.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from jianmu.errors import SandboxError
from jianmu.execution._docker import docker_errors as _docker_errors
from jianmu.execution._docker import import_docker as _import_docker
from jianmu.execution.docker_sandbox import DEFAULT_IMAGE

__all__ = ("DEFAULT_MIRROR", "build_image", "debian_mirror", "image_exists")

DEFAULT_MIRROR = "http://deb.debian.org/debian"
"""Used when the host's apt sources name no Debian mirror."""

_TRIM = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale",
         "var/cache/apt/archives", "var/lib/apt/lists", "var/cache/debconf")
_CHANGES = ['ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
            "ENV LANG=C.UTF-8", "WORKDIR /workspace", 'CMD ["/bin/bash"]']
_DOCKERFILE = """\
FROM debian:{suite}-slim
RUN apt-get update && apt-get install -y --no-install-recommends python3 \\
    && ln -sf python3 /usr/bin/python && rm -rf /var/lib/apt/lists/*
ENV LANG=C.UTF-8
WORKDIR /workspace
CMD ["/bin/bash"]
"""


def debian_mirror(sources: Path = Path("/etc/apt")) -> str:
    """The first non-security Debian mirror in the host's apt sources, else the default."""
    files = [sources / "sources.list", *sorted((sources / "sources.list.d").glob("*.list")),
             *sorted((sources / "sources.list.d").glob("*.sources"))]
    for path in files:
        try:
            text = path.read_text()
        except OSError:
            continue
        for uri in re.findall(r"(?:^deb\s+(?:\[[^\]]*\]\s+)?|^URIs:\s*)(\S+)", text, re.M):
            if uri.startswith("http") and "security" not in uri and "/debian" in uri:
                return uri
    return DEFAULT_MIRROR


def image_exists(name: str = DEFAULT_IMAGE) -> bool:
    """Whether the Docker daemon has ``name``.

    Raises:
        SandboxUnavailableError: no daemon answers.
    """
    docker = _import_docker()
    with _docker_errors("look up the image", name):
        client = docker.from_env(timeout=30)
        try:
            client.images.get(name)
        except docker.errors.ImageNotFound:
            return False
        finally:
            client.close()
    return True


def build_image(
    name: str = DEFAULT_IMAGE,
    *,
    suite: str = "bookworm",
    mirror: str | None = None,
    rootfs_cache: str | os.PathLike[str] | None = None,
    force: bool = False,
    log: Callable[[str], None] | None = None,
) -> str:
    """Build the sandbox image unless the daemon already has it; return the image id.

    Args:
        name: ``repository:tag`` to create.
        suite: Debian release to bootstrap.
        mirror: Debian mirror; default: the host's apt sources (`debian_mirror`).
        rootfs_cache: A tarball path: reused when present, written after a bootstrap, so a
            rebuild skips debootstrap.
        force: Rebuild even when the image exists.
        log: Receives one line per step (default: silent).

    Raises:
        SandboxUnavailableError: no Docker daemon answers.
        SandboxError: both the debootstrap build and the Dockerfile fallback failed.
    """
    say = log or (lambda _line: None)
    docker = _import_docker()
    with _docker_errors("connect to Docker", name):
        client = docker.from_env(timeout=600)
        client.ping()
    try:
        if not force:
            try:
                image = client.images.get(name)
            except docker.errors.ImageNotFound:
                pass
            else:
                say(f"image {name} is present ({image.short_id}); use force=True to rebuild")
                _link_python(client, name, say)
                return str(client.images.get(name).id)
        repository, _, tag = name.rpartition(":") if ":" in name.split("/")[-1] else (
            name, "", "latest")
        try:
            tarball = _rootfs_tarball(suite, mirror or debian_mirror(), rootfs_cache, say)
            try:
                say(f"importing the root file system as {name}")
                with _docker_errors("import the image", name):
                    client.api.import_image(
                        src=str(tarball), repository=repository, tag=tag, changes=_CHANGES
                    )
            finally:
                if rootfs_cache is None:
                    tarball.unlink(missing_ok=True)
        except SandboxError as first:
            say(f"debootstrap build failed ({first}); trying a Dockerfile build")
            try:
                with _docker_errors("build the image from a Dockerfile", name):
                    client.images.build(
                        fileobj=io.BytesIO(_DOCKERFILE.format(suite=suite).encode()),
                        tag=name, rm=True, pull=True,
                    )
            except SandboxError as second:
                raise SandboxError(
                    f"could not build {name!r}: debootstrap: {first}; Dockerfile: {second}. "
                    "Install debootstrap (apt-get install debootstrap) and run as root, or "
                    "make a registry reachable"
                ) from second
        _link_python(client, name, say)
        _check(client, name)
        image_id = str(client.images.get(name).id)
        say(f"built {name} ({image_id[:19]})")
        return image_id
    finally:
        client.close()


def _rootfs_tarball(
    suite: str, mirror: str, cache: str | os.PathLike[str] | None, say: Callable[[str], None]
) -> Path:
    if cache is not None and Path(cache).is_file():
        say(f"reusing the root file system in {cache}")
        return Path(cache)
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise SandboxError("debootstrap is not installed (apt-get install debootstrap)")
    if os.geteuid() != 0:
        raise SandboxError("debootstrap needs root; run the build as root")
    with tempfile.TemporaryDirectory(prefix="jianmu-rootfs-") as tmp:
        root = Path(tmp) / "rootfs"
        say(f"debootstrap {suite} from {mirror} (about a minute)")
        done = subprocess.run(
            [debootstrap, "--variant=minbase", "--include=python3", suite, str(root),
             mirror],
            capture_output=True, text=True, check=False,
        )
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-5:])
            raise SandboxError(f"debootstrap exited with {done.returncode}: {tail}")
        for rel in _TRIM:
            target = root / rel
            if target.is_dir():
                for child in target.iterdir():
                    if child.is_dir() and not child.is_symlink():
                        shutil.rmtree(child, ignore_errors=True)
                    else:
                        child.unlink(missing_ok=True)
        out = Path(cache) if cache is not None else Path(tempfile.mkstemp(suffix=".tar")[1])
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(out.name + ".partial")
        packed = subprocess.run(
            ["tar", "--numeric-owner", "-C", str(root), "-cf", str(partial), "."],
            capture_output=True, text=True, check=False,
        )
        if packed.returncode != 0:
            partial.unlink(missing_ok=True)
            raise SandboxError(f"tar failed: {packed.stderr.strip()}")
        partial.replace(out)  # a cache file is complete or absent, never half-written
        return out


def _has_python(client: object, name: str) -> bool:
    docker = _import_docker()
    try:
        client.containers.run(  # type: ignore[attr-defined]
            name, ["python", "-c", "pass"], remove=True, network_mode="none",
        )
    except (docker.errors.ContainerError, docker.errors.APIError):
        return False
    return True


def _link_python(client: object, name: str, say: Callable[[str], None]) -> None:
    """Give ``name`` a ``python`` command (a link to python3) if it has none: one layer,
    built from the local image, offline."""
    if _has_python(client, name):
        return
    say(f"linking python to python3 in {name}")
    with _docker_errors("add the python link", name):
        client.images.build(  # type: ignore[attr-defined]
            fileobj=io.BytesIO(f"FROM {name}\nRUN ln -sf python3 /usr/bin/python\n".encode()),
            tag=name, rm=True, pull=False,
        )


def _check(client: object, name: str) -> None:
    """Run Python once in the new image, so that a broken build fails here, not in a tool."""
    with _docker_errors("test the new image", name):
        output = client.containers.run(  # type: ignore[attr-defined]
            name, ["python", "-c", "import json, pickle; print(6 * 7)"], remove=True,
            network_mode="none",
        )
    if output.strip() != b"42":
        raise SandboxError(f"the image {name!r} was built but python does not work in it")
