"""handoff.protocol.ledger: findings that outlive their round, answered by every later reviewer."""

from __future__ import annotations

from handoff.protocol import ledger
from handoff.protocol.ledger import Entry, Ledger
from handoff.protocol.plan import parse
from handoff.protocol.reports import Answer, Finding, Justified, Report

PLAN = parse("---\ntest: python -m unittest\n---\n# Plan\n\n## Acceptance criteria\n\n"
             "- add() adds\n- neg() negates\n")
BARE = parse("# Plan without tests or criteria\n")


def review(*must: Finding, answers: tuple[Answer, ...] = (),
           weak: tuple[Justified, ...] = ()) -> Report:
    return Report(role="reviewer", commit="abc1234", verdict="fail" if must else "pass",
                  must_fix=must, ledger=answers, answers={"weakened": weak})


def fixed(ident: str) -> Answer:
    return Answer(ident, "fixed", "tests/test_calc.py::test_add")


def not_fixed(ident: str) -> Answer:
    return Answer(ident, "not-fixed", "calc.py:2 still subtracts")


LOG = Finding("app.py", 4, "The token is  logged")
ADD = Finding("calc.py", 2, "add() subtracts")


def test_findings_get_ids_in_the_order_raised_and_the_same_one_twice_is_one_entry() -> None:
    merged = Ledger().merged(1, [("reviewer", review(ADD)),
                                 ("security", review(LOG, Finding("app.py", 4, "the token is logged")))])
    assert [(e.id, e.raised_by, e.file, e.line) for e in merged.entries] == [
        ("F1", ("reviewer",), "calc.py", 2), ("F2", ("security",), "app.py", 4)]
    both = Ledger().merged(1, [("reviewer", review(ADD)), ("security", review(ADD))])
    assert [(e.id, e.raised_by) for e in both.entries] == [("F1", ("reviewer", "security"))]


def test_the_same_reason_on_another_line_is_another_finding() -> None:
    merged = Ledger().merged(1, [("reviewer", review(ADD)),
                                 ("security", review(Finding("calc.py", 9, ADD.reason)))])
    assert [e.id for e in merged.entries] == ["F1", "F2"]


def test_answers_close_or_keep_open_and_new_findings_continue_the_numbering() -> None:
    first = Ledger().merged(1, [("reviewer", review(ADD)), ("security", review(LOG))])
    second = first.merged(2, [("reviewer", review(Finding("calc.py", 7, "neg() is wrong"),
                                                  answers=(fixed("F1"), not_fixed("F2")))),
                              ("security", review(answers=(fixed("F1"), fixed("F2"))))])
    by_id = {e.id: e for e in second.entries}
    assert not by_id["F1"].open, "every reviewer of round 2 said fixed"
    assert by_id["F2"].open, "one reviewer said not-fixed: it stays open"
    assert by_id["F3"].open and by_id["F3"].round == 2
    assert [e.id for e in second.open()] == ["F2", "F3"]
    assert by_id["F2"].answers == ((2, "reviewer", "not-fixed", "calc.py:2 still subtracts"),
                                   (2, "security", "fixed", "tests/test_calc.py::test_add"))


def test_merging_a_round_again_adds_nothing_twice() -> None:
    first = Ledger().merged(1, [("reviewer", review(ADD))])
    reviews = [("reviewer", review(LOG, answers=(not_fixed("F1"),)))]
    once = first.merged(2, reviews)
    assert once.merged(2, reviews) == once
    assert Ledger.of(once.records()) == once


def test_not_fixed_in_two_rounds_is_found_once_in_one_is_not() -> None:
    first = Ledger().merged(1, [("security", review(LOG))])
    once = first.merged(2, [("security", review(LOG.__class__("x.py", 1, "other"),
                                                answers=(not_fixed("F1"),)))])
    assert once.twice_not_fixed() is None
    twice = once.merged(3, [("security", review(answers=(not_fixed("F1"), fixed("F2"))))])
    stuck = twice.twice_not_fixed()
    assert stuck is not None and stuck.id == "F1"


