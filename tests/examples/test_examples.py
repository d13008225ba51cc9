"""The examples run as a user would run them, offline."""

from __future__ import annotations

import os
import platform
import pty
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def run_example(name: str, *args: str, cwd: Path = REPO, **env: str) -> list[str]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("JIANMU_", "OPENAI_"))}
    out = subprocess.run(
        [sys.executable, str(REPO / "examples" / name), *args], cwd=cwd, capture_output=True,
        text=True, timeout=120, env={**clean, **env}, stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_hello_tree() -> None:
    lines = run_example("hello_tree.py")
    assert "state: {'greeting': 'hello', 'shout': 'HELLO!'}" in lines
    assert lines[-1].startswith("result: success")


def test_react_agent_says_it_is_scripted_and_answers() -> None:
    lines = run_example("react_agent.py")
    assert lines[0].startswith("LLM: the scripted stand-in")
    assert "answer: 17 * 23 = 391, and README.md has" in "\n".join(lines)
    assert lines[-1].startswith("result: success")


def test_react_agent_from_another_folder_says_what_it_could_not_read(tmp_path: Path) -> None:
    lines = run_example("react_agent.py", cwd=tmp_path)  # no README.md there
    answer = next(line for line in lines if line.startswith("answer: "))
    assert answer.startswith("answer: 17 * 23 = 391; README.md could not be read here: "), answer
    assert lines[-1].startswith("result: success")


def test_skill_report_asks_then_writes(tmp_path: Path) -> None:
    # a workspace of its own under tmp: a report left in the repository by an earlier run
    # could not make this assertion pass
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "tool_one.py").write_text("x = 1  # TODO: rename\n", encoding="utf-8")
    lines = run_example("skill_report.py", "src", str(tmp_path))
    text = "\n".join(lines)
    assert "approval needed: write_file" in text
    assert "approving as the demo user" in text
    assert lines[-1] == "result: success"
    report = tmp_path / ".reports" / "workspace-report.md"
    assert "tool_one.py" in report.read_text(encoding="utf-8")


def test_demo_runs_every_example(tmp_path: Path) -> None:
    lines = run_example("demo.py", XDG_STATE_HOME=str(tmp_path))
    text = "\n".join(lines)
    for name in ("hello_tree.py", "react_agent.py", "skill_report.py", "skill_review.py",
                 "handoff_agents.py", "lead_researcher.py", "approval_flow.py"):
        assert f"== {name}" in text
    assert lines[-1] == "  .venv/bin/jianmu studio"  # it ends by saying how to open the studio
    assert (tmp_path / "jianmu" / "checkpoints.sqlite").is_file()


