"""Fixtures for the sandbox tests: one sandbox of each kind per module, Docker gated.

Docker tests skip with a reason when no daemon or image is available, and fail instead when
``JIANMU_REQUIRE_DOCKER=1`` (CI), so a broken Docker set-up cannot pass as skipped.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.execution._helpers import (
    SANDBOX_KINDS,
    local_problem,
    make_sandbox,
    require_docker,
)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module scope, so that a module-scoped sandbox (one container) serves many tests."""
    return "asyncio"


@pytest.fixture(scope="module")
def shared_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace that the container's unprivileged user may write to."""
    path = tmp_path_factory.mktemp("workspace")
    path.chmod(0o777)
    # pytest's base folders are 0700: let uid 65534 reach the workspace through them.
    for parent in path.parents:
        if parent == Path(tmp_path_factory.getbasetemp()).parent:
            break
        parent.chmod(parent.stat().st_mode | 0o011)
    return path


@pytest.fixture(scope="module", params=SANDBOX_KINDS)
async def sandbox(request: pytest.FixtureRequest, shared_workspace: Path) -> AsyncIterator[Any]:
    """A started sandbox of each kind; one container for the whole module."""
    kind = request.param
    if kind == "docker":
        require_docker()
    else:
        problem = local_problem(kind)
        if problem is not None:
            pytest.skip(problem)
    box = make_sandbox(kind, shared_workspace)
    box.kind = kind
    await box.start()
    try:
        yield box
    finally:
        await box.close()


@pytest.fixture
def marker() -> str:
    """A unique string to find a test's processes in the process table."""
    return f"jm{uuid.uuid4().hex[:10]}"


