"""handoff.operations.standing: where a ticket stands, read from its directory alone (the rows
of `handoff status`), and its state recovered whatever happened to state.json. Real tickets,
made in the test's process; nothing runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import cast

from handoff.operations.standing import StatusRow, listed, starting


def test_an_orchestrator_is_starting_only_for_a_while() -> None:
    now = datetime.now(UTC)
    fresh: list[dict[str, object]] = [{"kind": "orchestrator"},
                                      {"kind": "starting", "time": now.isoformat()}]
    assert starting(fresh, 0)
    old: list[dict[str, object]] = [
        {"kind": "starting", "time": (now - timedelta(minutes=5)).isoformat()}]
    assert not starting(old, -1)
    assert not starting([{"kind": "starting", "time": "yesterday"}], -1)
    assert not starting([{"kind": "starting", "time": now.isoformat()}, {"kind": "orchestrator"}],
                        1), "its run took the ticket since"


def test_the_list_puts_what_waits_for_a_person_first_and_leaves_the_closed_out() -> None:
    def row(ticket: str, phase: str, updated: str) -> StatusRow:
        return cast(StatusRow, {"ticket": ticket, "phase": phase, "updated": updated})

    rows = [row("closed-new", "closed", "2026-12-05T10:00"),
            row("passed", "passed", "2026-12-05T09:00"),
            row("working-old", "implementing", "2026-12-05T01:00"),
            row("working-new", "reviewing", "2026-12-05T08:00"),
            row("queued", "queued", "2026-12-05T09:30"),
            row("asks", "needs-human", "2026-12-04T00:00"),
            row("broken", "unreadable", ""),
            row("plan", "awaiting-approval", "2026-12-05T07:00"),
            row("closed-old", "closed", "2026-01-01T00:00")]
    shown, closed = listed(rows, every=False)
    assert [r["ticket"] for r in shown] == ["plan", "asks", "broken", "working-new",
                                            "working-old", "queued", "passed"]
    assert closed == 2
    every, none_left = listed(rows, every=True)
    assert [r["ticket"] for r in every][-2:] == ["closed-new", "closed-old"] and none_left == 0
