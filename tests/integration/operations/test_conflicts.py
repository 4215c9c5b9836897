"""Tickets that change the same files, seen before the merge: `handoff conflicts`, the overlap in
`status` and the final report, the implementer told what changed under it, and `finish`
refusing a merge that would conflict with nothing changed."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from handoff.errors import EXIT_NOT_MERGED
from handoff.phases import Phase
from tests.conftest import git, wait_until
from tests.harness import (
    ADD_ONLY,
    ALL_TESTS,
    FIX_ADD,
    FIX_MUL,
    FIX_NEG,
    handoff,
    pane_screen,
    plan_text,
    release,
    spawn,
    state,
    stop_runner,
    ticket_path,
    wait_phase,
    write_plan,
)

#: the same line as FIX_ADD, written otherwise: two branches that both do it conflict
ADD_OTHERWISE = {"file": "calc.py", "replace": "return a - b", "with": "return b + a"}


def run(repo: Path, tmp_path: Path, ticket: str, rounds: dict[int, dict[str, object]]) -> None:
    plan = write_plan(tmp_path, plan_text(rounds, test=ALL_TESTS), f"{ticket}.md")
    done = handoff("start", ticket, "--plan", str(plan), "--yes", "--foreground", cwd=repo,
                   timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def snapshot(repo: Path) -> tuple[str, str, str, str]:
    """Every branch's head, the checkout's status, and the index's bytes: what finish must
    leave as it was when it refuses."""
    index = hashlib.sha256((repo / ".git" / "index").read_bytes()).hexdigest()
    return (git(repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads"),
            git(repo, "status", "--porcelain", "--untracked-files=all"),
            git(repo, "rev-parse", "HEAD"), index)


def test_overlapping_tickets_are_seen_told_and_a_conflicting_finish_is_refused(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    # C starts first and waits in its first review, its branch changing calc.py
    plan = write_plan(tmp_path, plan_text(
        {1: {"edits": [FIX_ADD], "reviewer": {"pause_until": "go"}},
         2: {"edits": [FIX_MUL, FIX_NEG]}}, test=ADD_ONLY, review=[ALL_TESTS]), "C.md")
    runner = spawn("start", "C", "--plan", str(plan), "--yes", "--foreground", cwd=repo,
                   log=tmp_path / "C.log")
    try:
        folder = wait_until(lambda: next(iter(handoff_home.glob("*/C/state.json")), None)).parent
        wait_until(lambda: "paused until" in pane_screen(folder, "reviewer",
                                                         state(handoff_home, "C")),
                   timeout=60, what="C's reviewer to pause")
        # meanwhile B fixes add its own way and is merged into main; then A, from the new main,
        # touches calc.py too and passes
        run(repo, tmp_path, "B", {1: {"edits": [ADD_OTHERWISE, FIX_MUL, FIX_NEG]}})
        assert handoff("finish", "B", cwd=repo).returncode == 0
        run(repo, tmp_path, "A", {1: {"edits": [
            {"file": "calc.py", "replace": "    return -a\n", "with": "    return 0 - a\n"}]}})
        shown = handoff("status", "A", cwd=repo).stdout
        assert "overlaps: C also changes calc.py" in shown, shown
        release(folder, "go")
        wait_phase(handoff_home, "C", "passed", "escalated", "needs-human", timeout=90)
        # the phase is in state.json a moment before the final report: the run ends after it
        runner.wait(timeout=60)
    finally:
        stop_runner(runner)
    current = state(handoff_home, "C")
    assert current["phase"] == Phase.PASSED and current["touched"] == ["calc.py"]

    # C's second round was told, before it wrote a line, what changed under it
    brief = (folder / "inbox" / "implementer" / "brief-2.md").read_text()
    told = brief.split("## Other tickets change your files", 1)[1]
    assert "- A (passed) also changes calc.py: it passed review and will be merged" in told
    assert "- main changed since this ticket started, in files you change too: calc.py" in told
    final = (folder / "final-report.md").read_text()
    assert "**Overlaps:**" in final and "A (passed) also changes calc.py" in final

    found = handoff("conflicts", "--json", cwd=repo)
    assert found.returncode == 1, found.stdout + found.stderr
    survey = json.loads(found.stdout)
    by_ticket = {t["ticket"]: t for t in survey["tickets"]}
    assert set(by_ticket) == {"A", "C"}, "B is merged and closed"
    assert by_ticket["C"]["conflicts"] == ["calc.py"] and by_ticket["A"]["conflicts"] is None
    assert survey["overlaps"] == [{"tickets": ["A", "C"], "files": ["calc.py"],
                                   "conflicts": ["calc.py"], "drivers": {}}]
    said = handoff("conflicts", cwd=repo).stdout
    assert "CONFLICTS with main at its head now, in calc.py" in said
    assert "overlap A ~ C: both change calc.py: CONFLICT in calc.py" in said

    before = snapshot(repo)
    refused = handoff("finish", "C", cwd=repo)
    assert refused.returncode == EXIT_NOT_MERGED, refused.stdout + refused.stderr
    assert "handoff/C does not merge cleanly into main" in refused.stderr
    assert "conflicts in calc.py" in refused.stderr
    assert snapshot(repo) == before, "the checkout, the branches and the index as they were"
    assert state(handoff_home, "C")["phase"] == Phase.PASSED


def test_a_ticket_alone_has_no_conflict_and_says_so(repo: Path, tmp_path: Path,
                                                    handoff_home: Path) -> None:
    run(repo, tmp_path, "S", {1: {"edits": [FIX_ADD, FIX_MUL, FIX_NEG]}})
    found = handoff("conflicts", cwd=repo)
    assert found.returncode == 0, found.stdout + found.stderr
    assert "merges cleanly into main" in found.stdout and "overlap" not in found.stdout
    assert json.loads(handoff("status", "S", "--json", cwd=repo).stdout)[0]["overlaps"] == {}
    assert ticket_path(handoff_home, "S").is_dir()
