"""handoff.loop.fences: what each peer, and the gate, may see and touch when the sandbox is on.
The rules of a real ticket's fences, and one of them run in bubblewrap."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from handoff.loop import fences
from handoff.loop.workspace import Workspace
from handoff.machinery import sandbox
from handoff.machinery.sandbox import HIDE, READ, WRITE, Fence
from handoff.role import Kind
from tests.tickets import new_ticket


@pytest.fixture
def ws(repo: Path, handoff_home: Path) -> Workspace:
    """Ticket T-1 with the implementer's and the reviewer's worktrees made."""
    ws = new_ticket(handoff_home, repo)
    for role in ("implementer", "reviewer"):
        ws.worktrees.ensure(role, ws.state().base_commit, recreate=True)
    return ws


def peer_fence(ws: Workspace, role: str, kind: Kind) -> Fence:
    return fences.peer(role, kind, ws.provider(role), ws.env(role), home=ws.home, tdir=ws.tdir,
                       repo=ws.repo, worktrees=ws.worktrees, config=ws.config)


def kinds(fence: Fence) -> dict[Path, str]:
    return {path: kind for kind, path in fence.laid_out()}


def test_a_reviewer_writes_its_worktree_and_drafts_and_nothing_of_the_git_directory(
        ws: Workspace) -> None:
    fence = peer_fence(ws, "reviewer", Kind.REVIEWER)
    laid = kinds(fence)
    worktree = ws.worktrees.path("reviewer").resolve()
    assert fence.workdir == ws.worktrees.path("reviewer")
    assert laid[worktree] == WRITE
    assert laid[ws.tdir.drafts("reviewer").resolve()] == WRITE
    assert laid[ws.tdir.signals("reviewer").resolve()] == WRITE
    common = ws.repo.common_dir.resolve()
    assert not any(p.is_relative_to(common) for p in fence.writable()), fence.writable()
    assert laid[worktree / ".git"] == READ, "what points git at its config stays read-only"
    assert laid[ws.home.resolve()] == HIDE, "every other ticket's record is hidden"


def test_the_implementer_commits_but_moves_no_ref(ws: Workspace) -> None:
    fence = peer_fence(ws, "implementer", Kind.IMPLEMENTER)
    writable = fence.writable()
    common = ws.repo.common_dir.resolve()
    admin = ws.worktrees.admin_dir(ws.worktrees.path("implementer"))
    assert admin is not None
    assert common / "objects" in writable and admin.resolve() in writable
    assert not any(p.is_relative_to(common / "refs") for p in writable)
    laid = kinds(fence)
    for name in ("commondir", "gitdir", "config.worktree"):
        assert laid[admin.resolve() / name] == READ, name
    assert (admin / "config.worktree").is_file(), "made empty, so there is one to hold"


def test_a_reviewer_reads_its_own_briefs_and_the_diffs_never_the_implementers_reports(
        ws: Workspace) -> None:
    folder = ws.tdir.path
    (folder / "diff-1.patch").write_text("diff\n")
    (folder / "gate-1.log").write_text("ok\n")
    shown = fences.ticket_view(ws.tdir, "reviewer", Kind.REVIEWER)
    assert folder / "inbox" / "reviewer" in shown and folder / "plan.md" in shown
    assert folder / "contracts" / "reviewer.md" in shown
    assert folder / "diff-1.patch" in shown and folder / "gate-1.log" in shown
    assert folder not in shown and folder / "inbox" / "implementer" not in shown
    assert not any(p.name in ("state.json", "events.jsonl") for p in shown)
    assert fences.ticket_view(ws.tdir, "implementer", Kind.IMPLEMENTER) == [folder]


def test_the_gate_sees_nothing_of_the_tickets_folder(ws: Workspace) -> None:
    ws.worktrees.ensure("gate", ws.state().base_commit, recreate=True)
    fence = fences.gate(home=ws.home, repo=ws.repo, worktrees=ws.worktrees, config=ws.config,
                        env=ws.gate_env())
    assert fence.workdir == ws.worktrees.path("gate")
    tdir = ws.tdir.path.resolve()
    laid = kinds(fence)
    assert not any(p.is_relative_to(tdir) for p in laid if laid[p] != HIDE), laid
    assert fence.writable() == [ws.worktrees.path("gate").resolve()]


def test_in_bubblewrap_a_reviewer_cannot_write_the_git_objects(ws: Workspace) -> None:
    support = sandbox.support()
    assert support.bwrap, f"bubblewrap is needed here: {support.why}"
    fence = peer_fence(ws, "reviewer", Kind.REVIEWER)
    objects = ws.repo.common_dir / "objects" / "planted"
    worktree = ws.worktrees.path("reviewer")
    run = subprocess.run(sandbox.wrap(support.bwrap, fence, ["sh", "-c", f"touch {objects}"]),
                         capture_output=True, text=True, timeout=30)
    assert run.returncode != 0 and not objects.exists()
    ok = subprocess.run(sandbox.wrap(support.bwrap, fence, ["touch", str(worktree / "note")]),
                        capture_output=True, text=True, timeout=30)
    assert ok.returncode == 0, ok.stderr
    assert (worktree / "note").exists()
    secret = ws.tdir.path / "state.json"
    seen = subprocess.run(sandbox.wrap(support.bwrap, fence, ["cat", str(secret)]),
                          capture_output=True, text=True, timeout=30)
    assert seen.returncode != 0, "the state is no reviewer's to read"
