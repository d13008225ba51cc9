"""Durable runs (issue 15): overhead over a plain run, throughput, parked runs, a DBOSAgent peer.

1. A ``react`` run (one model turn asking for three tool calls, then an answer) through
   `ReactiveRunner` and through `DurableEngine` (``start`` + ``result``, one worker launched in
   this process), on SQLite and PostgreSQL.
2. Throughput of runs on PostgreSQL with 1, 2 and 4 worker processes.
3. Runs parked on an approval in one worker: resident memory per run, threads.
4. pydantic-ai's `DBOSAgent` doing the same run, in its own process (DBOS is one per process).

PostgreSQL is a private cluster (tests/support/postgres.py), or the running server whose
superuser URL ``JIANMU_BENCH_POSTGRES`` names (the bench's databases are created there and
dropped after); without either the PostgreSQL parts print why and are skipped.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, LiteralString

from benchmarks._durable_app import STEPS, make_engine
from benchmarks._util import table, verdict
from jianmu.config import DurableConfig

ROOT = Path(__file__).resolve().parent.parent
MODEL_MS = 50.0
"""Simulated latency of one model reply (the tree makes two)."""
TOOL_MS = 10.0
"""Simulated latency of one tool call (the tree makes three, one by one)."""
OVERHEAD_RUNS = 10
FAST_POLL = 0.05
THROUGHPUT_RUNS = 500
WORKER_COUNTS = (1, 2, 4)
PARKED_RUNS = 1000
PEER_RUNS = 10
SETTLE_S = 1.0
"""Pause before reading a worker's memory and threads, for its last parked runs to settle."""
DEFAULT_POLL = DurableConfig().poll_interval_s
DEFAULT_CONCURRENCY = DurableConfig().worker_concurrency
WORKFLOW = "jianmu.run"


def progress(text: str) -> None:
    """One line of progress, at once."""
    print(f"  .. {text}", flush=True)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


# -- 1. overhead of a durable run ----------------------------------------------------------------
async def _overhead(url: str, poll: float, runs: int, queued: bool) -> tuple[float, float]:
    inputs = {"model_ms": MODEL_MS, "tool_ms": TOOL_MS}
    engine = make_engine(url, poll=poll)
    engine.launch()
    try:
        async def plain() -> float:
            runner = engine.build_runner("react", inputs, run_id="plain")
            start = time.perf_counter()
            result = await runner.run(timeout=60)
            assert result.status.value == "success", result
            return time.perf_counter() - start

        async def durable() -> float:
            start = time.perf_counter()
            if queued:  # enqueued, taken by the worker's queue poll, result polled
                result = await engine.result(await engine.start("react", inputs), timeout=120)
            else:  # the same durable workflow, started in this worker (as DBOSAgent.run does)
                result = await engine.run("react", inputs)
            assert result.status.value == "success", result
            return time.perf_counter() - start

        await plain()
        await durable()  # warm-up: first connections, first workflow
        plains = [await plain() for _ in range(runs)]
        durables = [await durable() for _ in range(runs)]
    finally:
        engine.shutdown()
    return statistics.median(plains), statistics.median(durables)


MODES = (("in this worker (engine.run)", DEFAULT_POLL, False),
         (f"queued, poll {DEFAULT_POLL} s (default)", DEFAULT_POLL, True),
         (f"queued, poll {FAST_POLL} s", FAST_POLL, True))
"""How a durable run is started: in the worker itself, or through the queue."""


def overhead(databases: dict[str, str], runs: int) -> dict[tuple[str, str], tuple[float, float]]:
    """Median plain and durable seconds per run, by (database, how the run starts)."""
    found: dict[tuple[str, str], tuple[float, float]] = {}
    for kind, url in databases.items():
        for label, poll, queued in MODES:
            progress(f"overhead on {kind}, {label}: {runs} plain + {runs} durable runs")
            found[kind, label] = asyncio.run(_overhead(url, poll, runs, queued))
    rows: list[tuple[str, ...]] = []
    for (kind, label), (plain, durable) in found.items():
        ratio = durable / plain
        per_step = (durable - plain) / STEPS
        rows.append((f"{kind}, {label}", ms(plain), ms(durable), f"{ratio:.2f}x",
                     f"{per_step * 1000:.1f} ms", "<= 1.5x", verdict(ratio <= 1.5)))
    print(f"\n1. durable run vs plain ReactiveRunner run (median of {runs}; model "
          f"{MODEL_MS:.0f} ms per reply x 2, tools {TOOL_MS:.0f} ms x 3 serial; {STEPS} steps; "
          "one worker in this process; a queued run also waits for the queue's poll)")
    table(rows, ("database, start", "plain", "durable", "ratio", "per step", "target", ""))
    return found


