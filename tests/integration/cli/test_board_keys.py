"""handoff.cli.board_keys: what the board's keys do, called as the board calls them, on real
tickets (and a ticket placed on a host whose ssh is never run: each case ends before it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from handoff.cli.board_keys import answer, approve, on_host, ticket_from_plan, view
from handoff.errors import ExternalFailure, HandoffError, UsageError
from handoff.operations.board import Row
from handoff.phases import Phase
from tests.tickets import new_ticket


def row_of(ticket: str, repo: Path, phase: str, host: str = "") -> Row:
    return Row(key=ticket, ticket=ticket, repo=str(repo), phase=phase, round=0, max_rounds=3,
               phase_since="", last_event="", peers={}, orchestrator=None, host=host)


def test_a_key_on_a_local_ticket_says_its_result_or_why_not_in_one_line(
        repo: Path, handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    row = row_of("T-1", repo, Phase.AWAITING_APPROVAL)
    with pytest.raises(UsageError) as refused:
        answer(handoff_home, row, "go on")
    assert "T-1 is not waiting for a person" in refused.value.message
    title, plan = view(handoff_home, row, "plan")
    assert title == f"T-1: its plan, waiting for approval ({ws.tdir.plan_md})"
    written = ws.tdir.plan_md.read_text(encoding="utf-8")
    assert plan.startswith(written.rstrip("\n")), "the plan, then what `handoff plan` adds"
    assert "  base: HEAD at " in plan and "approve: handoff plan T-1 --approve" in plan
    with pytest.raises(HandoffError, match="T-1 has no accepted work yet"):
        view(handoff_home, row, "diff")
    with pytest.raises(HandoffError, match="T-1 has no report yet"):
        view(handoff_home, row, "last report")
    said = approve(handoff_home, row)
    assert "\n" not in said and "T-1: the orchestrator runs in tmux session" in said
    moved_on = row_of("T-1", repo, Phase.IMPLEMENTING)
    assert view(handoff_home, moved_on, "plan") == (f"T-1: its plan ({ws.tdir.plan_md})",
                                                    written), "approved: the plan alone"


def test_a_ticket_whose_planner_drafts_has_no_plan_to_view_yet(
        repo: Path, handoff_home: Path) -> None:
    new_ticket(handoff_home, repo, "P-1", ticket_text="fix add")
    with pytest.raises(HandoffError) as none:
        view(handoff_home, row_of("P-1", repo, Phase.PLANNING), "plan")
    assert none.value.message == "P-1 has no plan yet: its planner drafts it"


def test_a_ticket_on_a_host_is_asked_there_or_said_to_be_there(repo: Path,
                                                               handoff_home: Path) -> None:
    row = row_of("H-1", repo, Phase.REVIEWING, host="build1")
    with pytest.raises(HandoffError) as there:
        view(handoff_home, row, "plan")
    assert there.value.message == "H-1 runs on build1: its plan is there"
    with pytest.raises(ExternalFailure, match="H-1 is no longer placed on build1"):
        on_host(handoff_home, row, ["diff", "H-1"])


def test_a_ticket_is_made_from_a_plan_file_and_waits_for_approval(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    plan = tmp_path / "PROJ-7.md"
    plan.write_text("# Fix add\n\nadd adds.\n", encoding="utf-8")
    said = ticket_from_plan(handoff_home, f" {plan} ", repo)
    assert said == (f"PROJ-7 made from {plan} in {repo.name}: awaiting your approval (v shows "
                    "its plan, y approves it)")
    [made] = list(handoff_home.glob("*/PROJ-7/state.json"))
    assert '"phase": "awaiting-approval"' in made.read_text(encoding="utf-8")
    with pytest.raises(UsageError, match="already exists"):
        ticket_from_plan(handoff_home, str(plan), repo)
