"""handoff.operations.merging: the git part of `handoff finish`, on a real repository: which
branch a ticket merges into, the merge made as objects only, and the base moved to it (the
whole command: tests/integration/operations/test_finish.py)."""

from __future__ import annotations

from handoff.operations.merging import (
    outcome,
)


def test_the_commit_message_is_the_final_report_without_its_heading() -> None:
    report = "# Final report: T-1\n\n**Outcome:** passed\n\n## Rounds\n1\n"
    assert outcome(report) == "Outcome: passed\n## Rounds\n1"