# -- worker processes ----------------------------------------------------------------------------
@contextmanager
def workers(url: str, count: int, log_dir: Path, **settings: str) -> Iterator[list[int]]:
    """``count`` worker processes of the bench app on ``url``, launched; yields their pids."""
    env = dict(os.environ, BENCH_DB=url, **settings,
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.setdefault("XDG_STATE_HOME", str(log_dir / "state"))
    procs = []
    try:
        for i in range(count):
            log = open(log_dir / f"worker{i}.log", "a", encoding="utf-8")
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "benchmarks._durable_app"], env=env, cwd=ROOT,
                stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True))
            log.close()
        for i, proc in enumerate(procs):
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line.startswith("ready"):
                text = (log_dir / f"worker{i}.log").read_text()
                raise RuntimeError(f"worker {i} did not start: {line!r}\n{text[-2000:]}")
        yield [p.pid for p in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)  # its runs need no clean end here
            proc.wait(timeout=60)


def _count(url: str, sql: str, **params: Any) -> int:
    """One count from DBOS's system tables (schema ``dbos`` on PostgreSQL)."""
    import sqlalchemy

    from jianmu.durable._tables import sqlalchemy_url

    postgres = not url.startswith("sqlite")
    engine = sqlalchemy.create_engine(sqlalchemy_url(url) if postgres else url)
    try:
        with engine.connect() as conn:
            text = sql.replace("dbos.", "dbos." if postgres else "")
            return int(conn.execute(sqlalchemy.text(text), params).scalar_one())
    finally:
        engine.dispose()


def finished(url: str) -> int:
    """Runs of the bench app that ended."""
    return _count(url, "SELECT count(*) FROM dbos.workflow_status WHERE name = :name "
                  "AND status IN ('SUCCESS', 'ERROR')", name=WORKFLOW)


