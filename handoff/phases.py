"""The phases of a ticket and the one the loop waits in for each kind of role (what a person
does next in each is handoff.next_steps).

Stdlib only: `handoff submit` (handoff.cli.filing) imports it in every peer's short process.
"""

from __future__ import annotations

from enum import StrEnum

from handoff.role import Kind


class Phase(StrEnum):
    AWAITING_APPROVAL = "awaiting-approval"
    #: a planner drafts the plan from the ticket's text (Orchestrator.planning); a record
    #: that names no phase is awaiting-approval, the first
    PLANNING = "planning"
    #: approved, waiting until the tickets it starts after have passed (handoff.loop.after)
    WAITING = "waiting"
    #: waiting for one of this machine's `max_parallel` slots (handoff.record.slots)
    QUEUED = "queued"
    IMPLEMENTING = "implementing"
    TESTING = "testing"
    GATING = "gating"
    REVIEWING = "reviewing"
    NEEDS_HUMAN = "needs-human"
    PASSED = "passed"
    ESCALATED = "escalated"
    CLOSED = "closed"


PHASES = tuple(str(p) for p in Phase)
FINISHED = (Phase.PASSED, Phase.ESCALATED, Phase.CLOSED)
#: the phases in which an orchestrator waits for peers' reports
WORKING = (Phase.PLANNING, Phase.IMPLEMENTING, Phase.TESTING, Phase.REVIEWING)
#: the phases that hold one of the machine's slots: peers or the gate's tests are at work (a
#: ticket waiting for a person holds none: its peers sit idle, which costs memory, not CPU)
AT_WORK = (Phase.PLANNING, Phase.IMPLEMENTING, Phase.TESTING, Phase.GATING, Phase.REVIEWING)


#: the order the lists show tickets in (`status`, the board): what waits for a person first (a
#: record nobody can read too), then work under way, then work waiting its turn, then work
#: ready to finish, the closed last; within each, the most recently active first
LIST_RANK: dict[str, int] = {
    Phase.AWAITING_APPROVAL: 0, Phase.NEEDS_HUMAN: 0, Phase.ESCALATED: 0,
    **dict.fromkeys(AT_WORK, 1), Phase.QUEUED: 2, Phase.WAITING: 2, Phase.PASSED: 3,
    Phase.CLOSED: 4}


def awaited(kind: Kind) -> Phase:
    """The phase in which the ticket waits for the report of a role of this kind."""
    return {Kind.IMPLEMENTER: Phase.IMPLEMENTING, Kind.TESTER: Phase.TESTING,
            Kind.REVIEWER: Phase.REVIEWING, Kind.PLANNER: Phase.PLANNING}[kind]

