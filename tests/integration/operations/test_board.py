"""The rows of `handoff watch` (handoff/operations/board.py), from ticket directories the real commands
made with the scripted agents: phases, the marks on what needs a person, each peer's state
with the evidence the orchestrator recorded, and reading only the tickets that changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

from handoff.operations.board import Board, Fold, Row
from handoff.record.events import EventLog
from tests.harness import (
    ADD_ONLY,
    FIX_ADD,
    events,
    handoff,
    plan_text,
    spawn,
    stop_runner,
    ticket_path,
    wait_phase,
    write_plan,
)


def waiting_ticket(repo: Path, tmp_path: Path, ticket: str) -> None:
    """A ticket whose plan waits for approval (start without --yes and no terminal)."""
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY),
                      f"{ticket}.md")
    done = handoff("start", ticket, "--plan", str(plan), cwd=repo)
    assert done.returncode == 1 and "waiting for approval" in done.stderr, done.stderr


def by_ticket(board: Board) -> dict[str, Row]:
    return {row.ticket: row for row in board.rows()}


def test_a_plan_waiting_for_approval_is_marked_and_a_passed_ticket_shows_its_reports(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    waiting_ticket(repo, tmp_path, "W-1")
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    done = handoff("start", "P-1", "--plan", str(plan), "--yes", "--foreground", cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr

    board = Board(handoff_home)
    assert board.refresh()
    rows = by_ticket(board)
    assert set(rows) == {"W-1", "P-1"}
    waiting, passed = rows["W-1"], rows["P-1"]
    assert (waiting.phase, waiting.needs, waiting.repo_name) == ("awaiting-approval", "approve",
                                                                 "repo")
    assert waiting.peers["implementer"].state == "-", "no peer was launched yet"
    newest = events(handoff_home, "W-1")[-1]  # `created`, or the notice sent after it
    assert waiting.last_event.startswith(newest["time"][11:19] + "  r0  ")
    assert waiting.phase_since == events(handoff_home, "W-1")[0]["time"]
    assert (passed.phase, passed.needs, passed.round) == ("passed", "", 1)
    assert passed.peers["implementer"].state == "reported"
    assert passed.peers["implementer"].evidence == "report impl-report-1.md accepted"
    assert (passed.peers["reviewer"].state, passed.peers["reviewer"].evidence) == \
        ("pass", "verdict pass")
    last = events(handoff_home, "P-1")[-1]
    assert passed.last_event.startswith(last["time"][11:19])
    assert passed.phase_since == next(e["time"] for e in events(handoff_home, "P-1")
                                      if e["kind"] == "phase" and e["to"] == "passed")
    assert passed.orchestrator is None


def test_a_peer_handed_to_a_person_shows_the_judgement_and_its_evidence(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    handoff_home.mkdir(parents=True, exist_ok=True)
    (handoff_home / "config.yaml").write_text("turn_grace: 1\n", encoding="utf-8")
    plan = plan_text({1: {"edits": [FIX_ADD], "silent": "always"}}, test=ADD_ONLY)
    runner = spawn("start", "H-1", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", "--max-rounds", "1", cwd=repo, log=tmp_path / "orch.log")
    try:
        wait_phase(handoff_home, "H-1", "needs-human", timeout=60)
        board = Board(handoff_home)
        board.refresh()
        row = by_ticket(board)["H-1"]
        assert row.orchestrator == runner.pid, "the running orchestrator is named"
    finally:
        stop_runner(runner)
    assert (row.phase, row.needs) == ("needs-human", "answer")
    implementer = row.peers["implementer"]
    escalated = next(e for e in events(handoff_home, "H-1") if e["kind"] == "escalate")
    assert implementer.state == "turn ended"
    assert implementer.evidence == f"{escalated['evidence']}; handed to a person"
    assert "after 1 nudge(s)" in implementer.evidence
    assert row.peers["reviewer"].state == "-", "the reviewer was never launched"

    # on the way there, each judgement the orchestrator recorded showed with its evidence
    log = events(handoff_home, "H-1")
    fold, seen = Fold(), []
    for event in log:
        fold.feed(event)
        if event.get("role") == "implementer":
            seen.append((fold.peers["implementer"].state, event["kind"]))
    assert ("starting", "launch") in seen
    assert ("turn ended", "peer") in seen and ("turn ended", "nudge") in seen
    judged = next(e for e in log if e["kind"] == "peer")
    fold = Fold()
    for event in log:
        fold.feed(event)
        if event is judged:
            break
    assert fold.peers["implementer"].evidence == judged["evidence"]


def test_only_the_tickets_that_changed_are_read_again(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    waiting_ticket(repo, tmp_path, "A-1")
    waiting_ticket(repo, tmp_path, "B-1")
    board = Board(handoff_home)
    assert board.refresh() and board.reads == 2
    assert not board.refresh() and board.reads == 2, "nothing changed: nothing is read"

    folder = ticket_path(handoff_home, "A-1")
    EventLog(folder / "events.jsonl").append("stopped", by="hand")
    assert board.refresh() and board.reads == 3, "one ticket changed: one ticket is read"
    row = by_ticket(board)["A-1"]
    assert row.last_event.endswith("stopped by hand")
    assert row.peers["reviewer"].state == "stopped"
    assert by_ticket(board)["B-1"].peers["reviewer"].state == "-", "B-1 is as it was"

    # the watcher is told of every folder a change can come from, new tickets included
    assert {handoff_home, folder.parent, folder, ticket_path(handoff_home, "B-1")} <= \
        set(board.folders())
    waiting_ticket(repo, tmp_path, "C-1")
    assert board.refresh() and set(by_ticket(board)) == {"A-1", "B-1", "C-1"}
    assert ticket_path(handoff_home, "C-1") in board.folders()
    # a ticket folder made a moment before its state.json, and a new repository's folder,
    # are watched at once: the state written into them wakes the board
    early = folder.parent / "D-1"
    early.mkdir()
    other_repo = handoff_home / "other-0123456789"
    other_repo.mkdir()
    assert {early, other_repo} <= set(board.folders())


def test_an_unreadable_state_is_marked_and_hides_no_other_ticket(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    waiting_ticket(repo, tmp_path, "U-1")
    waiting_ticket(repo, tmp_path, "U-2")
    (ticket_path(handoff_home, "U-1") / "state.json").write_text("{torn", encoding="utf-8")
    board = Board(handoff_home)
    board.refresh()
    rows = by_ticket(board)
    assert (rows["U-1"].phase, rows["U-1"].needs) == ("unreadable", "unreadable")
    assert "not valid JSON" in rows["U-1"].reason
    assert rows["U-2"].phase == "awaiting-approval"


def test_a_closed_ticket_has_no_peers_and_one_repo_can_be_shown_alone(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    waiting_ticket(repo, tmp_path, "C-2")
    assert handoff("close", "C-2", cwd=repo).returncode == 0
    board = Board(handoff_home)
    board.refresh()
    row = by_ticket(board)["C-2"]
    assert row.phase == "closed" and row.needs == ""
    assert {p.state for p in row.peers.values()} == {"gone"}
    other = handoff_home / "other-0123456789" / "X-1"
    other.mkdir(parents=True)
    (other / "state.json").write_text(json.dumps({"ticket": "X-1", "repo": "/nowhere",
                                                  "repo_key": "other-0123456789"}))
    assert set(by_ticket(_refreshed(Board(handoff_home)))) == {"C-2", "X-1"}
    only = _refreshed(Board(handoff_home, ticket_path(handoff_home, "C-2").parent.name))
    assert set(by_ticket(only)) == {"C-2"}
    assert os.path.isdir(other)


def _refreshed(board: Board) -> Board:
    board.refresh()
    return board


def test_only_the_watch_command_loads_textual() -> None:
    timed = subprocess.run([sys.executable, "-X", "importtime", "-m", "handoff", "--help"],
                           capture_output=True, text=True, timeout=60)
    assert timed.returncode == 0, timed.stderr
    loaded = {line.rsplit("|", 1)[-1].strip() for line in timed.stderr.splitlines()
              if line.startswith("import time:")}
    assert "handoff.cli.app" in loaded
    assert not {m for m in loaded if m.split(".")[0] == "textual"
                or m in ("handoff.operations.board", "handoff.cli.board_app")}, "--help must stay light"


def test_a_long_ticket_id_is_cut_in_its_column_and_whole_in_the_details(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    from datetime import UTC

    from handoff.cli.board_app import TICKET_WIDTH, cells, details

    long_id = "T-" + "x" * 62
    waiting_ticket(repo, tmp_path, long_id)
    board = Board(handoff_home)
    board.refresh()
    [row] = board.rows()
    shown = cells(row, datetime.now(UTC))["ticket"]
    assert isinstance(shown, str) and len(shown) == TICKET_WIDTH and shown.endswith("…")
    assert long_id in details(row)
