"""Another process that decides: ``approver.py RUN_ID CALL_ID`` approves the call, says so."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from durable_app import engine

if __name__ == "__main__":
    try:
        asyncio.run(engine.approve(sys.argv[1], sys.argv[2], "go ahead"))
    finally:
        engine.shutdown()
    print("approved")
