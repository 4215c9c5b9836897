"""handoff.loop.summary: the final report, 150 words or fewer, never without outcome and branch@commit."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest

from handoff.loop.summary import WORD_LIMIT, clip_words, final_report, words

SHA = "9fceb02d0ae598e95dc970b74767f19372d61af8"
BRANCH = "handoff/PROJ-7"


def report(*, outcome: str = "passed", reason: str = "", commit: str = SHA,
           changed: Sequence[tuple[str, int, int]] = (("calc.py", 2, 2),),
           verified: Sequence[str] = ("gate `make test` pass (orchestrator)",),
           findings: Sequence[str] = (), **extra: Any) -> str:
    args: dict[str, Any] = {"ticket": "PROJ-7", "outcome": outcome, "reason": reason,
                            "branch": BRANCH, "commit": commit, "rounds": 2, "reviews": 2,
                            "bounces": 1, "changed": changed, "verified": verified,
                            "open_findings": findings, **extra}
    return final_report(**args)


def branch_at_commit(text: str, commit: str) -> bool:
    """branch@<a prefix of the commit of at least 7 hex digits> appears in the text."""
    match = re.search(re.escape(BRANCH) + r"@([0-9a-f]{7,40})", text)
    return match is not None and commit.startswith(match.group(1))


def huge_inputs() -> dict[str, Any]:
    return {
        "reason": "the same must-fix came back: " + "very long explanation " * 120,
        "changed": [(f"src/package/module_{i}/deeply/nested/file_{i}.py", i * 7, i * 3)
                    for i in range(300)],
        "verified": [f"reviewer ran command number {i} with many arguments " + "--flag " * 40
                     for i in range(8)],
        "findings": [f"src/f{i}.py:{i}: this is wrong because " + "reasons " * 80
                     for i in range(40)],
    }


def test_words_counts_whitespace_separated_words() -> None:
    assert words("") == 0
    assert words("one") == 1
    assert words("  one\ttwo\n\nthree  ") == 3


def test_a_small_report_shows_everything() -> None:
    text = report(changed=[("calc.py", 2, 2), ("tests/test_calc.py", 10, 0)],
                  verified=["gate `make test` pass (orchestrator)", "reviewer: `make check` exit 0"],
                  outcome="escalated", reason="still failing after 3 review round(s)",
                  findings=["calc.py:9: neg() returns its argument"])
    assert "PROJ-7" in text
    assert "escalated" in text
    assert "still failing after 3 review round(s)" in text
    assert branch_at_commit(text, SHA)
    assert "calc.py" in text and "tests/test_calc.py" in text
    assert "gate `make test` pass (orchestrator)" in text
    assert "reviewer: `make check` exit 0" in text
    assert "neg() returns its argument" in text
    assert words(text) <= WORD_LIMIT


def test_the_outcome_is_in_the_title() -> None:
    first_line = report(outcome="needs-human").splitlines()[0]
    assert "PROJ-7" in first_line and "needs-human" in first_line


@pytest.mark.parametrize("outcome", ["passed", "escalated", "needs-human"])
def test_huge_inputs_still_fit_in_150_words(outcome: str) -> None:
    text = report(outcome=outcome, **huge_inputs())
    assert words(text) <= WORD_LIMIT
    assert outcome in text
    assert branch_at_commit(text, SHA)


@pytest.mark.parametrize("count", [1, 5, 9, 20, 100])
def test_many_changed_files_fit(count: int) -> None:
    changed = [(f"pkg/module_number_{i}.py", 1, 1) for i in range(count)]
    text = report(changed=changed)
    assert words(text) <= WORD_LIMIT
    assert branch_at_commit(text, SHA)
    assert "pkg/module_number_0.py" in text
    # every file is either named or counted: none is silently dropped
    named = text.count("pkg/module_number_")
    more = re.search(r"(\d+) more", text)
    assert named + (int(more.group(1)) if more else 0) == count


@pytest.mark.parametrize("count", [1, 3, 6, 30])
def test_many_long_findings_fit(count: int) -> None:
    findings = [f"src/f{i}.py:{i + 1}: because " + "it is quite wrong " * 30
                for i in range(count)]
    text = report(outcome="escalated", findings=findings)
    assert words(text) <= WORD_LIMIT
    assert "escalated" in text
    assert branch_at_commit(text, SHA)
    assert "src/f0.py" in text
    named = len(re.findall(r"src/f\d+\.py", text))
    more = re.search(r"(\d+) more", text)
    assert named + (int(more.group(1)) if more else 0) == count


def test_a_very_long_reason_is_shortened_but_the_outcome_stays() -> None:
    text = report(outcome="escalated", reason="word " * 500)
    assert words(text) <= WORD_LIMIT
    assert "escalated" in text
    assert branch_at_commit(text, SHA)


def test_without_a_commit_the_branch_is_still_named() -> None:
    text = report(outcome="needs-human", commit="", changed=[], verified=[])
    assert BRANCH in text
    assert "needs-human" in text
    assert words(text) <= WORD_LIMIT


def test_nothing_changed_and_nothing_verified_is_said_plainly() -> None:
    text = report(changed=[], verified=[])
    assert words(text) <= WORD_LIMIT
    assert branch_at_commit(text, SHA)


def test_the_report_keeps_its_lines_when_dropping_files_and_findings_would_fit() -> None:
    # Clipped to 8 words each and without files or findings, this fits in 150 words.
    verified = [" ".join(["word"] * 10) + f" {i}" for i in range(12)]
    text = report(outcome="escalated", reason="r " * 100,
                  changed=[(f"src/f{i}.py", 1, 2) for i in range(30)], verified=verified,
                  findings=["x.py:3: " + "long " * 50] * 6)
    assert words(text) <= WORD_LIMIT
    lines = text.splitlines()
    assert any(line.startswith("**Outcome:**") for line in lines)
    assert any(line.startswith("**Branch:**") and branch_at_commit(line, SHA) for line in lines)


def test_weakened_tests_are_named_however_little_room_is_left() -> None:
    weakened = [f"tests/test_{i}.py:{i}: test removed: `test_{i}`" for i in range(12)]
    roomy = report(weakened=weakened[:2])
    assert "**Tests weakened:**" in roomy and "test_1.py:1: test removed" in roomy
    squeezed = report(outcome="escalated", weakened=weakened, **huge_inputs())
    assert words(squeezed) <= WORD_LIMIT
    assert "**Tests weakened:**" in squeezed and "and 11 more" in squeezed
    assert "weakened" not in report()


def test_a_text_is_clipped_to_its_words_and_marked_only_when_cut() -> None:
    assert clip_words("ran   python -m pytest", 14) == "ran   python -m pytest", "kept as it is"
    assert clip_words("one two three four", 2) == "one two …"
    assert clip_words("one two three", 0) == "one two three", "0: no limit"
    assert clip_words("one two", 2) == "one two"


def test_a_ticket_from_an_issue_names_it_even_when_the_report_is_cut() -> None:
    issue = "https://github.com/team/calc/issues/7"
    assert f"**Issue:** {issue}" in report(source=issue)
    assert f"**Issue:** {issue}" in report(source=issue, **huge_inputs())
    assert "**Issue:**" not in report()
