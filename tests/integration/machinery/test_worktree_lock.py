"""handoff.machinery.worktree_lock: one process at a time in a repository's worktree add, list
and prune, waited for and then refused by name, gone with its holder, re-entrant in a thread."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest

from handoff.errors import Busy
from handoff.machinery.repo import Repo
from handoff.machinery.repo_worktrees import registered
from handoff.machinery.worktree_lock import repo_lock
from handoff.machinery.worktrees import TicketWorktrees
from tests.conftest import PYTHON, git, wait_until


@pytest.fixture
def base(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD")


def registered_paths(repo: Path) -> set[Path]:
    out = git(repo, "worktree", "list", "--porcelain")
    return {Path(line[len("worktree "):]).resolve() for line in out.splitlines()
            if line.startswith("worktree ")}


HOLD = """
import sys, time
from pathlib import Path
from handoff.machinery.worktree_lock import repo_lock
with repo_lock(Path(sys.argv[1])):
    Path(sys.argv[2]).write_text("held")
    while not Path(sys.argv[3]).exists():
        time.sleep(0.01)
"""


TAKE_TURNS = """
import os, sys
from pathlib import Path
from handoff.machinery.worktree_lock import repo_lock
for _ in range(int(sys.argv[3])):
    with repo_lock(Path(sys.argv[1])):
        with open(sys.argv[2], "a") as log:
            log.write(f"in {os.getpid()}\\n")
            log.flush()
            os.sched_yield()
            log.write(f"out {os.getpid()}\\n")
"""


def test_the_lock_lets_one_process_in_at_a_time(repo: Path, tmp_path: Path) -> None:
    log = tmp_path / "turns.log"
    common = Repo.at(repo).common_dir
    workers = [subprocess.Popen([PYTHON, "-c", TAKE_TURNS, str(common), str(log), "25"])
               for _ in range(8)]
    assert [w.wait(timeout=60) for w in workers] == [0] * 8
    lines = log.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 * 8 * 25
    for enter, leave in zip(lines[::2], lines[1::2], strict=True):
        assert enter.startswith("in ") and leave == "out " + enter[3:], (enter, leave)


def test_a_held_lock_is_waited_for_then_refused_clearly(repo: Path, tmp_path: Path) -> None:
    common = Repo.at(repo).common_dir
    held, release = tmp_path / "held", tmp_path / "release"
    holder = subprocess.Popen([PYTHON, "-c", HOLD, str(common), str(held), str(release)])
    try:
        wait_until(held.exists, what="the other process to hold the lock")
        started = time.monotonic()
        with pytest.raises(Busy) as info, repo_lock(common, timeout=0.5):
            pass
        assert 0.5 <= time.monotonic() - started < 5
        assert f"pid {holder.pid}" in info.value.message
        assert str(common) in info.value.message
        assert info.value.hint
    finally:
        release.write_text("go")
        holder.wait(timeout=30)
    with repo_lock(common, timeout=5):
        pass


def test_the_lock_dies_with_its_holder(repo: Path, tmp_path: Path) -> None:
    common = Repo.at(repo).common_dir
    held = tmp_path / "held"
    holder = subprocess.Popen([PYTHON, "-c", HOLD, str(common), str(held), str(tmp_path / "x")])
    wait_until(held.exists, what="the other process to hold the lock")
    holder.kill()
    holder.wait(timeout=30)
    with repo_lock(common, timeout=5):
        pass


def test_the_lock_is_reentrant_in_one_thread(repo: Path) -> None:
    common = Repo.at(repo).common_dir
    with repo_lock(common, timeout=1), repo_lock(common, timeout=1):
        assert registered(Repo.at(repo)) == {repo.resolve()}


HALF_ADD = """
import sys, time
from pathlib import Path
from handoff.machinery.worktree_lock import repo_lock
common, held, release = (Path(a) for a in sys.argv[1:4])
with repo_lock(common):
    # what another handoff's `git worktree add` leaves for an instant, in git's own order:
    # its admin dir locked, gitdir written, commondir created but not yet written
    half = common / "worktrees" / "other-ticket"
    half.mkdir(parents=True)
    (half / "locked").write_text("initializing")
    (half / "gitdir").write_text(str(common.parent / ".worktrees" / "other" / ".git") + "\\n")
    (half / "commondir").touch()
    held.write_text("held")
    while not release.exists():
        time.sleep(0.01)
    for name in ("commondir", "gitdir", "locked"):
        (half / name).unlink()
    half.rmdir()
"""


def test_worktree_operations_never_see_another_handoffs_half_done_add(
        repo: Path, base: str, tmp_path: Path) -> None:
    """While another handoff process holds the repo's lock in the middle of a worktree add,
    making a worktree waits for it instead of reading the half-written worktree (git: "failed
    to read .git/worktrees/<x>/commondir") and failing."""
    common = Repo.at(repo).common_dir
    wt = TicketWorktrees(Repo.at(repo), "T-1")
    held, release = tmp_path / "held", tmp_path / "release"
    other = subprocess.Popen([PYTHON, "-c", HALF_ADD, str(common), str(held), str(release)])
    outcome: list[object] = []

    def make() -> None:
        try:
            outcome.append(wt.create_detached("reviewer", base))
        except Exception as exc:  # reported by the assertions below
            outcome.append(exc)

    try:
        wait_until(held.exists, what="the other process to be half-way through its add")
        adder = threading.Thread(target=make)
        adder.start()
        adder.join(timeout=1.0)
        assert adder.is_alive() and not outcome, f"it did not wait: {outcome}"
    finally:
        release.write_text("go")
    adder.join(timeout=30)
    assert other.wait(timeout=30) == 0
    assert outcome == [wt.path("reviewer")]
    assert registered_paths(repo) == {repo.resolve(), wt.path("reviewer").resolve()}

