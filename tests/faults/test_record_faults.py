"""Faults of the ticket record: a damaged state.json or events.jsonl, a deleted repo, a closed or
stale ticket, a full disk under the state dir — driven through the real CLI, tmux and git."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from handoff.record.events import EventLog
from handoff.record.store import repo_key
from tests.conftest import git
from tests.faults.catalog import fault
from tests.harness import (
    ADD_ONLY,
    FIX_ADD,
    events,
    handoff,
    paused_ticket,
    plan_text,
    processes_of,
    release,
    state,
    stop_runner,
    ticket_path,
    wait_phase,
    windows,
    write_plan,
)

GARBAGE = '{"ticket": "R-1", "phase": "implem'


def branch_commits(repo: Path, ticket: str) -> list[str]:
    """The ticket's commits: its implementer's checkout's, while there is one (handoff puts them
    on the branch as it accepts them, and at close), else its branch's."""
    worktree = repo / ".worktrees" / ticket / "implementer"
    tip = git(worktree, "rev-parse", "HEAD") if worktree.is_dir() else f"handoff/{ticket}"
    return git(repo, "rev-list", f"main..{tip}").split()


@fault("10", "state.json is overwritten with garbage while the ticket runs",
       "log works as ever; stop finds the peers through state.json.bak and says so; close puts "
       "the backup back as state.json, keeps the damaged file as state.json.corrupt-1 and says so",
       "the peers are stopped; the damaged file, every event, the branch's commit")
