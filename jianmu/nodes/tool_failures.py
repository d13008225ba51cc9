"""What the model reads of a call that failed: an exception as text, the ``BaseException``s a
tool may raise of its own (``sys.exit()``, a ``CancelledError`` nobody sent it, pytest's
``Failed``), which ones stop the run instead (`interrupts`: Ctrl-C, a cancel), a result
withheld; and which failures are worth another attempt (a call stopped mid-flight:
`jianmu.nodes._under_way.maybe_done`). `ToolExecutor` and `ToolNode` share them."""

from __future__ import annotations

import asyncio

from jianmu.errors import MCPError, ToolError, ToolTimeoutError, exit_text
from jianmu.guard.guardrails import withheld
from jianmu.tools.calls import printable

__all__ = ("error_text", "interrupts", "own_failure", "transient", "withheld")


def error_text(exc: BaseException) -> str:
    """An exception as the model should read it: our errors speak for themselves."""
    if isinstance(exc, ToolError):
        return printable(exc)
    return f"{type(exc).__name__}: {printable(exc)}"


def interrupts(exc: BaseException) -> bool:
    """Whether ``exc`` stops the run rather than fails the call: a ``KeyboardInterrupt`` (the
    person's Ctrl-C, also one raised in a tool's own code on the loop) or a cancel, alone or
    in an exception group. The call that got it is settled as stopped
    (`jianmu.nodes._under_way`)."""
    if isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError)):
        return True
    return isinstance(exc, BaseExceptionGroup) and exc.subgroup(
        (KeyboardInterrupt, asyncio.CancelledError)) is not None


def own_failure(exc: BaseException, *, halted: bool = True) -> str | None:
    """What the model reads of a call that raised ``exc``, a ``BaseException`` that is not an
    ``Exception``, or None when ``exc`` is not the tool's and must go on.

    ``sys.exit()`` in a tool (argparse on bad input) ends the call, not the process; a
    ``CancelledError`` while nobody cancelled the call (a task of the tool's that someone
    cancelled) is the tool's failure; a cancel of the call itself is not. With ``halted``
    false (the node running the call was not stopped), a cancel of the task the call runs in
    came from the tool itself (``asyncio.current_task().cancel()``): it is withdrawn, so the
    node goes on, and the call fails. A ``KeyboardInterrupt`` is the person's and goes on.
    Any other (pytest's ``Failed``, gevent's ``Timeout``, trio's ``Cancelled`` on asyncio) is
    the call's failure: the model reads it, and the conversation stays whole.
    """
    if isinstance(exc, SystemExit):
        return f"the tool {exit_text(exc)}"
    if isinstance(exc, GeneratorExit):
        return "the tool raised GeneratorExit"
    if isinstance(exc, KeyboardInterrupt):
        return None
    if isinstance(exc, asyncio.CancelledError):
        task = asyncio.current_task()
        if task is None:
            return None
        if not task.cancelling():
            return "the tool raised CancelledError without being cancelled"
        if not halted:
            while task.uncancel():
                pass
            return ("the tool cancelled the task it ran in (asyncio.current_task().cancel()), "
                    "so the call did not finish")
        return None
    if isinstance(exc, BaseExceptionGroup):
        if exc.subgroup(KeyboardInterrupt) is not None:
            return None
        cancels = exc.subgroup(asyncio.CancelledError)
        if cancels is not None and own_failure(cancels.exceptions[0], halted=halted) is None:
            return None  # the call's own task group saw the call being stopped
    return error_text(exc)


def transient(exc: Exception) -> bool:
    """Whether another attempt may succeed: a dropped connection, a server that restarts.

    A tool's own timeout is not retried (a hung call must not pile up), nor are the tool's
    deliberate failures (`ToolError`) or bugs (ValueError, TypeError, ...).
    """
    if isinstance(exc, ToolTimeoutError):
        return False
    if isinstance(exc, (ConnectionError, TimeoutError, MCPError)):
        return True
    return bool(getattr(exc, "transient", False))
