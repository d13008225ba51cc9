"""`make studio-shot`: a screenshot of Jianmu Studio's run page (docs/studio.png).

A run of tests/studio/studio_flow.py is started with ``jianmu run --non-interactive`` (it waits
for approval of its ``deploy`` call), the studio serves it, and headless Chromium takes the
picture of the run page: its status, the pending call, the tree, the state.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jianmu.studio import create_app  # noqa: E402
from tests.support.studio import (  # noqa: E402
    chromium_problem,
    make_driver,
    serve,
    start_suspended,
    studio_sources,
)

TOKEN = "screenshot"


def main(out: Path) -> None:
    problem = chromium_problem()
    if problem is not None:
        sys.exit(f"studio-shot: {problem}")
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        os.environ["XDG_STATE_HOME"] = str(Path(folder) / "state")
        checkpoints = Path(folder) / "runs" / "checkpoints.sqlite"
        run_id = start_suspended(checkpoints, "prod-eu-1")
        driver = make_driver(1100, 1000)
        try:
            with serve(create_app(studio_sources(checkpoints), TOKEN)) as url:
                driver.get(f"{url}/run/cp/{run_id}?token={TOKEN}")
                deadline = time.monotonic() + 30
                while "deploy" not in driver.find_element("id", "pending").text:
                    if time.monotonic() > deadline:
                        sys.exit("studio-shot: the run page did not show the pending call")
                    time.sleep(0.1)
                height = driver.execute_script("return document.body.scrollHeight")
                driver.set_window_size(1100, min(int(height) + 40, 2400))
                driver.save_screenshot(str(out))
                driver.get("about:blank")
        finally:
            driver.quit()
    print(f"wrote {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "studio.png")
