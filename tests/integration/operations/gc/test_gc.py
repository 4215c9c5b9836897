"""`handoff gc`: real tickets run through the CLI in real tmux and git, then left behind (marked
closed, their record deleted, their orchestrator or tmux server killed with SIGKILL); gc must
name exactly those leftovers, remove exactly them, and never lose work or touch a live ticket."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests.conftest import PYTHON, git, wait_until
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
