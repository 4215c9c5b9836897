"""Whole tickets with a team: reviewers side by side, a tester, the ledger, weakened tests and
scanners, in real tmux and git with the scripted agents, driven through the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from handoff.errors import EXIT_ESCALATED
from tests.conftest import git, wait_until
from tests.harness import (
    ALL_TESTS,
    FIX_ADD,
    FIX_MUL,
    FIX_NEG,
    LOGGED,
    MEND,
    assert_clean_error,
    events,
    handoff,
    in_peer,
    pane_screen,
    plan_text,
    release,
    spawn,
    state,
    stop_runner,
    ticket_path,
    wait_event,
    wait_phase,
    write_plan,
)

SECURITY = {"provider": "scripted", "kind": "reviewer", "focus": "security"}


def team(repo: Path, **roles: dict[str, Any]) -> None:
    """The repository's .handoff.yaml with these roles (in this order) besides the two."""
    (repo / ".handoff.yaml").write_text(yaml.safe_dump(
        {"roles": {"implementer": {"provider": "scripted"}, "reviewer": {"provider": "scripted"},
                   **roles}}, sort_keys=False), encoding="utf-8")
    git(repo, "add", ".handoff.yaml")
    git(repo, "commit", "-q", "-m", "team")


def run(repo: Path, tmp_path: Path, ticket: str, plan: str, *extra: str,
        timeout: float = 150) -> subprocess.CompletedProcess[str]:
    path = write_plan(tmp_path, plan, f"{ticket}.md")
    return handoff("start", ticket, "--plan", str(path), "--yes", "--foreground", *extra,
                   cwd=repo, timeout=timeout)


def kinds(log: list[dict[str, Any]], kind: str, n: int | None = None) -> list[dict[str, Any]]:
    return [e for e in log if e["kind"] == kind and (n is None or e["round"] == n)]


