"""handoff.loop.unrequested: from the second review on, a hunk no finding asked for, in a file
the plan does not name, is listed to every reviewer, who must answer it; a review that leaves
one unanswered is refused. Real git (a fix round's diff), the scripted agents, real tmux."""

from __future__ import annotations

from pathlib import Path

from handoff.loop.unrequested import found
from handoff.protocol.ledger import Entry
from handoff.protocol.plan import parse
from tests.conftest import git
from tests.harness import (
    ADD_ONLY,
    ALL_TESTS,
    FIX_ADD,
    FIX_MUL,
    FIX_NEG,
    TOUCH_README,
    events,
    handoff,
    plan_text,
    ticket_path,
    wait_phase,
    write_plan,
)


def test_a_hunk_near_a_finding_or_in_a_named_file_or_a_test_is_asked_for(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD")
    (repo / "calc.py").write_text((repo / "calc.py").read_text().replace("a + b", "a * b"))
    (repo / "README.md").write_text("# calc\n\nnot asked for\n")
    (repo / "tests" / "test_more.py").write_text("import unittest\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a fix round")
    diff = git(repo, "diff", "-U0", "--no-color", "--no-ext-diff", "--no-textconv", "-M",
               base, "HEAD")
    finding = Entry("F1", 1, ("reviewer",), "calc.py", 6, "mul adds")
    plan = parse("# Fix calc\n\nMake the tests pass.\n")
    assert [u.file for u in found(diff, [finding], plan)] == ["README.md"], \
        "calc.py is near F1's line, a test file is in scope, README.md is asked by nobody"
    listed = found(diff, [], plan)
    assert [(u.id, u.file) for u in listed] == [("U1", "README.md"), ("U2", "calc.py")]
    assert listed[1].line == 6 and "a * b" in listed[1].first
    named = parse("# Fix calc\n\nChange `calc.py` and `README.md`.\n")
    assert found(diff, [], named) == [], "files the plan names are its scope"


def test_a_reviewer_that_leaves_an_unrequested_change_unanswered_is_refused(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    text = plan_text({1: {"edits": [FIX_ADD]},
                      2: {"edits": [FIX_MUL, FIX_NEG, TOUCH_README],
                          "reviewer": {"ignore_unrequested": True}}},
                     test=ADD_ONLY, review=[ALL_TESTS]) + "\nChange `calc.py` only.\n"
    plan = write_plan(tmp_path, text)
    assert handoff("start", "U-1", "--plan", str(plan), "--yes", cwd=repo).returncode == 0
    asked = wait_phase(handoff_home, "U-1", "needs-human", "passed", "escalated", timeout=120)
    log = events(handoff_home, "U-1")
    [listed] = [e for e in log if e["kind"] == "unrequested"]
    assert len(listed["changes"]) == 1 and listed["changes"][0].startswith("NOTES.md:"), listed
    brief = (ticket_path(handoff_home, "U-1") / "inbox" / "reviewer" / "brief-2.md").read_text()
    assert "## Changes no finding asked for" in brief and "`U1` NOTES.md:" in brief
    implementer = (ticket_path(handoff_home, "U-1") / "inbox" / "implementer" /
                   "brief-2.md").read_text()
    assert "shown to the reviewers as unrequested" in implementer
    refused = [p for e in log if e["kind"] == "submission" and e.get("accepted") is False
               for p in e.get("problems", [])]
    assert any("unrequested change U1 is not answered" in p for p in refused), refused
    assert asked["phase"] == "needs-human", "a pass that ignores it is never taken"
    handoff("stop", "U-1", cwd=repo)
