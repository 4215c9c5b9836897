"""The CLI's contract: clear one-line errors with hints, documented exit codes, no tracebacks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import git, wait_until
from tests.faults.catalog import fault
from tests.harness import (
    ADD_ONLY,
    FIX_ADD,
    assert_clean_error,
    events,
    handoff,
    in_peer,
    plan_text,
    release,
    spawn,
    state,
    ticket_path,
    wait_briefed,
    wait_event,
    wait_phase,
    write_plan,
)


def test_a_plan_outside_a_repository_is_a_usage_error(tmp_path: Path) -> None:
    plan = write_plan(tmp_path, "# plan\n")
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    assert_clean_error(handoff("start", "T-1", "--plan", str(plan), "--yes", cwd=outside),
                       2, "not inside a git repository")


def test_malformed_plan_names_the_problem(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, "---\ntest: [unclosed\n---\n# plan\n")
    assert_clean_error(handoff("start", "T-1", "--plan", str(plan), "--yes", cwd=repo), 2,
                       "not valid YAML")


def test_unknown_ticket_is_not_found(repo: Path) -> None:
    for args in (("status", "NOPE"), ("log", "NOPE"), ("close", "NOPE"), ("stop", "NOPE")):
        assert_clean_error(handoff(*args, cwd=repo), 3, "no ticket 'NOPE'")


def test_start_twice_and_unknown_role(repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    first = handoff("start", "T-1", "--plan", str(plan), "--yes", "--foreground", cwd=repo)
    assert first.returncode == 0, first.stderr
    assert_clean_error(handoff("start", "T-1", "--plan", str(plan), "--yes", cwd=repo), 2,
                       "already exists", "handoff finish T-1")
    assert_clean_error(handoff("recycle", "T-1", "janitor", cwd=repo), 2,
                       "this ticket has no role 'janitor'", "implementer, reviewer")
    assert_clean_error(handoff("recycle", "T-1", "reviewer", cwd=repo), 2,
                       "no work in progress (phase passed)")


def test_second_orchestrator_is_refused_as_busy(repo: Path, tmp_path: Path,
                                                handoff_home: Path) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD], "pause_until": "go"}},
                                          test=ADD_ONLY))
    runner = spawn("start", "T-3", "--plan", str(plan), "--yes", "--foreground", cwd=repo,
                   log=tmp_path / "run.log")
    try:
        wait_event(handoff_home, "T-3", "launch", role="implementer")
        assert_clean_error(handoff("resume", "T-3", "--foreground", cwd=repo), 4,
                           "already running")
        stopped = handoff("stop", "T-3", cwd=repo)
        assert stopped.returncode == 0, stopped.stderr
        assert runner.wait(timeout=20) == 130
    finally:
        runner.kill()
        runner.wait()
    kinds = [e["kind"] for e in _events(handoff_home, "T-3")]
    assert kinds.count("stopped") == 2  # the orchestrator's own record, and the stop command's


def _events(home: Path, ticket: str) -> list[dict[str, object]]:
    path = ticket_path(home, ticket) / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_submit_lists_every_problem_and_files_nothing(repo: Path, tmp_path: Path,
                                                      handoff_home: Path) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD],
                                               "reviewer": {"pause_until": "go"}}},
                                          test=ADD_ONLY))
    runner = spawn("start", "T-4", "--plan", str(plan), "--yes", "--foreground", cwd=repo,
                   log=tmp_path / "run.log")
    try:
        wait_briefed(handoff_home, "T-4", "reviewer")
        folder = ticket_path(handoff_home, "T-4")
        bad = folder / "drafts" / "reviewer" / "bad.md"  # where the peer may write
        bad.write_text("---\nverdict: maybe\ncommit: xyz\nmust_fix: [{file: a.py}]\n---\n")
        submit = [sys.executable, "-m", "handoff", "submit", str(bad), "--dir", str(folder),
                  "--role", "reviewer", "--round"]
        done = in_peer(handoff_home, "T-4", "reviewer", [*submit, "1"])
        assert done.returncode == 1 and "NOT accepted" in done.stderr
        for needle in ("'verdict' must be pass or fail", "'commit' must be a commit hash",
                       "must_fix[0].line", "must_fix[0].reason"):
            assert needle in done.stderr, needle
        assert not (folder / "review-report-1.md").exists()
        stale = in_peer(handoff_home, "T-4", "reviewer", [*submit, "7"])
        assert stale.returncode == 1 and "ticket is in round 1" in stale.stderr
        release(folder, "go")
        assert runner.wait(timeout=30) == 0
    finally:
        runner.kill()
        runner.wait()
    assert_clean_error(handoff("submit", str(tmp_path / "bad.md")), 2, "--dir")


def test_missing_tmux_is_a_clear_missing_tool_error(repo: Path, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("git",):
        found = shutil.which(tool)
        assert found
        (bin_dir / tool).symlink_to(found)
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    old = os.environ["PATH"]
    os.environ["PATH"] = str(bin_dir)
    try:
        done = handoff("start", "T-5", "--plan", str(plan), "--yes", cwd=repo)
    finally:
        os.environ["PATH"] = old
    assert_clean_error(done, 6, "tmux is not installed")


@fault("7", "handoff runs under umask 022 (its files would be readable by group and others)",
       "the state tree is private whatever the umask: folders 700, files 600 (events, lock, "
       "state, drafts, patches, signals, tmux.conf)",
       "every file of the ticket, readable by its owner alone")
def test_the_state_tree_is_private_whatever_the_umask(repo: Path, tmp_path: Path,
                                                     handoff_home: Path) -> None:
    """Issue 6.7: under umask 022 the ticket folder was 755 and events, lock, drafts, patches
    and tmux.conf 644. After a real ticket ran, stopped and closed, nothing in the state tree
    is open to group or others: folders 700, files 600."""
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD], "leave_untracked": ["x.txt"]}},
                                          test=ADD_ONLY))
    old = os.umask(0o022)
    try:
        done = handoff("start", "T-P", "--plan", str(plan), "--yes", "--foreground", cwd=repo)
        assert done.returncode == 0, done.stdout + done.stderr
        assert handoff("close", "T-P", "--force", cwd=repo).returncode == 0
    finally:
        os.umask(old)
    folder = ticket_path(handoff_home, "T-P")
    walked = [handoff_home, *handoff_home.rglob("*")]
    for name in ("events.jsonl", "lock", "state.json", "state.json.bak", "plan.md"):
        assert folder / name in walked, name
    assert any(p.parent.parent.name == "drafts" for p in walked), "a peer's draft is in the walk"
    assert handoff_home / "tmux.conf" in walked
    loose = [f"{oct(p.lstat().st_mode & 0o777)} {p}" for p in walked
             if p.lstat().st_mode & 0o777 != (0o700 if p.is_dir() else 0o600)]
    assert not loose, "\n".join(loose)


def _crash_at_the_gate(repo: Path, tmp_path: Path, home: Path, ticket: str) -> None:
    """Run ticket until its orchestrator dies of an error: the plan is damaged while the
    implementer works; at the gate the ticket waits for a person (the plan is not the approved
    one), who approves it as it is; the orchestrator then reads it at the gate."""
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD], "pause_before_report": "go"}},
                                          test=ADD_ONLY))
    runner = spawn("start", ticket, "--plan", str(plan), "--yes", "--foreground", cwd=repo,
                   log=tmp_path / "run.log")
    try:
        wait_event(home, ticket, "launch", role="implementer")
        # the implementer read the plan before it committed; it now waits for go
        worktree = repo / ".worktrees" / ticket / "implementer"
        wait_until(lambda: worktree.is_dir() and git(repo, "rev-list",
                                                     f"main..{git(worktree, 'rev-parse', 'HEAD')}"),
                   what="the implementer to commit")
        (ticket_path(home, ticket) / "plan.md").write_text("---\ntest: [unclosed\n---\n# plan\n")
        release(ticket_path(home, ticket), "go")
        wait_phase(home, ticket, "needs-human")
        assert handoff("answer", ticket, "approved", cwd=repo).returncode == 0
        assert runner.wait(timeout=60) == 2, (tmp_path / "run.log").read_text()
    finally:
        runner.kill()
        runner.wait()


@fault("21", "the orchestrator stops on an error in the background",
       "status shows it crashed, its error and the command that carries on",
       "the ticket at its phase; the error event")
def test_status_shows_why_an_orchestrator_crashed_and_how_to_go_on(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    """Issue 6.21: status showed '-' for a ticket whose orchestrator had crashed."""
    _crash_at_the_gate(repo, tmp_path, handoff_home, "T-C")
    row = json.loads(handoff("status", "T-C", "--json", cwd=repo).stdout)[0]
    assert row["phase"] == "gating" and row["orchestrator"] is None
    assert row["run"] == "crashed" and "not valid YAML" in row["error"]
    assert row["hint"] == "handoff resume T-C"
    text = handoff("status", cwd=repo).stdout
    line = next(x for x in text.splitlines() if x.startswith("T-C"))
    assert "crashed" in line
    assert "error: " in text and "not valid YAML" in text and "next: handoff resume T-C" in text


@fault("21", "a peer died until its relaunch budget ran out; a person resumes the ticket",
       "the resumed orchestrator starts the budget afresh and records what it carried",
       "every death and transcript; the round")
def test_a_resumed_ticket_starts_its_relaunch_budget_afresh(repo: Path, tmp_path: Path,
                                                           handoff_home: Path) -> None:
    """Issue 6.21: the relaunch counter carried across resume, so a resumed peer that died had
    less room than a fresh one. A person resuming is a person acting: the budget starts anew,
    and the orchestrator event records what was carried."""
    (repo / ".handoff.yaml").write_text("max_relaunches: 3\n", encoding="utf-8")
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD], "exit": 3}}, test=ADD_ONLY))
    first = spawn("start", "T-R", "--plan", str(plan), "--yes", "--foreground", cwd=repo,
                  log=tmp_path / "first.log")
    try:
        wait_event(handoff_home, "T-R", "death", role="implementer", relaunches=1)
    finally:
        first.kill()  # SIGKILL: the counter stays on disk as it was
        first.wait()
    carried = state(handoff_home, "T-R")["relaunches"]
    assert carried >= 1 and state(handoff_home, "T-R")["phase"] == "implementing"
    second = spawn("resume", "T-R", "--foreground", cwd=repo, log=tmp_path / "second.log")
    try:
        wait_phase(handoff_home, "T-R", "needs-human")
    finally:
        assert handoff("stop", "T-R", cwd=repo).returncode == 0
        second.kill()
        second.wait()
    log = events(handoff_home, "T-R")
    start = next(i for i, e in enumerate(log) if e["kind"] == "orchestrator"
                 and e["pid"] == second.pid)
    assert log[start]["relaunches_before"] == carried
    deaths = [e["relaunches"] for e in log[start:] if e["kind"] == "death"]
    assert deaths == [1, 2, 3, 4], "a full budget of 3 relaunches after the resume"


@pytest.mark.parametrize("argv", [["status"], ["status", "--json"], ["status", "P-1"],
                                  ["log", "P-1"], ["log", "P-1", "--json"]])
def test_a_reader_that_went_away_is_an_expected_end(argv: list[str], repo: Path, tmp_path: Path,
                                                    handoff_home: Path) -> None:
    """`handoff status | head -1`: the pipe closes under the writer. No crash log, no
    traceback: exit 1 and nothing said (the reader is gone)."""
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    handoff("start", "P-1", "--plan", str(plan), cwd=repo, input_text="")  # awaiting approval
    read_end, write_end = os.pipe()
    os.close(read_end)  # closed before a byte is written: every write fails, deterministically
    try:
        done = subprocess.run([sys.executable, "-m", "handoff", *argv], cwd=repo, stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert done.returncode == 1, done.stderr
    assert done.stderr == ""
    from handoff.cli import crash

    assert not list(crash.folder().glob("crash-*")), "no crash log for an expected end"


def test_a_terminal_that_went_away_is_an_expected_end(repo: Path, tmp_path: Path,
                                                      handoff_home: Path) -> None:
    """What an orchestrator meets when its tmux server dies: its terminal answers every write
    with EIO. No crash log, exit 1."""
    import pty

    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    handoff("start", "P-2", "--plan", str(plan), cwd=repo, input_text="")
    controller, terminal = pty.openpty()
    child = subprocess.Popen([sys.executable, "-c",
                              "import os, sys, time\n"
                              "sys.stdin.readline()\n"  # until the test closed the terminal
                              "from handoff.cli.entry import run\n"
                              "sys.exit(run(['log', 'P-2']))\n"],
                             cwd=repo, stdin=subprocess.PIPE, stdout=terminal,
                             stderr=subprocess.PIPE, text=True)
    os.close(terminal)
    os.close(controller)  # the terminal is gone: every write to it now fails with EIO
    _, err = child.communicate("go\n", timeout=60)
    assert child.returncode == 1, err
    assert "internal error" not in err and "Traceback" not in err
    from handoff.cli import crash

    assert not list(crash.folder().glob("crash-*"))
