"""handoff.loop.handing: what each role is handed for a round, on a real ticket and repository
(no peer, no tmux)."""

from __future__ import annotations

from pathlib import Path

from handoff.loop import handing
from handoff.loop.context import TicketContext
from handoff.phases import Phase
from handoff.protocol.ledger import Entry, Ledger
from tests.conftest import commit_file
from tests.loop_tickets import (
    ADD_FIXED,
    TESTER,
    at_round,
    implementer_commit,
    new_context,
    new_ticket,
    team,
)

OPEN = Entry("F1", 1, ("reviewer",), "calc.py", 5, "mul() adds")
MUL_FIXED = ADD_FIXED.replace("    return a + b\n\n\ndef neg", "    return a * b\n\n\ndef neg")

# ---- elsewhere: what other tickets did to this one's files -----------------------------------


def touching(repo: Path, home: Path, *files: str) -> TicketContext:
    ctx = new_context(repo, home)
    ctx.state.touched = list(files)
    return ctx


def test_nothing_is_said_while_the_ticket_has_changed_no_file(repo: Path,
                                                             handoff_home: Path) -> None:
    ctx = new_context(repo, handoff_home)
    commit_file(repo, "calc.py", ADD_FIXED, "main mends add()")
    assert handing.elsewhere(ctx) == []


def test_the_base_branch_moving_in_a_file_the_ticket_changes_is_named(
        repo: Path, handoff_home: Path) -> None:
    ctx = touching(repo, handoff_home, "calc.py", "tests/test_calc.py")
    commit_file(repo, "calc.py", ADD_FIXED, "main mends add()")
    commit_file(repo, "README.md", "read me\n", "main adds a README")

    [(title, text)] = handing.elsewhere(ctx)
    assert title == "Other tickets change your files"
    assert "- main changed since this ticket started, in files you change too: calc.py\n" in text
    assert "README.md" not in text and "test_calc.py" not in text


def test_the_base_branch_moving_only_in_other_files_is_not_said(repo: Path,
                                                                handoff_home: Path) -> None:
    ctx = touching(repo, handoff_home, "calc.py")
    commit_file(repo, "README.md", "read me\n", "main adds a README")
    assert handing.elsewhere(ctx) == []


def test_a_passed_ticket_that_changes_the_same_file_is_named(repo: Path,
                                                             handoff_home: Path) -> None:
    other = new_ticket(repo, handoff_home, ticket="T-0")
    done = other.state()
    done.touched = ["calc.py"]
    other.tdir.move(done, Phase.PASSED, "every reviewer passed it")
    ctx = touching(repo, handoff_home, "calc.py")

    [(_, text)] = handing.elsewhere(ctx)
    assert "- T-0 (passed) also changes calc.py: it passed review and will be merged" in text


# ---- the briefs' feedback ---------------------------------------------------------------------


def test_the_implementers_brief_carries_only_its_own_rounds_feedback(
        repo: Path, handoff_home: Path) -> None:
    ctx = new_context(repo, handoff_home)
    ctx.state.round = 2
    ctx.state.feedback = {"round": 2, "findings": [OPEN.fields()],
                          "notes": [["The verification gate failed", "boom at abc1234"]]}
    brief = handing.implementer_brief(ctx, 2)
    assert "boom at abc1234" in brief and "mul() adds" in brief
    assert "boom at abc1234" not in handing.implementer_brief(ctx, 3), "an older round's"


def test_a_testers_brief_carries_a_persons_answer_and_no_other_note(
        repo: Path, handoff_home: Path) -> None:
    team(repo, qa=TESTER)
    ctx = new_context(repo, handoff_home)
    at_round(ctx, implementer_commit(ctx, "calc.py", ADD_FIXED))
    ctx.state.feedback = {"round": 1, "notes": [["A person answered", "Use pytest."],
                                                ["The verification gate failed", "boom"]]}
    brief = handing.tester_brief(ctx, "qa", 1, ctx.hand_diff(1))
    assert "Use pytest." in brief and "boom" not in brief


# ---- review_of: what every reviewer is shown -----------------------------------------------------


def test_the_first_review_shows_no_increment(repo: Path, handoff_home: Path) -> None:
    ctx = new_context(repo, handoff_home)
    commit = implementer_commit(ctx, "calc.py", ADD_FIXED)
    at_round(ctx, commit)
    review = handing.review_of(ctx, 1, commit, ctx.hand_diff(1))
    assert (review.commit, review.diff, review.increment) == (commit, ctx.tdir.diff(1), None)
    assert review.earlier == () and review.weakened == ()
    assert ctx.state.weakened == {"1": []}, "what it weakened is looked for once and kept"


def test_a_later_review_shows_the_increment_since_the_last_review_and_the_open_findings(
        repo: Path, handoff_home: Path) -> None:
    ctx = new_context(repo, handoff_home)
    first = implementer_commit(ctx, "calc.py", ADD_FIXED)
    at_round(ctx, first)
    ctx.state.verdicts = {"1": "fail"}
    ctx.state.ledger = Ledger((OPEN,)).records()
    ctx.state.round = 2
    second = implementer_commit(ctx, "calc.py", MUL_FIXED)
    at_round(ctx, second)

    review = handing.review_of(ctx, 2, second, ctx.hand_diff(2))

    assert review.increment == ctx.tdir.diff_since(2, 1)
    increment = review.increment.read_text()
    assert "-    return a + b\n+    return a * b\n" in increment
    assert "return a - b" not in increment, "round 1's change was reviewed already"
    assert "return a - b" in ctx.tdir.diff(2).read_text(), "the whole diff is still handed"
    assert [e.id for e in review.earlier] == ["F1"]
    assert "diff-2-since-1.patch" in ctx.state.handed, "handed as handoff's own file"
