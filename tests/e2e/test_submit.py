"""A report is judged on the worktree as it was when `handoff submit` accepted it: what the
peer does after filing (a build file, the next step's first edit) is not a claim of that
report. Only a running orchestrator files a report, and a report changed after its checks does
not count at all."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from handoff.record.ticket import TicketDir
from tests.conftest import commit_file, git, wait_until
from tests.harness import (
    ADD_ONLY,
    FIX_ADD,
    events,
    in_peer,
    paused_ticket,
    plan_text,
    release,
    running,
    spawn,
    state,
    stop_runner,
    ticket_path,
    type_into,
    wait_briefed,
    wait_event,
    write_plan,
)

REPORT = ("---\nstatus: done\ncommit: '{sha}'\n---\n## Changes\nFixed add.\n\n## Verification\n"
          "Ran the tests.\n\n## Deviations\nNone\n\n## Open questions\nNone\n")


def submit_argv(folder: Path, report: Path, role: str = "implementer") -> list[str]:
    return [sys.executable, "-m", "handoff", "submit", str(report), "--dir", str(folder),
            "--role", role, "--round", "1"]


def test_with_no_orchestrator_nothing_is_filed_and_litter_after_an_accepted_submit_is_no_claim(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    plan = plan_text({1: {"edits": [FIX_ADD], "pause_until": "never"}}, test=ADD_ONLY,
                     review=[ADD_ONLY])
    runner = spawn("start", "S-1", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo, log=tmp_path / "first.log")
    try:
        wait_event(handoff_home, "S-1", "launch", role="implementer")
    finally:
        runner.kill()  # SIGKILL: the peers live on, nobody listens for reports
        runner.wait()
    folder = ticket_path(handoff_home, "S-1")
    worktree = repo / ".worktrees" / "S-1" / "implementer"
    calc = (worktree / "calc.py").read_text().replace("return a - b", "return a + b")
    sha = commit_file(worktree, "calc.py", calc, "fix add")
    report = folder / "drafts" / "implementer" / "report.md"  # where the peer may write
    report.write_text(REPORT.format(sha=sha))
    alone = in_peer(handoff_home, "S-1", "implementer", submit_argv(folder, report))
    assert alone.returncode == 1 and "no orchestrator is running" in alone.stderr, alone
    assert not (folder / "impl-report-1.md").exists(), "only an orchestrator files a report"

    runner = spawn("resume", "S-1", "--foreground", cwd=repo, log=tmp_path / "second.log")
    try:
        wait_until(lambda: [e for e in events(handoff_home, "S-1")
                            if e["kind"] == "orchestrator"][1:], 60,
                   "the resumed orchestrator to listen")
        filed = in_peer(handoff_home, "S-1", "implementer", submit_argv(folder, report))
        assert filed.returncode == 0, filed.stderr
        (worktree / "build.log").write_text("written after the report was filed\n")
        assert runner.wait(timeout=120) == 0
    finally:
        stop_runner(runner)
    accepted = [e for e in events(handoff_home, "S-1") if e["kind"] == "submission"]
    assert [e["accepted"] for e in accepted if e["role"] == "implementer"] == [True]
    assert state(handoff_home, "S-1")["phase"] == "passed"
    assert "build.log" in git(worktree, "status", "--porcelain"), \
        "the stray file is still there, never judged"


def test_a_report_changed_after_submit_filed_it_does_not_count(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    """A reviewer's report is taken once its turn is over: filed, then (the orchestrator
    killed meanwhile) changed by hand, it is a forgery when the resumed orchestrator takes it."""
    plan = plan_text({1: {"edits": [FIX_ADD], "reviewer": {"pause_after_report": "done"}}},
                     test=ADD_ONLY, review=[ADD_ONLY])
    runner = spawn("start", "S-2", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo, log=tmp_path / "first.log")
    try:
        wait_event(handoff_home, "S-2", "submitted", role="reviewer", timeout=60)
    finally:
        runner.kill()
        runner.wait()
    folder = ticket_path(handoff_home, "S-2")
    report = folder / "review-report-1.md"
    report.write_text(report.read_text().replace("## Summary", "## Summary\n(edited later)"))
    release(folder, "done")  # the reviewer's turn ends
    runner = spawn("resume", "S-2", "--foreground", cwd=repo, log=tmp_path / "second.log")
    try:
        forged = wait_event(handoff_home, "S-2", "forgery", role="reviewer")
    finally:
        runner.kill()
        runner.wait()
    assert "changed after" in forged["why"]
    kept = folder / forged["report"]
    assert "(edited later)" in kept.read_text(), "the set-aside report is kept as it was"
    assert not [e for e in events(handoff_home, "S-2") if e["kind"] == "submission"
                and e.get("accepted") and e["role"] == "reviewer"], "a changed report was never taken"


def submit_as_implementer(home: Path, ticket: str, folder: Path,
                          report: Path) -> subprocess.CompletedProcess[str]:
    """`handoff submit` typed in the implementer's own terminal."""
    return in_peer(home, ticket, "implementer", submit_argv(folder, report)[:-2])


