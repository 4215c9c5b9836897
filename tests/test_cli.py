"""The CLI's contract: clear one-line errors with hints, documented exit codes, no tracebacks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from handoff.events import EventLog
from tests.conftest import wait_until
from tests.harness import (
    ADD_ONLY,
    FIX_ADD,
    handoff,
    plan_text,
    spawn,
    state,
    ticket_path,
    wait_event,
    write_plan,
)


def assert_clean_error(done: subprocess.CompletedProcess[str], code: int, *needles: str) -> None:
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout
    assert done.stderr.startswith("handoff: error:"), done.stderr
    for needle in needles:
        assert needle in done.stderr, (needle, done.stderr)


@pytest.mark.parametrize("ticket", ["../escape", "a/b", "-rf", ".hidden", "x" * 65, "a..b",
                                    "sp ace", "semi;colon"])
def test_hostile_ticket_ids_are_refused_before_anything_exists(
        ticket: str, repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    done = handoff("start", "--plan", str(plan), "--yes", "--", ticket, cwd=repo)
    assert_clean_error(done, 2, "invalid ticket id")
    assert not handoff_home.exists() or not any(handoff_home.rglob("state.json"))
    assert not (repo / ".worktrees").exists()


def test_missing_plan_and_non_repo_are_usage_errors(repo: Path, tmp_path: Path) -> None:
    assert_clean_error(handoff("start", "T-1", "--plan", str(tmp_path / "nope.md"), cwd=repo),
                       2, "nope.md")
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
                       "already exists", "resume")
    assert_clean_error(handoff("recycle", "T-1", "janitor", cwd=repo), 2, "unknown role")
    assert_clean_error(handoff("recycle", "T-1", "reviewer", cwd=repo), 2,
                       "no work in progress (phase passed)")


def test_unapproved_plan_waits_then_resume_yes_runs_it(repo: Path, tmp_path: Path,
                                                       handoff_home: Path) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    waiting = handoff("start", "T-2", "--plan", str(plan), cwd=repo, input_text="")
    assert waiting.returncode == 1 and "waiting for approval" in waiting.stderr
    assert state(handoff_home, "T-2")["phase"] == "awaiting-approval"
    assert not (repo / ".worktrees").exists(), "nothing is created before approval"
    done = handoff("resume", "T-2", "--yes", "--foreground", cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert state(handoff_home, "T-2")["phase"] == "passed"


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
        wait_event(handoff_home, "T-4", "launch", role="reviewer")
        folder = ticket_path(handoff_home, "T-4")
        bad = tmp_path / "bad.md"
        bad.write_text("---\nverdict: maybe\ncommit: xyz\nmust_fix: [{file: a.py}]\n---\n")
        done = handoff("submit", str(bad), "--dir", str(folder), "--role", "reviewer",
                       "--round", "1")
        assert done.returncode == 1 and "NOT accepted" in done.stderr
        for needle in ("'verdict' must be pass or fail", "'commit' must be a commit hash",
                       "must_fix[0].line", "must_fix[0].reason"):
            assert needle in done.stderr, needle
        assert not (folder / "review-report-1.md").exists()
        stale = handoff("submit", str(bad), "--dir", str(folder), "--role", "reviewer",
                        "--round", "7")
        assert stale.returncode == 1 and "ticket is in round 1" in stale.stderr
        (folder / "go").write_text("go\n")
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


def test_init_writes_config_once(repo: Path) -> None:
    first = handoff("init", cwd=repo)
    assert first.returncode == 0 and (repo / ".handoff.yaml").is_file()
    (repo / ".handoff.yaml").write_text("max_rounds: 2\n")
    second = handoff("init", cwd=repo)
    assert second.returncode == 0 and "leaving it alone" in second.stdout
    assert (repo / ".handoff.yaml").read_text() == "max_rounds: 2\n"


def test_status_empty_and_log_survives_a_torn_line(repo: Path, tmp_path: Path,
                                                   handoff_home: Path) -> None:
    assert json.loads(handoff("status", "--json").stdout) == []
    assert "no tickets yet" in handoff("status").stdout
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    assert handoff("start", "T-6", "--plan", str(plan), "--yes", "--foreground",
                   cwd=repo).returncode == 0
    log_file = ticket_path(handoff_home, "T-6") / "events.jsonl"
    whole = len(log_file.read_text().splitlines())
    with log_file.open("a") as handle:
        handle.write('{"time": "2026-01-01T00:00:00", "kind": "torn')
    done = handoff("log", "T-6", "--json", cwd=repo)
    assert done.returncode == 0
    assert len(json.loads(done.stdout)) == whole
    assert "skipped 1 unreadable line" in done.stderr


def test_start_notes_uncommitted_changes_left_out_of_the_ticket(repo: Path, tmp_path: Path,
                                                                handoff_home: Path) -> None:
    (repo / "calc.py").write_text("# my local experiment\n", encoding="utf-8")
    (repo / "scratch.txt").write_text("notes\n", encoding="utf-8")
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    done = handoff("start", "T-7", "--plan", str(plan), "--yes", "--foreground", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert "note: 2 uncommitted change(s)" in done.stderr and "not part of T-7" in done.stderr
    assert (repo / "calc.py").read_text() == "# my local experiment\n", "left untouched"


def test_status_lists_a_broken_ticket_without_hiding_the_others(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    for ticket in ("T-8", "T-9"):
        assert handoff("start", ticket, "--plan", str(plan), cwd=repo,
                       input_text="").returncode == 1
    (ticket_path(handoff_home, "T-8") / "state.json").write_text("[]")
    rows = {r["ticket"]: r for r in json.loads(handoff("status", "--json").stdout)}
    assert rows["T-9"]["phase"] == "awaiting-approval"
    assert rows["T-8"]["phase"] == "unreadable" and "state.json" in rows["T-8"]["reason"]
    text = handoff("status")
    assert text.returncode == 0 and "unreadable" in text.stdout and "T-9" in text.stdout


def test_log_follow_prints_new_events_as_they_come(repo: Path, tmp_path: Path,
                                                   handoff_home: Path) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    assert handoff("start", "T-L", "--plan", str(plan), cwd=repo).returncode == 1
    out = tmp_path / "follow.log"
    follower = spawn("log", "T-L", "--follow", cwd=repo, log=out)
    try:
        wait_until(lambda: "ticket created" in out.read_text(), what="the existing events")
        EventLog(ticket_path(handoff_home, "T-L") / "events.jsonl").append(
            "answer", round=1, role="human", file="answer-1.md")
        wait_until(lambda: "answered (answer-1.md)" in out.read_text(), what="the new event")
    finally:
        follower.kill()
        follower.wait()
