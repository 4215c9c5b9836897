"""handoff.protocol.reports: the shape of the reports peers hand back, every rule, every problem at once."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from handoff.protocol.frontmatter import join
from handoff.protocol.reports import IMPL_SECTIONS, Finding, Report, parse, template
from handoff.role import Kind

SHA = "9fceb02d0ae598e95dc970b74767f19372d61af8"
IMPL_BODY = (
    "## Changes\nFixed add() in calc.py.\n\n"
    "## Verification\nRan the unit tests: 3 passed.\n\n"
    "## Deviations\nNone\n\n"
    "## Open questions\nNone\n"
)
REVIEW_BODY = "## Summary\nRan the tests; add() is still wrong.\n"
FIX = {"file": "calc.py", "line": 2, "reason": "add() subtracts"}


def impl(body: str = IMPL_BODY, drop: tuple[str, ...] = (), **fields: Any) -> str:
    data: dict[str, Any] = {"ticket": "PROJ-1", "role": "implementer", "round": 1,
                            "status": "done", "commit": SHA, **fields}
    return join({k: v for k, v in data.items() if k not in drop}, body)


def review(body: str = REVIEW_BODY, drop: tuple[str, ...] = (), **fields: Any) -> str:
    data: dict[str, Any] = {"ticket": "PROJ-1", "role": "reviewer", "round": 1, "verdict": "fail",
                            "commit": SHA, "must_fix": [FIX], "should_fix": [], **fields}
    return join({k: v for k, v in data.items() if k not in drop}, body)


def problems_of(text: str, role: str, expect: dict[str, Any] | None = None) -> list[str]:
    report, problems = parse(text, role, expect)
    assert report is None, "expected the report to be refused"
    assert problems, "a refused report must say why"
    return problems


def one_problem_about(text: str, role: str, *words: str) -> str:
    problems = problems_of(text, role)
    assert len(problems) == 1, problems
    for word in words:
        assert word in problems[0], (word, problems[0])
    return problems[0]


# ---- implementer -------------------------------------------------------------------------------


def test_a_valid_implementer_report() -> None:
    report, problems = parse(impl(), "implementer")
    assert problems == []
    assert isinstance(report, Report)
    assert report.role == "implementer"
    assert report.status == "done"
    assert report.commit == SHA
    assert report.sections["changes"] == "Fixed add() in calc.py."
    assert report.sections["verification"] == "Ran the unit tests: 3 passed."
    assert set(report.sections) == {s.lower() for s in IMPL_SECTIONS}
    assert report.body == IMPL_BODY


@pytest.mark.parametrize("status", ["done", "partial"])
def test_each_status_is_accepted(status: str) -> None:
    report, problems = parse(impl(status=status), "implementer")
    assert problems == [] and report is not None and report.status == status


def test_a_blocked_report_with_its_question() -> None:
    body = IMPL_BODY.replace("## Open questions\nNone\n",
                             "## Open questions\nShould add() accept floats?\n")
    report, problems = parse(impl(body, status="blocked"), "implementer")
    assert problems == []
    assert report is not None and report.sections["open questions"] == "Should add() accept floats?"


def test_headings_of_levels_one_to_three_and_any_case_count() -> None:
    body = "# Changes\nx\n### VERIFICATION ###\ny\n## deviations\nNone\n## Open Questions\nNone\n"
    report, problems = parse(impl(body), "implementer")
    assert problems == [] and report is not None


@pytest.mark.parametrize("commit", [SHA.upper(), SHA[:7], SHA[:12], f"  {SHA}  "])
def test_commit_forms_that_are_accepted(commit: str) -> None:
    report, problems = parse(impl(commit=commit), "implementer")
    assert problems == []
    assert report is not None and report.commit == commit.strip().lower()


@pytest.mark.parametrize("section", IMPL_SECTIONS)
def test_each_missing_section_is_named(section: str) -> None:
    body = "".join(f"## {s}\ntext\n\n" for s in IMPL_SECTIONS if s != section)
    one_problem_about(impl(body), "implementer", "section", section)


def test_all_missing_sections_are_named_together() -> None:
    problem = one_problem_about(impl("Just some prose, no headings.\n"), "implementer", "section")
    for section in IMPL_SECTIONS:
        assert section in problem


@pytest.mark.parametrize("status", ["finished", "Done", "", None, ["done"], True])
def test_a_bad_status(status: Any) -> None:
    one_problem_about(impl(status=status), "implementer", "'status'")


def test_a_missing_status() -> None:
    one_problem_about(impl(drop=("status",)), "implementer", "'status'")


@pytest.mark.parametrize("commit", ["HEAD", "abc12", "g" * 40, SHA + "a", "", "main", SHA[:6],
                                    "9fceb02 extra", None, ["9fceb02"]])
def test_a_bad_commit(commit: Any) -> None:
    one_problem_about(impl(commit=commit), "implementer", "'commit'")


def test_a_missing_commit() -> None:
    one_problem_about(impl(drop=("commit",)), "implementer", "'commit'")


@pytest.mark.parametrize("answer", ["", "\n\n"])
def test_a_blocked_report_must_ask_its_question(answer: str) -> None:
    body = IMPL_BODY.replace("## Open questions\nNone\n", f"## Open questions\n{answer}")
    one_problem_about(impl(body, status="blocked"), "implementer", "blocked", "Open questions")


def test_text_without_frontmatter_is_one_clear_problem() -> None:
    problems = problems_of(IMPL_BODY, "implementer")
    assert len(problems) == 1
    assert "---" in problems[0]


# ---- reviewer ----------------------------------------------------------------------------------


def test_a_valid_failing_review() -> None:
    text = review(must_fix=[{"file": " calc.py ", "line": 2, "reason": " add() subtracts "},
                            {"file": "calc.py", "line": 0, "reason": "no test for negatives"}],
                  should_fix=[{"file": "README.md", "line": 1, "reason": "typo"}])
    report, problems = parse(text, "reviewer")
    assert problems == []
    assert report is not None
    assert report.role == "reviewer" and report.verdict == "fail" and report.commit == SHA
    assert report.must_fix == (Finding("calc.py", 2, "add() subtracts"),
                               Finding("calc.py", 0, "no test for negatives"))
    assert report.should_fix == (Finding("README.md", 1, "typo"),)
    assert report.sections["summary"] == "Ran the tests; add() is still wrong."


@pytest.mark.parametrize("should_fix", [[], None, [{"file": "a.py", "line": 3, "reason": "naming"}]])
def test_a_valid_passing_review(should_fix: Any) -> None:
    report, problems = parse(review(verdict="pass", must_fix=[], should_fix=should_fix), "reviewer")
    assert problems == []
    assert report is not None and report.verdict == "pass" and report.must_fix == ()


def test_a_passing_review_may_leave_out_the_lists() -> None:
    report, problems = parse(review(verdict="pass", drop=("must_fix", "should_fix")), "reviewer")
    assert problems == [] and report is not None


@pytest.mark.parametrize("verdict", ["approve", "PASS", "", None, True])
def test_a_bad_verdict(verdict: Any) -> None:
    one_problem_about(review(verdict=verdict), "reviewer", "'verdict'")


def test_a_missing_verdict() -> None:
    one_problem_about(review(drop=("verdict",)), "reviewer", "'verdict'")


def test_a_bad_commit_in_a_review() -> None:
    one_problem_about(review(commit="HEAD~1"), "reviewer", "'commit'")


@pytest.mark.parametrize("must_fix", [[], None, "drop"])
def test_fail_needs_a_must_fix(must_fix: Any) -> None:
    text = review(drop=("must_fix",)) if must_fix == "drop" else review(must_fix=must_fix)
    one_problem_about(text, "reviewer", "fail", "must_fix")


def test_pass_cannot_have_a_must_fix() -> None:
    one_problem_about(review(verdict="pass"), "reviewer", "pass", "must_fix")


@pytest.mark.parametrize(("item", "where"), [
    ({"line": 2, "reason": "r"}, "must_fix[0].file"),
    ({"file": "", "line": 2, "reason": "r"}, "must_fix[0].file"),
    ({"file": "   ", "line": 2, "reason": "r"}, "must_fix[0].file"),
    ({"file": 7, "line": 2, "reason": "r"}, "must_fix[0].file"),
    ({"file": "a.py", "reason": "r"}, "must_fix[0].line"),
    ({"file": "a.py", "line": -1, "reason": "r"}, "must_fix[0].line"),
    ({"file": "a.py", "line": "12", "reason": "r"}, "must_fix[0].line"),
    ({"file": "a.py", "line": 1.5, "reason": "r"}, "must_fix[0].line"),
    ({"file": "a.py", "line": True, "reason": "r"}, "must_fix[0].line"),
    ({"file": "a.py", "line": 2}, "must_fix[0].reason"),
    ({"file": "a.py", "line": 2, "reason": " "}, "must_fix[0].reason"),
    ({"file": "a.py", "line": 2, "reason": ["r"]}, "must_fix[0].reason"),
    ("calc.py:2: add() subtracts", "must_fix[0]"),
])
def test_a_wrong_finding_field_is_named(item: Any, where: str) -> None:
    one_problem_about(review(must_fix=[item]), "reviewer", where)


def test_the_index_of_a_wrong_finding_is_named() -> None:
    one_problem_about(review(must_fix=[FIX, FIX, {"file": "a.py", "line": -3, "reason": "r"}]),
                      "reviewer", "must_fix[2].line")


def test_should_fix_findings_are_checked_too() -> None:
    one_problem_about(review(should_fix=[{"file": "a.py", "line": "x", "reason": "r"}]),
                      "reviewer", "should_fix[0].line")


@pytest.mark.parametrize("key", ["must_fix", "should_fix"])
def test_a_finding_list_that_is_not_a_list(key: str) -> None:
    fields: dict[str, Any] = {key: "calc.py:2 is wrong"}
    one_problem_about(review(**fields), "reviewer", f"'{key}'")


def test_a_finding_with_every_field_wrong_reports_each_field() -> None:
    problems = problems_of(review(must_fix=[{"file": "", "line": -1, "reason": ""}]), "reviewer")
    assert len(problems) == 3
    for field in ("file", "line", "reason"):
        assert any(f"must_fix[0].{field}" in p for p in problems), field


# ---- expectations ------------------------------------------------------------------------------

EXPECT = {"ticket": "PROJ-1", "round": 1, "role": "implementer"}


def test_a_report_matching_the_expectations() -> None:
    report, problems = parse(impl(), "implementer", EXPECT)
    assert problems == [] and report is not None


@pytest.mark.parametrize(("key", "value"), [("ticket", "PROJ-2"), ("round", 2), ("role", "reviewer")])
def test_a_mismatch_on_ticket_round_or_role(key: str, value: Any) -> None:
    problems = problems_of(impl(), "implementer", {**EXPECT, key: value})
    assert len(problems) == 1
    assert f"'{key}'" in problems[0]
    assert str(value) in problems[0]


def test_a_mismatch_in_a_review() -> None:
    problems = problems_of(review(round=3), "reviewer",
                           {"ticket": "PROJ-1", "round": 1, "role": "reviewer"})
    assert len(problems) == 1 and "'round'" in problems[0]


def test_a_round_written_as_text_matches() -> None:
    report, problems = parse(impl(round="1"), "implementer", EXPECT)
    assert problems == [] and report is not None


# ---- every problem at once ---------------------------------------------------------------------


def test_every_implementer_problem_is_returned_at_once() -> None:
    text = impl("Only prose.\n", ticket="OTHER-9", round=4, status="finished", commit="HEAD")
    problems = problems_of(text, "implementer", EXPECT)
    joined = "\n".join(problems)
    for needle in ("'ticket'", "'round'", "'status'", "'commit'", "Changes", "Open questions"):
        assert needle in joined, needle
    assert len(problems) >= 5


def test_every_reviewer_problem_is_returned_at_once() -> None:
    text = review(role="implementer", verdict="maybe", commit="nope",
                  must_fix=[{"file": "a.py", "line": "x", "reason": ""}], should_fix="later")
    problems = problems_of(text, "reviewer", {"ticket": "PROJ-1", "round": 1, "role": "reviewer"})
    joined = "\n".join(problems)
    for needle in ("'role'", "'verdict'", "'commit'", "must_fix[0].line", "must_fix[0].reason",
                   "'should_fix'"):
        assert needle in joined, needle
    assert len(problems) == 6


# ---- findings and the template -----------------------------------------------------------------


def test_a_finding_keeps_its_identity_when_its_line_moves() -> None:
    first = Finding("calc.py", 2, "add() subtracts  instead of adding")
    moved = Finding("calc.py", 9, "Add() subtracts instead of\nadding")
    assert first.key() == moved.key()
    assert first.key() != Finding("other.py", 2, first.reason).key()
    assert first.key() != Finding("calc.py", 2, "mul() adds").key()


def test_a_finding_renders_file_line_and_reason() -> None:
    text = Finding("calc.py", 2, "add() subtracts").render()
    assert text.startswith("calc.py:2")
    assert text.endswith("add() subtracts")


@pytest.mark.parametrize("role", ["implementer", "reviewer"])
def test_the_template_is_valid_once_a_sha_is_filled_in(role: str) -> None:
    report, problems = parse(template(role, SHA), role, {"role": role})
    assert problems == []
    assert report is not None and report.commit == SHA


@pytest.mark.parametrize("role", ["implementer", "reviewer"])
def test_the_unfilled_template_is_refused_for_its_commit(role: str) -> None:
    problems = problems_of(template(role), role)
    assert any("'commit'" in p for p in problems)


def test_the_template_frontmatter_is_plain_yaml() -> None:
    head = template("reviewer", SHA).split("---\n")[1]
    data = yaml.safe_load(head)
    assert data["commit"] == SHA and data["verdict"] in ("pass", "fail")


@pytest.mark.parametrize("role", ["implementer", "reviewer"])
@pytest.mark.parametrize("sha", ["1234567", "0123456", "4020593312"])
def test_the_template_is_valid_with_an_all_digit_sha(role: str, sha: str) -> None:
    report, problems = parse(template(role, sha), role)
    assert problems == []
    assert report is not None and report.commit == sha


# ---- the ledger, weakened tests, testers ------------------------------------------------------


def test_a_later_review_answers_earlier_findings_and_weakened_tests() -> None:
    text = review(must_fix=[], verdict="fail",
                  ledger=[{"id": "F1", "status": "fixed", "evidence": "test_add passes"},
                          {"id": "F2", "status": "not fixed", "evidence": "calc.py:9"}],
                  weakened=[{"id": "W1", "answer": "justified", "reason": "plan drops it"}])
    report, problems = parse(text, "reviewer")
    assert problems == [] and report is not None
    assert [(a.id, a.status, a.evidence) for a in report.ledger] == [
        ("F1", "fixed", "test_add passes"), ("F2", "not-fixed", "calc.py:9")]
    assert [a.id for a in report.not_fixed()] == ["F2"], "a not-fixed answer is what fails it"
    assert [(w.id, w.answer) for w in report.weakened] == [("W1", "justified")]


def test_a_pass_cannot_leave_an_earlier_finding_not_fixed_or_a_test_unjustly_weakened() -> None:
    not_fixed = review(verdict="pass", must_fix=[],
                       ledger=[{"id": "F1", "status": "not-fixed", "evidence": "x.py:1"}])
    assert any("verdict 'pass' cannot" in p for p in problems_of(not_fixed, "reviewer"))
    weakened = review(verdict="pass", must_fix=[],
                      weakened=[{"id": "W1", "answer": "unjustified", "reason": "guarded neg"}])
    assert any("verdict 'pass' cannot" in p for p in problems_of(weakened, "reviewer"))


def test_an_unproven_test_is_answered_and_a_pass_cannot_call_one_unjustified() -> None:
    answered = review(must_fix=[], verdict="pass",
                      unproven=[{"id": "P1", "answer": "justified", "reason": "guards F2"}])
    report, problems = parse(answered, "reviewer")
    assert problems == [] and report is not None
    assert [(p.id, p.answer) for p in report.unproven] == [("P1", "justified")]
    unjust = review(verdict="pass", must_fix=[],
                    unproven=[{"id": "P1", "answer": "unjustified", "reason": "vacuous"}])
    assert any("verdict 'pass' cannot" in p for p in problems_of(unjust, "reviewer"))
    failing = review(verdict="fail", must_fix=[],
                     unproven=[{"id": "P1", "answer": "unjustified", "reason": "vacuous"}])
    assert parse(failing, "reviewer")[1] == [], "an unjustified one is what a fail needs"
    wrong = review(verdict="fail", unproven=[{"id": "U1", "answer": "justified", "reason": "x"}])
    assert any("unproven[0].id must be an unproven test's id from your brief, e.g. P1" in p
               for p in problems_of(wrong, "reviewer"))


def test_a_later_review_answers_each_unrequested_change_and_a_pass_has_none_unjustified() -> None:
    asked = review(must_fix=[], verdict="pass",
                   unrequested=[{"id": "U1", "answer": "justified", "reason": "F1 needed it"}])
    report, problems = parse(asked, "reviewer")
    assert problems == [] and report is not None
    assert [(u.id, u.answer) for u in report.unrequested] == [("U1", "justified")]
    unjust = review(verdict="pass", must_fix=[],
                    unrequested=[{"id": "U1", "answer": "unjustified", "reason": "a rewrite"}])
    assert any("unrequested changes or unproven tests answered unjustified" in p
               for p in problems_of(unjust, "reviewer"))
    bad = review(verdict="fail", unrequested=[{"id": "W1", "answer": "justified",
                                               "reason": "x"}])
    assert any("unrequested[0].id must be an unrequested change's id" in p
               for p in problems_of(bad, "reviewer"))
    assert "unrequested:" in template("reviewer", "abc1234", asked={"unrequested": ("U1",)})


@pytest.mark.parametrize(("item", "said"), [
    ({"id": "X1", "status": "fixed", "evidence": "t"}, "ledger[0].id"),
    ({"id": "F1", "status": "maybe", "evidence": "t"}, "status must be fixed or not-fixed"),
    ({"id": "F1", "status": "fixed"}, "evidence must say how you know"),
    ({"id": "F1", "status": "fixed", "evidence": "  "}, "evidence must say how you know"),
    ("F1 fixed", "ledger[0] must be a mapping"),
])
def test_a_bad_ledger_answer_is_named(item: Any, said: str) -> None:
    problems = problems_of(review(ledger=[item]), "reviewer")
    assert any(said in p for p in problems), problems


def test_a_bad_weakened_answer_and_a_bad_criterion_are_named() -> None:
    problems = problems_of(review(weakened=[{"id": "W1", "answer": "fine", "reason": "x"}],
                                  must_fix=[{**FIX, "criterion": 2}]), "reviewer")
    assert any("answer must be justified or unjustified" in p for p in problems)
    assert any("must_fix[0].criterion must name a criterion" in p for p in problems)


def test_a_must_fix_may_name_the_criterion_it_is_about() -> None:
    report, _ = parse(review(must_fix=[{**FIX, "criterion": "AC2"}]), "reviewer")
    assert report is not None and report.must_fix[0].criterion == "AC2"
    assert report.must_fix[0].key() == Finding("calc.py", 9, "add()  Subtracts").key()


def test_a_testers_report_has_the_implementers_shape() -> None:
    text = impl(role="qa")
    report, problems = parse(text, "tester", {"role": "qa"}, role="qa")
    assert problems == [] and report is not None and report.role == "qa"
    missing = problems_of(impl(role="qa", body="## Changes\nx\n"), "tester")
    assert any("missing section" in p for p in missing)


def test_a_later_reviews_template_is_a_report_once_its_blanks_are_filled() -> None:
    text = template("reviewer", SHA, ("F1", "F2"), {"weakened": ("W1",), "unproven": ("P1", "P2")})
    report, problems = parse(text, "reviewer")
    assert problems == [] and report is not None
    assert [a.id for a in report.ledger] == ["F1", "F2"]
    assert [w.id for w in report.weakened] == ["W1"]
    assert [p.id for p in report.unproven] == ["P1", "P2"]
    assert report.must_fix[0].criterion == "AC1"


def test_the_reviewers_template_asks_for_the_tests_it_ran_which_the_final_report_reads() -> None:
    """The final report shows each reviewer's first `## Tests run` line (handoff.loop.summary):
    the template every brief shows asks for the section, so a real reviewer that follows it
    is credited with the tests it ran."""
    text = template(Kind.REVIEWER, "a" * 40).replace(
        "Each test command you ran, and what it said (e.g. `pytest -q`: 42 passed).",
        "`python -m pytest -q`: 12 passed").replace("must_fix:\n  - file: path/to/file.py\n"
                                                   "    line: 42\n    reason: what is wrong "
                                                   "and why it matters\n", "must_fix: []\n")
    report, problems = parse(text.replace("verdict: fail", "verdict: pass"), Kind.REVIEWER)
    assert problems == [] and report is not None
    assert report.sections["tests run"] == "`python -m pytest -q`: 12 passed"
