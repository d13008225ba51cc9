"""The real keep-alive model server the provider tests share: one per module, each test's
script and request log emptied before it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.model_server import ModelServer


@pytest.fixture(scope="module")
def running() -> Iterator[ModelServer]:
    with ModelServer() as started:
        yield started


@pytest.fixture
def server(running: ModelServer) -> ModelServer:
    running.requests.clear()
    running._script.clear()
    return running
