"""Where tools run: `ToolRunner`, the `Sandbox` protocol and its implementations.

The public names load on first use (module ``__getattr__``): a run whose tools all run
in-process imports the runner and never a sandbox, and `DockerSandbox` needs the ``docker``
extra only when it is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jianmu._lazy import lazy_names

if TYPE_CHECKING:
    from jianmu.execution.docker_sandbox import DEFAULT_IMAGE, DockerSandbox
    from jianmu.execution.image import build_image, image_exists
    from jianmu.execution.local_sandbox import LocalSandbox, bwrap_available
    from jianmu.execution.runner import ToolRunner, current_workspace, use_workspace
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

_HOLDERS = {
    "jianmu.execution.docker_sandbox": ("DEFAULT_IMAGE", "DockerSandbox"),
    "jianmu.execution.image": ("build_image", "image_exists"),
    "jianmu.execution.local_sandbox": ("LocalSandbox", "bwrap_available"),
    "jianmu.execution.runner": ("ToolRunner", "current_workspace", "use_workspace"),
    "jianmu.execution.sandbox": (
        "MOUNT_ROOT",
        "BaseSandbox",
        "ExecCall",
        "ExecResult",
        "FakeSandbox",
        "MountingSandbox",
        "Sandbox",
        "can_mount_read_only",
    ),
}
__getattr__, __dir__ = lazy_names(__name__, _HOLDERS, __all__)
