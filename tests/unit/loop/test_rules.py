"""handoff.loop.rules: every decision the loop makes, one case each, no tmux, no git."""

from __future__ import annotations

import pytest

from handoff.loop import rules
from handoff.loop.rules import Limits, Move
from handoff.phases import Phase
from handoff.protocol.ledger import Entry, Ledger
from handoff.protocol.reports import Finding
from handoff.role import Kind

F1 = Entry("F1", 1, ("security",), "app.py", 4, "the token is logged")
F2 = Entry("F2", 1, ("reviewer",), "calc.py", 2, "add() subtracts")


def not_fixed(entry: Entry, *rounds: int) -> Entry:
    return Entry(entry.id, entry.round, entry.raised_by, entry.file, entry.line, entry.reason,
                 answers=tuple((r, "reviewer", "not-fixed", "still there") for r in rounds))


# ---- after the implementer's or a tester's report ----------------------------------------------


def test_a_blocked_implementer_goes_to_a_person_with_its_question() -> None:
    move = rules.after_work(Kind.IMPLEMENTER, "implementer", "blocked", "Which API?", "qa")
    assert move == Move(Phase.NEEDS_HUMAN, "the implementer is blocked: Which API?")


def test_done_work_goes_to_the_first_tester_when_there_is_one() -> None:
    move = rules.after_work(Kind.IMPLEMENTER, "implementer", "done", "", "qa")
    assert (move.phase, move.next_round) == (Phase.TESTING, False)
    assert "qa" in move.reason


def test_done_work_goes_to_the_gate_without_testers() -> None:
    assert rules.after_work(Kind.IMPLEMENTER, "implementer", "partial", "", None) == \
        Move(Phase.GATING)


def test_a_tester_hands_on_to_the_next_tester_then_the_gate() -> None:
    assert rules.after_work(Kind.TESTER, "unit", "done", "", "e2e").phase == Phase.TESTING
    assert rules.after_work(Kind.TESTER, "e2e", "done", "", None) == Move(Phase.GATING)


def test_a_blocked_tester_goes_to_a_person() -> None:
    move = rules.after_work(Kind.TESTER, "qa", "blocked", "No fixtures?", None)
    assert move.phase == Phase.NEEDS_HUMAN and "the qa is blocked: No fixtures?" in move.reason


def test_the_testers_take_their_turns_in_the_teams_order() -> None:
    assert rules.next_tester(("unit", "e2e"), {}) == "unit"
    assert rules.next_tester(("unit", "e2e"), {"unit": "abc"}) == "e2e"
    assert rules.next_tester(("unit", "e2e"), {"unit": "abc", "e2e": "def"}) is None
    assert rules.next_tester((), {}) is None


def test_a_round_whose_testers_all_reported_before_a_crash_goes_to_the_gate() -> None:
    move = rules.round_tested()
    assert (move.phase, move.next_round, move.after_answer) == (Phase.GATING, False, "")
    assert move.reason == "every tester of the round reported"


# ---- after the gate ---------------------------------------------------------------------------


@pytest.mark.parametrize(("test_passed", "block", "passes"), [
    (True, False, True), (None, False, True), (False, False, False), (True, True, False),
    (None, True, False)])
def test_the_gate_passes_when_its_command_and_every_required_scanner_pass(
        test_passed: bool | None, block: bool, passes: bool) -> None:
    assert rules.gate_passes(test_passed, block) is passes


def test_a_gate_with_nothing_to_run_goes_to_the_reviewers() -> None:
    move = rules.gate_skipped()
    assert (move.phase, move.next_round) == (Phase.REVIEWING, False)
    assert move.reason == "the plan names no test command"


def test_a_passed_gate_goes_to_the_reviewers() -> None:
    assert rules.after_gate(True, 2, 3, "`make` passed", []) == Move(Phase.REVIEWING)


def test_a_failed_gate_goes_back_to_the_implementer_with_its_notes() -> None:
    note = ("The verification gate failed", "1 test failed")
    move = rules.after_gate(False, 0, 3, "`make` failed (exit 1)", [note])
    assert move == Move(Phase.IMPLEMENTING, next_round=True, notes=(note,))


