"""One owner per run: the lease a runner takes in its checkpoint store before it decides,
resumes or continues a run, so two processes never both restore a checkpoint and both act on it.

A lease names its owner (``host:pid:purpose:token``, for people to read) and when it expires.
It is taken atomically in the store (`SQLiteCheckpointer.claim`), renewed while the run goes on
(on every checkpoint saved under it, and every third of its time-to-live), and released when
the run returns; a crashed owner's lease expires, or is taken over at once when the owner was
a process of this machine that is gone (Linux: the same boot and pid namespace, and no live
process with its pid and start time). The lease of another process of this machine that is
alive is not taken when it expires (a long-held loop, a paused process, a clock that differs:
it is known to be alive); this process's own runners and other machines' go by the clock.
A lease belongs to the process that took it: a forked child never gives up its parent's. The
renewal calls the store on a worker thread, so a busy file never holds up the event loop.
A second claimant meanwhile gets
`RunClaimedError` naming the holder and when its lease ends. A runner also remembers the
newest checkpoint it knows: when the run went on elsewhere after it read it (another owner
continued and released it), its next claim is refused too, so it cannot act on a stale copy.

Durable runs (`jianmu.durable`) do not use this: DBOS owns their workflows.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from jianmu.errors import CheckpointError, RunClaimedError

__all__ = (
    "Lease", "LeasingCheckpointer", "RunClaim", "alive_elsewhere", "default_owner",
    "of_this_machine", "process_gone", "refusal", "storable", "store_failed", "this_process",
    "until",
)

T = TypeVar("T")

DEFAULT_LEASE_TTL = 60.0
"""Seconds a lease lasts unless renewed: how long a crashed owner keeps others waiting."""


@dataclass(frozen=True, kw_only=True)
class Lease:
    """An owner's hold on a run in a checkpoint store."""

    run_id: str
    """The run held."""
    owner: str
    """Who holds it (``host:pid:purpose:token``)."""
    expires: float
    """When it ends unless renewed, in seconds since the epoch (the store's clock)."""
    seq: int = 0
    """The number of the run's newest checkpoint when the lease was taken (0: none yet)."""
    process: str = ""
    """The holder's process as `this_process` describes it (``""``: not known)."""


@runtime_checkable
class LeasingCheckpointer(Protocol):
    """A `Checkpointer` that can also lease runs to one owner at a time (`SQLiteCheckpointer`).

    A runner on a checkpointer without these methods runs unclaimed, as before. The renewal
    of a running run's lease calls ``renew`` (or ``claim``) on a worker thread, never two at
    once, while the run may save on its loop: the store must be thread-safe (one lock).
    """

    lease_ttl: float
    """Seconds a lease lasts unless renewed."""

    def save(self, run_id: str, checkpoint: dict[str, Any], *, owner: str | None = None,
             release: bool = False, after: int | None = None) -> None:
        """Store a checkpoint; with ``owner``, only while ``owner`` holds the run (renewed, or
        given up with ``release``); with ``after``, only on top of checkpoint number ``after``
        (`RunClaimedError` otherwise)."""
        ...

    def load(self, run_id: str) -> dict[str, Any] | None:
        """Return the newest checkpoint of ``run_id``, or None."""
        ...

    def claim(self, run_id: str, owner: str, *, ttl: float | None = None) -> Lease:
        """Take or renew the lease on ``run_id`` for ``owner``; `RunClaimedError` if another
        owner holds it."""
        ...

    def release(self, run_id: str, owner: str) -> None:
        """Give up ``owner``'s lease on ``run_id`` (nothing if it does not hold it)."""
        ...

    def holder(self, run_id: str) -> Lease | None:
        """The unexpired lease on ``run_id``, if any."""
        ...


def default_owner(purpose: str) -> str:
    """A new owner name: ``host:pid:purpose:token`` (the token tells apart two runners of
    one process)."""
    return f"{socket.gethostname()}:{os.getpid()}:{purpose}:{uuid.uuid4().hex[:6]}"


