"""Which tickets of one repository change the same files: read from their records alone.

Every ticket keeps the files its branch changed since its base (`State.touched`, written when a
round's commit is taken). Two open tickets that touch one file will meet at the merge; seen
early, a person can order them, and the implementer of the later one is told. Reading records
only (no git) keeps this cheap enough for `handoff status` and the board; whether the overlap
is a real conflict is git's to say (`handoff conflicts`, handoff.operations.conflicts).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from handoff.errors import HandoffError
from handoff.phases import Phase
from handoff.record.ticket import State, all_tickets

#: the phases whose branch may still reach the base: every one but closed
OPEN = tuple(p for p in Phase if p is not Phase.CLOSED)


@dataclass(frozen=True)
class Overlap:
    """Another open ticket of the repository that changes some of the same files."""

    ticket: str
    phase: str
    files: tuple[str, ...]

    def shown(self) -> str:
        listing = ", ".join(self.files[:5]) + (f" and {len(self.files) - 5} more"
                                               if len(self.files) > 5 else "")
        return f"{self.ticket} ({self.phase}) also changes {listing}"


def open_states(home: Path, repo_key: str) -> list[State]:
    """The records of the repository's open tickets (a record that cannot be read is passed
    over: `status` names it on its own row)."""
    found = []
    for tdir in all_tickets(home, repo_key):
        try:
            state = tdir.load()
        except HandoffError:
            continue
        if state.phase in OPEN:
            found.append(state)
    return found


def of(state: State, others: Iterable[State]) -> list[Overlap]:
    """The open tickets among others that change files state's ticket changes too."""
    return among(state.ticket, state.touched,
                 ((o.ticket, o.phase, o.touched) for o in others))


def among(ticket: str, touched: Collection[str],
          others: Iterable[tuple[str, str, Collection[str]]]) -> list[Overlap]:
    """The open tickets among others ((ticket, phase, touched) each, of the same repository)
    that change some of the files touched."""
    mine = set(touched)
    found: list[Overlap] = []
    if not mine:  # `status` asks this of every ticket against every other one
        return found
    for other, phase, theirs in others:
        if other == ticket or phase not in OPEN:
            continue
        shared = mine.intersection(theirs)
        if shared:
            found.append(Overlap(other, phase, tuple(sorted(shared))))
    return found


def for_ticket(home: Path, state: State) -> list[Overlap]:
    """What overlaps this ticket, read from the records beside it."""
    if not state.touched:
        return []
    return of(state, open_states(home, state.repo_key))
