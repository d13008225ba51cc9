"""Shared fixtures: async tests run on asyncio through anyio's pytest plugin.

PostgreSQL tests skip with a reason when no PostgreSQL server is installed, and fail instead
when ``JIANMU_REQUIRE_POSTGRES=1`` (CI), so a broken set-up cannot pass as skipped.
"""

from __future__ import annotations

import re
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.postgres import PostgresCluster, postgres_problem, skip_or_fail

_TESTS = Path(__file__).parent
_SLOW_FIRST = ("test_readme.py", "durable", "studio", "mcp", "cli", "security", "execution",
               "runtime", "benchmarks")
"""Where the long files are, longest first. xdist hands whole files to its workers in the order
collected (``--dist loadfile``): a long file handed out last keeps one worker busy while the
other has nothing left to do."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Long files first (`_SLOW_FIRST`); within a file, the order written."""
    def rank(item: pytest.Item) -> int:
        top = item.path.relative_to(_TESTS).parts[0]
        return _SLOW_FIRST.index(top) if top in _SLOW_FIRST else len(_SLOW_FIRST)

    items.sort(key=rank)


@pytest.fixture
def anyio_backend() -> str:
    """Run `@pytest.mark.anyio` tests on asyncio only."""
    return "asyncio"


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP listener on 127.0.0.1 of the host; yields its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    try:
        yield server.getsockname()[1]
    finally:
        server.close()


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """One private PostgreSQL server on 127.0.0.1 for the whole session."""
    problem = postgres_problem()
    if problem is not None:
        skip_or_fail(problem)
    with PostgresCluster() as cluster:
        yield cluster


@pytest.fixture
def postgres_url(
    request: pytest.FixtureRequest, postgres_cluster: PostgresCluster
) -> Iterator[str]:
    """The url of a fresh, empty database of ``postgres_cluster``, dropped after the test."""
    stem = re.sub(r"[^a-z0-9_]+", "_", request.node.name.lower())[:40].strip("_")
    name = f"t_{stem}_{uuid.uuid4().hex[:8]}"
    url = postgres_cluster.create_database(name)
    try:
        yield url
    finally:
        postgres_cluster.drop_database(name)
