"""`make studio-shot`: the README's picture of Jianmu Studio (docs/studio.png), from a real run.

It runs ``examples/demo.py`` (what ``make demo`` runs) in a fresh folder; the demo ends with a
run of ``examples/approval_flow.py`` parked on its ``append_note`` approval, checkpointed where
``jianmu run`` keeps runs. The studio serves that file as ``jianmu studio`` would, and headless
Chromium takes the run page: the pending approval, the tree as a graph (the node that asks
selected, with its details), the time slider and the timeline.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jianmu._cli.serve import restorer  # noqa: E402
from jianmu.config import load_config  # noqa: E402
from jianmu.studio import CheckpointRuns, create_app  # noqa: E402
from jianmu.studio.runs import Journal  # noqa: E402
from tests.support.studio import chromium_problem, make_driver, serve  # noqa: E402

TOKEN = "screenshot"
WIDTH = 1360
WAIT_S = 60


def run_demo(folder: Path) -> Path:
    """Run ``make demo``'s script in ``folder``; the checkpoint file it left."""
    env = {**os.environ, "XDG_STATE_HOME": str(folder / "state")}
    env = {k: v for k, v in env.items() if not k.startswith(("JIANMU_", "OPENAI_"))}
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "demo.py")], cwd=folder,
                          env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        sys.exit(f"studio-shot: the demo failed:\n{done.stdout}\n{done.stderr}")
    return folder / "state" / "jianmu" / "checkpoints.sqlite"


def until(driver: Any, condition: Any, what: str) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT_S, poll_frequency=0.1).until(condition, what)


def main(out: Path) -> None:
    from selenium.webdriver.common.by import By

    problem = chromium_problem()
    if problem is not None:
        sys.exit(f"studio-shot: {problem}")
    out = out.resolve()  # before moving into the demo's folder
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        os.chdir(folder)
        os.environ["XDG_STATE_HOME"] = str(folder / "state")
        checkpoints = run_demo(folder)
        source = CheckpointRuns(str(checkpoints), Journal(str(checkpoints)),
                                restorer(str(checkpoints), load_config()))
        parked = [r for r in source.runs("suspended") if r["tree"] == "approval-flow"]
        if len(parked) != 1:
            sys.exit(f"studio-shot: the demo left {len(parked)} parked approval runs, not 1")
        run_id = parked[0]["run_id"]
        driver = make_driver(WIDTH, 1000)
        try:
            with serve(create_app([source], TOKEN, project=str(folder))) as url:
                driver.get(f"{url}/run/cp/{run_id}?token={TOKEN}")
                until(driver, lambda d: "append_note" in d.find_element(By.ID, "pending").text,
                      "the pending approval")
                until(driver, lambda d: "asked: append_note" in
                      d.find_element(By.ID, "timeline").text, "the timeline")
                node = '[data-node="approval-flow/execute"][data-status="suspended"]'
                until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, node), "the graph")
                driver.find_element(By.CSS_SELECTOR, node).click()
                until(driver, lambda d: "ToolExecutor" in d.find_element(By.ID, "details").text,
                      "the node's details")
                bottom = driver.execute_script(
                    "const t = document.getElementById('timeline').getBoundingClientRect();"
                    "return t.top + window.scrollY + Math.min(t.height, 330);")
                driver.set_window_size(WIDTH, min(int(bottom) + 40, 2400))  # returns once resized
                driver.save_screenshot(str(out))
                driver.get("about:blank")
        finally:
            driver.quit()
    print(f"wrote {out} (run {run_id} of examples/demo.py, waiting for its approval)")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "studio.png")
