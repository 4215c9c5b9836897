"""handoff.operations.viewing, what needs no git: which two commits a ticket's change lies
between, whole or one round's, and the refusal of a change there is not. The diffs themselves,
on a real repository, are in tests/integration/operations/test_viewing.py."""

from __future__ import annotations

import pytest

from handoff.errors import UsageError
from handoff.operations.viewing import span
from handoff.phases import Phase
from handoff.record.ticket import State

BASE, ONE, TWO = "b" * 40, "1" * 40, "2" * 40


def ticket(**commits: str) -> State:
    return State(ticket="T-1", repo="/r", repo_key="r-1", phase=Phase.REVIEWING, round=2,
                 base_commit=BASE, commits={k.lstrip("r"): v for k, v in commits.items()})


def test_the_whole_change_runs_from_the_base_to_the_newest_commit() -> None:
    whole = span(ticket(r1=ONE, r2=TWO))
    assert (whole.base, whole.commit) == (BASE, TWO)
    assert whole.what == "T-1: its whole change, bbbbbbbbbb..2222222222 (2 round(s))"


def test_a_rounds_change_runs_from_the_commit_before_it() -> None:
    assert (span(ticket(r1=ONE, r2=TWO), 2).base, span(ticket(r1=ONE, r2=TWO), 2).commit) == \
        (ONE, TWO)
    assert span(ticket(r1=ONE, r2=TWO), 1).base == BASE
    assert span(ticket(r1=ONE, r3=TWO), 3).base == ONE, "a round with no commit is skipped"


def test_a_change_there_is_not_is_refused_naming_the_rounds_there_are() -> None:
    with pytest.raises(UsageError) as none:
        span(ticket())
    assert none.value.message == "T-1 has no accepted work yet (phase reviewing)"
    with pytest.raises(UsageError) as missing:
        span(ticket(r1=ONE, r2=TWO), 5)
    assert (missing.value.message, missing.value.hint) == (
        "T-1 has no accepted commit for round 5", "rounds with one: 1, 2")
