"""`handoff finish` tests what it merges: two passed tickets whose merge is textually clean but
broken are refused with the base unmoved, and a train of tickets is merged once, tested once,
and cut at the ticket that breaks it. Real git, real tmux, the scripted peers, the real CLI."""

from __future__ import annotations

from pathlib import Path

from handoff.errors import EXIT_NOT_MERGED
from tests.conftest import git
from tests.harness import events, handoff, state
from tests.unit.operations.test_train import (
    DISCOVER,
    NOTES,
    RENAME_NEG,
    USES_NEG,
    finish,
    first_parents,
    fixed_base,
    pass_ticket,
)

ADD_NEG = {"file": "calc.py", "replace": '    "mul": mul\n}',
           "with": '    "mul": mul,\n    "neg": neg\n}'}
ADD_SQUARE = {"file": "calc.py", "replace": '    "mul": mul\n}',
              "with": '    "mul": mul,\n    "square": lambda a: a * a\n}'}


def checks(home: Path, ticket: str) -> list[dict[str, object]]:
    return [e for e in events(home, ticket) if e["kind"] == "merge-check"]


def test_two_passed_tickets_whose_union_merge_breaks_the_build(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    fixed_base(repo, union=True)
    pass_ticket(repo, tmp_path, "U-1", [ADD_NEG])
    pass_ticket(repo, tmp_path, "U-2", [ADD_SQUARE])
    # git's own word is "clean"; conflicts says what that is worth here
    shown = handoff("conflicts", cwd=repo)
    assert "merge=union" in shown.stdout and "calc.py" in shown.stdout, shown.stdout
    code, out = finish(repo, "U-1")
    assert code == 0, out
    assert "not run again" in out and "has not moved since U-1 was reviewed" in out, out
    head = git(repo, "rev-parse", "main")
    code, out = finish(repo, "U-2")
    assert code == EXIT_NOT_MERGED, out
    assert "U-2 merged into main fails the gate" in out, out
    # the tests never ran: the module does not import, and the message says how it ended
    assert "names no failing test, and ends: SyntaxError: invalid syntax" in out, out
    assert "its changes meet those of U-1" in out, out
    assert "Traceback" not in out
    assert git(repo, "rev-parse", "main") == head, "the base did not move"
    assert git(repo, "status", "--porcelain") == "", "the person's checkout is untouched"
    assert state(handoff_home, "U-2")["phase"] == "passed"
    check = checks(handoff_home, "U-2")[-1]
    assert check["result"] == "failed", check
    log = next(handoff_home.glob("*/U-2")) / str(check["logs"][0])  # type: ignore[index]
    assert "SyntaxError" in log.read_text(), "the log is of the merged tree's run"


def test_a_semantic_conflict_names_the_failing_test_and_the_way_on(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    fixed_base(repo)
    pass_ticket(repo, tmp_path, "S-1", RENAME_NEG, test=DISCOVER)
    pass_ticket(repo, tmp_path, "S-2", [USES_NEG], test=DISCOVER)
    assert finish(repo, "S-1")[0] == 0
    head = git(repo, "rev-parse", "main")
    code, out = finish(repo, "S-2")
    assert code == EXIT_NOT_MERGED, out
    assert "failing: " in out and "test_twice" in out, out
    assert "its changes meet those of S-1" in out, out
    assert git(repo, "rev-parse", "main") == head
    # the hint's way on, followed, is in tests/integration/operations/test_onto.py
    assert "'handoff resume S-2 --onto main'" in out, out
    assert state(handoff_home, "S-2")["phase"] == "passed"


def test_a_train_is_merged_once_and_tested_once(repo: Path, tmp_path: Path,
                                                handoff_home: Path) -> None:
    base = fixed_base(repo)
    one = pass_ticket(repo, tmp_path, "T-1", [NOTES])
    two = pass_ticket(repo, tmp_path, "T-2", [ADD_NEG])
    code, out = finish(repo, "--all-passed")
    assert code == 0, out
    assert "T-1 merged into main" in out and "T-2 merged into main" in out, out
    merges = first_parents(repo, base)
    assert len(merges) == 2, "one merge commit per ticket, on one line"
    assert [git(repo, "rev-parse", f"{m}^2") for m in reversed(merges)] == [one, two]
    # the base moved once: its reflog has one entry past the start
    assert len(git(repo, "reflog", "--format=%H", "main").split()) == 3
    for ticket in ("T-1", "T-2"):
        ran = checks(handoff_home, ticket)
        assert [c["result"] for c in ran] == ["passed"], ran
        assert ran[0]["tickets"] == ["T-1", "T-2"] and ran[0]["commit"] == merges[0]
        assert state(handoff_home, ticket)["phase"] == "closed"


def test_a_train_whose_middle_ticket_breaks_it_merges_the_first_only(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    base = fixed_base(repo)
    pass_ticket(repo, tmp_path, "M-1", RENAME_NEG, test=DISCOVER)
    pass_ticket(repo, tmp_path, "M-2", [USES_NEG], test=DISCOVER)
    pass_ticket(repo, tmp_path, "M-3", [NOTES], test=DISCOVER)
    code, out = finish(repo, "M-1", "M-2", "M-3", "--squash")
    assert code == EXIT_NOT_MERGED, out
    assert "M-1 merged into main" in out, out
    assert "M-2 merged into main with M-1 fails the gate" in out and "test_twice" in out, out
    assert "M-3 was not merged and stays passed" in out, out
    assert len(first_parents(repo, base)) == 1, "only M-1's squashed commit"
    assert "def negate(" in git(repo, "show", "main:calc.py")
    assert state(handoff_home, "M-1")["phase"] == "closed"
    assert state(handoff_home, "M-2")["phase"] == "passed"
    assert state(handoff_home, "M-3")["phase"] == "passed"
    # the whole train, then M-1 alone (its reviewed tree: not run again), then M-1 and M-2
    assert [c["result"] for c in checks(handoff_home, "M-1")] == ["failed", "skipped", "failed"]
    code, out = finish(repo, "M-3")
    assert code == 0, out


def test_finish_refuses_a_train_named_badly_changing_nothing(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    fixed_base(repo)
    pass_ticket(repo, tmp_path, "B-1", [NOTES])
    head = git(repo, "rev-parse", "main")
    for args, said in ((("B-1", "B-1"), "named twice"), ((), "name the tickets to finish"),
                       (("B-1", "--all-passed"), "not both")):
        code, out = finish(repo, *args)
        assert code == 2 and said in out and "hint:" in out, out
    assert git(repo, "rev-parse", "main") == head and state(handoff_home, "B-1")["phase"] == \
        "passed"
