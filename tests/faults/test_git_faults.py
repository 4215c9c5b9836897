"""git faults: a hook that hangs, tickets racing in one repo, folders that are not worktrees,
a worktree deleted mid-round, a setup that failed and was fixed."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from functools import partial
from pathlib import Path

import pytest

from tests.conftest import PYTHON, git, wait_until
from tests.faults.catalog import fault
from tests.harness import (
    ADD_ONLY,
    ALL_TESTS,
    FIX_ADD,
    FIX_MUL,
    FIX_NEG,
    events,
    handoff,
    plan_text,
    release,
    running,
    spawn,
    state,
    ticket_path,
    wait_phase,
    worktree_count,
    write_plan,
)

BATCHES, TICKETS = 3, 20


def gone(pid: int) -> bool:
    """The process has ended (a zombie waiting for its reaper has ended too)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"


def errors(home: Path, ticket: str) -> list[str]:
    return [str(e.get("message")) for e in events(home, ticket) if e["kind"] == "error"]


def wait_launched_or_failed(home: Path, ticket: str, timeout: float = 60) -> None:
    """Until the ticket's implementer was launched or its orchestrator stopped on an error."""
    def settled() -> bool:
        if not list(home.glob(f"*/{ticket}/events.jsonl")):
            return False
        return any(e["kind"] == "error" or (e["kind"] == "launch" and e["role"] == "implementer")
                   for e in events(home, ticket))
    wait_until(settled, timeout, f"{ticket}'s implementer to be launched")


HANGING_HOOK = """#!/bin/sh
sleep 300 &
echo $! > {pids}/background
echo $$ > {pids}/hook
sleep 300
"""


def screen(folder: Path, role: str) -> str:
    """What the role's pane shows, read with plain tmux on the ticket's recorded socket."""
    current = state(folder.parent.parent, folder.name)
    return subprocess.run(["tmux", "-L", current["socket"], "capture-pane", "-p", "-t",
                           f"={current['session']}:{role}"], capture_output=True, text=True,
                          timeout=15).stdout


@fault("15", "a reference-transaction hook hangs, with a background child, while handoff "
             "makes the ticket's branch",
       "the git call ends at its bound (HANDOFF_GIT_TIMEOUT) together with every process the "
       "hook started; the orchestrator stops with a clear error pointing at hooks; once the hook "
       "is mended, resume makes the branch and the worktree and the ticket passes",
       "the record; the branch and its commit once resumed")
def test_a_hanging_git_hook_is_ended_and_the_ticket_resumes(
        repo: Path, tmp_path: Path, handoff_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    hook = repo / ".git" / "hooks" / "reference-transaction"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(HANGING_HOOK.format(pids=pids), encoding="utf-8")
    hook.chmod(0o755)
    monkeypatch.setenv("HANDOFF_GIT_TIMEOUT", "3")
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY,
                                          review=[ADD_ONLY]))
    started = time.monotonic()
    done = handoff("start", "H-1", "--plan", str(plan), "--yes", "--foreground", cwd=repo,
                   timeout=60)
    assert time.monotonic() - started < 30, "the hung hook was not cut off at its bound"
    assert done.returncode == 1, done.stdout + done.stderr
    assert "did not finish within 3s" in done.stderr and "hook" in done.stderr
    assert "Traceback" not in done.stderr
    for name in ("hook", "background"):
        pid = int((pids / name).read_text())
        wait_until(partial(gone, pid), timeout=10, what=f"the hook's {name} process to end")
    assert any("did not finish within 3s" in m for m in errors(handoff_home, "H-1"))
    assert git(repo, "branch", "--list", "handoff/H-1") == "", "its transaction was cut off"

    hook.unlink()
    resumed = handoff("resume", "H-1", "--foreground", cwd=repo, timeout=120)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert state(handoff_home, "H-1")["phase"] == "passed"
    assert "return a + b" in git(repo, "show", "handoff/H-1:calc.py")
    assert git(repo, "rev-list", "--count", "main..handoff/H-1") == "1"


@fault("3", "a user's folder (not a worktree) sits at .worktrees/W1/implementer: start refuses, "
            "then `close` without --force",
       "start refuses, naming the folder; close removes only what git knows as W1's worktrees, "
       "leaves the folder where it is and names it in its closing event (`left`)",
       "the user's folder and every file in it, unchanged")
