"""Expected failures: each carries a message for a person, a hint to mend it, and an exit code.

The CLI turns these into one clear message and the documented exit code; anything else is a bug
and may show a traceback.
"""

from __future__ import annotations


class HandoffError(Exception):
    """An expected failure a user can act on."""

    exit_code = 1

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(HandoffError):
    """Bad input: a hostile ticket id, an unknown role, a malformed plan or config."""

    exit_code = 2


class NotFound(HandoffError):
    """The ticket, repo or file named does not exist."""

    exit_code = 3


class Busy(HandoffError):
    """Another orchestrator holds the ticket's lock."""

    exit_code = 4


class WorkAtRisk(HandoffError):
    """Refused because going on would lose uncommitted or untracked work."""

    exit_code = 5


class MissingTool(HandoffError):
    """A program handoff needs (tmux, git, a provider's CLI) is not installed."""

    exit_code = 6


class ExternalFailure(HandoffError):
    """git or tmux failed in a way we did not expect; the message carries its stderr."""

    exit_code = 1
