"""`ReactiveRunner.send`'s work: the user's next message added to the conversation, or kept
while a run told to stop is still stopping, or stands suspended on requests all decided, and
added as it ends (`add_sent`)."""

from __future__ import annotations

from typing import Any

__all__ = ("add_sent", "send")


def send(runner: Any, message: Any, namespace: str | None) -> None:
    """Add ``message`` to ``runner``'s conversation (`ReactiveRunner.send`)."""
    if runner._running and runner._cancel_requested:  # stopping: the message is the next turn
        _keep(runner, message, namespace)
        return
    if runner._running:
        raise RuntimeError("send() while the run is going; await run() first")
    add_sent(runner)  # sent before, while a run stopped: first
    if runner.interaction.has_pending:
        waiting = ", ".join(r.id for r in runner.interaction.pending)
        raise RuntimeError(
            f"the run waits for approval ({waiting}); approve or reject before sending more"
        )
    if runner._suspended_at is not None:
        # every request decided, none acted on yet: the calls they let go on (a sub-agent's
        # turn, a batch) come first, and the message after the run that makes them; added
        # now, it stood between a call and its result, and the calls ran for a conversation
        # that had moved on
        _keep(runner, message, namespace)
        return
    _add(runner, message, namespace)


def _keep(runner: Any, message: Any, namespace: str | None) -> None:
    """Check ``message`` now (refused at once) and keep it to add as the run ends."""
    view = runner.state.scope(namespace) if namespace else runner.state.root
    view.check_port_messages(message if not isinstance(message, str) else
                             {"role": "user", "content": message})
    runner._sent.append((message, namespace))


def add_sent(runner: Any) -> None:
    """Add the messages sent while a run stopped, once it has: nothing runs, and nothing
    waits for a person or for a call a person let go on (never between a call and its
    result)."""
    if runner._sent and not runner._running and runner._suspended_at is None and \
            not runner.interaction.has_pending:
        sent, runner._sent = runner._sent, []
        for message, namespace in sent:
            _add(runner, message, namespace)


def _add(runner: Any, message: Any, namespace: str | None) -> None:
    """The message appended, the last turn's answer cleared."""
    if isinstance(message, str):
        message = {"role": "user", "content": message}
    view = runner.state.scope(namespace) if namespace else runner.state.root
    view.append_port_messages(message)
    cleared = {
        key: value for key, value in
        (("final_answer", None), ("final_output", None), ("done", False))
        if runner.state.accepts(key) and view.get(key) not in (None, False)
    }
    if cleared:
        view.replace(cleared)
    runner._finished = None  # a new turn: the next run() answers it
    # ...and the work a stopped run finished unread is no longer where the run goes on from:
    # a model's turn kept so would have its calls run after this message (they are closed
    # as not run, the model asked again, as for a turn no one kept)
    for node in runner._kept:
        node._finished = None
    runner._kept = ()
    runner.ctx.events.emit("run.message", namespace=namespace)
