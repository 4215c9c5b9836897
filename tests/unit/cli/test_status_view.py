"""handoff.cli.status_view: what `handoff status` prints for its rows (a table, or JSON) and
the lean lane's command line. The rows themselves are handoff.operations.standing's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from handoff.cli import status_view
from handoff.cli.status_view import ordinal, parse, text
from handoff.operations.standing import StatusRow


def row(**changed: Any) -> StatusRow:
    """A row as standing.status gives one, for a ticket in review (the keys text reads)."""
    return cast(StatusRow, {"ticket": "T-1", "phase": "reviewing", "round": 2, "orchestrator": None,
            "run": "not started", "repo": "/src/calc", "reason": "", "error": "", "hint": "",
            "events_skipped": 0, "branch": "handoff/T-1", "commit": "0123456789abcdef",
            "dir": "/state/calc-0123/T-1", **changed})


@pytest.mark.parametrize(("n", "said"), [(1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"),
                                         (11, "11th"), (12, "12th"), (13, "13th"), (20, "20th"),
                                         (21, "21st"), (102, "102nd"), (111, "111th")])
def test_ordinal(n: int, said: str) -> None:
    assert ordinal(n) == said


def test_no_rows_say_how_to_begin() -> None:
    assert text([], False, False).startswith("no tickets yet: handoff start TICKET")
    assert text([], False, True) == "[]"


def test_a_table_row_for_each_ticket_with_its_orchestrator_and_repository() -> None:
    shown = text([row(), row(ticket="T-2", orchestrator=4242, phase="implementing"),
                  row(ticket="T-3", run="stopped", local_repo="/src/calc", host="box",
                      phase="gating")], False, False).splitlines()
    assert shown[0].split() == ["TICKET", "PHASE", "ROUND", "ORCHESTRATOR", "REPO"]
    assert shown[1].split() == ["T-1", "reviewing", "2", "-", "calc"]
    assert shown[2].split() == ["T-2", "implementing", "2", "running", "(pid", "4242)", "calc"]
    assert shown[3].split() == ["T-3", "gating", "2", "stopped", "calc", "@", "box"]
    assert len(shown) == 4, "no detail lines for rows that have none"


def test_what_a_row_has_to_say_follows_it() -> None:
    busy = row(queue={"place": 2, "waiting": 3, "at_work": 4, "max_parallel": 4},
               reason="ignored while queued", error="the gate failed", hint="handoff log T-1",
               events_skipped=2, verdicts={"reviewer": "pass", "security": "fail"},
               overlaps={"T-7": ["a.py", "b.py", "c.py", "d.py"]})
    lines = text([busy], False, False).splitlines()[2:]
    assert lines == [
        "    queue: 2nd of 3 waiting; 4 of 4 tickets at work (max_parallel); it starts by "
        "itself when a slot frees",
        "    reviews this round: reviewer pass, security fail",
        "    overlaps: T-7 also changes a.py, b.py, c.py … (handoff conflicts says more)",
        "    error: the gate failed",
        "    next: handoff log T-1",
        "    events.jsonl: 2 unreadable line(s) skipped"]
    assert text([row(reason="waiting for T-0")], False, False).splitlines()[2] == (
        "    waiting for T-0")


def test_one_ticket_asked_for_shows_its_team_branch_and_folder() -> None:
    team = {"implementer": "implementer", "reviewer": "reviewer", "qa": "tester"}
    lines = text([row(team=team, verdicts={"reviewer": "pass"})], True, False).splitlines()[2:]
    assert lines == ["    reviews this round: reviewer pass",
                     "    team: implementer (implementer), reviewer (reviewer), qa (tester)",
                     "    branch handoff/T-1 @ 0123456789", "    dir /state/calc-0123/T-1"]
    many = text([row(team=team, verdicts={"reviewer": "pass"})], False, False)
    assert "team:" not in many and "reviews" not in many, "in the list, only what stands out"


def test_json_is_the_rows_as_they_are() -> None:
    rows = [row(), row(ticket="T-2")]
    assert json.loads(text(rows, False, True)) == rows


def test_only_a_plain_status_takes_the_lean_path() -> None:
    assert parse([]) == (None, None, False, False)
    assert parse(["T-1", "--repo=/r", "--json"]) == ("T-1", Path("/r"), True, False)
    assert parse(["--repo", "/r", "T-1"]) == ("T-1", Path("/r"), False, False)
    assert parse(["--all", "--json"]) == (None, None, True, True)
    for argv in (["--help"], ["--json", "--json"], ["--repo"], ["A", "B"], ["--repo", "/a",
                                                                            "--repo", "/b"],
                 ["--all", "--all"]):
        assert parse(argv) is None, argv


def test_main_prints_the_status_of_this_home(handoff_home: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert status_view.main(["--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert status_view.main(["--bogus"]) is None, "the full command line says what is wrong"
    assert status_view.main(["NOPE"]) == 3
    assert capsys.readouterr().err.startswith("handoff: error: ")


def test_a_list_that_left_closed_tickets_out_says_how_many_and_how_to_see_them() -> None:
    shown = text([row()], False, False, closed=3).splitlines()
    assert shown[-1] == "(3 closed ticket(s) not shown: handoff status --all)"
    assert text([], False, False, closed=2) == \
        "no open tickets (2 closed ticket(s) not shown: handoff status --all)"
    assert "not shown" not in text([row()], False, False)