_PROCESS: dict[int, str] = {}


def this_process() -> str:
    """This process as ``boot:pid-namespace:pid:start-time`` (Linux), so another process of
    the same machine can tell whether it is still alive; ``""`` where /proc cannot tell."""
    pid = os.getpid()  # a forked child is another process: keyed by pid
    known = _PROCESS.get(pid)
    if known is None:
        try:
            boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
            namespace = os.stat("/proc/self/ns/pid").st_ino
            started = _stat(pid)[19]
        except (OSError, IndexError):
            known = ""
        else:
            known = f"{boot}:{namespace}:{pid}:{started}"
        _PROCESS[pid] = known
    return known


def of_this_machine(process: str) -> bool:
    """Whether ``process`` (as `this_process` describes one) ran on this boot and in this pid
    namespace: only then can this process tell whether it is alive."""
    mine, parts = this_process(), process.split(":")
    return bool(mine) and len(parts) == 4 and mine.split(":")[:2] == parts[:2]


def process_gone(process: str) -> bool:
    """Whether the process ``this_process()`` described has died. Only a process of this
    boot and pid namespace can be known dead; of anything else, False (its lease expires)."""
    if not of_this_machine(process):
        return False
    parts = process.split(":")
    try:
        stat = _stat(int(parts[2]))
    except (OSError, ValueError):
        return True  # no such process any more
    return stat[0] in ("Z", "X") or stat[19] != parts[3]  # a zombie, or its pid reused


def alive_elsewhere(process: str) -> bool:
    """Whether ``process`` is another process of this machine, and alive: its lease is kept
    past its expiry (this process's own runners, and other machines', go by the clock)."""
    return bool(process) and process != this_process() and of_this_machine(process) \
        and not process_gone(process)


def refusal(run_id: str, held: Lease, now: float) -> str:
    """Why a claim on ``run_id`` was refused while ``held`` holds it, and when to try again."""
    if alive_elsewhere(held.process):  # its lease is kept past its expiry: the clock is moot
        return (f"run {run_id!r} is claimed by {held.owner!r}, held by process "
                f"{held.process.split(':')[2]} of this machine, which is alive; nothing was "
                "done here. The run will be free when that process exits or closes the run")
    when = f"until {until(held.expires, now)}" if held.expires > now else \
        "(its lease ran out, but its owner has not let go)"
    return (f"run {run_id!r} is claimed by {held.owner!r} {when}: that owner is deciding or "
            "continuing it now; nothing was done here. Try again once it is done (if that "
            "owner crashed, once its lease has expired)")