def test_a_later_review_must_answer_every_open_finding() -> None:
    open_ = Ledger().merged(1, [("reviewer", review(ADD)), ("security", review(LOG))]).open()
    problems = ledger.problems(review(answers=(fixed("F1"),)), open_, PLAN, {})
    assert len(problems) == 1
    assert "earlier must-fix F2 app.py:4" in problems[0] and "raised by security" in problems[0]
    assert "{id: F2, status: fixed or not-fixed" in problems[0]
    assert ledger.problems(review(answers=(fixed("F1"), not_fixed("F2"))), open_, PLAN, {}) == []


def test_an_answer_to_a_finding_that_is_not_open_or_given_twice_is_refused() -> None:
    open_ = Ledger().merged(1, [("reviewer", review(ADD))]).open()
    problems = ledger.problems(review(answers=(fixed("F1"), fixed("F1"), fixed("F7"))), open_,
                               PLAN, {})
    assert any("F7, which is not an open finding" in p for p in problems)
    assert any("F1 more than once" in p for p in problems)


def test_a_later_new_must_fix_is_taken_on_a_changed_line_or_near_it() -> None:
    changed = {"calc.py": {10, 11}}
    for line in (10, 11, 8, 14, 0):
        assert ledger.problems(review(Finding("calc.py", line, "x")), [], PLAN, changed) == [], line
    outside = ledger.problems(review(Finding("calc.py", 20, "x")), [], PLAN, changed)
    assert len(outside) == 1 and "on no line the fix rounds changed" in outside[0]
    assert "AC0, AC1, AC2" in outside[0]
    other_file = ledger.problems(review(Finding("app.py", 10, "x")), [], PLAN, changed)
    assert len(other_file) == 1


def test_a_later_new_must_fix_elsewhere_must_name_a_criterion_of_the_plan() -> None:
    named = review(Finding("calc.py", 20, "neg(0) fails", criterion="ac2"))
    assert ledger.problems(named, [], PLAN, {}) == []
    assert ledger.problems(review(Finding("calc.py", 20, "x", criterion="AC0")), [], PLAN,
                           {}) == [], "AC0: the plan's tests pass"
    unknown = ledger.problems(review(Finding("calc.py", 20, "x", criterion="AC9")), [], PLAN,
                              {})
    assert unknown == ["must_fix[0] (calc.py:20).criterion 'AC9' is not a criterion of the plan "
                       "(AC0, AC1, AC2)"]
    bare = ledger.problems(review(Finding("calc.py", 20, "x")), [], BARE, {})
    assert "the plan lists no acceptance criteria" in bare[0]


def test_the_first_review_may_raise_anything() -> None:
    assert ledger.problems(review(Finding("anywhere.py", 999, "x")), [], BARE, None) == []


def test_every_weakened_test_must_be_answered_and_only_those() -> None:
    answered = review(weak=(Justified("W1", "justified", "the plan drops add_old"),
                            Justified("W3", "unjustified", "it guarded neg")))
    problems = ledger.problems(answered, [], PLAN, None, {"weakened": ["W1", "W2"]})
    assert problems == [
        "weakened test W2 is not answered: add {id: W2, answer: justified or unjustified, "
        "reason: …} under 'weakened:'",
        "weakened answers W3, which your brief does not list (W1, W2)"]


def test_an_entry_says_who_raised_it_and_the_last_answers() -> None:
    entry = Entry("F4", 2, ("reviewer", "security"), "app.py", 3, "open redirect", "AC1",
                  ((3, "reviewer", "not-fixed", "app.py:3"), (4, "security", "fixed", "t")))
    assert entry.attributed() == ("F4 app.py:3: open redirect (raised by reviewer, security in "
                                  "round 2, criterion AC1; round 4: security: fixed (t))")
    assert not entry.open and entry.not_fixed_rounds == 1