def test_a_corrupt_state_json_still_lets_log_stop_and_close_work(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    runner, folder, current = paused_ticket(repo, tmp_path, handoff_home, "R-1")
    try:
        commits = branch_commits(repo, "R-1")
        assert len(commits) == 1
        (folder / "state.json").write_text(GARBAGE, encoding="utf-8")

        logged = handoff("log", "R-1", cwd=repo)
        assert logged.returncode == 0, logged.stderr
        assert "ticket created" in logged.stdout
        stopped = handoff("stop", "R-1", cwd=repo)
        assert stopped.returncode == 0, stopped.stderr
        assert "not valid JSON" in stopped.stderr and "using state.json.bak" in stopped.stderr
        assert runner.wait(timeout=30) == 130, "the orchestrator was stopped, not left running"
        assert windows(str(current["socket"]), str(current["session"])) == {}
        assert not processes_of(handoff_home, "scripted_agent"), "the peers were stopped"

        closed = handoff("close", "R-1", "--force", cwd=repo)
        assert closed.returncode == 0, closed.stderr
        assert "restored it from state.json.bak" in closed.stderr
        assert "state.json.corrupt-1" in closed.stderr
    finally:
        stop_runner(runner)
    assert (folder / "state.json.corrupt-1").read_text(encoding="utf-8") == GARBAGE
    assert state(handoff_home, "R-1")["phase"] == "closed"
    assert branch_commits(repo, "R-1") == commits
    kinds = [e["kind"] for e in events(handoff_home, "R-1")]
    assert "state-restored" in kinds and kinds.count("stopped") >= 2


@fault("10", "state.json and state.json.bak are both garbage while the ticket runs",
       "stop rebuilds where the peers run from events.jsonl and stops them; resume refuses with "
       "a clear error (the loop cannot carry on from the event log alone)",
       "the peers are stopped; both damaged files; every event")
def test_without_any_state_file_stop_works_from_the_event_log(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    runner, folder, current = paused_ticket(repo, tmp_path, handoff_home, "R-2")
    try:
        for name in ("state.json", "state.json.bak"):
            (folder / name).write_text(GARBAGE, encoding="utf-8")
        stopped = handoff("stop", "R-2", cwd=repo)
        assert stopped.returncode == 0, stopped.stderr
        assert "using events.jsonl" in stopped.stderr
        assert runner.wait(timeout=30) == 130
        assert windows(str(current["socket"]), str(current["session"])) == {}
        assert not processes_of(handoff_home, "scripted_agent")
    finally:
        stop_runner(runner)
    resumed = handoff("resume", "R-2", "--foreground", cwd=repo)
    assert resumed.returncode == 2 and "Traceback" not in resumed.stderr
    assert "state.json.bak cannot be read either" in resumed.stderr
    assert (folder / "state.json").read_text(encoding="utf-8") == GARBAGE, "left as it was"


@fault("", "events.jsonl ends in a half-written line (a crash in the middle of an append)",
       "log, status and resume work and say how many lines they skipped; the next event starts "
       "on a line of its own and the ticket finishes",
       "every whole event; the torn line itself, untouched")
def test_a_torn_event_log_is_read_around_and_reported(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    runner, folder, _ = paused_ticket(repo, tmp_path, handoff_home, "R-3")
    try:
        assert handoff("stop", "R-3", cwd=repo).returncode == 0
        runner.wait(timeout=30)
    finally:
        stop_runner(runner)
    log = folder / "events.jsonl"
    whole = len(log.read_text(encoding="utf-8").splitlines())
    torn = '{"time": "2026-01-01T00:00:00+00:00", "kind": "submiss'
    with log.open("a", encoding="utf-8") as handle:
        handle.write(torn)

    logged = handoff("log", "R-3", cwd=repo)
    assert logged.returncode == 0 and "skipped 1 unreadable line" in logged.stderr
    status = handoff("status", "R-3", cwd=repo)
    assert status.returncode == 0 and "1 unreadable line(s) skipped" in status.stdout
    release(folder, "go")
    resumed = handoff("resume", "R-3", "--foreground", cwd=repo)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "note: events.jsonl has 1 unreadable line(s)" in resumed.stderr
    assert state(handoff_home, "R-3")["phase"] == "passed"
    read, bad = EventLog(log).read()
    assert bad == [whole + 1], "only the torn line is unreadable: the next event began anew"
    assert log.read_text(encoding="utf-8").splitlines()[whole] == torn
    assert [e["kind"] for e in read[-5:]] == ["final-report", "notified", "evidence", "left",
                                              "left"], \
        "the resumed run wrote on after the torn line, to its end"


@fault("11", "the repository is deleted while its ticket runs (e.g. a kept demo in /tmp)",
       "log, stop and close work from the ticket directory alone (also with --repo naming the "
       "deleted path) and say that the worktrees and branch went with the repo",
       "the ticket record: events, briefs, plan, state")
def test_a_deleted_repo_still_lets_log_stop_and_close_work(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    runner, folder, current = paused_ticket(repo, tmp_path, handoff_home, "R-4")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    try:
        shutil.rmtree(repo)
        logged = handoff("log", "R-4", cwd=elsewhere)
        assert logged.returncode == 0, logged.stderr
        assert "ticket created" in logged.stdout
        stopped = handoff("stop", "R-4", "--repo", str(repo), cwd=elsewhere)
        assert stopped.returncode == 0, stopped.stderr
        assert "is gone" in stopped.stderr
        runner.wait(timeout=30)
        assert windows(str(current["socket"]), str(current["session"])) == {}
        assert not processes_of(handoff_home, "scripted_agent"), "the peers were stopped"
        closed = handoff("close", "R-4", cwd=elsewhere)
        assert closed.returncode == 0, closed.stderr
        assert "repository is gone" in closed.stdout
    finally:
        stop_runner(runner)
    assert state(handoff_home, "R-4")["phase"] == "closed"
    assert (folder / "plan.md").is_file() and (folder / "inbox" / "implementer").is_dir()
    closing = [e for e in events(handoff_home, "R-4") if e.get("to") == "closed"]
    assert closing and closing[-1]["repo_gone"] is True
    resumed = handoff("resume", "R-4", cwd=elsewhere)
    assert resumed.returncode != 0 and "Traceback" not in resumed.stderr


@fault("14", "`handoff resume` of a closed ticket",
       "refused: 'closed, nothing to resume', exit 2; no session, no orchestrator, no event",
       "the closed ticket's record as it was")
def test_resume_of_a_closed_ticket_creates_nothing(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    assert handoff("start", "R-5", "--plan", str(plan), "--yes", "--foreground",
                   cwd=repo).returncode == 0
    assert handoff("close", "R-5", cwd=repo).returncode == 0
    current = state(handoff_home, "R-5")
    before = events(handoff_home, "R-5")
    for args in (("resume", "R-5"), ("resume", "R-5", "--foreground")):
        done = handoff(*args, cwd=repo)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "closed, nothing to resume" in done.stderr and "Traceback" not in done.stderr
    assert windows(str(current["socket"]), str(current["session"])) == {}
    assert events(handoff_home, "R-5") == before
    assert state(handoff_home, "R-5")["phase"] == "closed"


@fault("4", "state.json of a finished ticket is removed, then the same id is started with "
       "another plan",
       "refused: the folder holds an earlier record; handoff names it and moves or deletes "
       "nothing, and no peer starts",
       "the old record whole: reports, final report, events, state.json.bak")
def test_a_stale_ticket_folder_is_never_reused(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    assert handoff("start", "R-6", "--plan", str(plan), "--yes", "--foreground",
                   cwd=repo).returncode == 0
    folder = ticket_path(handoff_home, "R-6")
    current = state(handoff_home, "R-6")
    assert handoff("stop", "R-6", cwd=repo).returncode == 0
    (folder / "state.json").unlink()
    before = {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    other = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY) + "\nmore\n",
                       "other.md")
    done = handoff("start", "R-6", "--plan", str(other), "--yes", "--foreground", cwd=repo)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "holds an earlier record" in done.stderr and "deletes nothing" in done.stderr
    assert "state.json.bak" in done.stderr
    after = {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    assert after == before, "nothing in the old record changed"
    assert windows(str(current["socket"]), str(current["session"])) == {}


@contextlib.contextmanager
def small_disk(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of size mounted at where (as root), unmounted however the test ends."""
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
                   check=True, capture_output=True, timeout=30)
    try:
        yield where
    finally:
        done = subprocess.run(["umount", str(where)], capture_output=True, timeout=30)
        if done.returncode != 0:  # a straggler still holds a file: detach it now
            subprocess.run(["umount", "-l", str(where)], check=True, timeout=30)


def fill(folder: Path) -> Path:
    """Write a file in folder until the file system is full."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"x" * 65536)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    finally:
        os.close(fd)
    return filler


@fault("", "the disk under the state dir fills up while a ticket runs (a 2 MB tmpfs as "
       "HANDOFF_HOME)",
       "the orchestrator ends with one clear error naming the file it could not write and how "
       "to mend it (exit 1, no traceback); once space is freed, resume finishes the ticket",
       "state.json and its backup readable (atomic writes), events.jsonl of whole lines, the "
       "implementer's commit on the branch")
def test_a_full_state_disk_fails_clearly_and_keeps_the_record_whole(
        repo: Path, tmp_path: Path, handoff_home: Path, socket: str) -> None:
    with small_disk(handoff_home, "2m"):
        runner, folder, _ = paused_ticket(repo, tmp_path, handoff_home, "R-7")
        try:
            commits = branch_commits(repo, "R-7")
            before = state(handoff_home, "R-7")
            # the release is written before the disk fills and renamed after (a rename needs no
            # room): the implementer sees it in its ticket folder, where a sandboxed one looks
            (folder / "go.ready").write_text("go\n", encoding="utf-8")
            filler = fill(handoff_home)
            (folder / "go.ready").rename(folder / "go")  # its draft has no room
            code = runner.wait(timeout=90)
            output = (tmp_path / "R-7.log").read_text(encoding="utf-8", errors="replace")
            assert code == 1, output
            assert "Traceback" not in output
            assert "handoff: error: cannot write" in output
            assert "No space left on device" in output and "hint: free space" in output

            assert state(handoff_home, "R-7") == before, "state.json is the last whole one"
            assert json.loads((folder / "state.json.bak").read_text(encoding="utf-8"))
            _, bad = EventLog(folder / "events.jsonl").read()
            assert bad == [], "no torn event line"
            assert not list(folder.glob(".*.tmp")), "no half-written temporary file left"
            assert branch_commits(repo, "R-7") == commits

            filler.unlink()
            resumed = handoff("resume", "R-7", "--foreground", cwd=repo)
            assert resumed.returncode == 0, resumed.stdout + resumed.stderr
            assert wait_phase(handoff_home, "R-7", "passed")
            assert branch_commits(repo, "R-7") == commits, "round 1 was not committed twice"
        finally:
            stop_runner(runner)
            subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True,
                           timeout=15)


@fault("", "the disk under the state dir is full when a ticket is started",
       "start ends with one clear error naming the file it could not write; its hint is to "
       "free space and start again, never to resume a ticket that does not exist",
       "no ticket and no half-made record: status lists nothing, and the start once space is "
       "freed makes the ticket whole")
def test_a_start_on_a_full_disk_leaves_no_half_made_ticket(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    with small_disk(handoff_home, "1m"):
        (handoff_home / repo_key(repo / ".git", repo)).mkdir(mode=0o700)
        filler = fill(handoff_home)
        done = handoff("start", "F-1", "--plan", str(plan), "--yes", cwd=repo)
        assert done.returncode == 1, done.stdout + done.stderr
        assert "Traceback" not in done.stderr
        assert "handoff: error: cannot write" in done.stderr and "No space left" in done.stderr
        assert "then start it again: nothing of F-1 was kept" in done.stderr, done.stderr
        assert "resume" not in done.stderr
        assert not list(handoff_home.glob("*/F-1")) and not list(handoff_home.glob("*/.F-1*"))
        assert json.loads(handoff("status", "--json", "--all").stdout) == []
        filler.unlink()
        again = handoff("start", "F-1", "--plan", str(plan), "--yes", "--foreground", cwd=repo)
        assert again.returncode == 0, again.stderr
        assert events(handoff_home, "F-1")[0]["kind"] == "created"


@fault("", "`handoff close --force` of a ticket with uncommitted work while the disk under the "
       "state dir is full (the patch of that work cannot be written)",
       "close ends with one clear error naming the patch it could not write (exit 1, no "
       "traceback) and removes nothing; once space is freed, close --force keeps the patch",
       "the implementer's worktree and its uncommitted file, until a whole patch of it is kept")
def test_close_force_on_a_full_disk_removes_nothing_it_could_not_keep(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    with small_disk(handoff_home, "2m"):
        runner, folder, current = paused_ticket(repo, tmp_path, handoff_home, "K-1")
        stop_runner(runner)
        assert handoff("stop", "K-1", cwd=repo).returncode == 0
        worktree = Path(str(current["worktrees"]["implementer"]))  # type: ignore[index]
        (worktree / "notes.txt").write_text("my uncommitted notes\n" * 2000, encoding="utf-8")
        filler = fill(handoff_home)
        done = handoff("close", "K-1", "--force", cwd=repo)
        assert done.returncode == 1, done.stdout + done.stderr
        assert "Traceback" not in done.stderr
        assert "handoff: error: cannot write" in done.stderr and "discarded" in done.stderr
        assert (worktree / "notes.txt").is_file(), "nothing removed that was not kept"
        assert not list(folder.glob("transcripts/*discarded*.patch")), "no half a patch"
        filler.unlink()
        closed = handoff("close", "K-1", "--force", cwd=repo)
        assert closed.returncode == 0, closed.stderr
        [patch] = folder.glob("transcripts/*discarded*.patch")
        assert "my uncommitted notes" in patch.read_text(encoding="utf-8")
        assert not worktree.exists()
