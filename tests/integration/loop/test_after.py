"""Tickets that build on each other (handoff.loop.after): a chain A <- B <- C waits, starts from
the work it builds on, and is finished as one train; what cannot be is refused or goes to a
person. Real git, real tmux, the scripted peers, the real CLI; the decisions without them."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from handoff.cli.board_app import cells, details
from handoff.errors import EXIT_ESCALATED, EXIT_USAGE
from handoff.operations.board import Board
from tests.conftest import git
from tests.harness import (
    ADD_ONLY,
    ALL_TESTS,
    FIX_ADD,
    events,
    handoff,
    plan_text,
    release,
    state,
    ticket_path,
    wait_phase,
    write_plan,
)
from tests.unit.loop.test_after import start
from tests.unit.operations.test_train import finish, first_parents, fixed_base

#: A adds double(), B a test of it (its gate fails without A's work), C a test of both
DOUBLE = {"file": "calc.py", "replace": "OPS = {",
          "with": "def double(a: int) -> int:\n    return 2 * a\n\n\nOPS = {"}
TEST_DOUBLE = {"file": "tests/test_double.py", "content": (
    "import unittest\n\nfrom calc import double\n\n\nclass DoubleTest(unittest.TestCase):\n"
    "    def test_double(self) -> None:\n        self.assertEqual(double(4), 8)\n")}
TEST_BOTH = {"file": "tests/test_both.py", "content": (
    "import unittest\n\nfrom calc import double, neg\nfrom tests.test_double import DoubleTest"
    "\n\n\nclass BothTest(unittest.TestCase):\n    def test_both(self) -> None:\n"
    "        self.assertEqual(neg(double(2)), -4)\n        self.assertTrue(DoubleTest)\n")}


def test_a_chain_waits_starts_from_the_work_before_it_and_finishes_as_one_train(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    base = fixed_base(repo)
    assert start(repo, tmp_path, "A", {1: {"edits": [DOUBLE], "pause_until": "go"}})[0] == 0
    # B by --after, C by its plan's after:
    assert start(repo, tmp_path, "B", {1: {"edits": [TEST_DOUBLE]}}, "--after", "A")[0] == 0
    assert start(repo, tmp_path, "C", {1: {"edits": [TEST_BOTH]}}, after=["B"])[0] == 0
    for ticket, waits in (("B", "A"), ("C", "B")):
        held = wait_phase(handoff_home, ticket, "waiting", timeout=30)
        assert waits in held["reason"], held
    shown = handoff("status", "--json", cwd=repo)
    rows = {row["ticket"]: row for row in json.loads(shown.stdout)}
    assert rows["B"]["after"] == ["A"] and rows["C"]["after"] == ["B"]
    said = handoff("status", "B", cwd=repo).stdout
    assert "waits for A (implementing)" in said, said
    assert state(handoff_home, "B")["worktrees"] == {}, "no worktree before it starts"
    board = Board(handoff_home)
    board.refresh()
    row = next(r for r in board.rows() if r.ticket == "B")
    assert cells(row, datetime.now(UTC))["phase"] == "waiting for A"
    assert "why: waits for A (implementing)" in details(row)
    release(ticket_path(handoff_home, "A"), "go")
    for ticket in ("A", "B", "C"):
        final = wait_phase(handoff_home, ticket, "passed", "escalated", "needs-human",
                           timeout=180)
        assert final["phase"] == "passed", (ticket, final, events(handoff_home, ticket)[-5:])
    a, b = (state(handoff_home, t)["commits"]["1"] for t in ("A", "B"))
    # each started from the work before it (B's own gate needs A's double())
    assert state(handoff_home, "B")["base_commit"] == a
    assert state(handoff_home, "C")["base_commit"] == b
    started = [e for e in events(handoff_home, "C") if e["kind"] == "waiting" and e.get("base")]
    assert started and started[0]["commits"] == {"B": b} and started[0]["before"] == base
    # C cannot be merged alone before the work it starts from: the hint names the train
    code, out = finish(repo, "C")
    assert code == EXIT_USAGE and "'handoff finish A B C'" in out, out
    assert finish(repo, "B", "C")[0] == EXIT_USAGE, "nor B before A"
    code, out = finish(repo, *out.split("'handoff finish ", 1)[1].split("'")[0].split())
    assert code == 0, out
    assert out.index("A merged") < out.index("B merged") < out.index("C merged"), out
    assert len(first_parents(repo, base)) == 3
    assert len(git(repo, "reflog", "--format=%H", "main").split()) == \
        len(git(repo, "rev-list", "--first-parent", base).split()) + 1, "main moved once"
    for ticket in ("A", "B", "C"):
        assert state(handoff_home, ticket)["phase"] == "closed"


def test_a_dependency_that_escalates_sends_its_dependant_to_a_person(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    code, out = start(repo, tmp_path, "E", {1: {"edits": [FIX_ADD]}}, "--foreground",
                      "--max-rounds", "1", test=ADD_ONLY, review=[ALL_TESTS])
    assert code == EXIT_ESCALATED, out
    assert start(repo, tmp_path, "F", {1: {"edits": [FIX_ADD]}}, "--after", "E",
                 test=ADD_ONLY)[0] == 0
    final = wait_phase(handoff_home, "F", "needs-human", "implementing", "passed", timeout=60)
    assert final["phase"] == "needs-human", final
    assert "E escalated without passing" in final["reason"], final
    assert "handoff answer F go" in final["reason"]


def test_unknown_tickets_and_cycles_are_refused_at_start(repo: Path, tmp_path: Path,
                                                        handoff_home: Path) -> None:
    code, out = start(repo, tmp_path, "U", {1: {"edits": [FIX_ADD]}}, "--after", "NOPE-1")
    assert code == EXIT_USAGE and "NOPE-1, which is no ticket of this repository" in out, out
    code, out = start(repo, tmp_path, "V", {1: {"edits": [FIX_ADD]}}, "--after", "V")
    assert code == EXIT_USAGE and "cannot wait for itself" in out, out
    # two plans of one batch naming each other
    for name, other in (("P-1", "P-2"), ("P-2", "P-1")):
        write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY,
                                       after=[other]), f"{name}.md")
    done = handoff("start", "--plans", str(tmp_path / "P-1.md"), str(tmp_path / "P-2.md"),
                   "--yes", cwd=repo)
    assert done.returncode == 1 and "0 of 2 started" in done.stdout, done.stdout + done.stderr
    assert "wait for each other: P-1 -> P-2 -> P-1" in done.stderr, done.stderr
    assert not list(handoff_home.glob("*/U")) and not list(handoff_home.glob("*/P-1"))
