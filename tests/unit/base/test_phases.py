"""handoff.phases: the phases of a ticket, the groups the loop and the slots read, and the one a
ticket waits in for each kind of role."""

from __future__ import annotations

from handoff.phases import AT_WORK, FINISHED, PHASES, WORKING, Phase, awaited
from handoff.role import Kind


def test_each_kind_has_the_phase_its_reports_are_awaited_in() -> None:
    assert [awaited(k) for k in Kind] == [Phase.IMPLEMENTING, Phase.TESTING, Phase.REVIEWING,
                                          Phase.PLANNING]


def test_the_phases_are_the_words_a_record_carries() -> None:
    assert PHASES == ("awaiting-approval", "planning", "waiting", "queued", "implementing", "testing",
                      "gating", "reviewing", "needs-human", "passed", "escalated", "closed")
    assert Phase("needs-human") is Phase.NEEDS_HUMAN


def test_the_groups_of_phases() -> None:
    """A finished ticket is never at work; waiting for peers is at work, and so is the gate;
    a ticket waiting for a person, for a slot or for approval holds no slot."""
    assert not set(FINISHED) & set(AT_WORK)
    assert set(WORKING) < set(AT_WORK) and set(AT_WORK) - set(WORKING) == {Phase.GATING}
    idle = {Phase.AWAITING_APPROVAL, Phase.WAITING, Phase.QUEUED, Phase.NEEDS_HUMAN}
    assert not idle & set(AT_WORK) and not idle & set(FINISHED)
    assert set(Phase) == idle | set(AT_WORK) | set(FINISHED)
    assert {awaited(k) for k in Kind} == set(WORKING)
