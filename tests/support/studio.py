"""Studio test helpers: suspended runs started by the CLI, the studio served on a free port,
and headless Chromium (Debian's) driven by Selenium."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from io import StringIO
from pathlib import Path
from typing import Any

FLOW = Path(__file__).resolve().parent.parent / "studio" / "studio_flow.py"
XSS = "<script>alert('args')</script>"


def start_suspended(checkpoints: Path, target: str = f"prod {XSS}", flow: Path = FLOW) -> str:
    """Run the studio flow (or ``flow``) with ``jianmu run --non-interactive`` (it suspends);
    its run id."""
    from jianmu.cli import main

    config = checkpoints.parent / "jianmu.yaml"
    checkpoints.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f"runtime:\n  checkpoint_path: {checkpoints}\n", encoding="utf-8")
    out = StringIO()
    with redirect_stdout(out):
        code = main(["run", str(flow), "--config", str(config), "--input", f"target={target}",
                     "--non-interactive"])
    assert code == 3, out.getvalue()
    found = re.search(r"run (\w+)", out.getvalue())
    assert found, out.getvalue()
    return found.group(1)


def durable_pages(client: Any, run_id: str, journal: Path) -> tuple[str, str]:
    """The studio's API JSON and page of a durable run of ``client`` (a `DurableEngine`), read
    through the app with its token; both answered 200."""
    from starlette.testclient import TestClient

    from jianmu.studio import DurableRuns, create_app
    from jianmu.studio.runs import Journal

    token = "durable-pages-token"
    source = DurableRuns(client, Journal(str(journal)))
    with TestClient(create_app([source], token, by="tester"), base_url="http://127.0.0.1",
                    follow_redirects=False) as http:
        http.get(f"/?token={token}")
        view = http.get(f"/api/run/durable/{run_id}")
        page = http.get(f"/run/durable/{run_id}")
    assert view.status_code == 200 and page.status_code == 200
    return view.text, page.text


def studio_sources(checkpoints: Path) -> list[Any]:
    """The studio's sources for a checkpoint file, runs rebuilt as ``jianmu resume`` does."""
    from jianmu._cli.serve import restorer
    from jianmu.config import load_config
    from jianmu.studio import CheckpointRuns
    from jianmu.studio.runs import Journal

    config = load_config(str(checkpoints.parent / "jianmu.yaml"))
    return [CheckpointRuns(str(checkpoints), Journal(str(checkpoints)),
                           restorer(str(checkpoints), config, True))]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def serve(app: Any, port: int | None = None) -> Iterator[str]:
    """Serve ``app`` with uvicorn on 127.0.0.1 (on ``port``, else a free one) in a thread;
    yields its base URL."""
    import uvicorn

    port = port or free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    started = threading.Event()

    def watch() -> None:
        while not server.started and thread.is_alive():
            threading.Event().wait(0.02)
        started.set()

    threading.Thread(target=watch, daemon=True).start()
    assert started.wait(60) and server.started, "the studio did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


def chromium_problem() -> str | None:
    """Why headless Chromium cannot run here, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    if not chromium_binary():
        return "no Chromium (apt-get install chromium chromium-driver; .ci/browser-setup.sh)"
    if not shutil.which("chromedriver") and not Path("/usr/bin/chromedriver").exists():
        return "no chromedriver (apt-get install chromium-driver)"
    return None


def chromium_binary() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def skip_or_fail(reason: str) -> None:
    """Skip, or fail under JIANMU_REQUIRE_BROWSER=1 (CI), so a broken set-up cannot pass."""
    import pytest

    if os.environ.get("JIANMU_REQUIRE_BROWSER") == "1":
        pytest.fail(f"JIANMU_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


def make_driver(width: int = 1200, height: int = 1400) -> Any:
    """Headless Chromium from the system packages, driven through its chromedriver."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    binary = chromium_binary()
    assert binary is not None
    options.binary_location = binary
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 f"--window-size={width},{height}", "--no-first-run"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # `script_errors` reads it
    driver_path = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    return webdriver.Chrome(options=options, service=Service(driver_path))



_SHARED: list[Any] = []
SIZE = (1200, 1400)


def shared_driver() -> Any:
    """One headless Chromium for the test process, handed to each browser module in turn
    (starting one per module cost seconds each); a new one if it died. Quit at exit."""
    if _SHARED:
        try:
            _SHARED[0].current_url  # noqa: B018 - asks the browser whether it still answers
            return _SHARED[0]
        except Exception:  # dead or stuck: a new one
            _SHARED.clear()
    made = make_driver(*SIZE)
    _SHARED.append(made)
    atexit.register(made.quit)
    return made


def reset_driver(driver: Any) -> None:
    """Leave the shared browser as a new one would be for the next module: a blank page,
    its window size, no cookies, no script errors left to read (the studio keeps nothing
    else in the browser)."""
    driver.get("about:blank")
    driver.set_window_size(*SIZE)
    driver.execute_cdp_cmd("Network.clearBrowserCookies", {})
    script_errors(driver)  # read, so gone


def long_run(checkpoints: Path, ticks: int = 1000, nodes: int = 200) -> str:
    """A run of the studio benchmark's big tree to its end, saved in ``checkpoints``; its id."""
    from benchmarks.bench_studio import run_big

    checkpoints.parent.mkdir(parents=True, exist_ok=True)
    return run_big(checkpoints, ticks=ticks, nodes=nodes)[0]


def script_errors(driver: Any) -> list[str]:
    """The page's script errors logged since the last look (uncaught exceptions, rejections)."""
    return [str(entry["message"]) for entry in driver.get_log("browser")
            if entry.get("source") == "javascript" or "Uncaught" in str(entry["message"])]


def start_gated_run(checkpoints: Path, wait_s: float, steps: int = 3,
                    ) -> tuple[list[threading.Event], threading.Thread]:
    """A ReAct run ``gated`` going on in a thread, saved in ``checkpoints``: ``steps`` calls of
    ``wait_gate``, each ending only when the test sets its gate (or after ``wait_s`` s), then
    the answer ``done``. The gates, and the thread to join."""
    import asyncio

    from jianmu import ReactiveRunner, ScriptedLLM, SQLiteCheckpointer, StateManager, tool
    from jianmu.nodes import AgentState, create_react_node

    gates = [threading.Event() for _ in range(steps)]

    @tool(timeout_seconds=None)  # no end but its gate: the test says when each call ends
    async def wait_gate(step: int) -> str:
        """Wait until the test opens this step's gate.

        Args:
            step: which step.
        """
        await asyncio.to_thread(gates[step].wait, wait_s)
        return f"step {step} done"

    llm = ScriptedLLM([[{"name": "wait_gate", "arguments": {"step": i}}] for i in range(steps)]
                      + ["done"])
    state = StateManager(AgentState, {"messages": [{"role": "user", "content": "go"}]})
    runner = ReactiveRunner(create_react_node(llm, [wait_gate], name="gated"), state,
                            checkpointer=SQLiteCheckpointer(str(checkpoints)), run_id="gated")
    thread = threading.Thread(target=lambda: runner.run_sync(timeout=wait_s), daemon=True)
    thread.start()
    return gates, thread
