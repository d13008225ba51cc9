"""Run cosmic-ray on one module and print its score: ``python mutation/run.py MODULE``.

Each module has a config in this folder (``module-path`` names it, ``test-command`` its fast
tests). Mutants listed in ``<config>.equivalent`` (``operator line:col  # why``) are equivalent
to the original code and left out of the score. Exits non-zero below ``--min`` percent.

A big module (``jianmu/runtime/runner.py``: some 700 mutants, half a minute for each that
survives) can be scored on a random ``--sample N --seed S``; after adding tests,
``--retry-survivors`` tests only the last session's survivors again.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import subprocess
import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def find_config(module: str) -> Path:
    """The config whose ``module-path`` is ``module``."""
    for path in sorted(HERE.glob("*.toml")):
        if tomllib.loads(path.read_text())["cosmic-ray"]["module-path"] == module:
            return path
    known = ", ".join(
        tomllib.loads(p.read_text())["cosmic-ray"]["module-path"] for p in HERE.glob("*.toml")
    )
    sys.exit(f"no mutation config for {module!r}; add mutation/<name>.toml (known: {known})")


def equivalent(config: Path) -> set[tuple[str, str]]:
    """(operator, "line:col") of the mutants known to be equivalent."""
    listed = config.with_suffix(".equivalent")
    if not listed.exists():
        return set()
    keys = set()
    for line in listed.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            operator, where = line.split()
            keys.add((operator, where))
    return keys


def annotation_spans(module: Path) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Where the module's function annotations are, and those of variables inside functions:
    with ``from __future__ import annotations`` they are never evaluated, so their mutants are
    equivalent by construction. (A class's are left: pydantic evaluates a model's.)"""
    spans = []
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            inside = list(ast.iter_child_nodes(node))
            while inside:  # its local variables' annotations (a class in it is left)
                inner = inside.pop()
                if isinstance(inner, ast.AnnAssign):
                    note = inner.annotation
                    end = (note.end_lineno or note.lineno, note.end_col_offset or 0)
                    spans.append(((note.lineno, note.col_offset), end))
                if not isinstance(inner, ast.ClassDef):
                    inside.extend(ast.iter_child_nodes(inner))
            a = node.args
            notes = [x.annotation for x in (*a.posonlyargs, *a.args, *a.kwonlyargs,
                                             a.vararg, a.kwarg) if x is not None]
            for note in (*notes, node.returns):
                if note is not None:
                    end = (note.end_lineno or note.lineno, note.end_col_offset or 0)
                    spans.append(((note.lineno, note.col_offset), end))
    return spans


def skip_annotations(session: Path, module: Path) -> int:
    """Mark the mutants inside annotations as skipped; return how many."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    if "from __future__ import annotations" not in module.read_text():
        return 0
    spans = annotation_spans(module)
    with use_db(str(session), WorkDB.Mode.open) as db:
        jobs = [
            item.job_id for item in db.pending_work_items
            if any(start <= tuple(m.start_pos) and tuple(m.end_pos) <= end
                   for m in item.mutations for start, end in spans)
        ]
        if jobs:
            db.set_multiple_results(jobs, WorkResult(
                output="annotation (never evaluated)",
                worker_outcome=WorkerOutcome.SKIPPED,
            ))
    return len(jobs)


def keep_sample(session: Path, size: int, seed: int) -> int:
    """Keep ``size`` of the pending mutants, drawn with ``seed``; mark the rest skipped.

    For a quick estimate on a module too big to mutate whole in one sitting; the report then
    says the score is a sample's. Returns how many were left out."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    with use_db(str(session), WorkDB.Mode.open) as db:
        # drawn from the mutants in a fixed order (job ids are random): a seed draws the same
        items = sorted(db.pending_work_items, key=lambda item: [
            (m.operator_name, tuple(m.start_pos), m.occurrence) for m in item.mutations])
        jobs = [item.job_id for item in items]
        kept = set(random.Random(seed).sample(jobs, min(size, len(jobs))))
        left = [job for job in jobs if job not in kept]
        if left:
            db.set_multiple_results(left, WorkResult(
                output="not in the sample", worker_outcome=WorkerOutcome.SKIPPED,
            ))
    return len(left)


