"""handoff.verdicts: the words a report and a gate judge with, as the records carry them."""

from __future__ import annotations

from handoff.verdicts import STATUSES, VERDICTS, GateOutcome, Status, Verdict


def test_the_words_are_the_ones_reports_and_records_carry() -> None:
    assert VERDICTS == ("pass", "fail")
    assert STATUSES == ("done", "blocked", "partial")
    assert [str(g) for g in GateOutcome] == ["pass", "fail", "skipped"]


def test_a_word_read_back_is_the_same_member_and_compares_as_text() -> None:
    assert Verdict("pass") is Verdict.PASS and str(Verdict.PASS) == "pass"
    assert Status("blocked") is Status.BLOCKED and f"{Status.PARTIAL}" == "partial"
    assert GateOutcome("skipped") is GateOutcome.SKIPPED
    assert f"{Verdict.PASS}" == f"{GateOutcome.PASS}", "a round's verdict and its gate's alike"
