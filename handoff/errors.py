"""Expected failures: each carries a message for a person, a hint to mend it, and an exit code.

The CLI turns these into one clear message and the documented exit code; anything else is a bug
and may show a traceback.
"""

from __future__ import annotations

# The exit codes of `handoff`, one meaning each (docs/cli.md lists them for scripts and CI).
# 1..6 are errors; 10 and up say how a ticket's run ended when it did not pass.
EXIT_OK = 0  # done; for a run: the ticket passed (or was closed)
EXIT_FAILED = 1  # a failure with no code of its own; doctor found a FAIL; a report not accepted
EXIT_USAGE = 2  # bad input (handoff's own checks and the command line's)
EXIT_NOT_FOUND = 3
EXIT_BUSY = 4
EXIT_WORK_AT_RISK = 5
EXIT_MISSING_TOOL = 6
EXIT_NOT_MERGED = 7  # finish moved nothing (or only part of a train): a conflict, a red merge
EXIT_NEEDS_HUMAN = 10  # the run ended with the ticket waiting for a person (handoff answer)
EXIT_ESCALATED = 11  # the review loop stopped at a bound: open findings in final-report.md
EXIT_CRASH = 70  # handoff itself failed unexpectedly (a bug): see the crash log it names
EXIT_INTERRUPTED = 130  # stopped by Ctrl-C or a signal, mid-run


class HandoffError(Exception):
    """An expected failure a user can act on."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


def describe(exc: HandoffError) -> str:
    """The one message a person sees for exc: what is wrong, then how to mend it."""
    return f"handoff: error: {exc.message}" + (f"\n  hint: {exc.hint}" if exc.hint else "")


class UsageError(HandoffError):
    """Bad input: a hostile ticket id, an unknown role, a malformed plan or config."""

    exit_code = EXIT_USAGE


class NotFound(HandoffError):
    """The ticket, repo or file named does not exist."""

    exit_code = EXIT_NOT_FOUND


class Busy(HandoffError):
    """Another orchestrator holds the ticket's lock."""

    exit_code = EXIT_BUSY


class WorkAtRisk(HandoffError):
    """Refused because going on would lose uncommitted or untracked work."""

    exit_code = EXIT_WORK_AT_RISK


class MissingTool(HandoffError):
    """A program handoff needs (tmux, git, a provider's CLI) is not installed."""

    exit_code = EXIT_MISSING_TOOL


class NotMerged(HandoffError):
    """`finish` refused to move the base: the merge conflicts, or the merged result fails the
    gate (in a train: from this ticket on; the ones before it may have been merged)."""

    exit_code = EXIT_NOT_MERGED


class ExternalFailure(HandoffError):
    """git or tmux failed in a way we did not expect; the message carries its stderr (exit
    code EXIT_FAILED, as every HandoffError without a code of its own)."""


class Tampered(ExternalFailure):
    """A file a peer can write, which git would read as configuration or as where its
    configuration lives, is not what handoff made: handoff runs nothing that reads it, and a
    person must look (a peer cannot be told to mend what would steer handoff)."""
