"""handoff.operations.approval: what a person approves besides the plan, and the approval
itself (real ticket directories, the config files a person writes)."""

from __future__ import annotations

from pathlib import Path

from handoff.loop.workspace import Workspace
from handoff.machinery import sandbox
from handoff.operations.approval import (
    approval_summary,
    approve,
    independence,
    sandbox_line,
)
from handoff.record.store import file_digest
from tests.harness import ADD_ONLY, plan_text
from tests.tickets import new_ticket


def personal_config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(text, encoding="utf-8")


def test_approve_starts_round_one_once(repo: Path, handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    state = approve(ws)
    assert (state.phase, state.round) == ("implementing", 1)
    assert ws.tdir.load().plan_digest == file_digest(ws.tdir.plan_md)
    moves = [e for e in ws.tdir.events.read()[0] if e["kind"] == "phase"]
    assert [(e["from"], e["to"]) for e in moves] == [("awaiting-approval", "implementing")]
    again = approve(ws)  # approved already: nothing moves
    assert again.phase == "implementing"
    assert len([e for e in ws.tdir.events.read()[0] if e["kind"] == "phase"]) == 1


def test_a_ticket_built_on_others_waits_for_them_once_approved(
        repo: Path, handoff_home: Path) -> None:
    new_ticket(handoff_home, repo, "A-1")
    ws = new_ticket(handoff_home, repo, "B-1", after=("A-1",))
    assert approve(ws).phase == "waiting"
    moved = [e for e in ws.tdir.events.read()[0] if e["kind"] == "phase"][-1]
    assert moved["to"] == "waiting" and "it waits for A-1" in str(moved["reason"])


def test_the_summary_says_who_runs_from_where_how_far_and_fenced_how(
        repo: Path, handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    state = ws.state()
    lines = approval_summary(ws)
    assert lines[0].startswith("implementer: scripted")
    assert lines[1].startswith("reviewer: scripted")
    assert f"base: HEAD at {state.base_commit[:12]}; branch handoff/T-1" in lines
    assert f"rounds: at most {state.max_rounds} review round(s); gate: {' '.join(ADD_ONLY)}" \
        in lines
    assert lines[-1] == sandbox_line(ws)
    bare = new_ticket(handoff_home, repo, "U-1", plan=plan_text({}))
    assert any(line.endswith("gate: none (the plan names no test command, and the "
                             "repository's config no test:)") for line in approval_summary(bare))
    (repo / ".handoff.yaml").write_text("test: python -m pytest -q\n", encoding="utf-8")
    defaulted = new_ticket(handoff_home, repo, "U-2", plan=plan_text({}))
    assert any(line.endswith("gate: python -m pytest -q (the repository's test:)")
               for line in approval_summary(defaulted))


def test_the_sandbox_line_says_what_fences_the_peers(repo: Path, handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    found = sandbox.in_force("auto")
    expected = f"sandbox: {found.why}: each peer writes only its worktree" if found else \
        f"sandbox: none, {sandbox.support().why}: the peers run as you"
    assert sandbox_line(ws).startswith(expected)
    personal_config(handoff_home, "sandbox: off\n")
    off = Workspace.open(handoff_home, ws.tdir)
    assert sandbox_line(off).startswith("sandbox: off (your config): the peers run as you")


def test_a_review_on_the_implementers_own_cli_is_said_to_be_not_independent(
        repo: Path, handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    assert independence(ws) == []  # scripted agents: no model family to share
    personal_config(handoff_home, "roles: {implementer: {provider: codex}, "
                                  "reviewer: {provider: codex}}\n")
    same = Workspace.open(handoff_home, ws.tdir)
    assert independence(same) == [
        "note: every reviewer runs on codex, the implementer's CLI: the review is not "
        "independent (a reviewer on another installed CLI finds more)"]
    assert independence(same)[0] in approval_summary(same)
    personal_config(handoff_home, "roles: {implementer: {provider: codex}, "
                                  "reviewer: {provider: claude}}\n")
    assert independence(Workspace.open(handoff_home, ws.tdir)) == []
