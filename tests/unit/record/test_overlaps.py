"""handoff.record.overlaps: which open tickets of one repository change the same files, read
from their records alone (real records in a real state folder)."""

from __future__ import annotations

from pathlib import Path

from handoff.phases import Phase
from handoff.record.overlaps import OPEN, Overlap, among, for_ticket, of, open_states
from handoff.record.ticket import State, ticket_dir

KEY = "repo-0123456789"


def record(home: Path, ticket: str, phase: Phase, touched: list[str], key: str = KEY) -> State:
    tdir = ticket_dir(home, key, ticket)
    tdir.path.mkdir(parents=True)
    state = State(ticket=ticket, repo="/src/repo", repo_key=key, phase=phase, touched=touched)
    tdir.save(state)
    return state


def test_every_phase_but_closed_is_open() -> None:
    assert set(Phase) - set(OPEN) == {Phase.CLOSED}


def test_a_listing_is_cut_after_five_files() -> None:
    few = Overlap("B", "reviewing", ("a.py", "b.py"))
    assert few.shown() == "B (reviewing) also changes a.py, b.py"
    many = Overlap("B", "passed", tuple(f"f{i}.py" for i in range(7)))
    assert many.shown() == "B (passed) also changes f0.py, f1.py, f2.py, f3.py, f4.py and 2 more"
    six = Overlap("B", "passed", tuple(f"f{i}.py" for i in range(6)))
    assert six.shown().endswith("f4.py and 1 more")


def test_among_passes_over_itself_the_closed_and_the_unrelated() -> None:
    others = [("A", "implementing", ["calc.py"]), ("C", "closed", ["calc.py"]),
              ("D", "passed", ["other.py"]), ("E", "escalated", ["calc.py", "z.py"])]
    assert among("A", ["z.py", "calc.py"], others) == [
        Overlap("E", "escalated", ("calc.py", "z.py"))]
    assert among("A", [], others) == []


def test_the_records_beside_a_ticket_say_what_overlaps_it(handoff_home: Path) -> None:
    mine = record(handoff_home, "A", Phase.IMPLEMENTING, ["calc.py", "README.md"])
    record(handoff_home, "B", Phase.REVIEWING, ["README.md", "calc.py", "x.py"])
    record(handoff_home, "C", Phase.CLOSED, ["calc.py"])
    record(handoff_home, "D", Phase.PASSED, ["other.py"])
    record(handoff_home, "E", Phase.QUEUED, ["calc.py"], key="repo-other00000")
    broken = ticket_dir(handoff_home, KEY, "F")
    broken.path.mkdir()
    broken.state_file.write_text("{not json")
    assert [s.ticket for s in open_states(handoff_home, KEY)] == ["A", "B", "D"], (
        "closed, unreadable and other repositories' records are passed over")
    assert for_ticket(handoff_home, mine) == [Overlap("B", "reviewing", ("README.md", "calc.py"))]
    assert of(mine, open_states(handoff_home, KEY)) == for_ticket(handoff_home, mine)


def test_a_ticket_that_changed_nothing_overlaps_nothing(handoff_home: Path) -> None:
    record(handoff_home, "B", Phase.REVIEWING, ["calc.py"])
    fresh = State(ticket="A", repo="/src/repo", repo_key=KEY)
    assert for_ticket(handoff_home, fresh) == []