def test_close_leaves_a_folder_handoff_did_not_make(repo: Path, tmp_path: Path,
                                                    handoff_home: Path) -> None:
    folder = repo / ".worktrees" / "W1" / "implementer"
    (folder / "sub").mkdir(parents=True)
    (folder / "notes.txt").write_text("my notes\n")
    (folder / "sub" / "data.bin").write_bytes(bytes(range(256)))
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    refused = handoff("start", "W1", "--plan", str(plan), "--yes", "--foreground", cwd=repo)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert str(folder) in refused.stderr and "Traceback" not in refused.stderr

    closed = handoff("close", "W1", cwd=repo)
    assert closed.returncode == 0, closed.stdout + closed.stderr
    assert (folder / "notes.txt").read_text() == "my notes\n"
    assert (folder / "sub" / "data.bin").read_bytes() == bytes(range(256))
    closing = [e for e in events(handoff_home, "W1") if e["kind"] == "phase" and e["to"] == "closed"]
    assert closing[-1]["left"] == [str(folder)] and closing[-1]["removed"] == []
    assert worktree_count(repo) == 1


@fault("12", "the implementer's worktree is deleted by hand mid-round and the folder re-made "
             "with a file in it (a peer writing where its worktree was); the peer then dies",
       "before relaunching the peer handoff sees the folder is not a worktree of the repo, moves "
       "it aside intact (`.displaced-<time>`), makes the worktree again from the branch "
       "(a `worktree` event) and the ticket passes",
       "round 1's commit on the branch; the file written after the delete, in the moved folder")
def test_a_worktree_deleted_mid_round_is_made_again_from_the_branch(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    plan = write_plan(tmp_path, plan_text(
        {1: {"edits": [FIX_ADD]}, 2: {"edits": [FIX_MUL, FIX_NEG], "pause_until": "go"}},
        test=ADD_ONLY, review=[ALL_TESTS]))
    runner = spawn("start", "D-1", "--plan", str(plan), "--yes", "--foreground", cwd=repo,
                   log=tmp_path / "run.log")
    try:
        wait_phase(handoff_home, "D-1", "implementing", timeout=30)
        folder = ticket_path(handoff_home, "D-1")
        wait_until(lambda: "paused until" in screen(folder, "implementer"), timeout=90,
                   what="round 2's implementer to pause")  # round 1 never pauses
        round1 = git(repo, "rev-parse", "handoff/D-1")
        worktree = repo / ".worktrees" / "D-1" / "implementer"
        shutil.rmtree(worktree)
        worktree.mkdir()
        (worktree / "notes.txt").write_text("written after the delete\n")
        release(folder, "go")
        final = wait_phase(handoff_home, "D-1", "passed", "escalated", "needs-human", timeout=90)
        assert final["phase"] == "passed", final["reason"]
        assert runner.wait(timeout=30) == 0, (tmp_path / "run.log").read_text()
    finally:
        runner.kill()
        runner.wait()
    made = [e for e in events(handoff_home, "D-1") if e["kind"] == "worktree"]
    assert [(e["role"], e["created"]) for e in made] == [("implementer", True)]
    displaced = Path(made[0]["displaced"])
    assert (displaced / "notes.txt").read_text() == "written after the delete\n"
    assert git(repo, "merge-base", "--is-ancestor", round1, "handoff/D-1") == ""
    assert git(repo, "rev-list", "--count", "main..handoff/D-1") == "2"
    assert "return a * b" in git(repo, "show", "handoff/D-1:calc.py")


@fault("9", "post_create fails in the new worktrees; the config is fixed; `resume`",
       "the orchestrator stops with the command's error and keeps the worktree; on resume the "
       "setup of every worktree whose setup did not complete (no mark in its git dir) runs again",
       "the worktree as git made it; after the resume, its setup's output; the ticket's commit")
def test_a_failed_post_create_runs_again_once_fixed(repo: Path, tmp_path: Path,
                                                    handoff_home: Path) -> None:
    (repo / ".gitignore").write_text("__pycache__/\n/set-up.txt\n")
    git(repo, "commit", "-qam", "setup output is ignored")
    handoff_home.mkdir(parents=True, exist_ok=True)
    config = handoff_home / "config.yaml"
    config.write_text(f"post_create:\n  - [{PYTHON}, -c, 'import sys; sys.exit(3)']\n")
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY,
                                          review=[ADD_ONLY]))
    failed = handoff("start", "S-1", "--plan", str(plan), "--yes", "--foreground", cwd=repo)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "post_create" in failed.stderr and "Traceback" not in failed.stderr
    implementer = repo / ".worktrees" / "S-1" / "implementer"
    assert (implementer / "calc.py").exists() and not (implementer / "set-up.txt").exists()

    config.write_text(f"post_create:\n  - [{PYTHON}, -c, "
                      "\"import pathlib; pathlib.Path('set-up.txt').write_text('done')\"]\n")
    resumed = handoff("resume", "S-1", "--foreground", cwd=repo, timeout=120)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert state(handoff_home, "S-1")["phase"] == "passed"
    assert (implementer / "set-up.txt").read_text() == "done"
    assert (repo / ".worktrees" / "S-1" / "reviewer" / "set-up.txt").read_text() == "done"
    assert "return a + b" in git(repo, "show", "handoff/S-1:calc.py")


