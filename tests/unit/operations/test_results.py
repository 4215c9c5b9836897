"""handoff.operations.results: what the operations that end a ticket's run answer, and the
lines a person reads of each (the command line and the board print the same)."""

from __future__ import annotations

from pathlib import Path

from handoff.errors import NotMerged
from handoff.operations.results import (
    Answered,
    Closed,
    ClosedOnHost,
    Finished,
    FinishedOnHost,
    Recycled,
    Running,
    StartedOnHost,
    Stopped,
    Train,
)
from handoff.record.placed import Placement

BEFORE, AFTER, COMMIT = "1" * 40, "2" * 40, "3" * 40
RECORD = Path("/state/repo-1/T-1")


def closed(ticket: str = "T-1", **fields: object) -> Closed:
    given: dict[str, object] = {
        "ticket": ticket, "record": RECORD, "removed": ("implementer", "reviewer"),
        "branch": f"handoff/{ticket}", "stopped": None, "discarded_work": None, "left": (),
        "repo_gone": False, **fields}
    return Closed(**given)  # type: ignore[arg-type]


def test_a_stopped_ticket_says_what_ran() -> None:
    assert Stopped("T-1", 4242, True).said == \
        ["T-1 stopped (orchestrator: 4242, peers: stopped)"]
    assert Stopped("T-1", None, False).said == \
        ["T-1 stopped (orchestrator: not running, peers: not running)"]


def test_an_answer_says_where_it_was_filed_and_whether_the_orchestrator_was_started() -> None:
    answer = RECORD / "answer-1.md"
    assert Answered("T-1", answer, False).said == [f"answer filed as {answer}"]
    assert Answered("T-1", answer, True).said == [
        f"answer filed as {answer}",
        "orchestrator restarted in tmux; watch with handoff attach T-1"]


def test_a_recycled_peer_says_its_brief() -> None:
    brief = RECORD / "brief-reviewer-2.md"
    assert Recycled("T-1", "reviewer", brief).said == [f"reviewer of T-1 restarted on {brief}"]


def test_a_ticket_started_on_a_host_says_where_it_runs_after_what_the_host_said() -> None:
    where = Placement("R-1", "build1", "/home/me/proj", "~/.handoff/mirrors/proj", "main",
                      COMMIT)
    last = ("R-1: runs on host build1 (its mirror of proj: ~/.handoff/mirrors/proj); handoff "
            "status, attach R-1 and the rest reach it there")
    assert StartedOnHost(where, "R-1: the orchestrator runs in tmux session s").said == [
        "R-1: the orchestrator runs in tmux session s", last]
    assert StartedOnHost(where, "").said == [last]


def test_a_running_ticket_says_where_to_watch_it() -> None:
    said = Running("T-1", "handoff-T-1", RECORD).said
    assert said == ["T-1: the orchestrator runs in tmux session handoff-T-1.",
                    "  watch:  handoff attach T-1", "  state:  handoff status T-1",
                    f"  record: {RECORD}"]
    approved = Running("T-1", "s", RECORD, sandbox="sandbox: bubblewrap").said
    assert approved[0] == "sandbox: bubblewrap" and len(approved) == 5


def test_a_closed_ticket_says_what_went_and_what_was_kept() -> None:
    assert closed().said == [f"T-1 closed; worktrees removed: implementer, reviewer; branch "
                             f"handoff/T-1 kept; record in {RECORD}"]
    patch = Path("/state/repo-1/T-1/transcripts/implementer-discarded.patch")
    bare = closed(removed=(), branch="", discarded_work=patch).said
    assert bare[0] == f"T-1 closed; worktrees removed: none; it had no branch; record in {RECORD}"
    assert bare[1] == f"the implementer's uncommitted work was saved as {patch} (git apply it " \
        "to get it back)"
    assert closed(repo_gone=True).said == [
        f"T-1 closed; its repository is gone, with its worktrees and branch; record in {RECORD}"]


def test_a_finished_ticket_says_the_merge_only_when_one_was_made() -> None:
    merged = Finished(closed(), "squash", "main", BEFORE, AFTER, "handoff/T-1")
    assert merged.said[0] == "T-1 merged into main (squash): 1111111111 -> 2222222222 (not pushed)"
    assert merged.said[1:] == closed().said
    held = Finished(closed(), "merge", "main", BEFORE, "", "handoff/T-1")
    assert held.said == closed().said, "the base held it all: nothing merged, nothing said"


def test_a_train_says_how_the_merged_result_was_tested_then_each_ticket() -> None:
    first = Finished(closed("A"), "merge", "main", BEFORE, AFTER, "handoff/A", notes=("n-A",))
    second = Finished(closed("B"), "merge", "main", AFTER, COMMIT, "handoff/B")
    train = Train((first, second), tested="the gate passed on 3333333",
                  pushed=("pushed handoff/A",))
    assert train.said == ["merged result: the gate passed on 3333333", "n-A", *first.said,
                          *second.said, "pushed handoff/A"]
    stopped = Train((), refused=NotMerged("B conflicts"))
    assert stopped.said == [] and stopped.refused is not None


def test_a_ticket_closed_on_a_host_says_what_came_back() -> None:
    plain = ClosedOnHost("R-1", "build1", "", "handoff/R-1", None)
    assert plain.said == ["R-1: closed on host build1; its branch handoff/R-1 is here now"]
    report = Path("/state/final-R-1.md")
    kept = ClosedOnHost("R-1", "build1", "closed there", "", report)
    assert kept.said == ["closed there", "R-1: closed on host build1; it had made no branch, "
                                         f"its final report is {report}"]
    left = ClosedOnHost("R-1", "build1", "", "", None, report_left="too big")
    assert left.said[-1].endswith("its final report stays on the host only (too big)")


def test_a_ticket_finished_on_a_host_warns_when_nothing_tested_the_merge() -> None:
    on_host = ClosedOnHost("R-1", "build1", "", "handoff/R-1", None)
    done = FinishedOnHost(on_host, "merge", "main", BEFORE, AFTER, COMMIT, "handoff/R-1",
                          untested=True, merge_said=("merging",))
    assert done.said[:2] == ["merging", "R-1: handoff/R-1 (3333333333) merged into main: "
                                        "1111111111 → 2222222222 (merge; nothing pushed)"]
    assert done.said[2].startswith("note: main had moved since R-1 was reviewed on build1")
    assert done.said[3:] == on_host.said
    nothing = FinishedOnHost(on_host, "merge", "main", BEFORE, "", COMMIT, "handoff/R-1",
                             untested=False)
    assert nothing.said == on_host.said
