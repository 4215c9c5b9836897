"""A report is judged on the worktree as it was when `handoff submit` accepted it: what the
peer does after filing (a build file, the next step's first edit) is not a claim of that
report. A report changed after its checks does not count at all."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from handoff.record.ticket import TicketDir
from tests.conftest import commit_file, git
from tests.harness import (
    ADD_ONLY,
    FIX_ADD,
    as_peer,
    events,
    handoff,
    paused_ticket,
    plan_text,
    spawn,
    state,
    stop_runner,
    ticket_path,
    wait_event,
    write_plan,
)

REPORT = ("---\nstatus: done\ncommit: '{sha}'\n---\n## Changes\nFixed add.\n\n## Verification\n"
          "Ran the tests.\n\n## Deviations\nNone\n\n## Open questions\nNone\n")


def filed_then_littered(repo: Path, tmp_path: Path, home: Path, ticket: str) -> Path:
    """A ticket whose orchestrator died mid-round; the implementer's work committed and filed
    with `handoff submit` from the implementer's own session; then a stray file left in its
    worktree."""
    plan = plan_text({1: {"edits": [FIX_ADD], "pause_until": "never"}}, test=ADD_ONLY,
                     review=[ADD_ONLY])
    runner = spawn("start", ticket, "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo, log=tmp_path / "first.log")
    try:
        wait_event(home, ticket, "launch", role="implementer")
    finally:
        runner.kill()  # SIGKILL: the peers live on, nobody takes the report yet
        runner.wait()
    folder = ticket_path(home, ticket)
    worktree = repo / ".worktrees" / ticket / "implementer"
    calc = (worktree / "calc.py").read_text().replace("return a - b", "return a + b")
    sha = commit_file(worktree, "calc.py", calc, "fix add")
    report = tmp_path / "report.md"
    report.write_text(REPORT.format(sha=sha))
    filed = handoff("submit", str(report), "--dir", str(folder), "--role", "implementer",
                    "--round", "1", env=as_peer(home, ticket, "implementer"))
    assert filed.returncode == 0, filed.stderr
    (worktree / "build.log").write_text("written after the report was filed\n")
    return folder


def test_litter_after_an_accepted_submit_does_not_count_against_the_report(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    filed_then_littered(repo, tmp_path, handoff_home, "S-1")
    done = handoff("resume", "S-1", "--foreground", cwd=repo, timeout=90)
    assert done.returncode == 0, done.stdout + done.stderr
    accepted = [e for e in events(handoff_home, "S-1") if e["kind"] == "submission"]
    assert [e["accepted"] for e in accepted if e["role"] == "implementer"] == [True]
    assert state(handoff_home, "S-1")["phase"] == "passed"
    assert "build.log" in git(repo / ".worktrees" / "S-1" / "implementer", "status",
                              "--porcelain"), "the stray file is still there, never judged"


def test_a_report_changed_after_submit_filed_it_does_not_count(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    folder = filed_then_littered(repo, tmp_path, handoff_home, "S-2")
    report = folder / "impl-report-1.md"
    report.write_text(report.read_text().replace("Fixed add.", "Fixed add (edited later)."))
    runner = spawn("resume", "S-2", "--foreground", cwd=repo, log=tmp_path / "second.log")
    try:
        forged = wait_event(handoff_home, "S-2", "forgery", role="implementer")
    finally:
        runner.kill()
        runner.wait()
    assert "changed after" in forged["why"]
    kept = folder / forged["report"]
    assert "(edited later)" in kept.read_text(), "the set-aside report is kept as it was"
    assert not [e for e in events(handoff_home, "S-2") if e["kind"] == "submission"
                and e.get("accepted")], "a changed report was never taken"


def submit_as_implementer(home: Path, ticket: str, folder: Path, report: Path,
                          role: str = "implementer") -> tuple[int, subprocess.CompletedProcess[str]]:
    """`handoff submit` typed in the implementer's own terminal; its pid and result."""
    process = subprocess.Popen([sys.executable, "-m", "handoff", "submit", str(report), "--dir",
                                str(folder), "--role", role],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=as_peer(home, ticket, "implementer"))
    out, err = process.communicate(timeout=90)
    return process.pid, subprocess.CompletedProcess(process.args, process.returncode, out, err)


def test_a_running_orchestrator_judges_the_handed_over_report_once(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    runner, folder, _ = paused_ticket(repo, tmp_path, handoff_home, "S-3")
    try:
        worktree = repo / ".worktrees" / "S-3" / "implementer"
        report = tmp_path / "report.md"
        report.write_text(REPORT.format(sha="0" * 40))
        _, bad = submit_as_implementer(handoff_home, "S-3", folder, report)
        assert bad.returncode == 1
        assert f"commit {'0' * 40} does not exist" in bad.stderr
        assert not (folder / "impl-report-1.md").exists()

        report.write_text(REPORT.format(sha=git(worktree, "rev-parse", "HEAD")))
        pid, good = submit_as_implementer(handoff_home, "S-3", folder, report)
        assert good.returncode == 0, good.stderr
        assert f"filed as {folder / 'impl-report-1.md'}" in good.stdout
        submitted = wait_event(handoff_home, "S-3", "submitted", role="implementer")
        assert submitted["pid"] == pid, "the running orchestrator judged it, not the peer"
        wait_event(handoff_home, "S-3", "submission", role="implementer", accepted=True)
        assert state(handoff_home, "S-3")["rejections"] == 0, \
            "a report refused at submit is mended by the peer, never counted"
    finally:
        stop_runner(runner)


def test_a_report_the_orchestrator_judged_is_taken_without_checking_again(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    """Judged once: the orchestrator that filed a report takes it as judged, with no git
    command between the verdict and the acceptance (checked with git made unusable)."""
    from handoff.loop.orchestrator import Orchestrator
    from handoff.loop.workspace import Workspace
    from handoff.protocol.intake import Request

    runner, folder, _ = paused_ticket(repo, tmp_path, handoff_home, "S-4")
    stop_runner(runner)  # this test's own orchestrator takes over the ticket
    seal = as_peer(handoff_home, "S-4", "implementer")["HANDOFF_SEAL"]
    sha = git(repo / ".worktrees" / "S-4" / "implementer", "rev-parse", "HEAD")
    orchestrator = Orchestrator(Workspace.open(handoff_home, TicketDir(folder)))
    verdict = orchestrator.judge_handed(Request("implementer", 1, REPORT.format(sha=sha), seal,
                                                "report.md", os.getpid()))
    assert verdict.problems == [] and verdict.filed == str(folder / "impl-report-1.md")
    hidden = tmp_path / "no-git"
    hidden.mkdir()
    os.environ["PATH"], saved = str(hidden), os.environ["PATH"]
    try:
        taken = orchestrator.take_report("implementer", 1, folder / "impl-report-1.md")
    finally:
        os.environ["PATH"] = saved
    assert taken is not None and taken.commit == sha
