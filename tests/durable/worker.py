"""A worker process for the tests: launch the test app's engine, say so, serve until killed."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from durable_app import engine

if __name__ == "__main__":
    engine.launch()
    print(f"ready {engine.executor_id}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    engine.shutdown()
