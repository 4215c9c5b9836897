"""handoff.loop.orchestrator's stages that judge, on a ticket on paper (tests/paper.py: its
record, no repository, no tmux) with the fakes of the rooms that would run peers
(tests/rooms.py). Each stage gathers its inputs, a rule decides, and the context applies the
move: these check the gathering and the applying; the rules' own cases are in test_rules.py.
The stages that move a branch or hand a diff are in tests/integration/loop/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from handoff.loop import rules
from handoff.loop.context import TicketContext
from handoff.phases import Phase
from handoff.protocol.reports import Report
from handoff.record import slots
from handoff.record.slots import Slot
from handoff.record.store import atomic_write
from handoff.role import IMPLEMENTER
from handoff.verdicts import Status, Verdict
from tests.paper import COMMIT, on_paper, paper_ticket, review


def events(ctx: TicketContext, kind: str) -> list[dict[str, Any]]:
    found, _ = ctx.tdir.events.read()
    return [e for e in found if e["kind"] == kind]


def moves(ctx: TicketContext) -> list[tuple[str, str]]:
    return [(e["from"], e["to"]) for e in events(ctx, "phase")]


# ---- judging a round ------------------------------------------------------------------------


def test_every_reviewer_passing_passes_the_ticket(handoff_home: Path) -> None:
    ws = paper_ticket(handoff_home, Phase.REVIEWING, reviewers=("security", "quality"))
    orch, _, _, told = on_paper(ws)
    orch.judge_round(1, {"security": review("security", Verdict.PASS),
                         "quality": review("quality", Verdict.PASS)})
    state = ws.state()
    assert state.phase == Phase.PASSED and state.verdicts == {"1": "pass"}
    assert state.reason == "every reviewer passed it"
    assert told == [Phase.PASSED]
    assert ws.tdir.final_report.exists(), "written before the person is told"
    [said] = events(orch.ctx, "reviews")
    assert said["verdicts"] == {"security": "pass", "quality": "pass"} and said["open"] == []


def test_one_failing_reviewer_fails_the_round_and_its_findings_go_to_the_next(
        handoff_home: Path) -> None:
    ws = paper_ticket(handoff_home, Phase.REVIEWING, reviewers=("security", "quality"))
    orch, _, _, told = on_paper(ws)
    orch.judge_round(1, {"security": review("security", Verdict.FAIL, "adds wrong"),
                         "quality": review("quality", Verdict.PASS)})
    state = ws.state()
    assert (state.phase, state.round) == (Phase.IMPLEMENTING, 2)
    assert state.verdicts == {"1": "fail"}
    assert state.findings == {"1": ["calc.py::adds wrong"]}
    [entry] = state.ledger
    assert (entry["reason"], entry["raised_by"], entry["round"]) == ("adds wrong", ["security"], 1)
    assert moves(orch.ctx)[-1] == ("reviewing", "implementing")
    assert told == [Phase.IMPLEMENTING], "the person's status line shows the new round"
    assert state.feedback["findings"][0]["reason"] == "adds wrong", "its brief carries it"


def test_a_failed_round_at_the_round_limit_escalates(handoff_home: Path) -> None:
    ws = paper_ticket(handoff_home, Phase.REVIEWING, round_=2, max_rounds=2)
    state = ws.state()
    state.verdicts = {"1": "fail"}
    ws.tdir.save(state)
    orch, _, _, told = on_paper(ws)
    orch.judge_round(2, {"reviewer": review("reviewer", Verdict.FAIL, "still wrong")})
    state = ws.state()
    assert state.phase == Phase.ESCALATED and state.round == 2
    assert "still failing after 2 review round(s)" in state.reason
    assert told == [Phase.ESCALATED]


def test_the_same_must_fix_twice_escalates_at_once(handoff_home: Path) -> None:
    ws = paper_ticket(handoff_home, Phase.REVIEWING, round_=2, max_rounds=5)
    state = ws.state()
    state.findings = {"1": ["calc.py::adds wrong"]}
    ws.tdir.save(state)
    orch, _, _, told = on_paper(ws)
    orch.judge_round(2, {"reviewer": review("reviewer", Verdict.FAIL, "Adds   wrong")})
    state = ws.state()
    assert state.phase == Phase.ESCALATED
    assert state.reason == "the same must-fix came back: calc.py:2: Adds   wrong"
    assert told == [Phase.ESCALATED]


def test_a_verdict_recorded_at_acceptance_is_the_one_judged(handoff_home: Path) -> None:
    """A review taken by an earlier run (before a crash) is read from its file, and the verdict
    recorded when it was accepted stands (its file may not say one any more)."""
    ws = paper_ticket(handoff_home, Phase.REVIEWING)
    state = ws.state()
    state.reviewed = {"1": {"reviewer": "pass"}}
    ws.tdir.save(state)
    atomic_write(ws.tdir.report("reviewer", 1), "not a report any more\n")
    orch, _, _, _ = on_paper(ws)
    orch.judge_round(1, {})
    assert ws.state().phase == Phase.PASSED


def test_a_review_is_recorded_and_said_as_it_is_accepted(handoff_home: Path) -> None:
    ws = paper_ticket(handoff_home, Phase.REVIEWING, reviewers=("security", "quality"))
    orch, _, _, told = on_paper(ws)
    orch.record_review("security", 1, review("security", Verdict.FAIL, "adds wrong"))
    assert ws.state().reviewed == {"1": {"security": "fail"}}
    assert ws.state().phase == Phase.REVIEWING, "the other reviewer is still at work"
    assert told == []
    [said] = events(orch.ctx, "verdict")
    assert (said["role"], said["verdict"], said["commit"]) == ("security", "fail", COMMIT)
    assert said["must_fix"] == ["calc.py:2: adds wrong"]


# ---- the implementer's report -------------------------------------------------------------


def test_a_blocked_report_asks_a_person_with_its_question_and_takes_no_commit(
        handoff_home: Path) -> None:
    ws = paper_ticket(handoff_home, Phase.IMPLEMENTING, round_=1)
    state = ws.state()
    state.commits = {}
    ws.tdir.save(state)
    orch, _, _, told = on_paper(ws)
    blocked = Report(role=IMPLEMENTER, commit="", status=Status.BLOCKED,
                     sections={"open questions": "Should add saturate at 2**31?"})
    orch.accept_work(IMPLEMENTER, 1, blocked)
    state = ws.state()
    assert state.phase == Phase.NEEDS_HUMAN and state.commits == {}
    assert state.reason == "the implementer is blocked: Should add saturate at 2**31?"
    assert told == [Phase.NEEDS_HUMAN]


# ---- a person's answer ----------------------------------------------------------------------


def test_an_answer_starts_the_implementers_next_round_carrying_it(handoff_home: Path) -> None:
    ws = paper_ticket(handoff_home, Phase.NEEDS_HUMAN)
    atomic_write(ws.tdir.answer(1), "No: plain addition.\n")
    orch, _, _, told = on_paper(ws)
    orch.needs_human()
    state = ws.state()
    assert (state.phase, state.round, state.answers_used) == (Phase.IMPLEMENTING, 2, 1)
    assert told == [Phase.IMPLEMENTING]
    assert state.feedback["notes"] == [[rules.ANSWERED, "No: plain addition.\n"]]


def test_an_answer_in_the_same_round_goes_to_its_peer_and_resets_its_relaunches(
        handoff_home: Path) -> None:
    ws = paper_ticket(handoff_home, Phase.NEEDS_HUMAN)
    state = ws.state()
    state.after_answer, state.relaunched = "reviewing", {"reviewer": 2}
    ws.tdir.save(state)
    atomic_write(ws.tdir.answer(1), "go on\n")
    orch, _, _, told = on_paper(ws)
    orch.needs_human()
    state = ws.state()
    assert (state.phase, state.round) == (Phase.REVIEWING, 1)
    assert state.note_for_peer == "go on\n" and state.relaunched == {}
    assert state.reason == "answered: go on"
    assert told == [Phase.REVIEWING]


def test_a_plan_changed_while_asked_is_approved_by_the_answer(handoff_home: Path) -> None:
    ws = paper_ticket(handoff_home, Phase.NEEDS_HUMAN)
    ws.tdir.plan_md.write_text("# Fix add\n\nadd adds, and saturates.\n", encoding="utf-8")
    atomic_write(ws.tdir.answer(1), "yes, the new plan\n")
    orch, _, _, _ = on_paper(ws)
    orch.needs_human()
    [approved] = events(orch.ctx, "plan-approved")
    assert approved["by"] == "answer"
    assert ws.state().plan_digest == approved["digest"] != ""


# ---- the machine's slots --------------------------------------------------------------------


def test_a_ticket_at_work_with_no_slot_free_queues_and_says_where_it_stands(
        handoff_home: Path) -> None:
    handoff_home.mkdir(parents=True)
    (handoff_home / "config.yaml").write_text("max_parallel: 1\n", encoding="utf-8")
    other = Slot(handoff_home, handoff_home / "repo-x" / "OTHER", "2026-01-01T00:00:00", 1)
    assert other.take() is None, "the other ticket holds the one slot"
    try:
        ws = paper_ticket(handoff_home, Phase.IMPLEMENTING)
        orch, _, _, told = on_paper(ws)
        assert orch.hold_slot() is False
        state = ws.state()
        assert (state.phase, state.queued_for) == (Phase.QUEUED, "implementing")
        assert state.reason == "1 of 1 tickets at work (max_parallel), it is next"
        assert told == [Phase.QUEUED]
    finally:
        other.release()


def test_a_queued_ticket_goes_back_to_its_phase_once_a_slot_is_free(handoff_home: Path) -> None:
    ws = paper_ticket(handoff_home, Phase.QUEUED)
    state = ws.state()
    state.queued_for = "reviewing"
    ws.tdir.save(state)
    orch, _, _, told = on_paper(ws)
    orch.queued()  # every slot is free: no wait
    state = ws.state()
    assert (state.phase, state.queued_for) == (Phase.REVIEWING, "")
    assert told == [Phase.REVIEWING]
    assert [p.name for p in slots.folder(handoff_home).iterdir()] != [], "it holds its slot"
    orch.slot.release()


def test_a_phase_not_at_work_gives_its_slot_back(handoff_home: Path) -> None:
    ws = paper_ticket(handoff_home, Phase.REVIEWING)
    orch, _, _, _ = on_paper(ws)
    assert orch.hold_slot() is True
    held = list(slots.folder(handoff_home).iterdir())
    assert held, "reviewing is at work: a slot is held"
    orch.ctx.state.phase = Phase.NEEDS_HUMAN
    assert orch.hold_slot() is True
    assert not any(p.exists() for p in held)


# ---- the tickets it starts after --------------------------------------------------------


@pytest.mark.parametrize(("their_phase", "asked"), [("escalated", True), ("closed", True)])
def test_a_ticket_whose_dependency_cannot_pass_asks_a_person(
        handoff_home: Path, their_phase: str, asked: bool) -> None:
    before = paper_ticket(handoff_home, Phase.REVIEWING, ticket="T-0")
    state = before.state()
    state.phase = Phase(their_phase)
    before.tdir.save(state)
    ws = paper_ticket(handoff_home, Phase.WAITING, after=("T-0",))
    orch, _, _, told = on_paper(ws)
    orch.waiting()
    state = ws.state()
    assert (state.phase == Phase.NEEDS_HUMAN) is asked
    assert "T-0" in state.reason
    assert told == ([Phase.NEEDS_HUMAN] if asked else [])


def test_the_record_of_a_stage_is_json_a_person_can_read(handoff_home: Path) -> None:
    """What the stages wrote is the record `status` and `log` read: state.json stays valid
    JSON whose phase is a word of the vocabulary."""
    ws = paper_ticket(handoff_home, Phase.REVIEWING)
    orch, _, _, _ = on_paper(ws)
    orch.judge_round(1, {"reviewer": review("reviewer", Verdict.PASS)})
    data = json.loads(ws.tdir.state_file.read_text(encoding="utf-8"))
    assert data["phase"] == "passed" and Phase(data["phase"]) is Phase.PASSED


def test_an_answer_rereads_the_configuration_a_hint_asked_to_change(handoff_home: Path) -> None:
    """"set required: false for scanner X, then handoff answer T go": the running orchestrator
    takes the changed file from the answer on (it used to keep the configuration it started
    with, so following the hint looped)."""
    handoff_home.mkdir(parents=True)
    personal = handoff_home / "config.yaml"
    personal.write_text("scanners:\n  - name: gitleaks\n    command: [gitleaks, detect]\n",
                        encoding="utf-8")
    ws = paper_ticket(handoff_home, Phase.NEEDS_HUMAN)
    state = ws.state()
    state.after_answer = "gating"
    ws.tdir.save(state)
    orch, _, _, _ = on_paper(ws)
    assert orch.ws.config.scanners[0].required
    personal.write_text(personal.read_text(encoding="utf-8").replace(
        "detect]\n", "detect]\n    required: false\n"), encoding="utf-8")
    atomic_write(ws.tdir.answer(1), "go\n")
    orch.needs_human()
    assert not orch.ws.config.scanners[0].required, "the gate now skips it"
    assert orch.ctx.ws is orch.ws and orch.gate.ctx.ws is orch.ws, "every room sees it"
    [reread] = events(orch.ctx, "config")
    assert reread["changed"] == ["scanners"]
    assert ws.state().phase == Phase.GATING


def test_an_answer_after_a_config_file_broke_keeps_the_runs_own(handoff_home: Path) -> None:
    ws = paper_ticket(handoff_home, Phase.NEEDS_HUMAN)
    (handoff_home / "config.yaml").write_text("max_rounds: [\n", encoding="utf-8")
    atomic_write(ws.tdir.answer(1), "go on\n")
    orch, _, _, _ = on_paper(ws)
    before = orch.ws.config
    orch.needs_human()
    assert orch.ws.config is before
    [kept] = events(orch.ctx, "config")
    assert kept["reread"] is False and "config.yaml" in kept["error"]
