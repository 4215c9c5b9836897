"""handoff.loop.desk: reports in, on a real ticket with no peer (a `FakeCrew` records whom the
desk would start afresh). Reports are filed here as `handoff submit` files them: the text and
its signed receipt (handoff.loop.submission); the whole submit path is in test_e2e_submit."""

from __future__ import annotations

import os
from pathlib import Path

from handoff.loop import submission
from handoff.loop.context import TicketContext
from handoff.loop.desk import ReportDesk
from handoff.loop.rules import Move
from handoff.phases import Phase
from handoff.protocol.intake import Request
from handoff.record.store import atomic_write
from handoff.role import IMPLEMENTER
from tests.loop_tickets import ADD_FIXED, at_round, events, implementer_commit, new_context
from tests.rooms import FakeCrew
from tests.unit.loop.test_desk import WHOLE

DONE = ("---\nstatus: done\ncommit: '{sha}'\n---\n## Changes\nFixed add.\n## Verification\n"
        "ran it\n## Deviations\nNone\n## Open questions\nNone\n")
FAIL = ("---\nverdict: fail\ncommit: '{sha}'\nmust_fix:\n  - file: calc.py\n    line: 2\n"
        "    reason: the sum is wrong\nshould_fix: []\n---\n## Summary\nBroken.\n")
PASS = "---\nverdict: pass\ncommit: '{sha}'\nmust_fix: []\nshould_fix: []\n---\nFine.\n"


def desk_of(ctx: TicketContext) -> tuple[ReportDesk, FakeCrew]:
    crew = FakeCrew(ctx)
    return ReportDesk(ctx, crew), crew


def file(ctx: TicketContext, role: str, text: str, commit: str) -> Path:
    """The report filed for role's round as `handoff submit` files one: its signed receipt,
    then the text (a report filed before in the same turn kept beside, as submit keeps it)."""
    n = ctx.state.round
    target = ctx.tdir.report(role, n)
    if target.exists():
        submission.supersede(ctx.tdir, target)
    submission.write_receipt(ctx.tdir, target, text, commit, role, n)
    atomic_write(target, text)
    return target


def under_review(repo: Path, home: Path) -> tuple[TicketContext, str]:
    """A ticket whose reviewer reviews round 1's commit in its own checkout."""
    ctx = new_context(repo, home)
    commit = implementer_commit(ctx, "calc.py", ADD_FIXED)
    at_round(ctx, commit)
    ctx.apply(Move(Phase.REVIEWING))
    ctx.point("reviewer", 1)
    return ctx, commit


# ---- judge_handed: what `handoff submit` hands over -----------------------------------------------


def test_a_report_for_a_role_the_ticket_has_not_is_refused(repo: Path, handoff_home: Path) -> None:
    ctx = new_context(repo, handoff_home)
    desk, _ = desk_of(ctx)
    verdict = desk.judge_handed(Request("qa", 1, WHOLE, "report.md", os.getpid()))
    assert (verdict.filed, verdict.problems) == (None, ["unknown role 'qa'"])
    assert not ctx.tdir.report("qa", 1).exists() and events(ctx, "submitted") == []


def test_a_report_the_ticket_does_not_wait_for_is_refused_and_nothing_filed(
        repo: Path, handoff_home: Path) -> None:
    ctx = new_context(repo, handoff_home)
    desk, _ = desk_of(ctx)
    verdict = desk.judge_handed(Request("reviewer", 1, PASS.format(sha="a" * 40), "r.md",
                                        os.getpid()))
    assert verdict.filed is None
    assert verdict.problems == ["the ticket is implementing, not waiting for the reviewer's "
                                "report"]
    assert not ctx.tdir.report("reviewer", 1).exists() and desk.judged == {}


# ---- take_report: what a wait finds filed -------------------------------------------------------


def test_a_report_with_no_receipt_is_set_aside_as_forged(repo: Path, handoff_home: Path) -> None:
    ctx = new_context(repo, handoff_home)
    desk, crew = desk_of(ctx)
    commit = implementer_commit(ctx, "calc.py", ADD_FIXED)
    planted = ctx.tdir.report(IMPLEMENTER, 1)
    planted.write_text(DONE.format(sha=commit))  # written by hand, not filed by submit

    assert desk.take_report(IMPLEMENTER, 1, planted) is None

    assert not planted.exists()
    kept = ctx.tdir.path / "impl-report-1.forged-1.md"
    assert kept.read_text() == DONE.format(sha=commit), "kept beside the record, never deleted"
    [forged] = events(ctx, "forgery")
    assert (forged["report"], forged["why"]) == (kept.name, "it has no receipt from `handoff "
                                                            "submit`")
    state = ctx.ws.state()
    assert (state.rejections, state.phase) == (1, "implementing"), "the ticket waits on"
    assert crew.launched == [], "its peer is not the one who wrote it"


def test_too_many_forged_reports_ask_a_person(repo: Path, handoff_home: Path) -> None:
    ctx = new_context(repo, handoff_home)
    desk, _ = desk_of(ctx)
    ctx.state.rejections = 3
    planted = ctx.tdir.report(IMPLEMENTER, 1)
    planted.write_text(WHOLE)
    assert desk.take_report(IMPLEMENTER, 1, planted) is None
    state = ctx.ws.state()
    assert (state.phase, state.rejections) == ("needs-human", 4)
    assert state.reason.startswith("4 reports were rejected; the last: impl-report-1.md")