#: a setup that starts a child (`sleep` of a length no other process uses: the fenced setup's
#: pids are its sandbox's own, so the child is found by its command line), says so, and hangs
HANGING_SETUP = ("import pathlib, subprocess, sys, time; "
                 "subprocess.Popen(['sleep', sys.argv[2]]); "
                 "pathlib.Path(sys.argv[1]).write_text('started'); time.sleep(300)")


@fault("15", "a post_create command hangs (and has started a child of its own)",
       "it is ended at setup_timeout together with every process it started; start exits 1 "
       "naming the command and the bound; after the config is mended, resume sets up and passes",
       "the worktree as git made it; the ticket's record and commit")
def test_a_hanging_post_create_is_ended_with_its_children(repo: Path, tmp_path: Path,
                                                           handoff_home: Path) -> None:
    handoff_home.mkdir(parents=True, exist_ok=True)
    config = handoff_home / "config.yaml"
    told = tmp_path / "told"  # the fenced setup writes its checkout and sandbox.write alone
    told.mkdir()
    child, seconds = told / "child", f"{3000 + os.getpid() % 1000}"
    config.write_text(f"setup_timeout: 2\nsandbox: {{mode: on, write: [{told}]}}\n"
                      f"post_create:\n  - [{PYTHON}, -c, \"{HANGING_SETUP}\", {child}, "
                      f"'{seconds}']\n")
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY,
                                          review=[ADD_ONLY]))
    started = time.monotonic()
    hung = handoff("start", "H-1", "--plan", str(plan), "--yes", "--foreground", cwd=repo,
                   timeout=60)
    assert hung.returncode == 1, hung.stdout + hung.stderr
    assert time.monotonic() - started < 30, "the setup was not ended at its bound"
    assert "post_create" in hung.stderr and "did not finish within 2s" in hung.stderr
    assert "Traceback" not in hung.stderr
    assert child.read_text() == "started"
    wait_until(lambda: (pid := running("sleep", seconds)) is None or gone(pid), 10,
               "the setup's child to be gone")
    assert (repo / ".worktrees" / "H-1" / "implementer" / "calc.py").exists()

    config.write_text(f"setup_timeout: 2\nsandbox: {{mode: on, write: [{told}]}}\n")
    resumed = handoff("resume", "H-1", "--foreground", cwd=repo, timeout=120)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert state(handoff_home, "H-1")["phase"] == "passed"


@fault("18", f"{TICKETS} tickets started at once in one repo, then closed at once, "
             f"{BATCHES} batches in a row",
       "worktree add/list/remove/prune are serialised per repo by a lock in its git dir: every "
       "orchestrator gets both worktrees and its implementer, every close removes them",
       "every ticket's branch and record; the main checkout clean")
def test_tickets_started_together_in_one_repo_all_survive(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    handoff_home.mkdir(parents=True, exist_ok=True)  # all at once: none waits in the queue
    (handoff_home / "config.yaml").write_text(f"max_parallel: {TICKETS}\n")
    plan = write_plan(tmp_path, plan_text({1: {"pause_until": "go"}}))
    for batch in range(BATCHES):
        tickets = [f"R{batch}-{i}" for i in range(TICKETS)]
        # in the foreground: each start goes straight on to make its worktrees, all at once
        runs = [spawn("start", t, "--plan", str(plan), "--yes", "--foreground", cwd=repo,
                      log=tmp_path / f"start-{t}.log") for t in tickets]
        try:
            for ticket in tickets:
                wait_launched_or_failed(handoff_home, ticket)
                assert errors(handoff_home, ticket) == [], ticket
                assert state(handoff_home, ticket)["phase"] == "implementing"
            # the reviewer's checkout is made while the implementer works
            wait_until(lambda: worktree_count(repo) == 1 + 2 * TICKETS or None, 60,
                       "every ticket's two worktrees")
            closes = [spawn("close", t, cwd=repo, log=tmp_path / f"close-{t}.log")
                      for t in tickets]
            for ticket, closing in zip(tickets, closes, strict=True):
                assert closing.wait(timeout=60) == 0, (tmp_path / f"close-{ticket}.log").read_text()
            for run in runs:
                run.wait(timeout=30)  # close stopped it
        finally:
            for run in runs:
                run.kill()
                run.wait()
        for ticket in tickets:
            assert errors(handoff_home, ticket) == [], ticket
            assert state(handoff_home, ticket)["phase"] == "closed"
            assert git(repo, "rev-parse", "--verify", f"handoff/{ticket}"), "the branch is kept"
        assert worktree_count(repo) == 1
        assert not (repo / ".worktrees").exists()
    assert git(repo, "status", "--porcelain") == ""
