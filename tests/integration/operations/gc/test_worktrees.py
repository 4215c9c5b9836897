"""handoff.operations.gc.worktrees: a closed or vanished ticket's worktrees go through git;
work in them, a folder handoff did not make, and a worktree anyone still works in stay."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from handoff.machinery.repo import Repo
from handoff.machinery.worktrees import TicketWorktrees
from handoff.operations.gc.found import Options
from handoff.operations.gc.sessions import InUse
from handoff.operations.gc.worktrees import worktree_leftovers
from handoff.phases import Phase
from handoff.record.ticket import State, TicketDir
from tests.conftest import git
from tests.faults.catalog import fault
from tests.harness import (
    handoff,
    paused_ticket,
    stop_runner,
    ticket_path,
)
from tests.integration.operations.gc.test_gc import (
    gc,
    has_session,
    mark_closed,
    passed_ticket,
    registered,
    worktree_dir,
)


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


def made_by(repo: Path, home: Path, ticket: str, *roles: str) -> TicketWorktrees:
    """A ticket's worktrees, as handoff under HANDOFF_HOME home makes them (it records home)."""
    wt = TicketWorktrees(Repo.at(repo), ticket, home=home)
    for role in roles:
        wt.ensure(role, git(repo, "rev-parse", "HEAD"))
    return wt


def other_record(home: Path, repo: Path, ticket: str, phase: Phase) -> None:
    tdir = TicketDir(home / Repo.at(repo).key / ticket)
    tdir.path.mkdir(parents=True)
    tdir.save(State(ticket=ticket, repo=str(repo.resolve()), repo_key=Repo.at(repo).key,
                    phase=phase))


def test_another_homes_worktree_goes_once_its_owners_record_is_closed_or_gone(
        repo: Path, handoff_home: Path, tmp_path: Path) -> None:
    other = tmp_path / "other-home"
    live = made_by(repo, other, "L-1", "implementer")
    closed = made_by(repo, other, "C-1", "implementer")
    gone = made_by(repo, other, "G-1", "implementer")
    other_record(other, repo, "L-1", Phase.IMPLEMENTING)
    other_record(other, repo, "C-1", Phase.CLOSED)
    found = {i.path: i for i in worktree_leftovers(handoff_home, [], Options(repo=repo),
                                                   InUse())}
    kept = found[str(live.path("implementer"))]
    assert not kept.removable and f"belongs to ticket L-1 of HANDOFF_HOME {other}" in kept.why
    assert live.path("implementer").is_dir()
    for wt in (closed, gone):
        item = found[str(wt.path("implementer"))]
        assert item.removed and f"has no record in {handoff_home}" in item.why
        assert not wt.root.exists(), "the ticket's empty folder goes with its last worktree"


def test_a_worktree_a_kept_sessions_pane_works_in_is_kept_and_a_dry_run_removes_nothing(
        repo: Path, handoff_home: Path) -> None:
    wt = made_by(repo, handoff_home, "T-1", "implementer", "reviewer")
    busy = InUse([(wt.path("reviewer").resolve(), "tmux session s:work")])
    dry = {i.path: i for i in worktree_leftovers(handoff_home, [], Options(repo=repo,
                                                                            dry_run=True), busy)}
    assert dry[str(wt.path("implementer"))].removable and \
        not dry[str(wt.path("implementer"))].removed
    assert wt.path("implementer").is_dir()
    found = {i.path: i for i in worktree_leftovers(handoff_home, [], Options(repo=repo), busy)}
    reviewer = found[str(wt.path("reviewer"))]
    assert not reviewer.removable and "a pane of tmux session s:work works in it" in reviewer.why
    assert found[str(wt.path("implementer"))].removed
    assert wt.path("reviewer").is_dir() and not wt.path("implementer").exists()
