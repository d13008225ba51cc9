"""A failed tree: why it failed, in one line (what a failed run or a skill's subtree reports),
and the nodes a tick that raised left running, stopped."""

from __future__ import annotations

from py_trees.behaviour import Behaviour
from py_trees.common import Status

from jianmu.errors import RunFailed

__all__ = ("failure_exception", "failure_reason", "stop_running_nodes")


def failure_exception(root: Behaviour, run_id: str, error: str | None) -> BaseException:
    """What a failed run raises: the first node's exception under ``root``, else a `RunFailed`
    saying ``error`` (why the tree failed)."""
    for node in root.iterate():
        raised = getattr(node, "error", None)
        if isinstance(raised, BaseException):
            return raised
    return RunFailed(f"run {run_id} failed: {error or 'the tree failed'}", status="failure")


def failure_reason(root: Behaviour) -> str | None:
    """The first node's error under ``root`` (``name: Type: text``), else the feedback of the
    first node that failed; None when nothing says why."""
    for node in root.iterate():
        error = getattr(node, "error", None)
        if error is not None:
            return f"{node.name}: {type(error).__name__}: {error}"
    for node in root.iterate():
        if node.status is Status.FAILURE and node.feedback_message:
            return f"{node.name}: {node.feedback_message}"
    return None


def stop_running_nodes(root: Behaviour) -> None:
    """Stop every running node under ``root``, each once: a tick that raised midway left the
    statuses of the nodes above the raise unset, so stopping the root would not reach their
    running children. Parents first, with py_trees' own ``stop`` (which reaches the running
    nodes below them, in its order), then what is still running below a node it skipped:
    stopped children first, a decorator stopped after them stopped its child again, and a
    leaf's ``terminate`` ran once per decorator above it."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.status is Status.RUNNING:
            node.stop(Status.INVALID)
        stack.extend(reversed(node.children))
