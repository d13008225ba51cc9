"""`ToolExecutorConfig`: how a `ToolExecutor` runs a batch of tool calls."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ("ToolExecutorConfig",)


class ToolExecutorConfig(BaseModel):
    """How a `ToolExecutor` runs a batch (frozen: make another to change it)."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    execution_mode: Literal["auto", "serial", "parallel"] = "auto"
    """``auto``: parallel when the batch has several calls and every tool is parallel-safe."""
    max_concurrency: int = Field(default=32, ge=1)
    """Calls that may run at once in parallel mode."""
    retry_backoff: float = Field(default=0.5, ge=0)
    """Seconds to wait before retry ``n``, times ``n``."""
    observation_format: Literal["text", "json"] = "text"
    """Tool message content: the result text, or ``{"ok", "output", "error"}`` as JSON."""
    interactive: bool = True
    """``False``: nobody is asked for these calls, even in a run where a person answers: a
    call that needs a confirmation is denied, ``ask_user`` gets no answer, and a sub-agent
    called from here asks nobody either, nor an agent of the team a hand-off from here joins
    (`jianmu.Agent`'s ``interactive=False``)."""
