"""handoff.loop.baseline: the plan's tests are run once at the base, beside round 1, and a round
whose gate runs fewer tests than the base says so to every reviewer."""

from __future__ import annotations

from pathlib import Path

from tests.faults.catalog import fault
from tests.harness import (
    ALL_TESTS,
    FIX_ADD,
    FIX_MUL,
    FIX_NEG,
    events,
    handoff,
    plan_text,
    state,
    ticket_path,
    write_plan,
)


@fault("32", "the implementer's commit makes the gate run fewer tests without deleting or "
       "skipping one (the failing test classes are dropped from their module)",
       "the plan's tests also run at the base, beside round 1: the round's gate ran 1 of the "
       "base's 3, shown to every reviewer as a weakened test a pass must answer",
       "the base's count and each round's, in state.json; the gate-0.log of the base run")
def test_a_round_that_runs_fewer_tests_than_the_base_is_shown_to_the_reviewer(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    # fewer tests without deleting or skipping one: the failing classes are dropped from the
    # module after they are defined
    text = (repo / "tests" / "test_calc.py").read_text() + "\ndel MulTest, NegTest\n"
    edits = [FIX_ADD, {"file": "tests/test_calc.py", "content": text}]
    plan = plan_text({1: {"edits": edits, "reviewer": {"weakened": {"W1": "unjustified"}}}},
                     test=ALL_TESTS, review=[ALL_TESTS])
    done = handoff("start", "BL-1", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", "--max-rounds", "1", cwd=repo, timeout=120)
    final = state(handoff_home, "BL-1")
    assert final["phase"] == "escalated", done.stdout + done.stderr
    assert final["gates"] == {"1": "pass"}, "the gate alone passes it"
    assert final["tests_ran"]["base"]["ran"] == 3, final["tests_ran"]
    assert final["tests_ran"]["1"]["ran"] == 1, final["tests_ran"]
    [shown] = final["weakened"]["1"]
    assert "3 tests ran at the base, 1 at this commit (2 fewer)" in shown["text"], shown
    folder = ticket_path(handoff_home, "BL-1")
    brief = (folder / "inbox" / "reviewer" / "brief-1.md").read_text()
    assert "2 fewer" in brief, "every reviewer is shown it"
    assert final["verdicts"] == {"1": "fail"}, "answered unjustified: the round fails"
    base = [e for e in events(handoff_home, "BL-1") if e["kind"] == "gate"
            and e["result"] == "base"]
    assert len(base) == 1 and base[0]["tests"]["ran"] == 3, base
    assert (folder / "gate-0.log").is_file()
    gates = [e["result"] for e in events(handoff_home, "BL-1") if e["kind"] == "gate"]
    assert gates.index("base") < gates.index("running"), "never two gates at once"


def test_a_round_that_runs_as_many_tests_adds_nothing_to_review(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    plan = plan_text({1: {"edits": [FIX_ADD, FIX_MUL, FIX_NEG]}}, test=ALL_TESTS,
                     review=[ALL_TESTS])
    handoff("start", "BL-2", "--plan", str(write_plan(tmp_path, plan)), "--yes",
            "--foreground", "--max-rounds", "1", cwd=repo, timeout=120)
    final = state(handoff_home, "BL-2")
    assert final["tests_ran"]["base"]["ran"] == final["tests_ran"]["1"]["ran"] == 3
    assert final["weakened"].get("1", []) == []