def retry_survivors(session: Path, skip: set[tuple[str, str]]) -> int:
    """Forget the last session's survivors (but the known equivalents), so `exec` tests them
    again (after new tests: a mutant once killed stays killed by a larger suite). Returns
    how many."""
    from cosmic_ray.work_db import WorkDB, WorkResultStorage, use_db
    from cosmic_ray.work_item import TestOutcome

    with use_db(str(session), WorkDB.Mode.open) as db:
        jobs = [
            item.job_id for item, result in db.completed_work_items
            if result.test_outcome == TestOutcome.SURVIVED
            and not any((m.operator_name, "{}:{}".format(*m.start_pos)) in skip
                        for m in item.mutations)
        ]
        with db._session_maker.begin() as rows:
            rows.query(WorkResultStorage).filter(WorkResultStorage.job_id.in_(jobs)).delete()
    return len(jobs)


def cosmic_ray(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the cosmic-ray CLI of this interpreter."""
    command = [sys.executable, "-m", "cosmic_ray.cli", *args]
    return subprocess.run(command, cwd=ROOT, check=True, text=True, capture_output=True)


def main() -> int:
    """Mutate, test, report."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("module", nargs="?", default="jianmu/constraints.py")
    parser.add_argument("--min", type=float, default=90.0, help="lowest passing score (%%)")
    parser.add_argument("--report-only", action="store_true", help="score the last session")
    parser.add_argument("--retry-survivors", action="store_true",
                        help="test the last session's survivors again (after adding tests)")
    parser.add_argument("--sample", type=int, help="mutate only this many, drawn at random")
    parser.add_argument("--seed", type=int, default=0, help="the draw of --sample")
    args = parser.parse_args()
    config = find_config(args.module)
    session = ROOT / ".mutation" / f"{config.stem}.sqlite"
    if args.retry_survivors:
        print(f"{retry_survivors(session, equivalent(config))} survivors to test again")
        skip_annotations(session, ROOT / args.module)  # as annotations are skipped now
        cosmic_ray("exec", str(config), str(session))
    elif not args.report_only:
        session.parent.mkdir(exist_ok=True)
        session.unlink(missing_ok=True)
        cosmic_ray("init", str(config), str(session))
        print(f"{skip_annotations(session, ROOT / args.module)} mutants in annotations skipped")
        if args.sample is not None:
            left = keep_sample(session, args.sample, args.seed)
            print(f"a sample of {args.sample} (seed {args.seed}): {left} mutants left out")
        cosmic_ray("baseline", str(config))  # the tests must pass on the unmutated code
        cosmic_ray("exec", str(config), str(session))
    skip = equivalent(config)
    killed, survivors, excluded, other = 0, [], 0, 0
    for line in cosmic_ray("dump", str(session)).stdout.splitlines():
        item, result = json.loads(line)
        (mutation,) = item["mutations"]
        where = "{}:{}".format(*mutation["start_pos"])
        if result is None or result.get("test_outcome") not in ("killed", "survived"):
            other += 1  # not run, or the mutant does not even import (incompetent)
            killed += bool(result and result.get("test_outcome") == "incompetent")
        elif (mutation["operator_name"], where) in skip:
            excluded += 1
        elif result["test_outcome"] == "killed":
            killed += 1
        else:
            survivors.append(f"{args.module}:{where} {mutation['operator_name']}")
    total = killed + len(survivors)
    score = 100.0 * killed / total if total else 100.0
    for survivor in survivors:
        print("survived:", survivor)
    print(f"{args.module}: {killed}/{total} non-equivalent mutants killed ({score:.1f}%); "
          f"{excluded} equivalent excluded, {other} not scored")
    return 0 if score >= args.min else 1


if __name__ == "__main__":
    sys.exit(main())
