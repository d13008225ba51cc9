"""Where tools run: `ToolRunner`, the `Sandbox` protocol and its implementations.

`DockerSandbox` needs the ``docker`` extra only when it is used; importing this package does
not import docker-py.
"""

from __future__ import annotations

from jianmu.execution.docker_sandbox import DEFAULT_IMAGE, DockerSandbox
from jianmu.execution.image import build_image, image_exists
from jianmu.execution.local_sandbox import LocalSandbox, bwrap_available
from jianmu.execution.runner import ToolRunner
from jianmu.execution.sandbox import (
    MOUNT_ROOT,
    BaseSandbox,
    ExecCall,
    ExecResult,
    FakeSandbox,
    MountingSandbox,
    Sandbox,
    can_mount_read_only,
)
from jianmu.execution.workspace import current_workspace, use_workspace

__all__ = (
    "DEFAULT_IMAGE",
    "MOUNT_ROOT",
    "BaseSandbox",
    "DockerSandbox",
    "ExecCall",
    "ExecResult",
    "FakeSandbox",
    "LocalSandbox",
    "MountingSandbox",
    "Sandbox",
    "ToolRunner",
    "build_image",
    "bwrap_available",
    "can_mount_read_only",
    "current_workspace",
    "image_exists",
    "use_workspace",
)
