"""`handoff gc`: real tickets run through the CLI in real tmux and git, then left behind (marked
closed, their record deleted, their orchestrator or tmux server killed with SIGKILL); gc must
name exactly those leftovers, remove exactly them, and never lose work or touch a live ticket."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PYTHON, git, wait_until
from tests.faults.catalog import fault
from tests.harness import (
    ADD_ONLY,
    FIX_ADD,
    handoff,
    paused_ticket,
    plan_text,
    processes_of,
    state,
    stop_runner,
    ticket_path,
    tmux_alive,
    windows,
    write_plan,
)


def gc(*args: str, cwd: Path | None = None) -> list[dict[str, Any]]:
    done = handoff("gc", "--json", *args, cwd=cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    found: list[dict[str, Any]] = json.loads(done.stdout)
    return found


def listed(found: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """What gc found but the cgroups of the tickets' peers and gate runs (tests/unit/machinery/test_limits.py
    proves those)."""
    return {(item["kind"], item["path"]) for item in found if item["kind"] != "cgroup"}


def passed_ticket(repo: Path, tmp_path: Path, ticket: str) -> dict[str, Any]:
    """A ticket run to `passed` in the foreground: its session and worktrees stay."""
    plan = plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY, review=[ADD_ONLY])
    done = handoff("start", ticket, "--plan", str(write_plan(tmp_path, plan, f"{ticket}.md")),
                   "--yes", "--foreground", cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    return state(Path(os.environ["HANDOFF_HOME"]), ticket)


def mark_closed(home: Path, ticket: str) -> None:
    """What a close that died half-way leaves: the phase closed, the rest still there."""
    path = ticket_path(home, ticket) / "state.json"
    data = json.loads(path.read_text())
    data["phase"] = "closed"
    path.write_text(json.dumps(data))


def worktree_dir(repo: Path, ticket: str, role: str) -> Path:
    return repo.resolve() / ".worktrees" / ticket / role


def registered(repo: Path) -> set[Path]:
    out = git(repo, "worktree", "list", "--porcelain")
    return {Path(line[len("worktree "):]).resolve() for line in out.splitlines()
            if line.startswith("worktree ")}


def has_session(socket: str, session: str) -> bool:
    return subprocess.run(["tmux", "-L", socket, "has-session", "-t", f"={session}:"],
                          capture_output=True, timeout=15).returncode == 0


def test_a_closed_ticket_s_session_and_worktrees_go_a_live_one_s_stay(
        repo: Path, tmp_path: Path, handoff_home: Path, socket: str) -> None:
    closed = passed_ticket(repo, tmp_path, "T-1")
    live = passed_ticket(repo, tmp_path, "T-2")
    mark_closed(handoff_home, "T-1")
    leftovers = {("session", f"{socket}:{closed['session']}"),
                 ("worktree", str(worktree_dir(repo, "T-1", "implementer"))),
                 ("worktree", str(worktree_dir(repo, "T-1", "reviewer"))),
                 ("worktree", str(worktree_dir(repo, "T-1", "gate")))}

    dry = gc("--dry-run", cwd=repo)
    assert listed(dry) == leftovers
    assert all(i["removable"] and not i["removed"] and "T-1 is closed" in i["why"] for i in dry
               if i["kind"] != "cgroup")
    assert all("T-2" not in i["path"] for i in dry), "a live ticket's cgroups are its own"
    assert has_session(socket, closed["session"]), "--dry-run removes nothing"
    assert worktree_dir(repo, "T-1", "implementer") in registered(repo)

    done = gc(cwd=repo)
    assert listed(done) == leftovers and all(i["removed"] for i in done)
    assert not has_session(socket, closed["session"])
    assert not (repo / ".worktrees" / "T-1").exists()
    assert git(repo, "rev-parse", "--verify", "handoff/T-1"), "the branch is kept"
    # the live ticket (passed, not closed) keeps everything
    assert set(windows(socket, live["session"])) == {"orchestrator", "implementer", "reviewer"}
    assert {worktree_dir(repo, "T-2", r) for r in ("implementer", "reviewer")} <= registered(repo)
    assert gc(cwd=repo) == [], "nothing is left to find"


def test_a_vanished_ticket_s_session_peers_and_worktrees_go(
        repo: Path, tmp_path: Path, handoff_home: Path, socket: str) -> None:
    runner, folder, current = paused_ticket(repo, tmp_path, handoff_home, "T-3")
    stop_runner(runner)  # SIGKILL: the orchestrator leaves everything behind
    assert processes_of(handoff_home, "scripted_agent"), "the implementer still runs"
    # what a CLI may leave running past its pane: deaf to the hangup, in a session of its own
    left = subprocess.Popen(
        [PYTHON, "-c", "import signal, time; signal.signal(signal.SIGHUP, signal.SIG_IGN); "
                       "time.sleep(600)  # left-by-peer"],
        env={**os.environ, "HANDOFF_PEER": f"{folder}#implementer"}, start_new_session=True)
    try:
        wait_until(lambda: processes_of(handoff_home, "left-by-peer"), what="the left process")
        shutil.rmtree(folder)
        found = gc(cwd=repo)
        survivors = processes_of(handoff_home, "scripted_agent", "left-by-peer")
    finally:
        if left.poll() is None:
            left.kill()  # only when gc failed to end it: the test fails below, clean
        left.wait(timeout=10)
    # the gate's checkout too: made beside round 1 for the base's test count
    assert listed(found) == {("session", f"{socket}:{current['session']}"),
                             ("worktree", str(worktree_dir(repo, "T-3", "implementer"))),
                             ("worktree", str(worktree_dir(repo, "T-3", "reviewer"))),
                             ("worktree", str(worktree_dir(repo, "T-3", "gate")))}
    assert all(i["removed"] for i in found)
    assert "directory of its ticket T-3 is gone" in found[0]["why"]
    assert not has_session(socket, str(current["session"]))
    assert survivors == [], "the peers and what they left running are ended"
    assert registered(repo) == {repo.resolve()}
    assert not tmux_alive(socket)


def test_a_dirty_worktree_is_kept_and_with_force_kept_as_a_patch(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    passed_ticket(repo, tmp_path, "T-4")
    mark_closed(handoff_home, "T-4")
    implementer = worktree_dir(repo, "T-4", "implementer")
    (implementer / "calc.py").write_text("# half-done idea\n")
    (implementer / "idea.txt").write_text("untracked thought\n")

    found = {i["path"]: i for i in gc(cwd=repo)}
    kept = found[str(implementer)]
    assert not kept["removable"] and not kept["removed"]
    assert "uncommitted work" in kept["why"] and "--force" in kept["why"]
    assert found[str(worktree_dir(repo, "T-4", "reviewer"))]["removed"]
    assert (implementer / "idea.txt").read_text() == "untracked thought\n"

    forced = gc("--force", cwd=repo)
    assert [(i["path"], i["removed"]) for i in forced] == [(str(implementer), True)]
    patch = ticket_path(handoff_home, "T-4") / "transcripts" / "implementer-discarded-at-gc.patch"
    assert forced[0]["saved"] == str(patch)
    assert not implementer.exists() and not (repo / ".worktrees").exists()
    git(repo, "checkout", "-q", "handoff/T-4")
    git(repo, "apply", str(patch))
    assert (repo / "calc.py").read_text() == "# half-done idea\n"
    assert (repo / "idea.txt").read_text() == "untracked thought\n"


def test_what_is_not_a_worktree_or_is_in_use_is_named_and_left(repo: Path, tmp_path: Path,
                                                  handoff_home: Path, socket: str) -> None:
    passed_ticket(repo, tmp_path, "T-5")
    mark_closed(handoff_home, "T-5")
    root = repo.resolve() / ".worktrees"
    stray = root / "T-5" / "notes"
    stray.mkdir()
    (stray / "keep.txt").write_text("mine\n")
    ghost = root / "GHOST" / "implementer"  # looks like a worktree by its name only
    ghost.mkdir(parents=True)
    (ghost / "calc.py").write_text("not a checkout\n")
    (root / "loose.txt").write_text("a file\n")
    reviewer = worktree_dir(repo, "T-5", "reviewer")
    subprocess.run(["tmux", "-L", socket, "new-session", "-d", "-s", "stranger", "-c",
                    str(reviewer), "sleep", "600"], check=True, timeout=15)

    found = {i["path"]: i for i in gc(cwd=repo)}
    for path in (stray, ghost, root / "loose.txt"):
        assert found[str(path)]["kind"] == "folder" and not found[str(path)]["removable"]
        assert "left alone" in found[str(path)]["why"]
    assert found[f"{socket}:stranger"]["removable"] is False
    assert found[str(worktree_dir(repo, "T-5", "implementer"))]["removed"]
    in_use = found[str(reviewer)]
    assert not in_use["removable"] and f"tmux session {socket}:stranger" in in_use["why"]
    assert reviewer in registered(repo), "a worktree a pane works in stays"
    assert (stray / "keep.txt").read_text() == "mine\n"
    assert (ghost / "calc.py").read_text() == "not a checkout\n"
    assert (root / "loose.txt").exists() and has_session(socket, "stranger")


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


def test_a_stale_socket_goes_a_live_one_stays(repo: Path, handoff_home: Path,
                                              socket: str) -> None:
    path = Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}" / socket
    subprocess.run(["tmux", "-L", socket, "new-session", "-d", "-s", "x", "sleep", "600"],
                   check=True, timeout=15)
    assert [i for i in gc(cwd=repo) if i["kind"] == "socket"] == [], "a live server stays"
    server = int(subprocess.run(["tmux", "-L", socket, "display-message", "-p", "#{pid}"],
                                capture_output=True, text=True, check=True,
                                timeout=15).stdout)
    os.kill(server, signal.SIGKILL)
    wait_until(lambda: not tmux_alive(socket), what="the tmux server to die")
    assert path.exists()

    assert listed(gc("--dry-run", cwd=repo)) == {("socket", str(path))}
    assert path.exists()
    done = handoff("gc", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert f"removed      socket {path}: no tmux server answers on it" in done.stdout
    assert done.stdout.strip().endswith("gc: removed 1, kept 0")
    assert not path.exists() and not path.with_name(f"{socket}.lock").exists()


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


def test_a_vanished_ticket_s_dirty_worktree_is_kept_then_saved_outside_its_record(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    runner, folder, _ = paused_ticket(repo, tmp_path, handoff_home, "T-8")
    stop_runner(runner)
    implementer = worktree_dir(repo, "T-8", "implementer")
    (implementer / "draft.txt").write_text("unfinished\n")
    shutil.rmtree(folder)

    shown = handoff("gc", cwd=repo)
    assert shown.returncode == 0, shown.stderr
    assert (f"kept         worktree {implementer}: ticket T-8 has no record in {handoff_home}; "
            "it holds uncommitted work (draft.txt)") in shown.stdout
    assert re.search(r"gc: removed \d+, kept 1$", shown.stdout.strip()), shown.stdout
    assert shown.stdout.count("removed      worktree") == 2, "the reviewer's and the gate's"
    assert (implementer / "draft.txt").exists()

    forced = gc("--force", cwd=repo)
    patch = handoff_home / "discarded" / folder.parent.name / \
        "T-8-implementer-discarded-at-gc.patch"
    assert [(i["path"], i["removed"], i["saved"]) for i in forced if i["kind"] != "cgroup"] \
        == [(str(implementer), True, str(patch))]
    assert "draft.txt" in patch.read_text() and not folder.exists(), \
        "the patch is kept, and no folder is made where the record was"
    assert registered(repo) == {repo.resolve()}


@fault("18.7", "`handoff gc` under another HANDOFF_HOME (and tmux socket) while a ticket's "
       "peers work in its worktrees, with --force",
       "kept: each worktree records which HANDOFF_HOME and ticket made it, and gc never removes "
       "one whose owner's record lives, nor one any process works in (its cwd or an open file)",
       "both worktrees and the live ticket")
def test_gc_of_another_home_keeps_a_live_tickets_worktrees(
        repo: Path, tmp_path: Path, handoff_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner, _, _ = paused_ticket(repo, tmp_path, handoff_home, "GC1")
    try:
        monkeypatch.setenv("HANDOFF_HOME", str(tmp_path / "other-home"))
        monkeypatch.setenv("HANDOFF_TMUX_SOCKET", "handoff-gc-other")
        found = gc("--force", "--repo", str(repo), cwd=repo)
        kept = {i["path"]: i for i in found if i["kind"] == "worktree"}
        for role in ("implementer", "reviewer"):
            item = kept[str(worktree_dir(repo, "GC1", role))]
            assert not item["removed"] and f"HANDOFF_HOME {handoff_home}" in item["why"], item
            assert worktree_dir(repo, "GC1", role).is_dir()
    finally:
        stop_runner(runner)


@fault("18.7", "`handoff gc` of a worktree whose ticket has no record anywhere, while a process "
       "(not a pane of gc's tmux socket) works in it",
       "kept, naming the process", "the worktree")
def test_gc_keeps_a_worktree_a_process_works_in(repo: Path, tmp_path: Path,
                                                handoff_home: Path) -> None:
    passed_ticket(repo, tmp_path, "GC2")
    folder = ticket_path(handoff_home, "GC2")
    assert handoff("stop", "GC2", cwd=repo).returncode == 0
    shutil.rmtree(folder)
    path = worktree_dir(repo, "GC2", "implementer")
    worker = subprocess.Popen(["sleep", "120"], cwd=path)
    try:
        found = gc("--force", cwd=repo)
    finally:
        worker.kill()
        worker.wait()
    item = {i["path"]: i for i in found}[str(path)]
    assert not item["removed"] and f"pid {worker.pid} (sleep) works in it" in item["why"], item
    assert path.is_dir()
    others = {i["path"]: i for i in found}[str(worktree_dir(repo, "GC2", "reviewer"))]
    assert others["removed"], "the worktree nobody works in goes"
