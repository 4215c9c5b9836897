"""post_create runs once per worktree, fenced in like the gate; the reviewer's checkout is
still the commit under review at every round, and bytecode left in it (stale, or planted by
the code under review) is gone before the next round runs anything."""

from __future__ import annotations

import os
import py_compile
import subprocess
import sys
from pathlib import Path

import yaml

from handoff.machinery.repo import Repo
from handoff.machinery.worktrees import TicketWorktrees
from tests.conftest import PYTHON, commit_file, git, wait_until
from tests.harness import (
    ADD_ONLY,
    ALL_TESTS,
    FIX_ADD,
    FIX_MUL,
    FIX_NEG,
    explained,
    handoff,
    pane_screen,
    plan_text,
    release,
    spawn,
    state,
    stop_runner,
    ticket_path,
    wait_phase,
    write_plan,
)

#: a setup that leaves ignored output in the worktree (.venv/marker) and counts its runs in a
#: file outside the repository, one line naming the worktree per run
SETUP = ("import os, pathlib, sys; pathlib.Path('.venv').mkdir(exist_ok=True); "
         "pathlib.Path('.venv/marker').write_text('set up'); "
         "open(sys.argv[1], 'a').write(os.getcwd() + '\\n')")


def runs_of(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


def paused_on(folder: Path, flag: Path, current: dict[str, object]) -> bool:
    return f"paused until {flag}" in pane_screen(folder, "reviewer", current)


def stale_bytecode(worktree: Path) -> Path:
    """Bytecode of the worktree's calc.py as it is now, where Python would look for it, in a
    form Python never checks against its source (as pip or compileall may write it)."""
    cfile = worktree / "__pycache__" / f"calc.{sys.implementation.cache_tag}.pyc"
    py_compile.compile(str(worktree / "calc.py"), cfile=str(cfile), doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    return cfile


def test_setup_runs_once_per_worktree_and_the_reviewer_sees_each_commit_pristine(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    (repo / ".gitignore").write_text("__pycache__/\n.venv/\n", encoding="utf-8")
    git(repo, "commit", "-qam", "the setup's output is ignored")
    # the fenced setup writes only its checkout and what sandbox.write opens
    counted = tmp_path / "counted"
    counted.mkdir()
    runs = counted / "setup-runs"
    handoff_home.mkdir(parents=True, exist_ok=True)
    (handoff_home / "config.yaml").write_text(
        yaml.safe_dump({"post_create": [[PYTHON, "-c", SETUP, str(runs)]],
                        "sandbox": {"mode": "on", "write": [str(counted)]}}), encoding="utf-8")
    # round 1 fixes add and mul, the review finds neg broken; round 2 fixes neg and passes
    plan = write_plan(tmp_path, plan_text(
        {1: {"edits": [FIX_ADD, FIX_MUL], "reviewer": {"pause_until": "look-1"}},
         2: {"edits": [FIX_NEG], "reviewer": {"pause_until": "look-2"}}},
        test=ADD_ONLY, review=[ALL_TESTS]))
    runner = spawn("start", "S-1", "--plan", str(plan), "--yes", "--foreground", cwd=repo,
                   log=tmp_path / "orchestrator.log")
    try:
        implementer = repo / ".worktrees" / "S-1" / "implementer"
        reviewer = repo / ".worktrees" / "S-1" / "reviewer"
        wait_phase(handoff_home, "S-1", "reviewing")
        folder, current = ticket_path(handoff_home, "S-1"), state(handoff_home, "S-1")
        # in the ticket folder, where a sandboxed reviewer sees them
        look1, look2 = folder / "look-1", folder / "look-2"
        explained(lambda: wait_until(lambda: paused_on(folder, look1, current), 60,
                                     "the round 1 reviewer to pause"))
        # once in each new worktree: the implementer's, the reviewer's and the gate's own
        gate = repo / ".worktrees" / "S-1" / "gate"
        assert sorted(runs_of(runs)) == sorted([str(implementer), str(reviewer), str(gate)])
        # round 1's reviewer leaves an untracked file and bytecode of round 1's calc.py
        (reviewer / "notes.txt").write_text("the round 1 reviewer's notes\n", encoding="utf-8")
        stale = stale_bytecode(reviewer)
        release(folder, "look-1")

        explained(lambda: wait_until(lambda: paused_on(folder, look2, current), 90,
                                     "the round 2 reviewer to pause"))
        current = state(handoff_home, "S-1")
        assert current["round"] == 2 and current["gates"] == {"1": "pass", "2": "pass"}
        commit = current["commits"]["2"]
        assert git(reviewer, "rev-parse", "HEAD") == commit
        assert git(reviewer, "status", "--porcelain", "--untracked-files=all") == "", \
            "tracked files are the commit's, nothing untracked is left"
        assert git(reviewer, "diff", "--stat", commit) == ""
        assert not (reviewer / "notes.txt").exists()
        assert "notes.txt" in (folder / "transcripts" / "reviewer-scratch-2.patch").read_text()
        assert (reviewer / ".venv" / "marker").read_text() == "set up", "setup output stays"
        assert not stale.exists(), "what git does not track goes, the stale bytecode among it"
        release(folder, "look-2")

        final = wait_phase(handoff_home, "S-1", "passed", "escalated", "needs-human",
                           timeout=90)
        assert final["phase"] == "passed", final.get("reason")
        assert final["verdicts"] == {"1": "fail", "2": "pass"}, \
            "the round 2 review ran round 2's calc.py, not the stale bytecode of round 1"
        assert runner.wait(timeout=30) == 0
    finally:
        stop_runner(runner)
    lines = runs_of(runs)
    assert len(lines) == 3, f"post_create ran {len(lines)} times: {lines}"
    assert sorted(lines) == sorted([str(implementer), str(reviewer), str(gate)]), \
        "once per worktree"
    # bytecode left in the checkout would be a trap: Python run without the peers'
    # environment would take it over the source in front of it; none is left
    plain = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    probe = [PYTHON, "-c", "import calc; print(calc.neg(2))"]
    assert subprocess.run(probe, cwd=reviewer, env=plain, capture_output=True, text=True,
                          timeout=60).stdout.strip() == "-2"
    closed = handoff("close", "S-1", "--repo", str(repo))
    assert closed.returncode == 0, closed.stdout + closed.stderr


def setup_counting(repo: Path, runs: Path, *post_create: tuple[str, ...]) -> TicketWorktrees:
    count = (PYTHON, "-c", "import os, sys; open(sys.argv[1], 'a').write(os.getcwd() + '\\n')",
             str(runs))
    return TicketWorktrees(Repo.at(repo), "T-1", post_create=(*post_create, count))


def test_untracked_setup_output_is_kept_and_never_taken_for_the_reviewers_work(
        repo: Path, tmp_path: Path) -> None:
    """A setup whose output git does not ignore (a generated config, a folder): kept like the
    shared folders, since post_create does not run again to remake it."""
    runs = tmp_path / "runs"
    make = (PYTHON, "-c", "import pathlib; pathlib.Path('gen').mkdir(); "
            "pathlib.Path('gen/config.h').write_text('#define X 1'); "
            "pathlib.Path('odd [1] *.txt').write_text('generated')")
    wt = setup_counting(repo, runs, make)
    base = git(repo, "rev-parse", "HEAD")
    implementer, reviewer = wt.create_implementer(base), wt.create_detached("reviewer", base)
    (reviewer / "probe.py").write_text("the reviewer's probe\n", encoding="utf-8")
    (reviewer / "odd [2] *.txt").write_text("the reviewer's file\n", encoding="utf-8")
    commit = commit_file(implementer, "calc.py", "def add(a, b):\n    return a + b\n")
    scratch = tmp_path / "scratch.patch"

    wt.point("reviewer", commit, scratch)

    assert (reviewer / "gen" / "config.h").read_text() == "#define X 1"
    assert (reviewer / "odd [1] *.txt").read_text() == "generated"
    assert not (reviewer / "probe.py").exists() and not (reviewer / "odd [2] *.txt").exists()
    patch = scratch.read_text(encoding="utf-8")
    assert "probe.py" in patch and "odd [2]" in patch
    assert "config.h" not in patch and "odd [1]" not in patch
    assert wt.dirty(reviewer) == [] and wt.dirty(implementer) == []
    assert runs_of(runs).count(str(reviewer)) == 1


def test_a_worktree_deleted_by_hand_is_set_up_again_when_made_again(
        repo: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    wt = setup_counting(repo, runs)
    base = git(repo, "rev-parse", "HEAD")
    implementer, reviewer = wt.create_implementer(base), wt.create_detached("reviewer", base)
    commit = commit_file(implementer, "calc.py", "def add(a, b):\n    return a + b\n")
    wt.point("reviewer", commit, tmp_path / "scratch.patch")
    assert runs_of(runs).count(str(reviewer)) == 1
    subprocess.run(["rm", "-rf", str(reviewer)], check=True, timeout=60)

    made = wt.point("reviewer", commit, tmp_path / "scratch.patch")

    assert made.created and made.setup
    assert runs_of(runs).count(str(reviewer)) == 2, "the new worktree's git dir has no mark"
    assert git(reviewer, "rev-parse", "HEAD") == commit


def test_the_reviewer_writes_no_bytecode_and_a_planted_pyc_is_gone_by_the_next_round(
        repo: Path, tmp_path: Path) -> None:
    """No bytecode folder is shared between checkouts (one once let a peer of one ticket make
    the next ticket's gate pass): Python in a detached checkout writes none, and what the
    code under review left there (a .pyc Python never checks against its source) is removed
    when the checkout is pointed at the next commit."""
    assert "__pycache__/" in (repo / ".gitignore").read_text(), "bytecode is ignored"
    wt = TicketWorktrees(Repo.at(repo), "T-1")
    base = git(repo, "rev-parse", "HEAD")
    implementer, reviewer = wt.create_implementer(base), wt.create_detached("reviewer", base)
    env = wt.bytecode_env("reviewer")
    assert wt.bytecode_env("implementer") == {}, "the implementer's checkout is its own"
    writes = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}

    def add_in_reviewer() -> str:
        return subprocess.run([PYTHON, "-c", "import calc; print(calc.add(2, 3))"],
                              cwd=reviewer, check=True, timeout=60, capture_output=True,
                              text=True, env={**writes, **env}).stdout.strip()

    assert add_in_reviewer() == "-1", "the repo's calc subtracts"
    assert not (reviewer / "__pycache__").exists(), "no bytecode written"
    planted = stale_bytecode(reviewer)  # as the code under review could leave it
    assert add_in_reviewer() == "-1"
    commit = commit_file(implementer, "calc.py",
                         (implementer / "calc.py").read_text().replace("a - b", "a + b"))

    wt.point("reviewer", commit, tmp_path / "scratch.patch")

    assert not planted.exists()
    assert add_in_reviewer() == "5", "the commit under review runs, not round 1's bytecode"
