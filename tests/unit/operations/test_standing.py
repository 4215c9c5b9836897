"""handoff.operations.standing: where a ticket stands, read from its directory alone (the rows
of `handoff status`), and its state recovered whatever happened to state.json. Real tickets,
made in the test's process; nothing runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from handoff.operations.standing import (
    starting,
)


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
