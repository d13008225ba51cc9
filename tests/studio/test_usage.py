"""What a run spent, said alike by the studio and the CLI: model requests, tool calls, tokens,
and whether its counts are estimates."""

from __future__ import annotations

import json
from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path

from starlette.testclient import TestClient

from jianmu.llm.messages import Usage
from jianmu.studio.views import usage_text


def _snapshot(usage: Usage) -> dict[str, object]:
    return {"root": {"usage": vars(usage)}}


def test_estimated_tokens_are_said_to_be_estimates() -> None:
    # a server that said no usage: its tokens are a guess, which a person must not read as
    # the provider's bill (they were shown as any other count)
    said = usage_text(_snapshot(Usage(input_tokens=120, output_tokens=30, requests=3,
                                      estimated_requests=2)))
    assert said.startswith("3 model requests · 0 tool calls · 120 in / 30 out tokens")
    assert "estimated for 2 of the requests" in said
    assert "estimated" not in usage_text(_snapshot(Usage(input_tokens=5, requests=1)))


def test_prompt_cache_reads_are_said() -> None:
    said = usage_text(_snapshot(Usage(input_tokens=1000, output_tokens=10, requests=1,
                                      cache_read_tokens=800)))
    assert said == ("1 model request · 0 tool calls · 1000 in (800 read from the prompt cache) "
                    "/ 10 out tokens")


def test_runs_show_says_the_usage_the_studio_shows(client: TestClient, run_id: str,
                                                   checkpoints: Path) -> None:
    from jianmu.cli import main

    shown = client.get(f"/api/run/cp/{run_id}").json()["usage"]
    assert shown.startswith("0 model requests · 0 tool calls")  # it waits for its call
    config = str(checkpoints.parent / "jianmu.yaml")
    out = StringIO()
    with redirect_stdout(out):
        assert main(["runs", "show", run_id, "--config", config, "--json"]) == 0
    assert json.loads(out.getvalue())["usage"] == shown  # `runs show` said no usage at all
    out = StringIO()
    with redirect_stdout(out):
        assert main(["runs", "show", run_id, "--config", config]) == 0
    assert f"usage: {shown}" in " ".join(out.getvalue().split())
