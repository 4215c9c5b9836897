"""How long a watcher goes on while tmux does not answer, before it gives up."""

from __future__ import annotations

import time

from handoff.machinery.tmux import TmuxFailure, call_timeout

#: the patience, in calls' timeouts
PATIENT_CALLS = 2


class Patience:
    """How long a watcher goes on while tmux does not answer: a stopped or swamped server gets
    `limit` seconds from its first failure to answer, then the watcher gives up with a
    TmuxFailure that says so, instead of waiting forever or taking the silence for a death.
    (From the first failure, not the last answer: a waiting orchestrator asks tmux only now
    and then, and a long quiet wait is no silence.)"""

    def __init__(self, ticket: str = "TICKET", limit: float | None = None) -> None:
        self.ticket = ticket
        self.limit = PATIENT_CALLS * call_timeout() if limit is None else limit
        self.failing_since: float | None = None

    @property
    def failing(self) -> bool:
        return self.failing_since is not None

    def failed(self, exc: TmuxFailure) -> bool:
        """Note a failure; True for the first since tmux last answered (worth telling)."""
        now = time.monotonic()
        first = self.failing_since is None
        since = self.failing_since = now if self.failing_since is None else self.failing_since
        if now - since >= self.limit:
            hint = (f"{exc.hint or 'look at the tmux server'}; once it answers again, "
                    f"'handoff resume {self.ticket}' carries on where this stopped")
            raise TmuxFailure(f"tmux has not answered for {now - since:.0f}s: {exc.message}", hint)
        return first

    def answered(self) -> float | None:
        """Note an answer; how long tmux had been failing, when it had."""
        was = None if self.failing_since is None else time.monotonic() - self.failing_since
        self.failing_since = None
        return was
