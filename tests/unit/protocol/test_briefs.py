"""handoff.protocol.briefs: what each peer is told each round, and what the reviewer is never told."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from handoff.protocol import briefs, contracts
from handoff.protocol.briefs import BriefContext
from handoff.protocol.frontmatter import split
from handoff.protocol.ledger import Entry
from handoff.protocol.plan import parse
from handoff.role import Kind

SHA = "9fceb02d0ae598e95dc970b74767f19372d61af8"
PLAN = """---
test: python -m unittest -q tests.test_calc.AddTest
review:
  - python -m unittest -q
  - [ruff, check, "src dir"]
---
# Fix the calculator

Make add() add. PLAN-SENTINEL-7f3a
"""
TICKET_TEXT = "# PROJ-7\n\nThe calculator cannot add. TICKET-SENTINEL-91c2\n"
FINDINGS = (Entry("F1", 1, ("reviewer",), "calc.py", 2, "add() still subtracts"),
            Entry("F2", 1, ("reviewer", "security"), "tests/test_calc.py", 0,
                  "no test for negative numbers"))


@pytest.fixture
def tdir(tmp_path: Path) -> Path:
    path = tmp_path / "state" / "repo-0123456789" / "PROJ-7"
    path.mkdir(parents=True)
    (path / "plan.md").write_text(PLAN, encoding="utf-8")
    return path


def context(tdir: Path, role: str, round_: int, plan_text: str = PLAN,
            ticket: str = "PROJ-7", inline: bool = True) -> BriefContext:
    return BriefContext(
        contract=contracts.write(tdir, tdir, role), contract_inline=inline,
        ticket=ticket, role=role, kind=Kind(role), round=round_, ticket_text=TICKET_TEXT,
        plan=parse(plan_text),
        plan_path=tdir / "plan.md", worktree=tdir.parent / "worktrees" / role,
        submit=("/opt/handoff/bin/handoff", "submit", "--dir", str(tdir), "--role", role),
        draft=tdir / "drafts" / role / f"{role}-{round_}.md",
    )


def submit_argv(ctx: BriefContext) -> list[str]:
    return [*ctx.submit, str(ctx.draft)]


# ---- implementer -------------------------------------------------------------------------------


def test_implementer_brief_frontmatter(tdir: Path) -> None:
    ctx = context(tdir, "implementer", 1)
    fields, _ = split(briefs.implementer(ctx, "handoff/PROJ-7"))
    assert fields["ticket"] == "PROJ-7"
    assert fields["role"] == "implementer"
    assert fields["round"] == 1
    assert fields["worktree"] == str(ctx.worktree)
    assert fields["branch"] == "handoff/PROJ-7"
    assert fields["plan"] == str(tdir / "plan.md")
    assert fields["report"] == str(ctx.draft)
    assert fields["submit"] == submit_argv(ctx)
    assert fields["test"] == ["python", "-m", "unittest", "-q", "tests.test_calc.AddTest"]
    assert fields["findings"] == []


def test_implementer_brief_body_has_everything_to_work(tdir: Path) -> None:
    ctx = context(tdir, "implementer", 1)
    _, body = split(briefs.implementer(ctx, "handoff/PROJ-7"))
    assert "PROJ-7" in body
    assert "TICKET-SENTINEL-91c2" in body
    assert "PLAN-SENTINEL-7f3a" in body
    assert str(ctx.worktree) in body
    assert "handoff/PROJ-7" in body
    assert "round 1" in body
    assert shlex.join(submit_argv(ctx)) in body
    assert "python -m unittest -q tests.test_calc.AddTest" in body
    assert contracts.compose(tdir, "implementer").strip() in body


def test_round_one_lists_no_findings(tdir: Path) -> None:
    _, body = split(briefs.implementer(context(tdir, "implementer", 1), "handoff/PROJ-7"))
    for finding in FINDINGS:
        assert finding.reason not in body


@pytest.mark.parametrize("round_", [2, 3])
def test_later_rounds_carry_the_reviewers_findings(round_: int, tdir: Path) -> None:
    ctx = context(tdir, "implementer", round_)
    fields, body = split(briefs.implementer(ctx, "handoff/PROJ-7", FINDINGS))
    assert fields["round"] == round_
    assert f"round {round_}" in body
    assert fields["findings"] == [f.render() for f in FINDINGS]
    for finding in FINDINGS:
        assert finding.file in body
        assert finding.reason in body


def test_notes_become_sections_of_the_brief(tdir: Path) -> None:
    ctx = context(tdir, "implementer", 2)
    brief = briefs.implementer(ctx, "handoff/PROJ-7",
                               notes=[("The verification gate failed", "2 tests failed: NOTE-SENTINEL")])
    _, body = split(brief)
    assert "The verification gate failed" in body
    assert "NOTE-SENTINEL" in body


def test_a_plan_without_a_test_command(tdir: Path) -> None:
    ctx = context(tdir, "implementer", 1, plan_text="# Just prose\n")
    fields, body = split(briefs.implementer(ctx, "handoff/PROJ-7"))
    assert fields["test"] is None
    assert "Just prose" in body


def test_a_numeric_looking_ticket_stays_text(tdir: Path) -> None:
    fields, _ = split(briefs.implementer(context(tdir, "implementer", 1, ticket="007"), "handoff/007"))
    assert fields["ticket"] == "007"
    assert fields["branch"] == "handoff/007"


def test_a_plan_with_its_own_frontmatter_does_not_leak_into_the_briefs(tdir: Path) -> None:
    for brief in (briefs.implementer(context(tdir, "implementer", 1), "handoff/PROJ-7"),
                  briefs.reviewer(context(tdir, "reviewer", 1),
                                  briefs.Review(SHA, tdir / "diff-1.patch"))):
        fields, body = split(brief)
        assert "review" not in fields  # the plan's key, not the brief's
        assert fields["ticket"] == "PROJ-7"
        assert "PLAN-SENTINEL-7f3a" in body


def test_a_draft_path_with_spaces_is_quoted_in_the_submit_command(tmp_path: Path) -> None:
    folder = tmp_path / "my state" / "PROJ-7"
    folder.mkdir(parents=True)
    ctx = context(folder, "implementer", 1)
    _, body = split(briefs.implementer(ctx, "handoff/PROJ-7"))
    command = shlex.join(submit_argv(ctx))
    assert command in body
    assert shlex.split(command) == submit_argv(ctx)


# ---- reviewer ----------------------------------------------------------------------------------


def test_reviewer_brief_frontmatter(tdir: Path) -> None:
    ctx = context(tdir, "reviewer", 2)
    diff = tdir / "diff-2.patch"
    fields, _ = split(briefs.reviewer(ctx, briefs.Review(SHA, diff)))
    assert fields["ticket"] == "PROJ-7"
    assert fields["role"] == "reviewer"
    assert fields["round"] == 2
    assert fields["commit"] == SHA
    assert fields["diff"] == str(diff)
    assert fields["plan"] == str(tdir / "plan.md")
    assert fields["worktree"] == str(ctx.worktree)
    assert fields["report"] == str(ctx.draft)
    assert fields["submit"] == submit_argv(ctx)
    assert fields["tests"] == [["python", "-m", "unittest", "-q"], ["ruff", "check", "src dir"]]


def test_reviewer_brief_body_has_plan_commit_diff_and_tests(tdir: Path) -> None:
    ctx = context(tdir, "reviewer", 2)
    diff = tdir / "diff-2.patch"
    _, body = split(briefs.reviewer(ctx, briefs.Review(SHA, diff)))
    assert "PLAN-SENTINEL-7f3a" in body
    assert "TICKET-SENTINEL-91c2" in body
    assert SHA in body
    assert str(diff) in body
    assert str(ctx.worktree) in body
    assert "python -m unittest -q" in body
    assert shlex.join(["ruff", "check", "src dir"]) in body
    assert shlex.join(submit_argv(ctx)) in body
    assert contracts.compose(tdir, "reviewer").strip() in body


@pytest.mark.parametrize("role", ["implementer", "reviewer"])
def test_a_cli_that_reads_the_contract_itself_gets_only_a_pointer(tdir: Path, role: str) -> None:
    ctx = context(tdir, role, 1, inline=False)
    text = briefs.implementer(ctx, "handoff/PROJ-7") if role == "implementer" \
        else briefs.reviewer(ctx, briefs.Review(SHA, tdir / "diff-1.patch"))
    assert contracts.shipped(role).strip() not in text
    assert f"also at `{ctx.contract}`" in text


def test_reviewer_tests_default_to_the_plans_test_command(tdir: Path) -> None:
    ctx = context(tdir, "reviewer", 1, plan_text="---\ntest: make check\n---\n# Plan\n")
    fields, body = split(briefs.reviewer(ctx, briefs.Review(SHA, tdir / "diff-1.patch")))
    assert fields["tests"] == [["make", "check"]]
    assert "make check" in body


def test_reviewer_brief_never_carries_the_implementer_report(tdir: Path) -> None:
    report = ("---\nstatus: done\ncommit: " + SHA + "\n---\n## Changes\nIMPL-REPORT-SENTINEL-55ab "
              "trust me, it works\n## Verification\nall green\n## Deviations\nNone\n"
              "## Open questions\nNone\n")
    (tdir / "impl-report-1.md").write_text(report, encoding="utf-8")
    (tdir / "drafts" / "implementer").mkdir(parents=True)
    (tdir / "drafts" / "implementer" / "implementer-1.md").write_text(report, encoding="utf-8")
    for round_ in (1, 2):
        brief = briefs.reviewer(context(tdir, "reviewer", round_),
                                briefs.Review(SHA, tdir / f"diff-{round_}.patch"))
        assert "IMPL-REPORT-SENTINEL-55ab" not in brief
        assert "trust me" not in brief
        assert "impl-report" not in brief
        assert "implementer-1.md" not in brief


def test_reviewer_brief_template_names_the_commit_under_review(tdir: Path) -> None:
    _, body = split(briefs.reviewer(context(tdir, "reviewer", 1),
                                    briefs.Review(SHA, tdir / "diff-1.patch")))
    assert f"commit: '{SHA}'" in body


def test_notes_and_findings_are_capped_in_bytes(tdir: Path) -> None:
    """One 5 MB line of feedback (a gate's output, a finding's reason) does not make a 5 MB brief."""
    ctx = context(tdir, "implementer", 2)
    flood = "NOTE-START " + "x" * 5_000_000 + " NOTE-END"
    huge = Entry("F1", 1, ("reviewer",), "calc.py", 3,
                 "REASON-START " + "y" * 5_000_000 + " REASON-END")
    text = briefs.implementer(ctx, "handoff/PROJ-7", [huge],
                              notes=[("The verification gate failed", flood)])
    assert len(text.encode()) < briefs.NOTE_LIMIT + 3 * briefs.FINDING_LIMIT + 20_000
    for kept in ("NOTE-START", "NOTE-END", "REASON-START", "REASON-END", "bytes cut by handoff"):
        assert kept in text
    fields, _ = split(text)
    findings = fields["findings"]
    assert isinstance(findings, list)
    assert len(findings[0].encode()) < briefs.FINDING_LIMIT + 100


# ---- the team: testers, more reviewers, the ledger ---------------------------------------------

CRITERIA_PLAN = PLAN + "\n## Acceptance criteria\n\n- add(2, 3) is 5\n- add(-1, 1) is 0\n"


def named(tdir: Path, role: str, kind: Kind, round_: int = 1) -> BriefContext:
    ctx = context(tdir, "reviewer" if kind is Kind.REVIEWER else "implementer", round_,
                  plan_text=CRITERIA_PLAN)
    return BriefContext(**{**ctx.__dict__, "role": role, "kind": kind,
                           "contract": contracts.write(tdir, tdir, role, kind)})


def test_a_tester_brief_names_the_commit_to_build_on_and_every_criterion(tdir: Path) -> None:
    ctx = named(tdir, "qa", Kind.TESTER)
    fields, body = split(briefs.tester(ctx, SHA, tdir / "diff-1.patch"))
    assert (fields["role"], fields["kind"], fields["commit"]) == ("qa", "tester", SHA)
    assert fields["test"] == ["python", "-m", "unittest", "-q", "tests.test_calc.AddTest"]
    assert f"detached at `{SHA}`" in body
    # the plan's own criterion first, then its listed ones, numbered as reviewers name them
    assert "- AC0: the plan's test commands pass" in body
    assert "- AC1: add(2, 3) is 5\n- AC2: add(-1, 1) is 0\n" in body
    assert "# Your role: tester" in body and "You are **qa**, a tester," in body
    assert "status: done" in body and f"commit: '{SHA}'" in body


def test_a_later_review_lists_the_open_findings_attributed_and_asks_an_answer_for_each(
        tdir: Path) -> None:
    answered = Entry("F3", 1, ("security",), "app.py", 9, "token in the log",
                     answers=((2, "reviewer", "not-fixed", "app.py:9 still logs it"),))
    review = briefs.Review(SHA, tdir / "diff-3.patch", tdir / "diff-3-since-2.patch",
                           (*FINDINGS, answered),
                           (("W1", "tests/test_calc.py:14: removed-assertion: `assert x`"),))
    fields, body = split(briefs.reviewer(named(tdir, "security", Kind.REVIEWER, 3), review))
    assert fields["earlier"] == [
        {"id": "F1", "file": "calc.py", "line": 2, "reason": "add() still subtracts"},
        {"id": "F2", "file": "tests/test_calc.py", "line": 0,
         "reason": "no test for negative numbers"},
        {"id": "F3", "file": "app.py", "line": 9, "reason": "token in the log"}]
    assert fields["weakened"] == ["W1"]
    assert fields["increment"] == str(tdir / "diff-3-since-2.patch")
    assert "raised by reviewer, security in round 1" in body
    assert "round 2: reviewer: not-fixed (app.py:9 still logs it)" in body
    assert "answer every one under `ledger:`" in body
    assert "`W1` tests/test_calc.py:14" in body
    # the template has one line to fill for each
    for ident in ("F1", "F2", "F3"):
        assert f"{{id: {ident}, status: fixed" in body
    assert "{id: W1, answer: justified" in body
    assert "criterion: AC1" in body


def test_a_first_review_has_no_ledger_and_no_increment(tdir: Path) -> None:
    fields, body = split(briefs.reviewer(named(tdir, "security", Kind.REVIEWER),
                                         briefs.Review(SHA, tdir / "diff-1.patch")))
    assert fields["earlier"] == [] and fields["weakened"] == [] and "increment" not in fields
    assert "\nledger:" not in body and "Earlier must-fix" not in body


def test_a_review_lists_test_configuration_and_a_smaller_gate_beside_the_weakened_tests(
        tdir: Path) -> None:
    """Entries as handoff.loop.weakened describes them: one answer each, under `weakened:`."""
    shown = (("W1", 'pytest.ini:1: test configuration changed: `new file: +[pytest] | '
                    '+addopts = -k "not test_x"`'),
             ("W2", "the gate: fewer tests ran: 12 tests ran at the base, 9 at this commit "
                    "(3 fewer)"))
    fields, body = split(briefs.reviewer(named(tdir, "reviewer", Kind.REVIEWER),
                                         briefs.Review(SHA, tdir / "diff-1.patch", weakened=shown)))
    assert fields["weakened"] == ["W1", "W2"]
    assert '- `W1` pytest.ini:1: test configuration changed: `new file: +[pytest] | ' \
           '+addopts = -k "not test_x"`' in body
    assert "- `W2` the gate: fewer tests ran: 12 tests ran at the base" in body
    # what a justified configuration change is, so a reviewer can answer one
    assert "every test that ran before still runs and can still fail" in body
    assert "{id: W1, answer: justified" in body and "{id: W2, answer: justified" in body