def test_a_running_orchestrator_judges_the_handed_over_report_once(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    runner, folder, _ = paused_ticket(repo, tmp_path, handoff_home, "S-3")
    try:
        worktree = repo / ".worktrees" / "S-3" / "implementer"
        report = folder / "drafts" / "implementer" / "report.md"
        report.write_text(REPORT.format(sha="0" * 40))
        bad = submit_as_implementer(handoff_home, "S-3", folder, report)
        assert bad.returncode == 1
        assert f"commit {'0' * 40} does not exist" in bad.stderr
        assert not (folder / "impl-report-1.md").exists()

        report.write_text(REPORT.format(sha=git(worktree, "rev-parse", "HEAD")))
        good = submit_as_implementer(handoff_home, "S-3", folder, report)
        assert good.returncode == 0, good.stderr
        assert f"filed as {folder / 'impl-report-1.md'}" in good.stdout
        submitted = wait_event(handoff_home, "S-3", "submitted", role="implementer")
        assert submitted["pid"] > 0, "the kernel named the process that handed it over"
        wait_event(handoff_home, "S-3", "submission", role="implementer", accepted=True)
        assert state(handoff_home, "S-3")["rejections"] == 0, \
            "a report refused at submit is mended by the peer, never counted"
    finally:
        stop_runner(runner)


def a_command_of(home: Path, ticket: str, role: str, seconds: str) -> int:
    """The pid of a command (`sleep seconds`) running in the role's own session, as its CLI
    runs its commands."""
    type_into(home, ticket, role, f"!sleep {seconds}")
    return wait_until(lambda: running("sleep", seconds), 30,
                      f"`sleep {seconds}` to run in the {role}'s session")


def test_a_report_the_orchestrator_judged_is_taken_without_checking_again(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    """Judged once: the orchestrator that filed a report takes it as judged, with no git
    command between the verdict and the acceptance (checked with git made unusable)."""
    from handoff.loop.orchestrator import Orchestrator
    from handoff.loop.workspace import Workspace
    from handoff.protocol.intake import Request

    runner, folder, _ = paused_ticket(repo, tmp_path, handoff_home, "S-4")
    stop_runner(runner)  # this test's own orchestrator takes over the ticket
    command = a_command_of(handoff_home, "S-4", "implementer", "91.4")
    sha = git(repo / ".worktrees" / "S-4" / "implementer", "rev-parse", "HEAD")
    orchestrator = Orchestrator(Workspace.open(handoff_home, TicketDir(folder)))
    mine = orchestrator.desk.judge_handed(Request("implementer", 1, REPORT.format(sha=sha),
                                             "report.md", os.getpid()))
    assert mine.filed is None and "own session" in mine.problems[0], \
        "a process outside the peer's session files nothing"
    verdict = orchestrator.desk.judge_handed(Request("implementer", 1, REPORT.format(sha=sha),
                                                "report.md", command))
    assert verdict.problems == [] and verdict.filed == str(folder / "impl-report-1.md")
    hidden = tmp_path / "no-git"
    hidden.mkdir()
    os.environ["PATH"], saved = str(hidden), os.environ["PATH"]
    try:
        taken = orchestrator.desk.take_report("implementer", 1, folder / "impl-report-1.md")
    finally:
        os.environ["PATH"] = saved
    assert taken is not None and taken.commit == sha


def test_a_fail_a_reviewer_filed_stands_whatever_it_files_after_in_the_same_turn(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    """Filed from the reviewer's own session: a fail, then a pass. Taken at the end of its
    turn, the fail is the verdict, and what replaced it is kept beside the record."""
    from handoff.loop.orchestrator import Orchestrator
    from handoff.loop.workspace import Workspace
    from handoff.protocol.intake import Request

    plan = plan_text({1: {"edits": [FIX_ADD], "reviewer": {"pause_until": "never"}}},
                     test=ADD_ONLY, review=[ADD_ONLY])
    runner = spawn("start", "S-5", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo, log=tmp_path / "S-5.log")
    try:
        wait_briefed(handoff_home, "S-5", "reviewer")
    finally:
        stop_runner(runner)  # this test's own orchestrator takes over the ticket
    folder = ticket_path(handoff_home, "S-5")
    command = a_command_of(handoff_home, "S-5", "reviewer", "92.7")
    sha = state(handoff_home, "S-5")["commits"]["1"]
    orchestrator = Orchestrator(Workspace.open(handoff_home, TicketDir(folder)))
    fail = ("---\nverdict: fail\ncommit: '{sha}'\nmust_fix:\n  - file: calc.py\n    line: 2\n"
            "    reason: the sum is wrong\nshould_fix: []\n---\n## Summary\nBroken.\n")
    passed = "---\nverdict: pass\ncommit: '{sha}'\nmust_fix: []\nshould_fix: []\n---\nFine.\n"
    for text in (fail, passed):
        verdict = orchestrator.desk.judge_handed(Request("reviewer", 1, text.format(sha=sha),
                                                    "r.md", command))
        assert verdict.problems == [], verdict.problems
    report = folder / "review-report-1.md"
    assert "verdict: pass" in report.read_text(), "the later one is filed"
    taken = orchestrator.desk.take_report("reviewer", 1, report)
    assert taken is not None and taken.verdict == "fail"
    assert "verdict: fail" in report.read_text()
    kept = [e for e in events(handoff_home, "S-5") if e["kind"] == "verdict-kept"]
    assert len(kept) == 1 and kept[0]["verdict"] == "fail"
    assert "verdict: pass" in (folder / "review-report-1.filed-2.md").read_text()