def test_a_filed_report_changed_afterwards_is_set_aside(repo: Path, handoff_home: Path) -> None:
    ctx = new_context(repo, handoff_home)
    desk, _ = desk_of(ctx)
    commit = implementer_commit(ctx, "calc.py", ADD_FIXED)
    filed = file(ctx, IMPLEMENTER, DONE.format(sha=commit), commit)
    filed.write_text(DONE.format(sha=commit).replace("Fixed add.", "Fixed everything."))
    assert desk.take_report(IMPLEMENTER, 1, filed) is None
    [forged] = events(ctx, "forgery")
    assert forged["why"] == "it was changed after `handoff submit` filed it"


def test_a_filed_implementer_report_is_taken(repo: Path, handoff_home: Path) -> None:
    ctx = new_context(repo, handoff_home)
    desk, crew = desk_of(ctx)
    commit = implementer_commit(ctx, "calc.py", ADD_FIXED)
    filed = file(ctx, IMPLEMENTER, DONE.format(sha=commit), commit)

    report = desk.take_report(IMPLEMENTER, 1, filed)
    assert report is not None and (report.commit, report.status) == (commit, "done")
    [taken] = events(ctx, "submission")
    assert (taken["accepted"], taken["commit"], taken["status"]) == (True, commit, "done")
    assert ctx.state.rejections == 0 and crew.launched == []


def test_a_reviewers_report_that_does_not_parse_is_rejected_and_its_peer_starts_afresh(
        repo: Path, handoff_home: Path) -> None:
    ctx, commit = under_review(repo, handoff_home)
    desk, crew = desk_of(ctx)
    checkout = ctx.ws.worktrees.path("reviewer")
    (checkout / "scratch.txt").write_text("notes")
    filed = file(ctx, "reviewer", "Looks fine to me.\n", commit)

    assert desk.take_report("reviewer", 1, filed) is None

    rejected = ctx.tdir.path / "review-report-1.rejected-1.md"
    assert rejected.read_text() == "Looks fine to me.\n" and not filed.exists()
    [said] = events(ctx, "submission")
    assert said["accepted"] is False and said["problems"], "the peer is told why"
    assert crew.launched == [("reviewer", ctx.tdir.brief("reviewer", 1), "report rejected")]
    assert not (checkout / "scratch.txt").exists(), "its checkout is reset for the next go"
    state = ctx.ws.state()
    assert (state.phase, state.round, state.rejections) == ("reviewing", 1, 1)


def test_an_implementers_report_that_does_not_parse_starts_its_next_round_with_why(
        repo: Path, handoff_home: Path) -> None:
    ctx = new_context(repo, handoff_home)
    desk, crew = desk_of(ctx)
    commit = implementer_commit(ctx, "calc.py", ADD_FIXED)
    filed = file(ctx, IMPLEMENTER, "I fixed it.\n", commit)

    assert desk.take_report(IMPLEMENTER, 1, filed) is None
    state = ctx.ws.state()
    assert (state.phase, state.round, state.rejections) == ("implementing", 2, 1)
    [(title, text)] = state.feedback["notes"]
    assert title == "Your last report was not accepted" and text.startswith("- ")
    assert crew.launched == [], "its next brief is pasted by the stage, not a relaunch"


def test_a_reviewers_earlier_fail_in_the_same_turn_stands_against_its_later_pass(
        repo: Path, handoff_home: Path) -> None:
    ctx, commit = under_review(repo, handoff_home)
    desk, _ = desk_of(ctx)
    file(ctx, "reviewer", FAIL.format(sha=commit), commit)
    filed = file(ctx, "reviewer", PASS.format(sha=commit), commit)

    report = desk.take_report("reviewer", 1, filed)

    assert report is not None and report.verdict == "fail"
    assert [f.reason for f in report.must_fix] == ["the sum is wrong"]
    assert "verdict: fail" in filed.read_text(), "the verdict that counts is in its place"
    assert "verdict: pass" in (ctx.tdir.path / "review-report-1.filed-2.md").read_text()
    [kept] = events(ctx, "verdict-kept")
    assert (kept["role"], kept["verdict"], kept["report"]) == ("reviewer", "fail",
                                                               "review-report-1.md")


def test_a_fail_nobody_filed_through_submit_does_not_undo_a_pass(repo: Path,
                                                                 handoff_home: Path) -> None:
    ctx, commit = under_review(repo, handoff_home)
    desk, _ = desk_of(ctx)
    (ctx.tdir.path / "review-report-1.filed-1.md").write_text(FAIL.format(sha=commit))
    filed = file(ctx, "reviewer", PASS.format(sha=commit), commit)

    report = desk.take_report("reviewer", 1, filed)
    assert report is not None and report.verdict == "pass"
    assert events(ctx, "verdict-kept") == []


def test_a_pass_from_a_checkout_that_changed_is_rejected(repo: Path, handoff_home: Path) -> None:
    ctx, commit = under_review(repo, handoff_home)
    desk, crew = desk_of(ctx)
    (ctx.ws.worktrees.path("reviewer") / "calc.py").write_text("# gone\n")
    filed = file(ctx, "reviewer", PASS.format(sha=commit), commit)

    assert desk.take_report("reviewer", 1, filed) is None
    [said] = events(ctx, "submission")
    assert "tracked files changed: calc.py" in said["problems"][0]
    assert [reason for _, _, reason in crew.launched] == ["report rejected"]
