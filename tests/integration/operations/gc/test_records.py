"""handoff.operations.gc.records: a record whose repository is gone is named (deleted only
on request), and a dead orchestrator's lock is named, never removed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from handoff.operations.gc.found import Options
from handoff.operations.gc.records import lock_leftovers, record_leftovers, staging_leftovers
from handoff.phases import Phase
from handoff.record.lock import TicketLock
from handoff.record.ticket import State, TicketDir
from tests.harness import (
    FIX_ADD,
    handoff,
    paused_ticket,
    plan_text,
    processes_of,
    stop_runner,
    ticket_path,
    write_plan,
)
from tests.integration.operations.gc.test_gc import (
    gc,
    has_session,
    listed,
    registered,
    worktree_dir,
)
from tests.unit.operations.gc.test_found import saved


def test_a_killed_orchestrator_s_lock_is_named_its_live_ticket_untouched(
        repo: Path, tmp_path: Path, handoff_home: Path, socket: str) -> None:
    runner, folder, current = paused_ticket(repo, tmp_path, handoff_home, "T-6")
    pid = runner.pid
    stop_runner(runner)
    lock = folder / "lock"
    found = gc(cwd=repo)
    assert [(i["kind"], i["path"], i["removable"]) for i in found] == [("lock", str(lock), False)]
    assert f"pid {pid}" in found[0]["why"] and "handoff resume T-6" in found[0]["why"]
    assert lock.read_text().strip() == str(pid), "the lock file is never deleted"
    assert has_session(socket, str(current["session"]))
    assert {worktree_dir(repo, "T-6", r) for r in ("implementer", "reviewer")} <= registered(repo)
    assert processes_of(handoff_home, "scripted_agent"), "the paused implementer runs on"


def test_a_record_whose_repo_is_gone_is_listed_and_pruned_only_on_request(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}))
    assert handoff("start", "T-7", "--plan", str(plan), cwd=repo).returncode == 1  # unapproved
    folder = ticket_path(handoff_home, "T-7")
    shutil.rmtree(repo)

    found = gc(cwd=tmp_path)
    assert listed(found) == {("record", str(folder))} and not found[0]["removable"]
    assert "--prune-records" in found[0]["why"] and folder.is_dir()
    assert listed(gc("--prune-records", "--dry-run", cwd=tmp_path)) == {("record", str(folder))}
    assert folder.is_dir()
    pruned = gc("--prune-records", cwd=tmp_path)
    assert pruned[0]["removed"] and not folder.exists() and not folder.parent.exists()
    assert gc(cwd=tmp_path) == []


def test_a_dead_orchestrators_lock_is_named_only_while_its_ticket_is_unfinished(
        handoff_home: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    working = saved(handoff_home, "T-1", phase=Phase.IMPLEMENTING)
    working.tdir.lock_file.write_text(f"{dead.pid}\n")
    [named] = lock_leftovers([working])
    assert (named.kind, named.path, named.removable) == \
        ("lock", str(working.tdir.lock_file), False)
    assert f"pid {dead.pid}" in named.why and "'handoff resume T-1'" in named.why
    finished = saved(handoff_home, "T-2", phase=Phase.CLOSED)
    finished.tdir.lock_file.write_text(f"{dead.pid}\n")
    assert lock_leftovers([finished]) == [], "a finished ticket's lock names a dead pid anyway"
    held = TicketLock(working.tdir.lock_file)
    held.acquire()
    try:
        assert lock_leftovers([working]) == [], "its orchestrator runs"
    finally:
        held.release()
    working.tdir.lock_file.write_text("")
    assert lock_leftovers([working]) == [], "a lock that never named a pid"


def test_pruning_keeps_a_record_whose_orchestrator_holds_its_lock(handoff_home: Path) -> None:
    record = saved(handoff_home, "T-1", repo="/gone/repo")
    assert record.repo is None
    held = TicketLock(record.tdir.lock_file)
    held.acquire()
    try:
        [kept] = record_leftovers([record], Options(prune_records=True))
    finally:
        held.release()
    assert not kept.removable and f"its orchestrator (pid {os.getpid()}) still runs" in kept.why
    assert record.tdir.path.is_dir()
    [pruned] = record_leftovers([record], Options(prune_records=True))
    assert pruned.removed and not record.tdir.path.exists()
    assert not record.tdir.path.parent.exists(), "its repo-key folder, left empty, goes too"


def test_pruning_keeps_a_record_whose_tmux_session_still_runs(
        handoff_home: Path, socket: str) -> None:
    record = saved(handoff_home, "T-1", repo="/gone/repo", socket=socket, session="s-T-1")
    subprocess.run(["tmux", "-L", socket, "new-session", "-d", "-s", "s-T-1", "sleep", "600"],
                   check=True, timeout=15)
    [kept] = record_leftovers([record], Options(prune_records=True))
    assert not kept.removable and "its tmux session s-T-1 still runs" in kept.why
    assert record.tdir.path.is_dir()


def test_a_start_killed_before_its_ticket_was_made_leaves_nothing_listed_and_gc_removes_it(
        handoff_home: Path) -> None:
    """A start writes its record beside its place and renames it in (operations.create): killed
    meanwhile, it leaves a hidden folder that no list shows, and gc removes it once that start
    is gone; one whose start still runs is left to it."""
    gone = subprocess.Popen(["true"])  # a pid that ran and is reaped: no process holds it
    gone.wait(timeout=15)
    repo_folder = handoff_home / "calc-0123456789"
    cut_off = repo_folder / f".K-1.new-{gone.pid}"
    at_work = repo_folder / f".K-2.new-{os.getpid()}"
    for folder in (cut_off, at_work):
        folder.mkdir(parents=True)
        TicketDir(folder).save(State(ticket=folder.name, repo="/src/calc",
                                     repo_key=repo_folder.name))
    assert handoff("status", "--json", "--all").stdout.strip() == "[]", "no ticket was made"
    dry = staging_leftovers(handoff_home, Options(dry_run=True))
    assert [(i.path, i.removable, i.removed) for i in dry] == [(str(cut_off), True, False)]
    assert f"the start of K-1 (pid {gone.pid}) was cut off" in dry[0].why
    [done] = staging_leftovers(handoff_home, Options())
    assert done.removed and not cut_off.exists() and at_work.is_dir()
