"""README's scale-out walk-through (`examples/scale_out.sh`) runs against a real PostgreSQL."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(400)


def test_scale_out_walkthrough(postgres_url: str, tmp_path: Path) -> None:
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    env = {k: v for k, v in os.environ.items() if not k.startswith("JIANMU_")}
    env.update({
        "JIANMU_DATABASE_URL": postgres_url,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        "PYTHONPATH": str(REPO),
        "XDG_STATE_HOME": str(tmp_path / "state"),
    })
    out = subprocess.run(["bash", "examples/scale_out.sh"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=360, stdin=subprocess.DEVNULL)
    logs = "\n".join(f"--- {p.name}\n{p.read_text()}" for p in tmp_path.glob("worker-*.log"))
    assert out.returncode == 0, f"{out.stdout}\n{out.stderr}\n{logs}"
    assert "enqueued 20 runs" in out.stdout
    summary = re.search(r"(\d+) runs: (.*)", out.stdout)
    assert summary and summary.group(1) == "21", out.stdout  # 20 triage runs and the deploy
    assert "success" in out.stdout.split(summary.group(0))[1]  # the approved run finished
    logs = [(tmp_path / f"worker-{w}.log").read_text() for w in "ab"]
    assert all("worker-" in log for log in logs), logs
