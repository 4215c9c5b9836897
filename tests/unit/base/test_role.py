"""handoff.role: a ticket's team, its names and kinds, and how state.json keeps it."""

from __future__ import annotations

import pytest

from handoff.errors import UsageError
from handoff.role import DEFAULT, Kind, Team, check_name


@pytest.mark.parametrize("name", ["security", "qa-2", "E2E_tests", "r" * 32])
def test_a_role_name_is_a_short_identifier(name: str) -> None:
    assert check_name(name) == name


@pytest.mark.parametrize("name", ["", "2nd", "a.b", "a:b", "a/b", "a b", "r" * 33, "gate",
                                  "Orchestrator", "human", "impl", "review", "-x"])
def test_other_names_are_refused_with_what_a_name_may_be(name: str) -> None:
    with pytest.raises(UsageError) as caught:
        check_name(name)
    assert "letters, digits" in (caught.value.hint or "")


def test_a_team_is_put_in_working_order_keeping_each_kinds_own_order() -> None:
    team = Team.of([("security", Kind.REVIEWER), ("e2e", Kind.TESTER),
                    ("implementer", Kind.IMPLEMENTER), ("reviewer", Kind.REVIEWER),
                    ("unit", Kind.TESTER)])
    assert team.names == ("implementer", "e2e", "unit", "security", "reviewer")
    assert team.kind("unit") is Kind.TESTER and team.has("security") and not team.has("x")


@pytest.mark.parametrize(("pairs", "said"), [
    ([("reviewer", Kind.REVIEWER)], "exactly one implementer"),
    ([("implementer", Kind.IMPLEMENTER), ("qa", Kind.TESTER)], "at least one reviewer"),
    ([("implementer", Kind.IMPLEMENTER), ("coder", Kind.IMPLEMENTER),
      ("reviewer", Kind.REVIEWER)], "exactly one implementer"),
    ([("implementer", Kind.IMPLEMENTER), ("reviewer", Kind.REVIEWER),
      ("reviewer", Kind.REVIEWER)], "same name"),
])
def test_a_team_that_cannot_work_is_refused(pairs: list[tuple[str, Kind]], said: str) -> None:
    with pytest.raises(UsageError) as caught:
        Team.of(pairs)
    assert said in caught.value.message


def test_state_keeps_the_team_and_a_ticket_from_before_teams_has_the_two_roles() -> None:
    team = Team.of([("implementer", Kind.IMPLEMENTER), ("security", Kind.REVIEWER)])
    assert Team.from_records(team.records()) == team
    assert team.records() == [{"name": "implementer", "kind": "implementer"},
                              {"name": "security", "kind": "reviewer"}]
    assert Team.from_records([]) == DEFAULT
    assert DEFAULT.names == ("implementer", "reviewer")
