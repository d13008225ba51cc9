"""``jianmu studio`` stopped (Ctrl-C) while a page's live stream is open: the stream is told
(``event: closing``) and ends, and the studio stops at once without a traceback (the stream held
it up until uvicorn cut it: "Exception in ASGI application ... CancelledError")."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from tests.support.studio import free_port

TOKEN = "stop-token"


def test_ctrl_c_with_a_page_open_tells_the_page_and_stops_cleanly(
        checkpoints: Path, run_id: str) -> None:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    studio = subprocess.Popen(
        [sys.executable, "-m", "jianmu", "studio", "--checkpoints", str(checkpoints),
         "--port", str(port), "--token", TOKEN],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert studio.stdout is not None
        for line in studio.stdout:  # serving once it printed its URL
            if line.startswith("open: "):
                break
        base = f"http://127.0.0.1:{port}"
        said: list[str] = []
        first = threading.Event()
        with httpx.Client(base_url=base, cookies={}) as http:
            http.get(f"/?token={TOKEN}")

            def read() -> None:
                try:
                    with http.stream("GET", f"/stream/run/cp/{run_id}", timeout=60) as answer:
                        for line in answer.iter_lines():
                            said.append(line)
                            if line.startswith("data: {") and not first.is_set():
                                first.set()
                except httpx.HTTPError as exc:  # cut, not ended
                    said.append(f"cut: {exc}")

            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            assert first.wait(60), said  # the page has the run
            studio.send_signal(signal.SIGINT)
            reader.join(30)
            assert not reader.is_alive(), "the stream did not end"
        _, err = studio.communicate(timeout=60)
    finally:
        if studio.poll() is None:
            studio.kill()
            studio.wait()
    assert "event: closing" in said
    assert "Traceback" not in err and "ERROR" not in err, err


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_studio_stopped_ends_cleanly_not_as_an_error(
        checkpoints: Path, run_id: str, stop: int) -> None:
    """Stopping the studio, as its help says (serve until Ctrl-C), printed 'jianmu: error:
    interrupted' and exited 4, as a run cut short does."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    studio = subprocess.Popen(
        [sys.executable, "-m", "jianmu", "studio", "--checkpoints", str(checkpoints),
         "--port", str(port), "--token", TOKEN],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as a terminal's
    try:
        assert studio.stdout is not None
        for line in studio.stdout:  # serving once it printed its URL
            if line.startswith("open: "):
                break
        # answered: uvicorn serves, so it handles the signals (a person is never this quick)
        assert httpx.get(f"http://127.0.0.1:{port}/?token={TOKEN}", timeout=60).status_code in \
            (200, 303)  # 303: to the page, its token now a cookie
        studio.send_signal(stop)
        out, err = studio.communicate(timeout=60)
    finally:
        if studio.poll() is None:
            studio.kill()
            studio.wait()
    assert studio.returncode == 0 and out.strip() == "stopped", (studio.returncode, out, err)
    assert "error" not in err and "Traceback" not in err, err
