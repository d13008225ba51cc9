"""`fork_run`: a new run that starts from a past point of another, the original untouched.

The fork is a checkpoint under a new run id holding the state at that point (or the state a
person edited), the nodes' statuses there and the tick count; restoring it continues the tree
from that point, as resuming a checkpoint would. What had happened by then is in the state:
a tool call that finished before the point is in ``completed_call_ids`` and does not run again.
Anything after the point runs anew, through the guard: the fork starts with no approvals, so
an approval given in the original run allows nothing in the fork.
"""

from __future__ import annotations

import copy
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jianmu.errors import CheckpointError
from jianmu.runtime.checkpoint import CHECKPOINT_VERSION
from jianmu.runtime.lease import default_owner
from jianmu.runtime.points import STOPPED, snapshot_ops

if TYPE_CHECKING:
    from jianmu.runtime.checkpoint import SQLiteCheckpointer

__all__ = ("fork_run", "set_state_values")


def set_state_values(snapshot: dict[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``snapshot`` with ``values`` written: ``key`` at the root, ``namespace/key``
    in a namespace (it must exist)."""
    out = copy.deepcopy(snapshot)
    for full, value in values.items():
        ns, _, key = str(full).rpartition("/")
        if not key:
            raise CheckpointError(f"cannot set {full!r}: name a key (key or namespace/key)")
        if ns:
            spaces = out.setdefault("namespaces", {})
            if ns not in spaces:
                known = ", ".join(sorted(spaces)) or "none"
                raise CheckpointError(f"cannot set {full!r}: the state has no namespace {ns!r} "
                                      f"at that point (namespaces: {known})")
            spaces[ns][key] = value
        else:
            out.setdefault("root", {})[key] = value
    return out


def _check_snapshot(state: Any) -> dict[str, Any]:
    if not isinstance(state, dict):
        raise CheckpointError("the fork's state must be a JSON object (a state snapshot with "
                              "'root' and 'namespaces')")
    if state.get("version", 1) != 1:
        raise CheckpointError(f"unsupported state snapshot version {state.get('version')!r}")
    root, spaces = state.get("root", {}), state.get("namespaces", {})
    if not isinstance(root, dict):
        raise CheckpointError("the fork's state: 'root' must be a JSON object of state keys")
    if not isinstance(spaces, dict) or not all(isinstance(v, dict) for v in spaces.values()):
        raise CheckpointError("the fork's state: 'namespaces' must map each namespace to a "
                              "JSON object of state keys")
    unknown = sorted(set(state) - {"version", "root", "namespaces"})
    if unknown:
        raise CheckpointError(f"the fork's state has unknown parts {unknown}: give 'root' "
                              "and 'namespaces'")
    return {"version": 1, "root": root, "namespaces": spaces}


_UNDER_WAY = "calls_under_way"
"""The state key of the calls a run had started and not recorded (`jianmu.nodes._under_way`)."""


def _nothing_under_way(snapshot: dict[str, Any]) -> dict[str, Any]:
    """``snapshot`` without calls marked as under way: the fork is a new run, and a call its
    point had started runs in it through the guard like any other, not as one in doubt."""
    def clean(values: Any) -> Any:
        if isinstance(values, dict) and values.get(_UNDER_WAY):
            return {**values, _UNDER_WAY: {}}
        return values

    spaces = snapshot.get("namespaces")
    return {**snapshot, "root": clean(snapshot.get("root")),
            **({"namespaces": {k: clean(v) for k, v in spaces.items()}}
               if isinstance(spaces, dict) else {})}


def fork_run(store: SQLiteCheckpointer, run_id: str, point: int, *,
             state: dict[str, Any] | None = None, values: Mapping[str, Any] | None = None,
             new_id: str | None = None, owner: str | None = None) -> str:
    """Save a new run that starts at ``point`` of ``run_id``; returns its id.

    A point where the tree had ended (the run's last, say) gives a fork that has ended there
    too, with that result, unless its state is edited: then the tree runs again from its start.

    Args:
        store: the checkpoint file of ``run_id``; the fork is saved there.
        run_id: the run to fork.
        point: the point to start from (`RunHistory.points`).
        state: the state to start with instead of the point's (a `StateManager.snapshot`).
        values: state keys to set on top (``key`` or ``namespace/key``).
        new_id: the new run's id (default: a fresh one).
        owner: who forks, named in ``run_id``'s lease while a fork from its latest point is
            made (default ``host:pid:fork:token``).

    Raises:
        CheckpointError: no such run or point, or a state that is not a snapshot. (The state's
            values are checked against the tree's schema when the fork is restored.)
        RunClaimedError: the fork is from the run's latest point and another owner holds the
            run (it may be executing what that point was about to do).
    """
    newest = store.history.last_point(run_id)
    if newest is None or point >= newest:
        # the latest point is where the run's owner is acting now: claim it while copying
        owner = owner or default_owner("fork")
        store.claim(run_id, owner)
        try:
            return _fork(store, run_id, point, state, values, new_id)
        finally:
            store.release(run_id, owner)
    return _fork(store, run_id, point, state, values, new_id)


def _fork(store: SQLiteCheckpointer, run_id: str, point: int, state: dict[str, Any] | None,
          values: Mapping[str, Any] | None, new_id: str | None) -> str:
    latest = store.load(run_id)
    if latest is None:
        raise CheckpointError(f"no run {run_id!r} in {store.path}")
    if latest.get("version", 1) != CHECKPOINT_VERSION:  # else the fork is made, then refused
        # under its own new id, as if it were what another version saved
        raise CheckpointError(
            f"cannot fork run {run_id!r}: its checkpoint is version {latest.get('version')!r}, "
            f"saved by another version of Jianmu (this one reads version {CHECKPOINT_VERSION});"
            " fork it with the Jianmu that saved it")
    frame = store.history.frame(run_id, point)
    original = _check_snapshot(frame.state)
    snapshot = original if state is None else _check_snapshot(state)
    if values:
        snapshot = set_state_values(snapshot, values)
    # a state sent back unchanged (the studio's fork box sends the point's state) is no edit
    edited = snapshot != original
    snapshot = _nothing_under_way(snapshot)
    fork_id = new_id or uuid.uuid4().hex[:12]
    if store.load(fork_id) is not None:
        raise CheckpointError(f"run {fork_id!r} already exists in {store.path}")
    # a node stopped at the run's end is INVALID to py_trees (`STOPPED` is the points' word)
    statuses = {key: "INVALID" if status == STOPPED else status
                for key, status in frame.statuses.items()}
    nodes = {key: {"name": str(frame.tree.get(key, {}).get("name", "?")), "status": status}
             for key, status in statuses.items()}
    parent = store.history.run(run_id) or {}
    history = store.history
    history.begin(fork_id, cwd=parent.get("cwd"), parent=run_id, parent_point=point)
    history.add_point(fork_id, 0, frame.tick, {
        "state": snapshot_ops(snapshot), "nodes": statuses, "tree": frame.tree,
        "errors": frame.errors}, [(time.time(), "run.forked", None, {
            "run": run_id, "point": point, "edited": edited})])
    # a point where the tree had ended is the run's end: a fork of it as it was has ended
    # there too (its result, not a new pass of the tree; send() starts a new turn); one with
    # an edited state runs the tree again from its start, on that state
    ended = None if edited else {"SUCCESS": "success", "FAILURE": "failure"}.get(
        frame.statuses.get("0", ""))
    error = None if ended != "failure" else "; ".join(
        f"{key}: {said}" for key, said in sorted(frame.errors.items())) or "the run failed"
    store.save(fork_id, {
        "version": latest.get("version", 1), "run_id": fork_id, "status": ended or "running",
        "tree": latest.get("tree", "?"), "ticks": frame.tick, "state": snapshot,
        "nodes": nodes, "interaction": {}, "user_roles": latest.get("user_roles", []),
        "saved": time.time(), "forked_from": {"run": run_id, "point": point},
        **({"state_schema": latest["state_schema"]} if "state_schema" in latest else {}),
        # the run's constraints: a fork restored without them must not go on under the defaults
        **({"constraints": latest["constraints"]} if "constraints" in latest else {}),
        **({"error": error} if error is not None else {}),
    })
    return fork_id
