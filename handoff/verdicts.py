"""The words a report and a gate judge with: a reviewer's verdict, an implementer's or tester's
status, a gate's outcome. Written once, as enums mypy can check; each value is the word a
report's frontmatter, the ticket's record and its events carry.

Stdlib only, like handoff.phases: `handoff submit` imports it in every peer's short process.
"""

from __future__ import annotations

from enum import StrEnum


class Verdict(StrEnum):
    """A reviewer's judgement of the commit under review (and a round's, over its reviewers)."""

    PASS = "pass"
    FAIL = "fail"


class Status(StrEnum):
    """How an implementer or tester says its turn ended."""

    DONE = "done"
    BLOCKED = "blocked"
    PARTIAL = "partial"


class GateOutcome(StrEnum):
    """What a round's gate came to (State.gates)."""

    PASS = "pass"
    FAIL = "fail"
    #: the plan names no test command and no scanner is configured
    SKIPPED = "skipped"


VERDICTS = tuple(str(v) for v in Verdict)
STATUSES = tuple(str(s) for s in Status)
