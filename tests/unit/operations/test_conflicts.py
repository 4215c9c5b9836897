"""Tickets that change the same files, seen before the merge: `handoff conflicts`, the overlap in
`status` and the final report, the implementer told what changed under it, and `finish`
refusing a merge that would conflict with nothing changed."""

from __future__ import annotations

from handoff.record.overlaps import among


def test_only_open_tickets_of_the_same_files_overlap() -> None:
    others = [("B", "reviewing", ["calc.py", "README.md"]), ("C", "closed", ["calc.py"]),
              ("D", "passed", ["other.py"]), ("A", "implementing", ["calc.py"])]
    found = among("A", ["calc.py", "README.md"], others)
    assert [(o.ticket, o.phase, o.files) for o in found] == [
        ("B", "reviewing", ("README.md", "calc.py"))]
    assert found[0].shown() == "B (reviewing) also changes README.md, calc.py"
    assert among("A", [], others) == []
