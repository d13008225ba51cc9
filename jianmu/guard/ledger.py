"""`GuardLedger`: what a run has used that the guard counts, kept in the run's state."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ("RATE_WINDOW_SECONDS", "GuardLedger")

RATE_WINDOW_SECONDS = 60.0
"""The window of the per-minute rate limits."""


class GuardLedger(BaseModel):
    """Tool calls a run made, and their clock times per tool for the per-minute limits.

    Immutable: `after` returns the next ledger, which the node writes back to the state in the
    same update as the call's observation, so a restored run counts exactly what ran.
    """

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    calls_made: int = 0
    """Tool calls executed in the run."""
    call_times: dict[str, tuple[float, ...]] = Field(default_factory=dict)
    """Clock times of the calls of the last minute, per canonical tool name (lower case)."""

    @classmethod
    def of(cls, value: Any) -> GuardLedger:
        """The ledger stored in a state: a `GuardLedger`, its JSON dict, or nothing yet."""
        if isinstance(value, GuardLedger):
            return value
        return cls.model_validate(value or {})

    def after(self, names: Iterable[str], at: float, *, timed: bool = True) -> GuardLedger:
        """This ledger plus calls of ``names`` made at ``at``; times older than a minute go.

        ``timed=False`` counts the calls without keeping their times (no rate limit applies).
        """
        names = list(names)
        if not timed and not self.call_times:  # nothing to keep or prune: just count
            return GuardLedger.model_construct(
                calls_made=self.calls_made + len(names), call_times={}
            )
        times = {k: list(v) for k, v in self.call_times.items()}
        if timed:
            for name in names:
                times.setdefault(name.lower(), []).append(at)
        kept = {
            k: tuple(t for t in v if at - t < RATE_WINDOW_SECONDS) for k, v in times.items()
        }
        # built from this ledger's own valid data: no need to validate it again
        return GuardLedger.model_construct(
            calls_made=self.calls_made + len(names),
            call_times={k: v for k, v in kept.items() if v},
        )
