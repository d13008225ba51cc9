"""`make demo`: the main examples, offline, one after another."""

from __future__ import annotations

import asyncio
import inspect
import runpy
import sys
from pathlib import Path

EXAMPLES = (
    ("hello_tree.py", "async nodes ticked by a ReactiveRunner"),
    ("react_agent.py", "a ReAct agent over the built-in tools"),
    ("skill_report.py", "a BT skill from skills/, with its confirmation step"),
    ("skill_review.py", "skills disclosed on demand: load one, open the file its body names"),
    ("handoff_agents.py", "a triage agent hands the customer to billing, which answers typed"),
    ("lead_researcher.py", "a lead agent calls a researcher agent as a tool, approvals and all"),
)

if __name__ == "__main__":
    here = Path(__file__).parent
    for name, what in EXAMPLES:
        print(f"\n== {name}: {what} ==")
        main = runpy.run_path(str(here / name))["main"]
        # offline even where a model is configured (an exported OPENAI_API_KEY, say): the
        # demo installs no provider extra and must not spend a real model's tokens
        offline = {"offline": True} if "offline" in inspect.signature(main).parameters else {}
        try:
            asyncio.run(main(**offline))
        except KeyboardInterrupt:  # Ctrl-C (at skill_report's prompt, say): no traceback
            print(f"\nstopped in {name}; make demo runs it all again")
            sys.exit(130)

    # a run that waits for a person, checkpointed where `jianmu run` keeps runs: the studio
    # shows it with its pending call, and approving it there finishes it
    from jianmu.cli import main as jianmu

    print("\n== approval_flow.py: a run parked on an approval (jianmu run --non-interactive) ==")
    code = jianmu(["run", str(here / "approval_flow.py"), "--input", "note=approved in the studio",
                   "--non-interactive"])
    assert code == 3, f"the parked run exited with {code}, not 3"
    # the `jianmu resume` above is .venv/bin/jianmu until the virtualenv is activated
    print("\nThe command is .venv/bin/jianmu ('. .venv/bin/activate' puts jianmu on your PATH).")
    print("Open Jianmu Studio on the demo's runs (approve the parked one in the browser):")
    print("  .venv/bin/jianmu studio")
