"""handoff.cli.tickets: the commands that start a ticket's run, carry it on and end it. What
start takes (one id and its plan, or --plans; a plan on stdin), what it says of work it leaves
out, and the hints close leaves behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from handoff.inputs import PLAN_LIMIT
from tests.conftest import commit_file
from tests.harness import (
    ADD_ONLY,
    FIX_ADD,
    assert_clean_error,
    events,
    handoff,
    plan_text,
    ticket_path,
    write_plan,
)


def test_start_notes_uncommitted_changes_left_out_of_the_ticket(repo: Path, tmp_path: Path,
                                                                handoff_home: Path) -> None:
    (repo / "calc.py").write_text("# my local experiment\n", encoding="utf-8")
    (repo / "scratch.txt").write_text("notes\n", encoding="utf-8")
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    done = handoff("start", "T-7", "--plan", str(plan), "--yes", "--foreground", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert "note: 2 uncommitted change(s)" in done.stderr and "not part of T-7" in done.stderr
    assert (repo / "calc.py").read_text() == "# my local experiment\n", "left untouched"


def test_a_plan_can_come_on_stdin_and_an_oversized_one_is_refused(
        repo: Path, handoff_home: Path) -> None:
    text = plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY)
    done = handoff("start", "T-6", "--plan", "-", cwd=repo, input_text=text)
    assert done.returncode == 1 and "waiting for approval" in done.stderr  # made, not approved
    assert (ticket_path(handoff_home, "T-6") / "plan.md").read_text(encoding="utf-8") == text
    huge = handoff("start", "T-5", "--plan", "-", cwd=repo, input_text="x" * (PLAN_LIMIT + 1))
    assert huge.returncode != 0 and "the plan (stdin) is larger than" in huge.stderr


@pytest.mark.parametrize(("args", "needle"), [
    (["--plans", "--plan", "{plan}", "{plan}"], "--plan, --summary and --foreground are for one"),
    (["--plans", "--foreground", "{plan}"], "--plan, --summary and --foreground are for one"),
    (["--plans"], "--plans needs the plan files"),
    (["T-1", "T-2", "--plan", "{plan}"], "start takes one ticket id and its --plan"),
    (["T-1"], "start takes one ticket id and its --plan"),
    (["T-1", "--plan", "{plan}", "--host", "build1", "--after", "T-0"],
     "a ticket that starts after others runs on this machine"),
    (["T-1", "--plan", "{plan}", "--host", "build1", "--foreground"],
     "--foreground runs the orchestrator in this terminal"),
])
def test_what_start_is_given_is_checked_before_anything_is_made(
        args: list[str], needle: str, repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    done = handoff("start", *[a.replace("{plan}", str(plan)) for a in args], cwd=repo)
    assert_clean_error(done, 2, needle)
    assert not handoff_home.exists() or not any(handoff_home.rglob("state.json"))


def test_hints_after_close_point_the_right_way(repo: Path, tmp_path: Path,
                                               handoff_home: Path) -> None:
    """A ticket closed before its plan was approved had no branch; a second close changes
    nothing; its old reason goes; `start` of its id does not suggest a resume that refuses."""
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    handoff("start", "H-1", "--plan", str(plan), cwd=repo, input_text="")  # awaiting approval
    closed = handoff("close", "H-1", cwd=repo)
    assert closed.returncode == 0, closed.stderr
    assert "it had no branch" in closed.stdout and "handoff/H-1" not in closed.stdout
    assert handoff("close", "H-1", cwd=repo).returncode == 0
    phases = [(e["from"], e["to"]) for e in events(handoff_home, "H-1") if e["kind"] == "phase"]
    assert phases.count(("closed", "closed")) == 0 and phases[-1][1] == "closed"
    [row] = json.loads(handoff("status", "--json", "--all", cwd=repo).stdout)
    assert row["reason"] == "closed by handoff close", row
    again = handoff("start", "H-1", "--plan", str(plan), "--yes", cwd=repo)
    assert again.returncode == 2
    assert "it is closed" in again.stderr and "start a new ticket" in again.stderr
    assert "handoff resume" not in again.stderr


def test_the_repositorys_test_command_gates_a_plan_that_names_none(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    """`test:` in .handoff.yaml: every plan need not repeat it. A plan without one, and no
    repository default, is said to have no gate (--yes shows no approval summary)."""
    bare = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}), "bare.md")
    first = handoff("start", "T-1", "--plan", str(bare), "--yes", "--foreground", cwd=repo)
    assert first.returncode == 0, first.stderr
    assert "note: T-1 has no gate: its plan names no test command" in first.stderr
    assert [e["result"] for e in events(handoff_home, "T-1") if e["kind"] == "gate"] == \
        ["skipped"]

    commit_file(repo, ".handoff.yaml", json.dumps({"test": ADD_ONLY}), "the project's tests")
    done = handoff("start", "T-2", "--plan", str(bare), "--yes", "--foreground", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert "has no gate" not in done.stderr
    gates = [e for e in events(handoff_home, "T-2") if e["kind"] == "gate"]
    assert [e["command"] for e in gates if e["result"] == "running"] == [ADD_ONLY]
    assert gates[-1]["result"] == "pass"
