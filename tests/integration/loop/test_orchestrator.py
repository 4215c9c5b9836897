"""handoff.loop.orchestrator's stages, each on a real ticket (directory, repository, worktrees,
the ticket's tmux session) with fakes for the rooms that would run peers (tests/rooms.py:
the crew records whom it would brief or launch, the watch hands back the reports a test gives
it). The loop with real peers is in the test_e2e_* files."""

from __future__ import annotations

import threading
from pathlib import Path

from handoff.loop import rules
from handoff.loop.context import TicketContext
from handoff.loop.rules import Move
from handoff.phases import Phase
from handoff.protocol.reports import Finding, Report
from handoff.record.slots import Slot
from handoff.role import IMPLEMENTER
from tests.conftest import commit_file, git
from tests.loop_tickets import (
    ADD_FIXED,
    SECURITY,
    TESTER,
    at_round,
    done,
    events,
    implementer_commit,
    new_ticket,
    phases,
    team,
    verdict,
)
from tests.rooms import fitted


def in_phase(ctx: TicketContext, phase: Phase, commit: str = "") -> None:
    """The ticket moved on to phase (with round 1's commit accepted), as earlier stages do."""
    if commit:
        at_round(ctx, commit)
    ctx.apply(Move(phase))


def one_slot(home: Path) -> None:
    """This machine runs one ticket at a time (max_parallel is the person's own setting)."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text("max_parallel: 1\n")


def branch_tip(repo: Path) -> str:
    return git(repo, "rev-parse", "refs/heads/handoff/T-1")


# ---- the implementer and the testers --------------------------------------------------------


def test_an_accepted_done_report_puts_its_commit_on_the_branch_and_runs_the_gate(
        repo: Path, handoff_home: Path) -> None:
    ws = new_ticket(repo, handoff_home)
    base = ws.state().base_commit
    orch, crew, watch = fitted(ws)
    commit = implementer_commit(orch.ctx, "calc.py", ADD_FIXED)
    watch.reports[IMPLEMENTER] = done(IMPLEMENTER, commit[:8])  # a short sha is resolved
    assert branch_tip(repo) == base, "the peer's commit does not move the branch"

    orch.implementing()

    brief = ws.tdir.brief(IMPLEMENTER, 1)
    assert crew.briefed == [(IMPLEMENTER, brief, False)], "pasted into a live CLI if there is one"
    assert watch.waited == [{IMPLEMENTER: brief}]
    assert "round 1" in brief.read_text()
    state = ws.state()
    assert state.phase == "gating" and state.commits == {"1": commit}
    assert state.touched == ["calc.py"]
    assert branch_tip(repo) == commit
    [moved] = events(orch.ctx, "branch")
    assert (moved["commit"], moved["by"]) == (commit, "fast-forward")
    assert phases(orch.ctx)[-1] == ("implementing", "gating")


def test_an_implementers_done_report_goes_to_the_first_tester(repo: Path,
                                                              handoff_home: Path) -> None:
    team(repo, qa=TESTER)
    orch, _, watch = fitted(new_ticket(repo, handoff_home))
    commit = implementer_commit(orch.ctx, "calc.py", ADD_FIXED)
    watch.reports[IMPLEMENTER] = done(IMPLEMENTER, commit)

    orch.implementing()
    state = orch.ctx.ws.state()
    assert (state.phase, state.reason, state.commits) == ("testing", "qa writes tests",
                                                           {"1": commit})
    assert state.tested == {}, "the implementer is no tester"


def test_a_testers_commit_on_top_becomes_the_rounds_and_the_gate_runs(
        repo: Path, handoff_home: Path) -> None:
    team(repo, qa=TESTER)
    orch, crew, watch = fitted(new_ticket(repo, handoff_home))
    ctx = orch.ctx
    in_phase(ctx, Phase.TESTING, implementer_commit(ctx, "calc.py", ADD_FIXED))
    checkout = ctx.ws.worktrees.path("qa")
    tested: list[str] = []

    def adds_a_test() -> Report:  # done in the checkout the stage pointed at round 1's commit
        tested.append(commit_file(checkout, "tests/test_more.py", "def test_x(): pass\n"))
        return done("qa", tested[0])
    watch.reports["qa"] = adds_a_test

    orch.testing()

    brief = ctx.tdir.brief("qa", 1)
    assert crew.briefed == [("qa", brief, True)], "a tester starts fresh on its brief"
    assert ctx.tdir.diff(1).exists(), "it is handed the round's diff"
    state = ctx.ws.state()
    assert state.phase == "gating"
    assert state.tested == {"1": {"qa": tested[0]}} and state.commits == {"1": tested[0]}
    assert branch_tip(repo) == tested[0]


def test_a_blocked_report_asks_a_person_and_accepts_no_commit(repo: Path,
                                                             handoff_home: Path) -> None:
    orch, _, watch = fitted(new_ticket(repo, handoff_home))
    base = orch.ctx.state.base_commit
    watch.reports[IMPLEMENTER] = done(IMPLEMENTER, base, status="blocked",
                                      question="Should neg() accept floats?")
    orch.implementing()

    state = orch.ctx.ws.state()
    assert state.phase == "needs-human"
    assert state.reason == "the implementer is blocked: Should neg() accept floats?"
    assert state.after_answer == "", "the answer starts the implementer's next round"
    assert state.commits == {} and branch_tip(repo) == base


def test_no_report_leaves_the_ticket_where_it_was(repo: Path, handoff_home: Path) -> None:
    orch, crew, watch = fitted(new_ticket(repo, handoff_home))
    orch.implementing()
    assert len(crew.briefed) == 1 and len(watch.waited) == 1
    assert orch.ctx.ws.state().phase == "implementing"


# ---- the reviewers ----------------------------------------------------------------------------


def test_two_reviewers_pass_and_fail_the_next_round_carries_the_failed_finding(
        repo: Path, handoff_home: Path) -> None:
    team(repo, security=SECURITY)
    orch, crew, watch = fitted(new_ticket(repo, handoff_home))
    ctx = orch.ctx
    commit = implementer_commit(ctx, "calc.py", ADD_FIXED)
    in_phase(ctx, Phase.REVIEWING, commit)
    leak = Finding("calc.py", 2, "the sum is logged")
    watch.reports.update(reviewer=verdict("reviewer", commit, True),
                         security=verdict("security", commit, False, leak))

    orch.reviewing()

    assert [(role, fresh) for role, _, fresh in crew.briefed] == \
        [("reviewer", True), ("security", True)]
    for role in ("reviewer", "security"):
        assert ctx.ws.worktrees.path(role).is_dir()
        assert git(ctx.ws.worktrees.path(role), "rev-parse", "HEAD") == commit
    state = ctx.ws.state()
    assert (state.round, state.phase) == (2, "implementing")
    assert state.verdicts == {"1": "fail"}
    assert state.reviewed == {"1": {"reviewer": "pass", "security": "fail"}}
    [finding] = state.feedback["findings"]
    assert (finding["file"], finding["line"], finding["reason"], finding["raised_by"]) == \
        ("calc.py", 2, "the sum is logged", ["security"])
    said = {e["role"]: e["verdict"] for e in events(ctx, "verdict")}
    assert said == {"reviewer": "pass", "security": "fail"}, "each verdict said as it came"
    [judged] = events(ctx, "reviews")
    assert judged["verdicts"] == {"reviewer": "pass", "security": "fail"}


def test_every_reviewer_passing_passes_the_ticket(repo: Path, handoff_home: Path) -> None:
    team(repo, security=SECURITY)
    orch, _, watch = fitted(new_ticket(repo, handoff_home))
    commit = implementer_commit(orch.ctx, "calc.py", ADD_FIXED)
    in_phase(orch.ctx, Phase.REVIEWING, commit)
    watch.reports.update(reviewer=verdict("reviewer", commit, True),
                         security=verdict("security", commit, True))
    orch.reviewing()
    state = orch.ctx.ws.state()
    assert (state.phase, state.reason, state.round) == ("passed", "every reviewer passed it", 1)
    assert orch.ctx.tdir.final_report.exists()


def test_a_failed_review_at_the_round_limit_escalates(repo: Path, handoff_home: Path) -> None:
    orch, _, _ = fitted(new_ticket(repo, handoff_home))
    ctx = orch.ctx
    commit = implementer_commit(ctx, "calc.py", ADD_FIXED)
    in_phase(ctx, Phase.REVIEWING, commit)
    ctx.state.max_rounds = 1
    ctx.state.reviewed = {"1": {"reviewer": "fail"}}

    orch.judge_round(1, {"reviewer": verdict("reviewer", commit, False,
                                             Finding("calc.py", 5, "mul() adds"))})

    state = ctx.ws.state()
    assert (state.phase, state.round) == ("escalated", 1)
    assert state.reason == "still failing after 1 review round(s) (--max-rounds)"
    assert state.verdicts == {"1": "fail"} and [e["reason"] for e in state.ledger] == \
        ["mul() adds"]
    assert "mul() adds" in ctx.tdir.final_report.read_text()


def test_a_fail_below_the_round_limit_is_not_escalated(repo: Path, handoff_home: Path) -> None:
    orch, _, _ = fitted(new_ticket(repo, handoff_home))
    commit = implementer_commit(orch.ctx, "calc.py", ADD_FIXED)
    in_phase(orch.ctx, Phase.REVIEWING, commit)
    orch.ctx.state.max_rounds = 2
    orch.judge_round(1, {"reviewer": verdict("reviewer", commit, False,
                                             Finding("calc.py", 5, "mul() adds"))})
    assert (orch.ctx.state.phase, orch.ctx.state.round) == ("implementing", 2)


# ---- a person -----------------------------------------------------------------------------------


def test_an_answer_carries_the_same_round_on_and_is_passed_to_its_peers(
        repo: Path, handoff_home: Path) -> None:
    orch, crew, watch = fitted(new_ticket(repo, handoff_home))
    ctx = orch.ctx
    commit = implementer_commit(ctx, "calc.py", ADD_FIXED)
    in_phase(ctx, Phase.REVIEWING, commit)
    ctx.apply(rules.ask("the reviewer needs a login", after_answer=Phase.REVIEWING))
    answer = ctx.tdir.answer(1)
    answer.parent.mkdir(parents=True, exist_ok=True)
    answer.write_text("I logged it in.\n")

    orch.needs_human()

    state = ctx.ws.state()
    assert (state.phase, state.round) == ("reviewing", 1)
    assert state.reason == "answered: I logged it in."
    assert (state.note_for_peer, state.answers_used, state.after_answer) == \
        ("I logged it in.\n", 1, "")

    watch.reports["reviewer"] = verdict("reviewer", commit, True)
    orch.reviewing()  # the reviewer has no pane: it starts afresh on its brief, told nothing
    assert crew.launched == [("reviewer", ctx.tdir.brief("reviewer", 1), "answered")]
    [told] = events(ctx, "answer-passed-on")
    assert (told["role"], told["delivered"]) == ("reviewer", False)
    assert ctx.ws.state().note_for_peer == "", "passed on once"


def test_an_answer_to_a_blocked_implementer_starts_its_next_round(
        repo: Path, handoff_home: Path) -> None:
    orch, _, _ = fitted(new_ticket(repo, handoff_home))
    ctx = orch.ctx
    ctx.apply(rules.after_work(orch.ctx.team.kind(IMPLEMENTER), IMPLEMENTER, "blocked",
                               "Floats?", None))
    answer = ctx.tdir.answer(1)
    answer.parent.mkdir(parents=True, exist_ok=True)
    answer.write_text("Yes, floats too.")

    orch.needs_human()
    state = ctx.ws.state()
    assert (state.phase, state.round, state.note_for_peer) == ("implementing", 2, "")
    assert state.feedback["notes"] == [["A person answered", "Yes, floats too."]]


# ---- the machine's slots --------------------------------------------------------------------


def test_a_ticket_with_every_slot_taken_queues_and_goes_back_once_one_is_free(
        repo: Path, handoff_home: Path) -> None:
    one_slot(handoff_home)
    other = new_ticket(repo, handoff_home, ticket="T-0")
    held = Slot(handoff_home, other.tdir.path, other.state().created, 1)
    assert held.take() is None, "the other ticket is at work"
    orch, _, _ = fitted(new_ticket(repo, handoff_home))
    ctx = orch.ctx
    in_phase(ctx, Phase.REVIEWING)
    try:
        assert orch.hold_slot() is False
        state = ctx.ws.state()
        assert (state.phase, state.queued_for) == ("queued", "reviewing")
        assert state.reason == "1 of 1 tickets at work (max_parallel), it is next"

        waiting = threading.Thread(target=orch.queued)
        waiting.start()
        held.release()
        waiting.join(timeout=30)
        assert not waiting.is_alive(), "the freed slot woke the queue"
        state = ctx.ws.state()
        assert (state.phase, state.queued_for) == ("reviewing", "")
        assert state.reason == "it got a slot (max_parallel 1)"
        assert orch.slot.held
        assert phases(ctx)[-2:] == [("reviewing", "queued"), ("queued", "reviewing")]
    finally:
        held.release()
        orch.slot.release()


def test_a_ticket_with_a_free_slot_takes_it_and_stays_in_its_phase(
        repo: Path, handoff_home: Path) -> None:
    one_slot(handoff_home)
    orch, _, _ = fitted(new_ticket(repo, handoff_home))
    try:
        assert orch.hold_slot() is True and orch.slot.held
        assert orch.ctx.state.phase == "implementing"
        orch.ctx.apply(rules.ask("why?"))
        assert orch.hold_slot() is True and not orch.slot.held, \
            "a ticket waiting for a person gives its slot back"
    finally:
        orch.slot.release()
