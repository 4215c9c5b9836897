"""`handoff finish TICKET [--merge | --squash]`: a passed ticket merged into its base branch,
locally, and closed, through the real CLI with the scripted agents, real tmux and git."""

from __future__ import annotations

from pathlib import Path

from handoff.errors import EXIT_ESCALATED, EXIT_NOT_MERGED, EXIT_USAGE, EXIT_WORK_AT_RISK
from tests.conftest import commit_file, git
from tests.harness import (
    ADD_ONLY,
    ALL_TESTS,
    FIX_ADD,
    FIX_MUL,
    FIX_NEG,
    events,
    handoff,
    plan_text,
    state,
    worktree_count,
    write_plan,
)

FIX_ALL = plan_text({1: {"edits": [FIX_ADD, FIX_MUL, FIX_NEG]}}, test=ALL_TESTS,
                    review=[ALL_TESTS])


def passed(repo: Path, tmp_path: Path, home: Path, ticket: str, *extra: str) -> str:
    """A ticket that passed review in round 1; its reviewed commit."""
    plan = write_plan(tmp_path, FIX_ALL, f"{ticket}.md")
    done = handoff("start", ticket, "--plan", str(plan), "--yes", "--foreground",
                   "--summary", "Fix the calc bugs", *extra, cwd=repo, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    current = state(home, ticket)
    assert current["phase"] == "passed"
    commit: str = current["commits"]["1"]
    return commit


def finish(repo: Path, ticket: str, *args: str) -> tuple[int, str]:
    done = handoff("finish", ticket, *args, cwd=repo, timeout=120)
    return done.returncode, done.stdout + done.stderr


def parents(repo: Path, rev: str) -> list[str]:
    return git(repo, "rev-list", "--parents", "-n", "1", rev).split()[1:]


def test_finish_merges_with_a_merge_commit_and_closes(repo: Path, tmp_path: Path,
                                                      handoff_home: Path) -> None:
    commit = passed(repo, tmp_path, handoff_home, "F-1")
    # the base moved on meanwhile, touching nothing the ticket touched
    moved = commit_file(repo, "NOTES.md", "the base moved on\n", "unrelated work on main")
    code, out = finish(repo, "F-1")
    assert code == 0, out
    assert "merged into main (merge)" in out and "not pushed" in out
    head = git(repo, "rev-parse", "main")
    assert parents(repo, head) == [moved, commit], "a merge commit of the base and the ticket"
    assert git(repo, "symbolic-ref", "--short", "HEAD") == "main"
    message = git(repo, "log", "-1", "--format=%B", head)
    assert message.startswith("Merge handoff/F-1 into main (F-1: Fix the calc bugs)"), message
    assert "Outcome: passed" in message
    # the user's checkout moved with it, and holds nothing half-done
    assert "return a + b" in (repo / "calc.py").read_text()
    assert (repo / "NOTES.md").is_file()
    assert git(repo, "status", "--porcelain") == ""
    assert state(handoff_home, "F-1")["phase"] == "closed"
    assert worktree_count(repo) == 1, "the ticket's worktrees are gone"
    assert git(repo, "rev-parse", "handoff/F-1") == commit, "the branch is kept"
    done = [e for e in events(handoff_home, "F-1") if e["kind"] == "finish"]
    assert done and done[0]["before"] == moved and done[0]["after"] == head


def test_finish_squash_makes_one_commit_naming_the_ticket(repo: Path, tmp_path: Path,
                                                          handoff_home: Path) -> None:
    base = git(repo, "rev-parse", "main")
    commit = passed(repo, tmp_path, handoff_home, "F-2")
    code, out = finish(repo, "F-2", "--squash")
    assert code == 0, out
    head = git(repo, "rev-parse", "main")
    assert parents(repo, head) == [base], "one commit on top of the base, no merge"
    assert git(repo, "rev-parse", f"{head}^{{tree}}") == git(repo, "rev-parse",
                                                            f"{commit}^{{tree}}")
    message = git(repo, "log", "-1", "--format=%B", head)
    assert message.startswith("F-2: Fix the calc bugs"), message
    assert "Outcome: passed" in message and "calc.py" in message
    assert git(repo, "status", "--porcelain") == ""
    assert "return -a" in (repo / "calc.py").read_text()
    assert state(handoff_home, "F-2")["phase"] == "closed" and worktree_count(repo) == 1
    code, out = finish(repo, "F-2", "--squash")
    assert code == EXIT_USAGE and "F-2 is closed, not passed" in out, out
    assert git(repo, "rev-parse", "main") == head


def test_a_base_that_already_has_the_change_gets_no_empty_commit(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    commit = passed(repo, tmp_path, handoff_home, "F-8")
    git(repo, "cherry-pick", commit)  # the user took the change over by hand
    head = git(repo, "rev-parse", "HEAD")
    code, out = finish(repo, "F-8", "--squash")
    assert code == 0, out
    assert "already holds what" in out and "nothing to merge" in out
    assert git(repo, "rev-parse", "main") == head
    assert state(handoff_home, "F-8")["phase"] == "closed" and worktree_count(repo) == 1


def test_finish_into_a_branch_checked_out_nowhere(repo: Path, tmp_path: Path,
                                                  handoff_home: Path) -> None:
    base = git(repo, "rev-parse", "main")
    commit = passed(repo, tmp_path, handoff_home, "F-3", "--base", "main")
    git(repo, "switch", "-q", "-c", "elsewhere")
    before = (repo / "calc.py").read_text()
    code, out = finish(repo, "F-3")
    assert code == 0, out
    assert parents(repo, "main") == [base, commit]
    assert git(repo, "symbolic-ref", "--short", "HEAD") == "elsewhere"
    assert git(repo, "rev-parse", "HEAD") == base, "the checkout of another branch is untouched"
    assert (repo / "calc.py").read_text() == before and git(repo, "status", "--porcelain") == ""


def test_a_conflicting_base_is_refused_changing_nothing(repo: Path, tmp_path: Path,
                                                        handoff_home: Path) -> None:
    passed(repo, tmp_path, handoff_home, "F-4")
    calc = (repo / "calc.py").read_text().replace("return a - b", "return b - a")
    head = commit_file(repo, "calc.py", calc, "main changes the same line")
    code, out = finish(repo, "F-4", "--merge")
    assert code == EXIT_NOT_MERGED, out
    assert "does not merge cleanly into main" in out and "conflicts in calc.py" in out
    assert "hint:" in out and "Traceback" not in out
    assert "F-4 stays passed" in out and "'handoff resume F-4 --onto main'" in out
    assert git(repo, "rev-parse", "HEAD") == head and git(repo, "rev-parse", "main") == head
    assert git(repo, "status", "--porcelain") == "", "no half-merged checkout"
    assert (repo / "calc.py").read_text() == calc
    assert not (Path(git(repo, "rev-parse", "--git-dir")) / "MERGE_HEAD").exists()
    # the main checkout, the implementer's, the reviewer's and the gate's
    assert state(handoff_home, "F-4")["phase"] == "passed" and worktree_count(repo) == 4


def test_a_dirty_checkout_of_the_base_is_refused_keeping_the_change(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    passed(repo, tmp_path, handoff_home, "F-5")
    head = git(repo, "rev-parse", "HEAD")
    mine = (repo / "calc.py").read_text() + "# my own change, not committed\n"
    (repo / "calc.py").write_text(mine)
    code, out = finish(repo, "F-5", "--squash")
    assert code == EXIT_WORK_AT_RISK, out
    assert "uncommitted or untracked changes: calc.py" in out and "hint:" in out
    assert (repo / "calc.py").read_text() == mine
    assert git(repo, "rev-parse", "HEAD") == head
    assert state(handoff_home, "F-5")["phase"] == "passed" and worktree_count(repo) == 4


def test_finish_refuses_a_ticket_that_did_not_pass(repo: Path, tmp_path: Path,
                                                   handoff_home: Path) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY,
                                          review=[ALL_TESTS]))
    done = handoff("start", "F-6", "--plan", str(plan), "--yes", "--foreground",
                   "--max-rounds", "1", cwd=repo, timeout=120)
    assert done.returncode == EXIT_ESCALATED, done.stdout + done.stderr
    head = git(repo, "rev-parse", "HEAD")
    code, out = finish(repo, "F-6")
    assert code == EXIT_USAGE, out
    assert "F-6 is escalated, not passed" in out and "--more-rounds" in out
    assert git(repo, "rev-parse", "HEAD") == head
    assert state(handoff_home, "F-6")["phase"] == "escalated"


def test_finish_refuses_when_the_base_is_not_known(repo: Path, tmp_path: Path,
                                                   handoff_home: Path) -> None:
    # started from HEAD: the base is the main checkout's branch, if it holds the base commit
    passed(repo, tmp_path, handoff_home, "F-7")
    git(repo, "switch", "-q", "--orphan", "lonely")
    commit_file(repo, "other.txt", "unrelated history\n", "a branch of its own")
    code, out = finish(repo, "F-7")
    assert code == EXIT_USAGE, out
    assert "lonely" in out and "does not hold that commit" in out and "hint:" in out
    assert state(handoff_home, "F-7")["phase"] == "passed"
