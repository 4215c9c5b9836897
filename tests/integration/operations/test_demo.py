"""handoff.operations.demo: the demo's throwaway repository, its plan (a bug the scripted
implementer fixes in two rounds, the second caught only by review), and its removal. The whole
demo runs in tests/e2e/test_loop.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from handoff.operations.demo import (
    PREFIX,
    REPO_NAME,
    new_demo,
    plan_text,
    remove_demo,
)
from handoff.protocol.plan import Argv, parse
from tests.conftest import git


def passes(repo: Path, argv: Argv) -> bool:
    return subprocess.run(list(argv), cwd=repo, capture_output=True, timeout=60).returncode == 0


def test_the_demo_repo_holds_the_bug_its_tests_and_one_commit(tmp_path: Path) -> None:
    ticket, repo, text = new_demo(tmp_path)
    assert ticket.startswith("DEMO-") and repo.name == REPO_NAME
    assert repo.parent.parent == tmp_path and repo.parent.name.startswith(PREFIX)
    assert git(repo, "rev-list", "--count", "HEAD") == "1"
    assert git(repo, "status", "--porcelain") == "", "a clean checkout a ticket can start from"
    assert git(repo, "config", "user.email") == "demo@handoff.invalid"
    assert text == plan_text(sys.executable)


def test_round_one_passes_the_gate_and_only_round_two_passes_the_review(tmp_path: Path) -> None:
    """What makes the demo show the loop: review sends the first fix back."""
    _, repo, text = new_demo(tmp_path)
    plan = parse(text, "demo")
    assert plan.test is not None and len(plan.review) == 1
    assert not passes(repo, plan.test), "the bug fails the gate at first"
    source = repo / "wordcount.py"
    for n, gate, review in ((1, True, False), (2, True, True)):
        edits = plan.scripts[n]["edits"]
        assert isinstance(edits, list)
        for edit in edits:
            before = source.read_text()
            assert edit["replace"] in before, (n, edit)
            source.write_text(before.replace(edit["replace"], edit["with"]))
        assert (passes(repo, plan.test), passes(repo, plan.review[0])) == (gate, review), n


def test_only_a_folder_exactly_as_the_demo_made_it_is_removed(tmp_path: Path) -> None:
    _, repo, _ = new_demo(tmp_path)
    (repo.parent / "mine.txt").write_text("a person's file\n")
    assert not remove_demo(repo) and repo.is_dir()
    (repo.parent / "mine.txt").unlink()
    assert remove_demo(repo) and not repo.parent.exists()
    other = tmp_path / "projects" / REPO_NAME
    other.mkdir(parents=True)
    assert not remove_demo(other) and other.is_dir(), "not a demo's temp folder"
    named = tmp_path / f"{PREFIX}x" / "project"
    named.mkdir(parents=True)
    assert not remove_demo(named) and named.is_dir()