def test_the_failed_gate_that_reaches_the_limit_escalates() -> None:
    move = rules.after_gate(False, 2, 3, "`make` failed (exit 1)", [])
    assert move.phase == Phase.ESCALATED and not move.next_round
    assert move.reason == "the verification gate failed 3 times: `make` failed (exit 1)"


def test_a_void_gate_asks_a_person_and_runs_the_gate_again_after() -> None:
    move = rules.gate_void("tracked files changed: calc.py", "T-1")
    assert (move.phase, move.after_answer) == (Phase.NEEDS_HUMAN, Phase.GATING)
    assert "calc.py" in move.reason and "handoff answer T-1" in move.reason


def test_a_missing_required_scanner_stops_the_gate_for_a_person_not_the_implementer() -> None:
    move = rules.missing_scanners(["gitleaks"], ["install gitleaks"])
    assert (move.phase, move.after_answer, move.next_round) == \
        (Phase.NEEDS_HUMAN, Phase.GATING, False)
    assert "gitleaks" in move.reason and "install gitleaks" in move.reason


def test_changed_control_files_ask_a_person_naming_eight_at_most() -> None:
    files = [f"f{i}" for i in range(10)]
    move = rules.protected(files, 2, "T-1")
    assert (move.phase, move.after_answer) == (Phase.NEEDS_HUMAN, Phase.GATING)
    assert "f7 and 2 more" in move.reason and "f8" not in move.reason


# ---- after every reviewer reported -----------------------------------------------------------


def test_the_round_passes_only_when_every_reviewer_passes() -> None:
    move = rules.after_reviews({"reviewer": "pass", "security": "pass"}, Ledger(), None, 1, 3)
    assert move.phase == Phase.PASSED
    failed = rules.after_reviews({"reviewer": "pass", "security": "fail"}, Ledger((F1,)), None,
                                 1, 3)
    assert failed == Move(Phase.IMPLEMENTING, next_round=True)


def test_the_round_verdict_is_pass_only_when_every_reviewer_passed() -> None:
    assert rules.round_verdict({"reviewer": "pass", "security": "pass"}) == "pass"
    assert rules.round_verdict({"reviewer": "pass", "security": "fail"}) == "fail"


def test_a_must_fix_an_earlier_round_raised_is_found_by_file_and_reason() -> None:
    again = Finding("calc.py", 9, "Add()  subtracts")
    assert rules.repeated([Finding("x.py", 1, "new"), again], {F2.key()}) == again
    assert rules.repeated([Finding("calc.py", 2, "another reason")], {F2.key()}) is None


def test_one_reviewer_passing_alone_passes_without_a_reason() -> None:
    assert rules.after_reviews({"reviewer": "pass"}, Ledger(), None, 1, 3) == Move(Phase.PASSED)


def test_a_repeated_must_fix_escalates_before_the_round_limit() -> None:
    repeated = Finding("calc.py", 2, "add() subtracts")
    move = rules.after_reviews({"reviewer": "fail"}, Ledger((F2,)), repeated, 2, 3)
    assert move.phase == Phase.ESCALATED
    assert move.reason == "the same must-fix came back: calc.py:2: add() subtracts"


def test_a_finding_answered_not_fixed_in_two_rounds_escalates() -> None:
    move = rules.after_reviews({"security": "fail"}, Ledger((not_fixed(F1, 2, 3),)), None, 3, 5)
    assert move.phase == Phase.ESCALATED
    assert "not-fixed in two rounds" in move.reason and "F1 app.py:4" in move.reason
    assert "raised by security in round 1" in move.reason


def test_a_finding_answered_not_fixed_once_goes_back_to_the_implementer() -> None:
    move = rules.after_reviews({"security": "fail"}, Ledger((not_fixed(F1, 2),)), None, 2, 5)
    assert move.phase == Phase.IMPLEMENTING and move.next_round


def test_failing_at_the_round_limit_escalates() -> None:
    move = rules.after_reviews({"reviewer": "fail"}, Ledger((F2,)), None, 3, 3)
    assert move == Move(Phase.ESCALATED, "still failing after 3 review round(s) (--max-rounds)")


# ---- after a rejected report -------------------------------------------------------------------


