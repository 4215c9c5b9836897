"""`handoff resume TICKET --onto BRANCH`: a passed ticket that `finish` refused (a conflict, a
red merge) is carried onto the base in a round of its own, passes again, and then merges; the
hint finish prints is the command that does it. Real git, real tmux, the scripted peers."""

from __future__ import annotations

import shlex
from pathlib import Path

from handoff.errors import EXIT_NOT_MERGED, EXIT_USAGE
from tests.conftest import commit_file, git
from tests.harness import events, handoff, plan_text, state, ticket_path, wait_phase, write_plan
from tests.unit.operations.test_train import DISCOVER, FIXED, RENAME_NEG, USES_NEG, finish, fixed_base


def start(repo: Path, tmp_path: Path, ticket: str, rounds: dict[int, dict[str, object]],
          test: list[str] = DISCOVER) -> None:
    plan = write_plan(tmp_path, plan_text(rounds, test=test), f"{ticket}.md")
    done = handoff("start", ticket, "--plan", str(plan), "--yes", "--foreground", cwd=repo,
                   timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def follow(repo: Path, out: str) -> str:
    """Run the handoff command the hint names, as a person would paste it."""
    hint = out.split("hint:", 1)[1]
    command = next(part for part in hint.split("'")[1::2] if "--onto" in part)
    argv = shlex.split(command)
    assert argv[0] == "handoff", command
    done = handoff(*argv[1:], cwd=repo, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def brief(home: Path, ticket: str, n: int) -> str:
    return (ticket_path(home, ticket) / "inbox" / "implementer" / f"brief-{n}.md").read_text()


def test_a_textual_conflict_is_carried_onto_the_base_and_then_finishes(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    fixed_base(repo)
    resolved = FIXED.replace("    return a + b\n", "    return int(sum((a, b)))\n")
    start(repo, tmp_path, "O-1", {
        1: {"edits": [{"file": "calc.py", "replace": "return a + b", "with": "return sum((a, b))"}]},
        2: {"edits": [{"file": "calc.py", "content": resolved}]}})
    moved = commit_file(repo, "calc.py", FIXED.replace("return a + b", "return int(a + b)"),
                        "main makes the sum an int")
    code, out = finish(repo, "O-1")
    assert code == EXIT_NOT_MERGED and "conflicts in calc.py" in out, out
    said = follow(repo, out)
    assert "O-1 carried onto main" in said and "conflicts in calc.py" in said, said
    final = wait_phase(handoff_home, "O-1", "passed", "escalated", "needs-human", timeout=120)
    assert final["phase"] == "passed", final
    told = brief(handoff_home, "O-1", 2)
    assert "Carry your work onto main" in told and "conflicts in: calc.py" in told, told
    assert "main makes the sum an int" in told, told
    assert final["verdicts"].get("2") == "pass" and final["base_commit"] == moved
    assert final["gates"].get("2") == "pass", "the carried round went through the gate"
    carried = [e for e in events(handoff_home, "O-1") if e["kind"] == "onto"]
    assert carried and carried[0]["conflicts"] == ["calc.py"] and carried[0]["after"] == moved
    # the round's commit is a merge of main: finish now merges it
    commit = final["commits"]["2"]
    assert git(repo, "merge-base", "--is-ancestor", moved, commit) == ""
    code, out = finish(repo, "O-1")
    assert code == 0, out
    assert "int(sum((a, b)))" in git(repo, "show", "main:calc.py")
    assert git(repo, "merge-base", "--is-ancestor", moved, "main") == ""


def test_a_red_merge_is_carried_with_what_failed_and_then_finishes(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    fixed_base(repo)
    start(repo, tmp_path, "R-1", {1: {"edits": RENAME_NEG}})
    start(repo, tmp_path, "R-2", {1: {"edits": [USES_NEG]}, 2: {"edits": [
        {"file": "tests/test_twice.py", "replace": "neg", "with": "negate"}]}})
    assert finish(repo, "R-1")[0] == 0
    code, out = finish(repo, "R-2")
    assert code == EXIT_NOT_MERGED and "test_twice" in out, out
    said = follow(repo, out)
    assert "merged cleanly at" in said, said
    final = wait_phase(handoff_home, "R-2", "passed", "escalated", "needs-human", timeout=120)
    assert final["phase"] == "passed", final
    told = brief(handoff_home, "R-2", 2)
    assert "it failed the gate" in told and "test_twice" in told and "merge-1.log" in told
    code, out = finish(repo, "R-2")
    assert code == 0, out
    assert "negate(negate(3))" in git(repo, "show", "main:tests/test_twice.py")


def test_carrying_onto_is_refused_where_it_cannot_work(repo: Path, tmp_path: Path,
                                                      handoff_home: Path) -> None:
    fixed_base(repo)
    start(repo, tmp_path, "N-1", {1: {"edits": [{"file": "NOTES.md", "content": "x\n"}]}})
    before = git(repo, "for-each-ref", "--format=%(refname) %(objectname)")
    for args, said in ((("--onto", "nowhere"), "there is no branch 'nowhere'"),
                       (("--onto", "main"), "N-1 already builds on main"),
                       (("--onto", "main", "--more-rounds", "0"), "at least 1")):
        done = handoff("resume", "N-1", *args, cwd=repo)
        assert done.returncode == EXIT_USAGE and said in done.stderr, done.stderr
        assert "hint:" in done.stderr
    assert git(repo, "for-each-ref", "--format=%(refname) %(objectname)") == before
    assert state(handoff_home, "N-1")["phase"] == "passed"