def test_skill_review_loads_a_skill_and_opens_the_file_its_body_names(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("try:\n    x = 1\nexcept:\n    pass\n", encoding="utf-8")
    lines = run_example("skill_review.py", str(tmp_path))
    text = "\n".join(lines)
    assert lines[0] == '  → load_skill({"name": "code-review"})'
    assert "loaded skill 'code-review'" in text
    assert '"path": "references/checklist.md"' in text
    assert "The checklist says: No bare `except:`" in text
    assert "names and descriptions only" in text
    assert lines[-1] == "result: success"


def test_handoff_agents_says_it_is_scripted_and_billing_answers_both_turns() -> None:
    lines = run_example("handoff_agents.py")
    assert lines[0].startswith("LLM: the scripted stand-in")
    assert "  ⇢ triage hands the conversation to billing" in lines
    answers = [line for line in lines if line.startswith("billing: Refund(")]
    assert len(answers) == 2 and "order='A1', amount=30.0" in answers[0]
    assert "order='B7', amount=0.0" in answers[1]
    assert lines[-1] == "result: success, 12 messages kept"


def test_lead_researcher_asks_by_path_then_answers() -> None:
    lines = run_example("lead_researcher.py")
    assert lines[0].startswith("LLM: the scripted stand-in")
    asked = [line for line in lines if line.startswith("approval needed:")]
    assert asked == ['approval needed: researcher > save_note({"text": "Tides: twice a day, '
                     'from the Moon\'s pull."})  [id researcher/call_1/call_3]']
    assert "    ← save_note: saved" in lines  # the researcher's call, nested under the lead's
    # the researcher starts once; after the approval its call goes on, it does not start again
    assert [line for line in lines if line.startswith("  → researcher(")] == [
        '  → researcher({"input": "How often do tides come, and why?"})']
    assert lines.index("  ↻ researcher goes on") < lines.index("    ← save_note: saved")
    assert ("  ← researcher: Two high tides a day, about 12 h 25 min apart: the Moon's pull "
            "raises a bulge of water on each side of the Earth.") in lines  # whole, not cut
    assert any(line.startswith("answer: Tides come in twice a day") for line in lines)
    assert lines[-1] == "result: success"


def test_demo_stays_offline_where_a_model_key_is_set(tmp_path: Path) -> None:
    # a newcomer often has OPENAI_API_KEY exported: `make demo` (which installs no provider
    # extra) still runs offline, on the stand-ins, and never asks a real model
    lines = run_example("demo.py", XDG_STATE_HOME=str(tmp_path), OPENAI_API_KEY="sk-not-a-key",
                       JIANMU_LLM_BASE_URL="http://127.0.0.1:9/v1")
    labels = [line for line in lines if line.startswith("LLM: ")]
    assert len(labels) == 3 and all("scripted stand-in" in line for line in labels), labels
    assert lines[-1] == "  .venv/bin/jianmu studio"


READ_SYSCALL = {"x86_64": "0", "aarch64": "63"}


def _wait_until_blocked_reading(process: subprocess.Popen[str]) -> None:
    """Wait until the process's main thread waits in read(), as a person's Ctrl-C finds it.

    A signal that lands between the prompt and the read() is handled before the read starts,
    which then waits on: any program's race, not the one under test.
    """
    number = READ_SYSCALL.get(platform.machine())
    if number is None:
        pytest.skip(f"no read() syscall number known for {platform.machine()}")
    deadline = time.monotonic() + 60
    while Path(f"/proc/{process.pid}/syscall").read_text().split()[0] != number:
        assert process.poll() is None, "the example ended instead of reading its answer"
        assert time.monotonic() < deadline, "the example never waited for its answer"
        time.sleep(0.01)


@pytest.mark.parametrize(("example", "said"), [
    ("approval_flow.py", "stopped: the note was not written"),
    ("skill_report.py", "stopped: no report was written"),
    ("demo.py", "stopped in skill_report.py"),
])
def test_one_ctrl_c_at_an_examples_prompt_stops_it(
    tmp_path: Path, example: str, said: str
) -> None:
    """The prompt's blocking input() ran inside asyncio.run, whose SIGINT handler only cancels
    the main task: the first Ctrl-C did nothing, and the script waited on."""
    controller, terminal = pty.openpty()  # asked only in a terminal
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("JIANMU_", "OPENAI_"))}
    args = ("src", str(tmp_path)) if example == "skill_report.py" else ()
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("x = 1\n", encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, str(REPO / "examples" / example), *args], cwd=tmp_path,
        env={**clean, "XDG_STATE_HOME": str(tmp_path / "state")}, stdin=terminal,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a terminal's
    )
    os.close(terminal)
    assert process.stdout is not None and process.stderr is not None
    seen = ""
    while "approve? [y/N] " not in seen:  # the prompt has no line end: read by character
        char = process.stdout.read(1)
        assert char, f"the example ended before it asked:\n{seen}{process.stderr.read()}"
        seen += char
    _wait_until_blocked_reading(process)  # a Ctrl-C just before its read() waits for the next
    process.send_signal(signal.SIGINT)  # once; nobody answers
    try:
        code = process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        pytest.fail("one Ctrl-C at the prompt did not stop the example")
    finally:
        os.close(controller)
    out, err = process.stdout.read(), process.stderr.read()
    process.stdout.close(), process.stderr.close()
    assert code == 130 and said in out, seen + out + err
    assert "Traceback" not in err, err


def test_scale_app_wait_says_it_waits_for_workers(tmp_path: Path) -> None:
    """With no worker up, `python examples/scale_app.py wait` waited for minutes saying
    nothing (a client runs no run itself)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("JIANMU_", "OPENAI_"))}
    env = {**clean, "XDG_STATE_HOME": str(tmp_path)}  # the app's SQLite file, no worker
    script = str(REPO / "examples" / "scale_app.py")
    enqueued = subprocess.run([sys.executable, script, "enqueue", "1"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
    assert enqueued.stdout.strip() == "enqueued 1 runs", enqueued.stdout + enqueued.stderr
    waiting = subprocess.Popen([sys.executable, script, "wait"], cwd=tmp_path, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert waiting.stdout is not None
        line = waiting.stdout.readline()
    finally:
        waiting.kill()
        waiting.wait()
        waiting.stdout.close(), waiting.stderr.close()  # type: ignore[union-attr]
    assert line == ("waiting for 1 run(s) to finish; workers run them: "
                    "jianmu worker examples/scale_app.py:engine\n"), line