def test_a_rejected_implementer_report_starts_its_next_round_with_the_problems() -> None:
    move = rules.after_rejection(Kind.IMPLEMENTER, 1, ["commit abc is not on the branch"])
    assert move is not None and move.next_round
    assert move.notes == (("Your last report was not accepted",
                           "- commit abc is not on the branch\n"),)


@pytest.mark.parametrize("kind", [Kind.TESTER, Kind.REVIEWER])
def test_another_peers_rejected_report_leaves_the_ticket_where_it_is(kind: Kind) -> None:
    assert rules.after_rejection(kind, 3, ["bad"]) is None


def test_a_forged_report_counts_as_a_rejection_and_too_many_go_to_a_person() -> None:
    assert rules.after_forgery(rules.MAX_REJECTIONS, "review-report-1.md", "no receipt") is None
    move = rules.after_forgery(rules.MAX_REJECTIONS + 1, "review-report-1.md", "no receipt")
    assert move is not None and move.phase == Phase.NEEDS_HUMAN
    assert move.reason == "4 reports were rejected; the last: review-report-1.md no receipt"


def test_too_many_rejections_go_to_a_person() -> None:
    move = rules.after_rejection(Kind.REVIEWER, rules.MAX_REJECTIONS + 1, ["bad commit"])
    assert move is not None and move.phase == Phase.NEEDS_HUMAN
    assert move.reason == "4 reports were rejected; the last problems: bad commit"


# ---- relaunches, budget, answers ---------------------------------------------------------------


def test_a_dying_peer_is_relaunched_up_to_its_limit() -> None:
    assert rules.relaunches_spent("security", 2, 2) == ""
    assert rules.relaunches_spent("security", 3, 2).startswith("the security died 3 times")


def test_over_budget_asks_a_person_and_carries_the_same_phase_on() -> None:
    move = rules.over_budget("12,000 tokens", "10,000 tokens", "tokens", "T-1", "reviewing")
    assert (move.phase, move.after_answer) == (Phase.NEEDS_HUMAN, "reviewing")
    assert "12,000 tokens" in move.reason and "10,000 tokens" in move.reason


@pytest.mark.parametrize("answer", ["allow", " Allow. ", "yes!", "OK", "approved"])
def test_these_answers_let_control_files_stand(answer: str) -> None:
    assert rules.allows(answer)


@pytest.mark.parametrize("answer", ["no", "put CLAUDE.md back", "allow it but revert x"])
def test_any_other_answer_sends_them_back(answer: str) -> None:
    assert not rules.allows(answer)


def test_an_answer_to_a_blocked_implementer_starts_its_next_round_carrying_the_answer() -> None:
    answered = rules.after_answer("Use floats.", "", [])
    assert answered.move == Move(Phase.IMPLEMENTING, next_round=True,
                                 notes=(("A person answered", "Use floats."),))
    assert answered.note == "" and answered.allowed == ()


def test_an_answer_for_a_held_peer_carries_the_same_round_on_and_is_passed_to_it() -> None:
    answered = rules.after_answer("I logged it in.\n", "reviewing", [])
    assert answered.move == Move(Phase.REVIEWING, "answered: I logged it in.")
    assert answered.note == "I logged it in.\n"


def test_an_answer_after_a_budget_stop_at_the_gate_tells_no_peer() -> None:
    answered = rules.after_answer("go on", "gating", [])
    assert answered.move.phase == Phase.GATING and answered.note == ""


def test_allow_lets_the_asked_control_files_stand_and_runs_the_gate() -> None:
    answered = rules.after_answer("allow", "gating", ["CLAUDE.md"])
    assert answered.allowed == ("CLAUDE.md",) and answered.move.phase == Phase.GATING


def test_another_answer_about_control_files_goes_to_the_implementer() -> None:
    answered = rules.after_answer("put CLAUDE.md back", "gating", ["CLAUDE.md"])
    assert answered.allowed == () and answered.move.next_round
    assert answered.move.notes == (("A person answered", "put CLAUDE.md back"),)


# ---- the plan, the machine's slots, the tickets it starts after -------------------------------


