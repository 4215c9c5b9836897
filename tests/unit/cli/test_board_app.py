"""handoff.cli.board_app: the live board's cells and details for a row, its keys' refusals,
and the app itself over a real state folder (Textual's headless pilot, no terminal). Whole
tickets on the board are tests/e2e/test_board.py's; the rows are handoff.operations.board's."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from rich.text import Text

from handoff.cli.board_app import (
    PEER_WIDTH,
    cells,
    details,
    recycle_keys,
)
from handoff.operations.board import Peer, Row
from handoff.phases import Phase

NOW = datetime(2026, 11, 30, 5, 12, 30, tzinfo=UTC)


def row(**changed: object) -> Row:
    base = Row(key="/state/calc/T-1", ticket="T-1", repo="/src/calc", phase="reviewing",
               round=2, max_rounds=5, phase_since="2026-11-30T05:00:00+00:00",
               last_event="2026-11-30T05:10:00 reviewer started",
               peers={"implementer": Peer("idle"), "reviewer": Peer("working", "editing", "")},
               orchestrator=4242)
    return replace(base, **changed)  # type: ignore[arg-type]


def test_recycle_keys_are_first_free_letters_then_digits() -> None:
    assert recycle_keys(["implementer", "reviewer"]) == {"i": "implementer", "r": "reviewer"}
    assert recycle_keys(["implementer", "reviewer", "review2", "rr"]) == {
        "i": "implementer", "r": "reviewer", "e": "review2", "1": "rr"}


def test_the_cells_of_a_row() -> None:
    shown = cells(row(), NOW)
    assert shown["needs"] == Text("")
    assert (shown["ticket"], shown["repo"], shown["phase"], shown["round"]) == (
        "T-1", "calc", "reviewing", "2/5")
    assert (shown["implementer"], shown["reviewer"]) == ("idle", "working: editing")
    assert shown["in_phase"] == "12m"
    assert shown["last"] == "T05:10:00 reviewer started", "the day is left out"


def test_what_a_person_must_do_stands_out() -> None:
    needs = cells(row(phase=Phase.NEEDS_HUMAN), NOW)["needs"]
    assert isinstance(needs, Text) and needs.plain.startswith("► ") and "bold" in str(needs.style)


def test_a_queued_or_waiting_ticket_says_for_what() -> None:
    assert cells(row(phase=Phase.QUEUED, place=2, waiting=3), NOW)["phase"] == "queued 2/3"
    assert cells(row(phase=Phase.WAITING, after=("A", "B")), NOW)["phase"] == (
        "waiting for A, B")
    assert cells(row(max_rounds=0), NOW)["round"] == "2"


def test_several_reviewers_share_one_cell_by_name() -> None:
    team = {"implementer": Peer("idle"), "reviewer": Peer("working"),
            "security": Peer("done", "x" * 80)}
    assert cells(row(peers=team), NOW)["reviewer"] == "reviewer working · security done"
    alone = cells(row(peers={"implementer": Peer("idle"), "qa": Peer("working", "y" * 80)}),
                  NOW)["reviewer"]
    assert isinstance(alone, str) and len(alone) == PEER_WIDTH and alone.endswith("…")


def test_the_details_of_a_row_say_everything_whole() -> None:
    text = details(row(reason="two findings", overlaps=(("T-7", ("a.py",) * 6),),
                       peers={"implementer": Peer("idle", "", "2026-11-30T05:01:02+00:00")}))
    assert text.splitlines() == [
        "T-1 in /src/calc: reviewing, round 2, orchestrator pid 4242",
        "  implementer: idle (at 05:01:02)",
        "  why: two findings",
        "  overlaps T-7: both change a.py, a.py, a.py, a.py, a.py …",
        "  last: 2026-11-30T05:10:00 reviewer started"]
    queued = details(row(orchestrator=None, place=1, waiting=2, reason="queued then"))
    assert "no orchestrator running" in queued
    assert "  queue: 1 of 2 waiting for a slot (max_parallel)" in queued and "why" not in queued
