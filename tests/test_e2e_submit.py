"""A report is judged on the worktree as it was when `handoff submit` accepted it: what the
peer does after filing (a build file, the next step's first edit) is not a claim of that
report. A report changed after its checks does not count at all."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import commit_file, git
from tests.harness import (
    ADD_ONLY,
    FIX_ADD,
    as_peer,
    events,
    handoff,
    plan_text,
    spawn,
    state,
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
