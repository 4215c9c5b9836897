"""handoff.loop.submission: a report is filed with a signed receipt of its checks, or refused
with why; a filed report that changed, or that handoff did not file, does not count. On a real
ticket, with no peer running (the whole submit path: tests/e2e/test_submit.py)."""

from __future__ import annotations

from pathlib import Path

from handoff.loop import submission
from handoff.loop.context import TicketContext
from handoff.role import Kind


def filed(ctx: TicketContext, role: str, text: str, n: int = 1) -> Path:
    """As submit files a report: its receipt first, then the text."""
    target = ctx.tdir.report(role, n)
    submission.write_receipt(ctx.tdir, target, text, "abcdef1", role, n)
    target.write_text(text)
    return target


def test_whose_reports_wait_for_the_turns_end() -> None:
    assert not submission.taken_at_turn_end(Kind.IMPLEMENTER)
    assert submission.taken_at_turn_end(Kind.REVIEWER) and submission.taken_at_turn_end(
        Kind.TESTER)