@pytest.mark.parametrize("phase", [Phase.IMPLEMENTING, Phase.REVIEWING, Phase.GATING])
def test_a_plan_changed_after_approval_asks_a_person_and_the_answer_carries_the_phase_on(
        phase: Phase) -> None:
    move = rules.plan_changed("/t/plan.md", "T-1", phase)
    assert (move.phase, move.after_answer, move.next_round) == (Phase.NEEDS_HUMAN, phase, False)
    assert move.reason.startswith("/t/plan.md changed after it was approved")
    assert "handoff answer T-1 \"approved\"" in move.reason


@pytest.mark.parametrize("phase", [Phase.IMPLEMENTING, Phase.TESTING, Phase.REVIEWING])
def test_no_free_slot_queues_the_ticket_to_go_back_to_its_phase(phase: Phase) -> None:
    move = rules.no_slot(phase, "1 of 1 tickets at work (max_parallel), it is next")
    assert move == Move(Phase.QUEUED, "1 of 1 tickets at work (max_parallel), it is next",
                        back_to=phase)
    assert move.after_answer == ""


@pytest.mark.parametrize("phase", [Phase.TESTING, Phase.GATING, Phase.REVIEWING])
def test_a_queued_ticket_that_gets_a_slot_goes_back_where_it_queued_from(phase: Phase) -> None:
    assert rules.got_slot(phase, 2) == Move(phase, "it got a slot (max_parallel 2)")


@pytest.mark.parametrize("queued_for", ["", "needs-human", "queued", "nonsense"])
def test_a_queued_ticket_whose_record_names_no_phase_at_work_goes_to_the_implementer(
        queued_for: str) -> None:
    move = rules.got_slot(queued_for, 1)
    assert (move.phase, move.back_to) == (Phase.IMPLEMENTING, "")


def test_a_ticket_whose_tickets_before_it_passed_starts_from_their_work() -> None:
    move = rules.started_after("A-1 and A-2 passed", "abc1234")
    assert (move.phase, move.next_round) == (Phase.IMPLEMENTING, False)
    assert move.reason == "A-1 and A-2 passed: it starts from their work (abc1234)"


def test_a_ticket_it_starts_after_that_will_not_pass_asks_a_person() -> None:
    move = rules.after_unmet("A-1 escalated", "T-2")
    assert (move.phase, move.after_answer) == (Phase.NEEDS_HUMAN, Phase.IMPLEMENTING)
    assert move.reason.startswith("A-1 escalated: it was to start from that work")
    assert "'handoff answer T-2 go'" in move.reason and "'handoff close T-2'" in move.reason


def test_work_it_starts_after_that_does_not_merge_asks_a_person_naming_the_conflicts() -> None:
    move = rules.after_conflicts(["calc.py (A-1, A-2)", "README.md (A-2)"], "T-2")
    assert (move.phase, move.after_answer) == (Phase.NEEDS_HUMAN, Phase.IMPLEMENTING)
    assert "conflicts in calc.py (A-1, A-2); README.md (A-2)" in move.reason
    assert "'handoff answer T-2 go' starts it from its base alone" in move.reason


# ---- the limits, for resume --more-rounds ------------------------------------------------------


def test_the_gate_limit_is_named_when_the_last_gate_failed_at_it() -> None:
    assert rules.bound_hit(None, "fail", 1, 3, Limits(3, 3), False) == "max-gate-bounces"


def test_the_round_limit_is_named_when_the_last_review_failed_at_it() -> None:
    assert rules.bound_hit("fail", "pass", 2, 0, Limits(2, 3), False) == "max-rounds"


def test_an_escalation_for_a_repeat_is_at_no_limit() -> None:
    assert rules.bound_hit("fail", "pass", 2, 0, Limits(2, 3), True) is None


def test_a_passed_ticket_is_at_no_limit() -> None:
    assert rules.bound_hit("pass", "pass", 3, 0, Limits(3, 3), False) is None


def test_more_rounds_give_every_limit_room_from_where_the_ticket_stands() -> None:
    assert rules.extended(Limits(2, 3), reviews=2, gate_bounces=1, more=2) == Limits(4, 3)
    assert rules.extended(Limits(3, 3), reviews=1, gate_bounces=3, more=1) == Limits(3, 4)