def test_two_reviewers_work_side_by_side_and_the_second_round_carries_the_finding(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    team(repo, security=SECURITY)
    plan = plan_text({1: {"edits": [FIX_ADD, FIX_MUL, FIX_NEG], "security": {"must_fix": [LOGGED]}},
                      2: {"edits": [MEND]}}, test=ALL_TESTS)
    done = run(repo, tmp_path, "TM-1", plan)
    assert done.returncode == 0, done.stdout + done.stderr
    final = state(handoff_home, "TM-1")
    assert final["phase"] == "passed" and final["verdicts"] == {"1": "fail", "2": "pass"}
    assert final["reviewed"] == {"1": {"reviewer": "pass", "security": "fail"},
                                 "2": {"reviewer": "pass", "security": "pass"}}
    assert [r["name"] for r in final["team"]] == ["implementer", "reviewer", "security"]

    log = events(handoff_home, "TM-1")
    # both reviewers were at work at once: each launched before either's report came in
    launched = [i for i, e in enumerate(log) if e["kind"] == "launch" and e["round"] == 1
                and e["role"] in ("reviewer", "security")]
    reported = [i for i, e in enumerate(log) if e["kind"] == "submission" and e["round"] == 1
                and e["role"] in ("reviewer", "security") and e["accepted"]]
    assert len(launched) == 2 and len(reported) == 2 and max(launched) < min(reported)
    # each worked in its own checkout of the commit, and the gate in one of its own
    folder = ticket_path(handoff_home, "TM-1")
    for who in ("reviewer", "security"):
        brief = (folder / "inbox" / who / "brief-1.md").read_text()
        assert f".worktrees/TM-1/{who}`" in brief
    gates = [e for e in kinds(log, "gate") if e.get("result") == "running"]
    assert gates and all(e["commit"] == final["commits"][str(e["round"])] for e in gates)

    brief = (folder / "inbox" / "implementer" / "brief-2.md").read_text()
    assert "F1" in brief and LOGGED["reason"] in brief and "raised by security in round 1" in brief
    assert final["ledger"][0]["raised_by"] == ["security"]
    # round 2's reviewers answered it, and neither saw the other's report
    second = (folder / "inbox" / "reviewer" / "brief-2.md").read_text()
    assert "answer every one under `ledger:`" in second and "F1" in second
    # beside the full diff, what changed since the last review: round 2's mend alone
    since = (folder / "diff-2-since-1.patch").read_text()
    assert "+    return a + b  # not logged" in since and "return a * b" not in since
    assert str(folder / "diff-2-since-1.patch") in second
    assert "security-report-1.md" not in second and "review-report-1.md" not in second
    answers = [e.get("ledger") for e in kinds(log, "verdict", 2)]
    assert answers == [["F1 fixed"], ["F1 fixed"]]
    verdicts = kinds(log, "reviews", 1)
    assert verdicts[0]["verdicts"] == {"reviewer": "pass", "security": "fail"}
    shown = handoff("status", "TM-1", cwd=repo).stdout
    assert "reviews this round: reviewer pass, security pass" in shown, shown
    closed = handoff("close", "TM-1", cwd=repo)
    assert closed.returncode == 0, closed.stderr
    assert not (repo / ".worktrees").exists(), "every worktree of the team, and the gate's"


def test_a_tester_adds_its_commit_to_the_branch_before_the_gate_and_the_review(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    team(repo, tester={"provider": "scripted"})
    extra_test = {"file": "tests/test_more.py", "content": (
        "import unittest\n\nfrom calc import add\n\n\nclass MoreTest(unittest.TestCase):\n"
        "    def test_add_negative(self) -> None:  # AC1\n"
        "        self.assertEqual(add(-1, 1), 0)\n")}
    plan = plan_text({1: {"edits": [FIX_ADD, FIX_MUL, FIX_NEG],
                          "tester": {"edits": [extra_test]}}}, test=ALL_TESTS)
    done = run(repo, tmp_path, "TT-1", plan + "\n## Acceptance criteria\n\n- add adds\n")
    assert done.returncode == 0, done.stdout + done.stderr
    final = state(handoff_home, "TT-1")
    assert final["phase"] == "passed"
    subjects = git(repo, "log", "--format=%s", "handoff/TT-1").splitlines()
    assert subjects[:2] == ["TT-1: round 1 (tester)", "TT-1: round 1"]
    tip = git(repo, "rev-parse", "handoff/TT-1")
    assert final["tested"] == {"1": {"tester": tip}} and final["commits"]["1"] == tip
    assert git(repo, "show", "handoff/TT-1:tests/test_more.py").startswith("import unittest")
    log = events(handoff_home, "TT-1")
    # each peer's brief (a launch on it, or the paste a warm reviewer takes), the branch, the gate
    order = [(e["kind"], e.get("role")) for e in log
             if e["kind"] in ("launch", "brief", "gate", "branch")
             and e.get("result") not in ("running", "base") and e.get("reason") != "warm"]
    # handoff moves the branch to each accepted commit: the implementer's, then the tester's
    assert order == [("launch", "implementer"), ("branch", "implementer"), ("launch", "tester"),
                     ("branch", "tester"), ("gate", ""), ("brief", "reviewer")]
    assert [e["commit"] for e in kinds(log, "gate") if e["result"] == "pass"] == [tip]
    folder = ticket_path(handoff_home, "TT-1")
    brief = (folder / "inbox" / "tester" / "brief-1.md").read_text()
    assert "AC1: add adds" in brief and "# Your role: tester" in brief
    # the implementer's checkout followed its branch
    assert git(repo / ".worktrees" / "TT-1" / "implementer", "rev-parse", "HEAD") == tip
    assert (folder / "tester-report-1.md").is_file()


def test_a_tester_that_changes_the_code_is_refused_and_the_ticket_waits_for_a_person(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    team(repo, qa={"provider": "scripted", "kind": "tester"})
    plan = plan_text({1: {"edits": [FIX_ADD, FIX_MUL, FIX_NEG],
                          "qa": {"edits": [{"file": "calc.py", "content": "x = 1\n"}]}}},
                     test=ALL_TESTS)
    runner = spawn("start", "TT-2", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo, log=tmp_path / "orch.log")
    try:
        wait_event(handoff_home, "TT-2", "nudge", role="qa", timeout=90)
    finally:
        stop_runner(runner)
    screen = pane_screen(ticket_path(handoff_home, "TT-2"), "qa", state(handoff_home, "TT-2"))
    assert "changes files that are not tests (calc.py)" in " ".join(screen.split())
    assert git(repo, "show", "handoff/TT-2:calc.py").startswith("def add"), "never on the branch"


def test_a_later_review_that_leaves_a_finding_unanswered_is_refused_by_submit(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    team(repo, security=SECURITY)
    plan = plan_text({1: {"edits": [FIX_ADD, FIX_MUL, FIX_NEG], "security": {"must_fix": [LOGGED]}},
                      2: {"edits": [MEND], "security": {"pause_until": "go"}}}, test=ALL_TESTS)
    runner = spawn("start", "TL-1", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo, log=tmp_path / "orch.log")
    try:
        folder = ticket_path_when(handoff_home, "TL-1")
        current = wait_until(lambda: state(handoff_home, "TL-1") if "paused until" in
                             pane_screen(folder, "security", state(handoff_home, "TL-1")) and
                             state(handoff_home, "TL-1")["round"] == 2 else None,
                             timeout=90, what="round 2's security reviewer to pause")
        commit = current["commits"]["2"]
        draft = folder / "drafts" / "security" / "security-2.md"  # where the peer may write
        front = {"verdict": "pass", "commit": commit, "must_fix": [], "should_fix": []}
        draft.write_text(f"---\n{yaml.safe_dump(front)}---\n## Summary\nFine.\n")
        submit = [sys.executable, "-m", "handoff", "submit", str(draft), "--dir", str(folder),
                  "--role", "security", "--round", "2"]
        refused = in_peer(handoff_home, "TL-1", "security", submit)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        said = " ".join(refused.stderr.split())
        assert "earlier must-fix F1 calc.py:2: the sum is written to a world-readable log" in said
        assert "{id: F1, status: fixed or not-fixed" in said
        # a new must-fix outside the fix rounds' lines, naming no criterion, is refused too
        front["verdict"] = "fail"
        front["must_fix"] = [{"file": "tests/test_calc.py", "line": 1, "reason": "style"}]
        front["ledger"] = [{"id": "F1", "status": "fixed", "evidence": "calc.py:2 logs nothing"}]
        draft.write_text(f"---\n{yaml.safe_dump(front)}---\n## Summary\nFine.\n")
        refused = in_peer(handoff_home, "TL-1", "security", submit)
        assert refused.returncode == 1 and "on no line the fix rounds changed" in refused.stderr
        front["verdict"], front["must_fix"] = "pass", []
        draft.write_text(f"---\n{yaml.safe_dump(front)}---\n## Summary\nFine.\n")
        taken = in_peer(handoff_home, "TL-1", "security", submit)
        assert taken.returncode == 0, taken.stdout + taken.stderr
        release(folder, "go")
        wait_phase(handoff_home, "TL-1", "passed", timeout=90)
    finally:
        stop_runner(runner)
    verdicts = [e for e in kinds(events(handoff_home, "TL-1"), "verdict", 2)
                if e["role"] == "security"]
    assert verdicts[0]["ledger"] == ["F1 fixed"]


def test_a_finding_answered_not_fixed_twice_escalates(repo: Path, tmp_path: Path,
                                                      handoff_home: Path) -> None:
    team(repo, security=SECURITY)
    plan = plan_text({1: {"edits": [FIX_ADD, FIX_MUL, FIX_NEG], "security": {"must_fix": [LOGGED]}},
                      2: {"edits": [MEND], "security": {"ledger": {"F1": "not-fixed"}}},
                      3: {"edits": [{"file": "NOTES.md", "content": "x\n"}],
                          "security": {"ledger": {"F1": "not-fixed"}}}}, test=ALL_TESTS)
    done = run(repo, tmp_path, "TL-2", plan, "--max-rounds", "5")
    assert done.returncode == EXIT_ESCALATED, done.stdout + done.stderr
    final = state(handoff_home, "TL-2")
    assert final["round"] == 3 and final["reviews"] == 3
    assert "not-fixed in two rounds" in final["reason"] and "F1 calc.py:2" in final["reason"]
    report = (ticket_path(handoff_home, "TL-2") / "final-report.md").read_text()
    assert "Open findings" in report and "raised by security" in " ".join(report.split())


def test_weakened_tests_are_shown_to_every_reviewer_and_in_the_final_report(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    team(repo, security=SECURITY)
    weaken = [{"file": "tests/test_calc.py",
               "replace": "class NegTest(unittest.TestCase):\n    def test_neg(self) -> None:\n"
                          "        self.assertEqual(neg(2), -2)\n", "with": ""},
              {"file": "tests/test_calc.py", "replace": "        self.assertEqual(mul(2, 3), 6)\n",
               "with": "        pass\n"}]
    plan = plan_text({1: {"edits": [FIX_ADD, *weaken]}}, test=ALL_TESTS)
    done = run(repo, tmp_path, "TW-1", plan)
    assert done.returncode == 0, done.stdout + done.stderr
    folder = ticket_path(handoff_home, "TW-1")
    for who in ("reviewer", "security"):
        brief = (folder / "inbox" / who / "brief-1.md").read_text()
        assert "Tests this change weakened" in brief
        assert "test removed: `test_neg`" in brief
        assert "assertion removed: `self.assertEqual(mul(2, 3), 6)`" in brief
    final = (folder / "final-report.md").read_text()
    assert "Tests weakened" in final and "test_neg" in final
    answers = [e.get("weakened") for e in kinds(events(handoff_home, "TW-1"), "verdict", 1)]
    assert answers == [["W1 justified", "W2 justified"]] * 2


def test_scanners_run_after_the_tests_every_one_and_a_failing_required_one_bounces(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    # the scanner lives in the repository: the gate's sandbox shows it its checkout, not /tmp
    (repo / "scan.py").write_text(
        "import pathlib, sys\n"
        "name, *paths = sys.argv[1:]\n"
        "bad = [p for p in paths if 'SECRET' in pathlib.Path(p).read_text()]\n"
        "print(f'{name}: secret in {bad}' if bad else f'{name}: clean')\n"
        "sys.exit(1 if bad else 0)\n")
    py = [sys.executable, "scan.py"]
    (repo / ".handoff.yaml").write_text(yaml.safe_dump({"scanners": [
        {"name": "secrets", "command": [*py, "secrets", "{changed_files}"]},
        {"name": "advice", "command": [*py, "advice", "{changed_files}"], "required": False},
        {"name": "pyonly", "command": [*py, "pyonly", "{changed_py_files}"]}]}, sort_keys=False))
    git(repo, "add", ".handoff.yaml", "scan.py")
    git(repo, "commit", "-q", "-m", "scanners")
    leak = {"file": "NOTES.md", "content": "token SECRET\n"}
    plan = plan_text({1: {"edits": [leak]},
                      2: {"edits": [FIX_ADD, FIX_MUL, FIX_NEG,
                                    {"file": "NOTES.md", "content": "no token\n"}]}},
                     test=ALL_TESTS)
    done = run(repo, tmp_path, "TS-1", plan)
    assert done.returncode == 0, done.stdout + done.stderr
    final = state(handoff_home, "TS-1")
    # round 1: the tests failed too, and every scanner after the failed one still ran; pyonly
    # had no Python file to scan, so no process ran for it (no log)
    assert final["scans"]["1"] == {"secrets": "failed", "advice": "failed", "pyonly": "skipped"}
    assert final["scans"]["2"] == {"secrets": "passed", "advice": "passed", "pyonly": "passed"}
    folder = ticket_path(handoff_home, "TS-1")
    assert "advice: secret in ['NOTES.md']" in (folder / "scan-1-advice.log").read_text()
    assert not (folder / "scan-1-pyonly.log").exists()
    assert "pyonly: clean" in (folder / "scan-2-pyonly.log").read_text()
    brief = (folder / "inbox" / "implementer" / "brief-2.md").read_text()
    assert "The verification gate failed" in brief and "The scanners failed" in brief
    assert "secrets: secret in ['NOTES.md']" in brief, "its output's end"
    assert "advice" not in brief.split("The scanners failed", 1)[1], "optional: never blocks"
    scans = [(e["round"], e["name"], e["state"]) for e in kinds(events(handoff_home, "TS-1"),
                                                                 "scanner")]
    assert scans[:3] == [(1, "secrets", "failed"), (1, "advice", "failed"),
                         (1, "pyonly", "skipped")]


def test_a_required_scanner_that_is_missing_is_refused_at_start_with_the_fix(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    """doctor FAILs it, and start refuses it the same way, before a round is spent (the gate
    used to find it missing after the implementer's whole round); optional, it is only said."""
    def scanners(required: bool) -> None:
        (repo / ".handoff.yaml").write_text(yaml.safe_dump({"scanners": [
            {"name": "gitleaks", "command": ["no-such-scanner-xyz", "detect"],
             "required": required}]}))
        git(repo, "add", ".handoff.yaml")
        git(repo, "commit", "-q", "-m", "scanners")

    scanners(required=True)
    doctor = handoff("doctor", cwd=repo)
    assert "scanner gitleaks" in doctor.stdout and "no-such-scanner-xyz is not installed" in \
        doctor.stdout
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD, FIX_MUL, FIX_NEG]}},
                                          test=ALL_TESTS))
    refused = handoff("start", "TS-2", "--plan", str(plan), "--yes", cwd=repo)
    assert_clean_error(refused, 6, "scanner gitleaks: no-such-scanner-xyz is not installed",
                       "set required: false for scanner gitleaks")
    assert not list(handoff_home.glob("*/TS-2")), "nothing made"
    scanners(required=False)
    done = handoff("start", "TS-2", "--plan", str(plan), "--yes", "--foreground", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert state(handoff_home, "TS-2")["scans"]["1"] == {"gitleaks": "missing"}


def ticket_path_when(home: Path, ticket: str) -> Path:
    return wait_until(lambda: next(iter(home.glob(f"*/{ticket}/state.json")), None),
                      what=f"{ticket}'s folder").parent


def test_a_reviewer_that_stalls_waits_for_a_person_while_the_other_one_reports(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    team(repo, security=SECURITY)
    handoff_home.mkdir(parents=True, exist_ok=True)
    # 5 s: long enough that a busy machine does not make the peer that works look stalled
    (handoff_home / "config.yaml").write_text("stall_timeout: 5\n", encoding="utf-8")
    plan = plan_text({1: {"edits": [FIX_ADD, FIX_MUL, FIX_NEG], "security": {"hang": "once"}}},
                     test=ALL_TESTS)
    runner = spawn("start", "TH-1", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo, log=tmp_path / "orch.log")
    try:
        waiting = wait_phase(handoff_home, "TH-1", "needs-human", timeout=90)
        assert "the security needs a person (stalled)" in waiting["reason"]
        assert "the reviewer" not in waiting["reason"]
        # the other reviewer was not stopped: its verdict came in before the ticket waited
        assert waiting["reviewed"] == {"1": {"reviewer": "pass"}}
        assert waiting["held"] == ["security"]
        shown = handoff("status", "TH-1", cwd=repo).stdout
        assert "reviews this round: reviewer pass" in shown and "next: handoff answer" not in \
            shown, "its orchestrator runs: the reason says what it needs"
        assert handoff("answer", "TH-1", "Try again.", cwd=repo).returncode == 0
        final = wait_phase(handoff_home, "TH-1", "passed", "escalated", timeout=90)
        assert runner.wait(timeout=30) == 0
    finally:
        stop_runner(runner)
    assert final["phase"] == "passed"
    assert final["reviewed"]["1"] == {"reviewer": "pass", "security": "pass"}
    log = events(handoff_home, "TH-1")
    launches = [(e["role"], e["reason"]) for e in log if e["kind"] == "launch"
                and e["role"] in ("reviewer", "security")]
    assert launches == [("reviewer", "warm"), ("security", "warm"), ("security", "answered")], \
        "only the held reviewer was told (and, hung, started afresh); the other never again"
    told = [e["role"] for e in log if e["kind"] == "answer-passed-on"]
    assert told == ["security"]


def test_a_blocked_testers_question_is_answered_in_the_next_rounds_briefs(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    team(repo, tester={"provider": "scripted"})
    extra_test = {"file": "tests/test_more.py", "content": (
        "import unittest\n\nfrom calc import neg\n\n\nclass MoreTest(unittest.TestCase):\n"
        "    def test_neg_zero(self) -> None:\n        self.assertEqual(neg(0), 0)\n")}
    plan = plan_text({1: {"edits": [FIX_ADD, FIX_MUL, FIX_NEG],
                          "tester": {"status": "blocked", "question": "Test floats too?"}},
                      2: {"edits": [{"file": "NOTES.md", "content": "ints only\n"}],
                          "tester": {"edits": [extra_test]}}}, test=ALL_TESTS)
    runner = spawn("start", "TT-3", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo, log=tmp_path / "orch.log")
    try:
        waiting = wait_phase(handoff_home, "TT-3", "needs-human", timeout=90)
        assert waiting["reason"] == "the tester is blocked: Test floats too?"
        assert handoff("answer", "TT-3", "Integers only.", cwd=repo).returncode == 0
        final = wait_phase(handoff_home, "TT-3", "passed", "escalated", timeout=90)
        assert runner.wait(timeout=30) == 0
    finally:
        stop_runner(runner)
    assert final["phase"] == "passed" and final["round"] == 2
    assert list(final["tested"]) == ["2"], "round 1's tester added nothing: it asked"
    folder = ticket_path(handoff_home, "TT-3")
    for who in ("implementer", "tester"):
        brief = (folder / "inbox" / who / "brief-2.md").read_text()
        assert "## A person answered" in brief and "Integers only." in brief, who
