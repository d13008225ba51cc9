"""Python's multiprocessing runs in a local sandbox, with bubblewrap or without, warm or cold:
its locks and queues are POSIX semaphores in ``/dev/shm``, which bubblewrap's ``/dev`` held
read-only to the commands' user (``PermissionError`` from ``SemLock``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu.execution.local_sandbox import LocalSandbox, bwrap_available

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]

POOLS = r"""
import multiprocessing as mp
with mp.get_context("fork").Pool(2) as pool:
    print(pool.map(abs, [-1, -2, 3]))
queue, lock = mp.Queue(), mp.Lock()
with lock:
    queue.put("through a queue")
print(queue.get())
"""


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
@pytest.mark.parametrize("bwrap", [
    pytest.param(True, id="bwrap", marks=pytest.mark.skipif(
        not bwrap_available(network=False), reason="no bubblewrap")),
    pytest.param(False, id="plain")])
async def test_multiprocessing_pools_and_queues_run(
        shared_workspace: Path, bwrap: bool, warm: bool) -> None:
    async with LocalSandbox(shared_workspace, use_bwrap=bwrap, network=not bwrap, timeout=60,
                            warm=warm) as box:
        done = await box.exec([box.python, "-c", POOLS])
    assert done.exit_code == 0, done
    assert done.stdout.splitlines() == [
        "[1, 2, 3]", "through a queue"], done
