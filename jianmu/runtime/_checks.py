"""What `ReactiveRunner` says of a py_trees user's mistakes: a root that is no behaviour, a
run's limits that are no limit, one tree run by two runners at once. Each is refused where it
is made, before anything of the run changes; the runner checks cheaply and comes here only
for a mistake (a plain run of a tree runs none of this module; `Agent` checks a run's timeout
here before it makes the runner)."""

from __future__ import annotations

from typing import Any

from py_trees.behaviour import Behaviour

__all__ = ("check_root", "check_run", "tree_taken")


def check_root(root: Any) -> None:
    """Refuse a root that is no behaviour (a class, a function, a list of nodes), or a node
    whose ``__init__`` did not call ``super().__init__()``: at construction, not as an
    AttributeError at the first run.

    Raises:
        TypeError: ``root`` is not a py_trees behaviour made by its ``__init__``.
    """
    if isinstance(root, Behaviour):
        if "name" not in vars(root):  # set by every Behaviour.__init__
            raise TypeError(
                f"{type(root).__name__}.__init__ did not call super().__init__(name): the node "
                f"has no name, status or children; call it first in __init__"
            )
        return
    from py_trees.trees import BehaviourTree  # a mistake's message only

    if isinstance(root, BehaviourTree):
        raise TypeError(
            "the root of a tree must be a py_trees behaviour, got a BehaviourTree: give its "
            "root, ReactiveRunner(tree.root); the runner ticks the root itself, so the "
            "BehaviourTree's pre/post tick handlers and visitors do not run (a run's "
            "'run.ticked' events come after each tick) and its count stays as it was"
        )
    if isinstance(root, type) and issubclass(root, Behaviour):
        hint = f"the class {root.__name__}, not a node: ReactiveRunner({root.__name__}(...))"
    elif isinstance(root, (list, tuple)):
        hint = (f"a {type(root).__name__} of nodes: put them in a composite, "
                f"py_trees.composites.Sequence('name', memory=True, children=[...])")
    elif callable(root):
        hint = (f"{type(root).__name__} {getattr(root, '__name__', root)!r}: a function is no "
                f"node; subclass AsyncNode and do the work in async def update_async(self)")
    else:
        hint = f"{type(root).__name__} {root!r}"
    raise TypeError(f"the root of a tree must be a py_trees behaviour, got {hint}")


def check_run(max_ticks: Any, timeout: Any) -> None:
    """Refuse a run's limits that are no limit before the run starts: ``max_ticks=0`` ran a
    tick and failed, ``timeout="5"`` raised inside the run, NaN never ran out.

    Raises:
        TypeError: ``max_ticks`` is not an int, or ``timeout`` not a number.
        ValueError: ``max_ticks`` < 1, or ``timeout`` not a number of seconds > 0.
    """
    if max_ticks is not None:
        if isinstance(max_ticks, bool) or not isinstance(max_ticks, int):
            raise TypeError(f"max_ticks is a whole number of ticks, got "
                            f"{type(max_ticks).__name__} {max_ticks!r}")
        if max_ticks < 1:
            raise ValueError(f"max_ticks must be at least 1 (None: no limit), got {max_ticks}")
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise TypeError(f"timeout is a number of seconds, got {type(timeout).__name__} "
                            f"{timeout!r}")
        if not timeout > 0:  # NaN too
            raise ValueError(f"timeout must be a number of seconds > 0 (None: no limit), got "
                             f"{timeout!r}")


def tree_taken(root: Behaviour, run_id: str, *, cleaning: bool = False) -> RuntimeError:
    """The error for a run of ``root`` while run ``run_id`` (another runner's) ticks it, or
    its stopped tasks still clean up after it returned (``cleaning``): both would write to the
    state of whichever run bound the nodes last."""
    doing = (f"is still cleaning up after run {run_id} (stopped tasks its timeout's grace "
             f"left running)" if cleaning else f"is being ticked by run {run_id}")
    return RuntimeError(
        f"tree {root.name!r} {doing}: a tree's nodes hold one run's "
        f"progress, so one tree runs once at a time; build a tree per run (a function that "
        f"returns it), or " + ("let that cleanup end first" if cleaning
                               else "await the other run first")
    )