def wait_count(count: Callable[[], int], target: int, timeout: float, what: str) -> None:
    """Wait until ``count()`` reaches ``target``; TimeoutError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while count() < target:
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


async def enqueue(url: str, tree: str, ids: list[str], inputs: dict[str, Any]) -> None:
    """Start runs ``ids`` of ``tree`` from a client, a few at a time."""
    client = make_engine(url)
    gate = asyncio.Semaphore(16)

    async def one(run_id: str) -> None:
        async with gate:
            await client.start(tree, inputs, run_id=run_id)

    try:
        await asyncio.gather(*(one(i) for i in ids))
    finally:
        client.shutdown()


# -- 2. throughput -------------------------------------------------------------------------------
def throughput(cluster: Any, runs: int, counts: tuple[int, ...], tmp: Path) -> dict[int, float]:
    """Runs per second with ``counts`` worker processes, each on a fresh database."""
    rates: dict[int, float] = {}
    for n in counts:
        name = f"bench_tp_{n}_{os.getpid()}"
        url = cluster.create_database(name)
        try:
            with workers(url, n, tmp):
                warm = [f"warm-{i}" for i in range(4 * n)]
                asyncio.run(enqueue(url, "react", warm, {}))
                wait_count(partial(finished, url), len(warm), 300, "the warm-up runs")
                progress(f"throughput: {runs} runs on {n} worker process(es)")
                start = time.perf_counter()
                asyncio.run(enqueue(url, "react", [f"run-{i}" for i in range(runs)], {}))
                queued = time.perf_counter() - start
                wait_count(partial(finished, url), len(warm) + runs, 900, f"{runs} runs")
                rates[n] = runs / (time.perf_counter() - start)
                progress(f"{rates[n]:.1f} runs/s (enqueueing took {queued:.1f} s)")
        finally:
            cluster.drop_database(name)
    rows: list[tuple[str, ...]] = []
    for n, rate in rates.items():
        scale = rate / rates[counts[0]]
        target = "" if n == counts[0] else (">= 1.6x" if n == 2 else "(printed)")
        mark = verdict(scale >= 1.6) if n == 2 else ""
        rows.append((f"{n} worker(s)", f"{rate:.1f} runs/s", f"{scale:.2f}x", target, mark))
    print(f"\n2. throughput on PostgreSQL: {runs} react runs, no simulated latency "
          f"(poll {DEFAULT_POLL} s, worker_concurrency {DEFAULT_CONCURRENCY}: the defaults; "
          f"{os.cpu_count()} CPU cores for the workers, PostgreSQL and this client)")
    table(rows, ("workers", "throughput", f"vs {counts[0]}", "target", ""))
    return rates


# -- 3. parked runs ------------------------------------------------------------------------------
def proc_stats(pid: int) -> tuple[int, int]:
    """Resident bytes and thread count of process ``pid``, read from outside."""
    try:
        import psutil
    except ImportError:
        fields = dict(line.split(":", 1) for line in
                      Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
        return int(fields["VmRSS"].split()[0]) * 1024, int(fields["Threads"])
    proc = psutil.Process(pid)
    return proc.memory_info().rss, proc.num_threads()


def parked(url: str, runs: int, tmp: Path) -> tuple[float, list[int]]:
    """Bytes per run parked on an approval; the worker's threads at 0, half and all parked."""
    def waiting(prefix: str) -> int:
        return _count(url, "SELECT count(*) FROM dbos.workflow_events WHERE key = :key "
                      "AND workflow_uuid LIKE :prefix", key="jianmu.pending", prefix=prefix + "%")

    concurrency = runs + 100  # a parked run holds its slot until it wakes
    half = runs // 2
    with workers(url, 1, tmp, BENCH_CONCURRENCY=str(concurrency)) as (pid,):
        warm = [f"warm-{i}" for i in range(20)]
        asyncio.run(enqueue(url, "park", warm, {}))
        wait_count(partial(waiting, "warm-"), len(warm), 300, "the warm-up runs to park")
        time.sleep(SETTLE_S)
        rss0, threads0 = proc_stats(pid)
        progress(f"parked: {runs} runs waiting for approvals in one worker (pid {pid})")
        asyncio.run(enqueue(url, "park", [f"park-a{i}" for i in range(half)], {}))
        wait_count(partial(waiting, "park-a"), half, 900, f"{half} runs to park")
        time.sleep(SETTLE_S)  # let the last ones settle in their recv
        _, threads_half = proc_stats(pid)
        asyncio.run(enqueue(url, "park", [f"park-b{i}" for i in range(runs - half)], {}))
        wait_count(partial(waiting, "park-"), runs, 900, f"{runs} runs to park")
        time.sleep(SETTLE_S)
        rss1, threads1 = proc_stats(pid)
    per_run = (rss1 - rss0) / runs
    threads = [threads0, threads_half, threads1]
    rows: list[tuple[str, ...]] = [
        ("resident memory", f"{rss0 / 2**20:.1f} MiB", "", f"{rss1 / 2**20:.1f} MiB",
         f"{per_run / 1024:.1f} KB per run", "<= 50 KB", verdict(per_run <= 50 * 1024)),
        # bounded pools (asyncio's executor: cores + 4) fill with the first runs; a thread per
        # run would add hundreds here, so a few (under 1% of the runs) is no growth per run
        ("threads", str(threads0), str(threads_half), str(threads1),
         f"+{threads1 - threads_half} for the 2nd half", "no growth per run",
         verdict(threads1 - threads_half <= max(2, (runs - half) // 100))),
    ]
    kind = "SQLite" if url.startswith("sqlite") else "PostgreSQL"
    print(f"\n3. {runs} runs parked on approvals, one worker process on {kind} (after 20 warm-up "
          f"runs; worker_concurrency {concurrency}; measured from outside)")
    table(rows, ("measure", "before", f"{half} parked", f"{runs} parked", "delta", "target", ""))
    return per_run, threads


# -- 4. the DBOSAgent peer -----------------------------------------------------------------------
def peer(url: str, runs: int) -> dict[str, Any]:
    """pydantic-ai's DBOSAgent figures from its own process (or why there are none)."""
    progress(f"peer: pydantic-ai DBOSAgent, {runs} plain + {runs} durable runs, own process")
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks._dbos_peer", url, str(runs), str(MODEL_MS),
         str(TOOL_MS)], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return {"skip": f"the peer process failed ({done.returncode}): "
                        f"{done.stderr.strip()[-500:]}"}
    return dict(json.loads(lines[-1]))


def compare(figures: dict[str, Any], ours: dict[str, tuple[float, float]], kind: str) -> None:
    """Print the peer's overhead beside Jianmu's on the same database."""
    print(f"\n4. per-run overhead of durability on {kind}, Jianmu vs pydantic-ai DBOSAgent "
          f"(same run, model {MODEL_MS:.0f} ms x 2, tools {TOOL_MS:.0f} ms x 3 one by one)")
    if "skip" in figures:
        print(f"   skipped: {figures['skip']}")
        return
    theirs = figures["durable"] - figures["plain"]
    rows: list[tuple[str, ...]] = [
        (f"pydantic-ai-slim {figures['version']}", ms(figures["plain"]), ms(figures["durable"]),
         ms(theirs), "", "", "")]
    for label, (plain, durable) in ours.items():
        mine = durable - plain
        ratio = mine / theirs if theirs > 0 else float("inf")
        rows.append((f"jianmu, {label}", ms(plain), ms(durable), ms(mine),
                     f"{ratio:.2f}x", "<= 1.0x", verdict(ratio <= 1.0)))
    table(rows, ("engine", "plain", "durable", "overhead", "vs peer", "target", ""))
    print("   DBOSAgent.run runs its workflow in the calling process, as engine.run does; a "
          "queued Jianmu run also waits for a worker's queue poll")


# -- main ----------------------------------------------------------------------------------------
class _Server:
    """A running PostgreSQL server, reached by a superuser's URL: creates and drops databases
    as `PostgresCluster` does, and drops those it created when closed."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self.created: list[str] = []

    def create_database(self, name: str) -> str:
        """Create an empty database; its URL (the same user's)."""
        self._execute("CREATE DATABASE {}", name)
        self.created.append(name)
        base, _, _ = self.admin_url.rpartition("/")
        return f"{base}/{name}"

    def drop_database(self, name: str) -> None:
        """Drop database ``name``, ending its sessions."""
        self._execute("DROP DATABASE IF EXISTS {} WITH (FORCE)", name)
        if name in self.created:
            self.created.remove(name)

    def close(self) -> None:
        for name in list(self.created):
            self.drop_database(name)

    def _execute(self, statement: LiteralString, name: str) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.admin_url, autocommit=True, connect_timeout=30) as conn:
            conn.execute(sql.SQL(statement).format(sql.Identifier(name)))


@contextmanager
def postgres() -> Iterator[Any]:
    """The server ``JIANMU_BENCH_POSTGRES`` names, else a private PostgreSQL cluster, else None
    (with the reason printed) when none can start."""
    given = os.environ.get("JIANMU_BENCH_POSTGRES")
    if given:
        server = _Server(given)
        try:
            yield server
        finally:
            server.close()
        return
    try:
        from tests.support.postgres import PostgresCluster, postgres_problem
    except ImportError as exc:
        problem: str | None = f"tests/support/postgres.py cannot be imported: {exc}"
    else:
        problem = postgres_problem()
    if problem is not None:
        print(f"  PostgreSQL parts skipped: {problem}", flush=True)
        yield None
        return
    progress("starting a private PostgreSQL cluster")
    with PostgresCluster() as cluster:
        yield cluster


def main() -> None:
    """Print the four durable figures and their targets."""
    try:
        import dbos  # noqa: F401
    except ImportError:
        print("  skipped: DBOS is not installed (pip install 'jianmu[dbos]')")
        return
    os.environ.setdefault("JIANMU_DBOS_LOG_LEVEL", "ERROR")
    with tempfile.TemporaryDirectory(prefix="jianmu-bench-") as folder, postgres() as cluster:
        tmp = Path(folder)
        os.environ.setdefault("XDG_STATE_HOME", str(tmp / "state"))
        databases = {"SQLite": f"sqlite:///{tmp / 'overhead.sqlite'}"}
        if cluster is not None:
            databases["PostgreSQL"] = cluster.create_database("bench_overhead")
        found = overhead(databases, OVERHEAD_RUNS)
        if cluster is not None:
            throughput(cluster, THROUGHPUT_RUNS, WORKER_COUNTS, tmp)
            parked(cluster.create_database("bench_parked"), PARKED_RUNS, tmp)
        else:
            print("\n2. throughput: skipped (needs PostgreSQL: several worker processes)")
            parked(f"sqlite:///{tmp / 'parked.sqlite'}", PARKED_RUNS, tmp)
        kind = "PostgreSQL" if cluster is not None else "SQLite"
        url = (cluster.create_database("bench_peer") if cluster is not None
               else f"sqlite:///{tmp / 'peer.sqlite'}")
        ours = {label: times for (k, label), times in found.items() if k == kind}
        compare(peer(url, PEER_RUNS), ours, kind)


if __name__ == "__main__":
    main()
