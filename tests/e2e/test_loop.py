"""The whole loop in real tmux and git, with the scripted agents, driven through the CLI."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from handoff.errors import EXIT_ESCALATED
from handoff.operations.closing import close_ticket
from tests.conftest import git, wait_until
from tests.faults.catalog import fault
from tests.harness import (
    ADD_ONLY,
    ALL_TESTS,
    FIX_ADD,
    FIX_MUL,
    FIX_NEG,
    TOUCH_README,
    events,
    handoff,
    paused_ticket,
    plan_text,
    spawn,
    state,
    stop_runner,
    ticket_path,
    tmux_alive,
    wait_phase,
    windows,
    with_inotify_watches,
    worktree_count,
    write_plan,
)

PHASES = {"awaiting-approval", "implementing", "gating", "reviewing", "needs-human", "passed",
          "escalated", "closed"}


@pytest.fixture
def temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The demo's TMPDIR: its throwaway repo lands in the test's own folder."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    return folder


@fault("22", "`handoff demo` (without --keep) makes a repo in the temp dir",
       "the demo removes the repo it made once the ticket is closed",
       "nothing in the temp dir")
def test_demo_runs_the_loop_and_cleans_up(handoff_home: Path, socket: str, temp_dir: Path) -> None:
    done = handoff("demo", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verdict FAIL" in done.stdout and "verdict PASS" in done.stdout
    assert "round 1 fail, round 2 pass" in done.stdout
    assert not tmux_alive(socket)

    assert json.loads(handoff("status", "--json").stdout) == [], "closed: not an open ticket"
    rows = json.loads(handoff("status", "--json", "--all").stdout)
    assert len(rows) == 1
    row = rows[0]
    assert {"ticket", "repo", "phase", "round", "dir"} <= set(row)
    assert row["phase"] == "closed" and row["round"] == 2
    folder = Path(row["dir"])
    assert not Path(row["repo"]).exists() and list(temp_dir.iterdir()) == [], \
        "the demo removes its throwaway repo"
    assert "the demo repo is removed" in done.stdout
    for name in ("inbox/implementer/brief-1.md", "inbox/implementer/brief-2.md",
                 "inbox/reviewer/brief-1.md", "inbox/reviewer/brief-2.md",
                 "impl-report-1.md", "impl-report-2.md", "review-report-1.md",
                 "review-report-2.md", "diff-1.patch", "diff-2.patch", "gate-1.log",
                 "gate-2.log", "final-report.md", "events.jsonl", "plan.md", "ticket.md"):
        assert (folder / name).is_file(), name
    assert "verdict: fail" in (folder / "review-report-1.md").read_text()
    assert "verdict: pass" in (folder / "review-report-2.md").read_text()
    assert "word_count" in (folder / "diff-1.patch").read_text()
    final = (folder / "final-report.md").read_text()
    assert len(final.split()) <= 150 and "passed" in final

    log = json.loads(handoff("log", row["ticket"], "--json").stdout)
    assert all({"time", "kind", "round", "role"} <= set(e) for e in log)
    transitions = [(e["from"], e["to"]) for e in log if e["kind"] == "phase"]
    assert transitions == [
        ("awaiting-approval", "implementing"), ("implementing", "gating"),
        ("gating", "reviewing"), ("reviewing", "implementing"), ("implementing", "gating"),
        ("gating", "reviewing"), ("reviewing", "passed"), ("passed", "closed")]
    kinds = {e["kind"] for e in log}
    assert {"launch", "submission", "gate", "verdict", "recycle", "final-report"} <= kinds


def test_demo_keep_leaves_the_peers_windows_to_attach_to(handoff_home: Path, socket: str,
                                                temp_dir: Path) -> None:
    done = handoff("demo", "--keep", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "handoff attach DEMO-" in done.stdout
    row = json.loads(handoff("status", "--json").stdout)[0]
    assert row["phase"] == "passed"
    assert row["hint"] == f"handoff finish {row['ticket']} (merges it) or handoff close " \
                          f"{row['ticket']}", "a passed ticket says how to take it"
    shown = windows(socket, row["session"])
    assert set(shown) == {"orchestrator", "implementer", "reviewer"}
    # a finished ticket runs no CLI: each peer left, its window kept with its last screen
    assert not shown["implementer"] and not shown["reviewer"]
    screen = subprocess.run(["tmux", "-L", socket, "capture-pane", "-p", "-t",
                             f"={row['session']}:implementer"], capture_output=True, text=True,
                            timeout=15).stdout
    assert "scripted: leaving" in screen and "report accepted" in screen, screen
    left = [e for e in json.loads(handoff("log", row["ticket"], "--json").stdout)
            if e["kind"] == "left" and e["reason"] == "the ticket passed"]
    assert {(e["role"], e["pane"]) for e in left} == {("implementer", "kept"),
                                                       ("reviewer", "kept")}
    # the main checkout, the implementer's, the reviewer's and the gate's own
    assert worktree_count(Path(row["repo"])) == 4
    closed = handoff("close", row["ticket"], "--repo", row["repo"])
    assert closed.returncode == 0, closed.stderr
    assert worktree_count(Path(row["repo"])) == 1 and not tmux_alive(socket)
    assert Path(row["repo"]).parent.parent == temp_dir, "--keep keeps the repo"


def test_a_ticket_runs_to_the_end_without_inotify_and_says_so(
        handoff_home: Path, socket: str, temp_dir: Path) -> None:
    """No inotify watch to be had (the per-user limit reached): the orchestrator polls, the
    ticket still passes, and the log says why it polls."""
    argv = with_inotify_watches(0, [sys.executable, "-m", "handoff", "demo"])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "round 1 fail, round 2 pass" in done.stdout
    ticket = json.loads(handoff("status", "--json", "--all").stdout)[0]["ticket"]
    log = json.loads(handoff("log", ticket, "--json").stdout)
    polling = [e for e in log if e["kind"] == "watch"]
    assert polling, "the orchestrator said nothing of its polling"
    assert all(e["state"] == "polling" and "max_user_watches" in e["reason"] for e in polling)
    assert "watching by polling every" in handoff("log", ticket).stdout


def run_ticket(repo: Path, tmp_path: Path, ticket: str, plan: str,
               *extra: str) -> tuple[int, str]:
    path = write_plan(tmp_path, plan, f"{ticket}.md")
    done = handoff("start", ticket, "--plan", str(path), "--yes", "--foreground", *extra,
                   cwd=repo, timeout=120)
    return done.returncode, done.stdout + done.stderr


def test_escalates_at_max_rounds_with_open_findings(repo: Path, tmp_path: Path,
                                                    handoff_home: Path) -> None:
    plan = plan_text({1: {"edits": [FIX_ADD]}, 2: {"edits": [FIX_MUL]}},
                     test=ADD_ONLY, review=[ALL_TESTS])
    code, out = run_ticket(repo, tmp_path, "T-1", plan, "--max-rounds", "2")
    assert code == EXIT_ESCALATED, out
    current = state(handoff_home, "T-1")
    assert current["phase"] == "escalated"
    assert current["reviews"] == 2 and current["verdicts"] == {"1": "fail", "2": "fail"}
    assert "max-rounds" in current["reason"]
    final = (ticket_path(handoff_home, "T-1") / "final-report.md").read_text()
    assert "Open findings" in final and "test_neg" in final
    # what the reviewer says it ran (its report's "Tests run"), not what the plan asked for
    assert f"reviewer: `{shlex.join(ALL_TESTS)}` exit 1; verdict fail" in \
        " ".join(final.split()), final
    shown = handoff("status", "T-1", cwd=repo).stdout
    assert "next: handoff resume T-1 --more-rounds 1" in shown, shown
    assert len(final.split()) <= 150


def test_a_failure_answered_not_fixed_in_two_rounds_stops_early(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    # round 1's review fails test_mul (F1); rounds 2 and 3 leave it failing: each reviewer
    # answers F1 not-fixed (the ledger), and the second time the loop stops
    plan = plan_text({1: {"edits": [FIX_ADD]}, 2: {"edits": [TOUCH_README]},
                      3: {"edits": [{"file": "NOTES.md", "content": "again\n"}]}},
                     test=ADD_ONLY, review=[ALL_TESTS])
    code, out = run_ticket(repo, tmp_path, "T-2", plan, "--max-rounds", "5")
    assert code == EXIT_ESCALATED, out
    current = state(handoff_home, "T-2")
    assert current["phase"] == "escalated"
    assert current["reviews"] == 3, "stopped before --max-rounds (5)"
    assert "not-fixed in two rounds" in current["reason"] and "test_mul" in current["reason"]
    assert next(e["answers"] for e in current["ledger"] if e["id"] == "F1") == [
        [2, "reviewer", "not-fixed", f"ran `{shlex.join(ALL_TESTS)}` exit 1 at "
                                     f"{current['commits']['2'][:10]}"],
        [3, "reviewer", "not-fixed", f"ran `{shlex.join(ALL_TESTS)}` exit 1 at "
                                     f"{current['commits']['3'][:10]}"]]


def test_the_same_must_fix_raised_again_stops_at_once(repo: Path, tmp_path: Path,
                                                     handoff_home: Path) -> None:
    logged = {"file": "calc.py", "line": 2, "reason": "the sum is logged"}
    mend = {"file": "calc.py", "replace": "return a + b", "with": "return b + a"}
    plan = plan_text({1: {"edits": [FIX_ADD, FIX_MUL, FIX_NEG], "reviewer": {"must_fix": [logged]}},
                      2: {"edits": [mend], "reviewer": {"must_fix": [logged]}}},
                     test=ALL_TESTS)
    code, out = run_ticket(repo, tmp_path, "T-5", plan)
    assert code == EXIT_ESCALATED, out
    current = state(handoff_home, "T-5")
    assert current["reviews"] == 2
    assert current["reason"] == "the same must-fix came back: calc.py:2: the sum is logged"


def test_failing_gate_goes_back_without_a_review(repo: Path, tmp_path: Path,
                                                 handoff_home: Path) -> None:
    plan = plan_text({1: {"edits": [FIX_MUL]}, 2: {"edits": [FIX_ADD]}},
                     test=ADD_ONLY, review=[ADD_ONLY])
    code, out = run_ticket(repo, tmp_path, "T-3", plan)
    assert code == 0, out
    current = state(handoff_home, "T-3")
    assert current["phase"] == "passed"
    assert current["gate_bounces"] == 1 and current["reviews"] == 1
    assert current["gates"] == {"1": "fail", "2": "pass"}
    assert current["verdicts"] == {"2": "pass"}
    folder = ticket_path(handoff_home, "T-3")
    assert not (folder / "inbox" / "reviewer" / "brief-1.md").exists()
    assert not (folder / "review-report-1.md").exists()
    assert "FAIL" in (folder / "gate-1.log").read_text()
    brief2 = (folder / "inbox" / "implementer" / "brief-2.md").read_text()
    assert "verification gate failed" in brief2 and "gate-1.log" in brief2


def test_blocked_implementer_waits_for_an_answer(repo: Path, tmp_path: Path,
                                                 handoff_home: Path) -> None:
    plan = plan_text({1: {"status": "blocked", "question": "Should add() saturate?"},
                      2: {"edits": [FIX_ADD]}}, test=ADD_ONLY, review=[ADD_ONLY])
    path = write_plan(tmp_path, plan)
    runner = spawn("start", "T-4", "--plan", str(path), "--yes", "--foreground", cwd=repo,
                   log=tmp_path / "orchestrator.log")
    try:
        waiting = wait_phase(handoff_home, "T-4", "needs-human")
        assert "Should add() saturate?" in waiting["reason"]
        status = handoff("status", "T-4", cwd=repo)
        assert "needs-human" in status.stdout
        answered = handoff("answer", "T-4", "No: plain addition.", cwd=repo)
        assert answered.returncode == 0, answered.stderr
        final = wait_phase(handoff_home, "T-4", "passed", "escalated")
        assert final["phase"] == "passed"
        assert runner.wait(timeout=30) == 0
    finally:
        runner.kill()
        runner.wait()
    brief2 = (ticket_path(handoff_home, "T-4") / "inbox" / "implementer" / "brief-2.md").read_text()
    assert "No: plain addition." in brief2


def test_dead_peer_is_noticed_relaunched_then_handed_to_a_person(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    plan = plan_text({1: {"edits": [FIX_ADD], "exit": 3, "exit_unless": "fixed"}}, test=ADD_ONLY)
    path = write_plan(tmp_path, plan)
    (repo / ".handoff.yaml").write_text("max_relaunches: 1\n", encoding="utf-8")
    git(repo, "add", ".handoff.yaml")
    git(repo, "commit", "-q", "-m", "config")
    runner = spawn("start", "T-5", "--plan", str(path), "--yes", "--foreground", cwd=repo,
                   log=tmp_path / "orchestrator.log")
    try:
        waiting = wait_phase(handoff_home, "T-5", "needs-human", timeout=30)
        assert "died" in waiting["reason"]
        deaths = [e for e in events(handoff_home, "T-5") if e["kind"] == "death"]
        assert [d["exit_status"] for d in deaths] == [3, 3]
        folder = ticket_path(handoff_home, "T-5")
        transcripts = list((folder / "transcripts").glob("implementer-*"))
        assert transcripts and any("exiting with 3" in t.read_text() for t in transcripts)

        (folder / "fixed").write_text("the person mended what killed it\n")
        assert handoff("answer", "T-5", "Fixed the environment.", cwd=repo).returncode == 0
        final = wait_phase(handoff_home, "T-5", "passed", "escalated")
        assert runner.wait(timeout=30) == 0
    finally:
        runner.kill()
        runner.wait()
    assert final["phase"] == "passed"
    assert final["round"] == 1, "after a crash loop the same round carries on"
    assert not (folder / "inbox" / "implementer" / "brief-2.md").exists()


def test_every_phase_written_is_a_known_phase(repo: Path, tmp_path: Path,
                                              handoff_home: Path) -> None:
    plan = plan_text({1: {"edits": [FIX_ADD, FIX_MUL, FIX_NEG]}}, test=ALL_TESTS)
    code, out = run_ticket(repo, tmp_path, "T-6", plan)
    assert code == 0, out
    seen = {e["to"] for e in events(handoff_home, "T-6") if e["kind"] == "phase"}
    assert seen <= PHASES and "passed" in seen
    assert wait_until(lambda: git(repo, "log", "-1", "--format=%s", "handoff/T-6"),
                      what="the ticket branch").startswith("T-6: round 1")


def git_processes_under(pid: int) -> list[str]:
    """The live git processes among pid's descendants ("<pid> <command line>")."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            parents[int(stat.parent.name)] = int(fields[1])
    found = []
    for child in parents:
        ancestor = parents.get(child)
        while ancestor is not None and ancestor != pid:
            ancestor = parents.get(ancestor)
        if ancestor == pid:
            try:
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if Path(cmdline[0].decode(errors="replace")).name == "git":
                found.append(f"{child} {b' '.join(cmdline).decode(errors='replace')}")
    return found


def test_no_git_process_outlives_a_ticket_s_git_work_nor_its_close(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    """The orchestrator has opened the repository, made both worktrees, checked the
    implementer's commit and launched the peers: while it waits, no git child of it is left
    (GitPython's persistent `git cat-file` would be); nor is one of a close run in-process."""
    runner, _, _ = paused_ticket(repo, tmp_path, handoff_home, "C-1")
    try:
        wait_until(lambda: not git_processes_under(runner.pid), timeout=10,
                   what="no git process under the waiting orchestrator")
        assert handoff("stop", "C-1", cwd=repo).returncode == 0
        assert runner.wait(timeout=30) == 130
    finally:
        stop_runner(runner)
    closed = close_ticket(handoff_home, "C-1", repo, force=True)
    assert "implementer" in closed.removed
    assert git_processes_under(os.getpid()) == []
