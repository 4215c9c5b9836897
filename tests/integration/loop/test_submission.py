"""handoff.loop.submission: a report is filed with a signed receipt of its checks, or refused
with why; a filed report that changed, or that handoff did not file, does not count. On a real
ticket, with no peer running (the whole submit path: tests/e2e/test_submit.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from handoff.loop import submission
from tests.loop_tickets import events, new_context
from tests.unit.loop.test_submission import filed

DONE = ("---\nstatus: done\ncommit: 'abcdef1'\n---\n## Changes\nx\n## Verification\nx\n"
        "## Deviations\nNone\n## Open questions\nNone\n")


def test_a_report_handoff_filed_counts_and_its_receipt_says_what_was_checked(
        repo: Path, handoff_home: Path) -> None:
    ctx = new_context(repo, handoff_home)
    report = filed(ctx, "implementer", DONE)
    assert submission.provenance(ctx.tdir, report, DONE, "implementer", 1) == ""
    receipt = json.loads(ctx.tdir.receipt(report).read_text())
    assert (receipt["report"], receipt["commit"], receipt["role"], receipt["round"]) == \
        (report.name, "abcdef1", "implementer", 1)
    assert receipt["signature"]


def test_a_report_changed_or_not_filed_by_handoff_does_not_count(
        repo: Path, handoff_home: Path) -> None:
    ctx = new_context(repo, handoff_home)
    report = filed(ctx, "implementer", DONE)
    changed = DONE.replace("x\n", "y\n", 1)
    assert submission.provenance(ctx.tdir, report, changed, "implementer", 1) == \
        "it was changed after `handoff submit` filed it"
    assert submission.provenance(ctx.tdir, report, DONE, "implementer", 2) == \
        "its receipt is for the implementer's round 1"
    receipt = ctx.tdir.receipt(report)
    data = json.loads(receipt.read_text())
    receipt.write_text(json.dumps({**data, "signature": "forged"}))
    assert "signature does not check out" in \
        submission.provenance(ctx.tdir, report, DONE, "implementer", 1)
    receipt.unlink()
    assert submission.provenance(ctx.tdir, report, DONE, "implementer", 1) == \
        "it has no receipt from `handoff submit`"
    receipt.write_text("[1]")
    assert submission.provenance(ctx.tdir, report, DONE, "implementer", 1) == \
        "its receipt is unreadable"


def test_a_report_replaced_in_the_same_turn_is_kept_beside_with_its_receipt(
        repo: Path, handoff_home: Path) -> None:
    ctx = new_context(repo, handoff_home)
    first = filed(ctx, "reviewer", "first")
    kept = submission.supersede(ctx.tdir, first)
    assert kept.name == f"{first.stem}.filed-1.md" and kept.read_text() == "first"
    assert submission.provenance(ctx.tdir, kept, "first", "reviewer", 1,
                                 filed_as=first.name) == "", "its receipt went with it"
    filed(ctx, "reviewer", "second")
    second = submission.supersede(ctx.tdir, first)
    assert second.name == f"{first.stem}.filed-2.md"
    assert submission.filed_before(ctx.tdir, first) == [kept, second]


def test_a_report_that_does_not_count_is_set_aside_never_deleted(
        repo: Path, handoff_home: Path) -> None:
    ctx = new_context(repo, handoff_home)
    report = filed(ctx, "implementer", DONE)
    said = submission.set_aside(ctx.tdir, report, "implementer", 1, "it changed")
    assert said is not None and said["kind"] == "forgery" and not report.exists()
    kept = ctx.tdir.path / str(said["report"])
    assert kept.read_text() == DONE
    assert submission.set_aside(ctx.tdir, report, "implementer", 1, "again") is None, \
        "another process set it aside first"
    voided = filed(ctx, "implementer", DONE)
    assert (submission.set_aside(ctx.tdir, voided, "implementer", 1, "ended", "void")
            or {})["kind"] == "voided"


def test_a_submit_that_is_not_the_peers_own_is_refused_and_logged_as_forgery(
        repo: Path, handoff_home: Path) -> None:
    ctx = new_context(repo, handoff_home)
    done, problems = submission.judge(ctx.ws, ctx.state, "implementer", None, DONE, os.getpid())
    assert done is None and len(problems) == 1
    assert problems[0].startswith("this `handoff submit` is not the implementer's own for round 1")
    [logged] = events(ctx, "forgery")
    assert logged["role"] == "implementer" and logged["report"] == ""
    assert not ctx.tdir.report("implementer", 1).exists(), "nothing is filed"


def test_a_submit_for_a_role_or_round_the_ticket_has_not_is_refused(
        repo: Path, handoff_home: Path) -> None:
    ctx = new_context(repo, handoff_home)
    done, problems = submission.judge(ctx.ws, ctx.state, "tester", None, DONE, os.getpid())
    assert done is None and problems == [
        "this ticket has no role 'tester' (its roles: implementer, reviewer)"]
    done, problems = submission.judge(ctx.ws, ctx.state, "reviewer", None, DONE, os.getpid())
    assert done is None and len(problems) == 1 and events(ctx, "forgery") == [], \
        "refused for the phase before anyone's identity is asked"
