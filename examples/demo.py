"""`make demo`: the main example, offline."""

from __future__ import annotations

import asyncio
import runpy
from pathlib import Path

if __name__ == "__main__":
    here = Path(__file__).parent
    print("== hello_tree: async nodes ticked by a ReactiveRunner ==")
    module = runpy.run_path(str(here / "hello_tree.py"))
    asyncio.run(module["main"]())