def _stat(pid: int) -> list[str]:
    """``/proc/PID/stat``'s fields after the command name (state first, start time 20th)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def storable(run_id: str) -> bool:
    """Whether ``run_id`` is text UTF-8 can encode (not a lone surrogate, what an undecodable
    byte of a command line becomes), as a run id must be to be saved or looked up."""
    if run_id.isascii():
        return True
    try:
        run_id.encode()
    except UnicodeEncodeError:
        return False
    return True


def store_failed(error: BaseException | None) -> bool:
    """Whether ``error`` is the store's own failure (busy, full, unwritable), not a run lost
    to another owner: a run that failed of it was interrupted, and goes on when run again."""
    return isinstance(error, CheckpointError) and not isinstance(error, RunClaimedError)


def until(expires: float, now: float) -> str:
    """When a lease ends, for a message: local time, and how far off."""
    stamp = datetime.fromtimestamp(expires).astimezone().isoformat(timespec="seconds")
    return f"{stamp} (in {max(expires - now, 0):.0f} s)"


class RunClaim:
    """A runner's side of its lease: who it is, whether it holds the run, and the newest
    checkpoint it knows (so it never acts on a copy another owner has since moved on)."""

    def __init__(self, store: LeasingCheckpointer, run_id: str, owner: str) -> None:
        self.store = store
        self.run_id = run_id
        self.owner = owner
        self.held = False
        self.lost = False
        """Whether the run went to another owner (or on elsewhere) under this runner: it must
        be restored again, and this claim touches the store no more."""
        self._renewed = 0.0  # time.monotonic() of the last renewal, while held
        self._pid = os.getpid()  # the process that holds it: a forked child never lets go
        self._turn = 0  # counts each taking and giving up: a renewal's answer is of its turn
        self._unreleased = False  # given up, but the store has not yet let the lease go
        self.seen: int | None = None
        """The number of the newest checkpoint this runner read or wrote (None: none yet)."""
        # a subclass may override save() without ``owner``: it then renews, then saves
        parameters = inspect.signature(store.save).parameters
        self._owned_save = "owner" in parameters
        # ...and without ``after``: then two runners under one owner name are not told apart
        self._fenced_save = "after" in parameters

    @classmethod
    def of(cls, store: object, run_id: str, owner: str | None) -> RunClaim | None:
        """The claim of a runner on ``store``; None when the store keeps no leases."""
        if not isinstance(store, LeasingCheckpointer):
            return None
        return cls(store, run_id, owner or default_owner("python"))

    @classmethod
    def new(cls, store: object, run_id: str, owner: str | None) -> RunClaim | None:
        """The claim of a new run's runner (not restored): it knows no checkpoint, so a run
        that has one already, under its id, is another's and is not started over."""
        claim = cls.of(store, run_id, owner)
        if claim is not None:
            claim.seen = 0
        return claim

    def take(self) -> None:
        """Take (or renew) the lease, then check that nobody moved the run on meanwhile.

        Raises:
            RunClaimedError: another owner holds the run, or continued it after this runner
                read it.
        """
        if self.lost:  # what it read is stale: a lease taken now could only be another's
            raise RunClaimedError(
                f"run {self.run_id!r} went on elsewhere, or to another owner, after this runner "
                "read it; nothing was done: restore the run again to act on where it is now",
                run_id=self.run_id,
            )
        if self.held and time.monotonic() - self._renewed < self.store.lease_ttl / 3:
            return  # held and fresh: nobody else can have written since (no commit to pay)
        lease = self.store.claim(self.run_id, self.owner)
        if self.seen is not None and lease.seq != self.seen:
            if not self.held:
                self.store.release(self.run_id, self.owner)
            self.held, self.lost = False, True
            if self.seen == 0:  # a new runner, given the id of a run that has checkpoints
                raise RunClaimedError(
                    f"run {self.run_id!r} already has checkpoints in this store (the newest is "
                    f"number {lease.seq}): a new runner does not start it over; nothing was "
                    "done. Restore it (ReactiveRunner.restore) to go on with it, or give this "
                    "run an id of its own", run_id=self.run_id)
            raise RunClaimedError(
                f"run {self.run_id!r} went on elsewhere after this runner read it (its newest "
                f"checkpoint is number {lease.seq}, this runner has number {self.seen}); "
                "nothing was done: restore the run again to act on where it is now",
                run_id=self.run_id,
            )
        self.seen = lease.seq
        if not self.held:
            self._turn += 1
        self.held = True
        self._pid = os.getpid()
        self._renewed = time.monotonic()

    def release(self) -> None:
        """Give the run up (the run returned, or the runner is closed); a release the store
        refused (busy) is tried again, quietly, by the next (the runner's ``aclose``)."""
        again = not self.held
        if self.held:
            self.held = False
            self._turn += 1
            self._unreleased = self._pid == os.getpid()  # a forked child's: the parent's
        if self._unreleased:
            try:
                self.store.release(self.run_id, self.owner)
            except CheckpointError:
                if not again:
                    raise
                return  # still granted: the store's close, or the process's end, frees it
            self._unreleased = False

    def quietly_release(self) -> None:
        """Give the run up while another error is told: a store that cannot be written now
        lets the lease expire (or be taken over once this process is gone)."""
        try:
            self.release()
        except CheckpointError:
            pass

    def save(self, checkpoint: dict[str, Any], *, last: bool = False) -> None:
        """Save under the lease (renewing it); ``last`` gives the run up with the same commit
        (the run returned). A runner that does not hold the run takes it for this save."""
        if not self.held:
            self.take()
            last = True
        try:
            self._save(checkpoint, last)
        except RunClaimedError:  # the run is another's now (maybe under the same name):
            self.held, self.lost = False, True  # giving "our" lease back would take it
            self._turn += 1
            raise
        except BaseException:
            if last:
                self.quietly_release()  # the save's error is the one to tell
            raise
        self.seen = (self.seen or 0) + 1
        if last:
            self.held = False
            self._turn += 1

    def _save(self, checkpoint: dict[str, Any], last: bool) -> None:
        if self._fenced_save:  # on top of the newest this runner knows: else it went on
            self.store.save(self.run_id, checkpoint, owner=self.owner, release=last,
                            after=self.seen or 0)
            self._renewed = time.monotonic()
        elif self._owned_save:  # renewed (or given up) and saved in one transaction
            self.store.save(self.run_id, checkpoint, owner=self.owner, release=last)
            self._renewed = time.monotonic()
        else:
            self.store.claim(self.run_id, self.owner)
            self.store.save(self.run_id, checkpoint)
            if last:
                self.store.release(self.run_id, self.owner)

    @asynccontextmanager
    async def kept(self) -> AsyncIterator[None]:
        """Renew the lease every third of its time-to-live while the block runs (a long tool
        call saves no checkpoint, yet the run is not dead). A block that raises gives the run
        up here, without letting a store that cannot be written hide the block's error. The
        block's end waits for a renewal under way: none outlives it."""
        task = asyncio.create_task(self._renew())
        try:
            yield
        except BaseException:
            await _stopped(task)
            self.quietly_release()
            raise
        await _stopped(task)

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self.store.lease_ttl / 3)
            if not self.held:
                return
            turn = self._turn
            try:  # on a worker thread: a busy file holds it up to its timeout, not the loop
                kept = await _in_thread(self._renew_once)
            except RunClaimedError:  # lost to another owner: the next save refuses and says so
                return
            except CheckpointError:  # a busy or failing store: the run is alive, try again
                continue
            if self._turn != turn:  # given up (or taken again) meanwhile: the answer is stale
                continue
            if not kept:  # given up by another owner that took it: the run went on elsewhere
                self.held, self.lost = False, True
                self._turn += 1
                return
            self._renewed = time.monotonic()

    def _renew_once(self) -> bool:
        """Extend the lease in the store; False if it is no longer this owner's."""
        renew = getattr(self.store, "renew", None)  # `SQLiteCheckpointer.renew`
        if renew is None:
            self.store.claim(self.run_id, self.owner)
            return True
        return bool(renew(self.run_id, self.owner))


async def _in_thread(call: Callable[[], T]) -> T:
    """``call()`` on a worker thread. Cancelled meanwhile, it still waits for the call to end,
    then raises the cancel: what the call does is over when its caller is."""
    future = asyncio.get_running_loop().run_in_executor(None, call)
    if await _waited_out(future):
        future.exception()  # retrieved: the cancel is what the caller is told
        raise asyncio.CancelledError
    return future.result()


async def _stopped(task: asyncio.Task[None]) -> None:
    """Cancel ``task`` and wait until it is over, even if cancelled meanwhile (then raise it)."""
    task.cancel()
    cancelled = await _waited_out(task)
    if not task.cancelled():
        task.exception()  # retrieved: a renewal's own failure is not the run's to tell
    if cancelled:
        raise asyncio.CancelledError


async def _waited_out(future: asyncio.Future[Any]) -> bool:
    """Wait until ``future`` is done, even if this wait is cancelled meanwhile; whether it
    was (the caller raises the cancel once its own clean-up is over)."""
    cancelled = False
    while not future.done():
        try:
            await asyncio.wait((future,))
        except asyncio.CancelledError:
            cancelled = True
    return cancelled
