"""handoff.loop.gating: the gate stage of a round on a real ticket, with real test commands and
scanners run at the round's commit in the gate's own checkout (no peer, no tmux session)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from handoff.loop.context import TicketContext
from handoff.loop.crew import Crew
from handoff.loop.gating import GateStage
from handoff.loop.rules import Move
from handoff.machinery.worktrees import GATE
from handoff.phases import Phase
from tests.conftest import PYTHON, git
from tests.harness import ADD_ONLY, FIX_ADD, plan_text
from tests.loop_tickets import ADD_FIXED, at_round, events, implementer_commit, new_context, repo_config

PASSES = [PYTHON, "-c", "print('all good')"]
FAILS = [PYTHON, "-c", "import sys; print('boom: add() is wrong'); sys.exit(1)"]
#: passes, and leaves a file in the checkout it ran in
PLANTS = [PYTHON, "-c", "open('planted.txt', 'w').write('x'); print('all good')"]


def at_the_gate(repo: Path, home: Path, test: list[str] | None,
                **config: Any) -> tuple[TicketContext, GateStage, str]:
    """A ticket whose round 1's commit (add() mended) waits for its gate; the base's tests are
    not counted unless config says base_tests."""
    repo_config(repo, **{"base_tests": False, **config})
    ctx = new_context(repo, home, plan_text({1: {"edits": [FIX_ADD]}}, test=test))
    commit = implementer_commit(ctx, "calc.py", ADD_FIXED)
    at_round(ctx, commit)
    ctx.apply(Move(Phase.GATING))
    return ctx, GateStage(ctx, Crew(ctx)), commit


def gate_results(ctx: TicketContext) -> list[str]:
    return [e["result"] for e in events(ctx, "gate")]


def test_a_passing_test_command_sends_the_round_to_the_reviewers(repo: Path,
                                                                 handoff_home: Path) -> None:
    ctx, gate, commit = at_the_gate(repo, handoff_home, PASSES)
    gate.run()

    state = ctx.ws.state()
    assert (state.phase, state.round, state.gates) == ("reviewing", 1, {"1": "pass"})
    assert gate_results(ctx) == ["running", "pass"]
    assert "all good" in ctx.tdir.gate_log(1).read_text()
    assert git(ctx.ws.worktrees.path(GATE), "rev-parse", "HEAD") == commit, \
        "it ran at the round's exact commit"


def test_a_failing_test_command_sends_the_implementer_its_next_round_with_the_output(
        repo: Path, handoff_home: Path) -> None:
    ctx, gate, commit = at_the_gate(repo, handoff_home, FAILS)
    gate.run()

    state = ctx.ws.state()
    assert (state.phase, state.round, state.gate_bounces) == ("implementing", 2, 1)
    assert state.gates == {"1": "fail"}
    [(title, text)] = state.feedback["notes"]
    assert title == "The verification gate failed"
    assert "boom: add() is wrong" in text and str(ctx.tdir.gate_log(1)) in text
    assert commit[:7] in text


def test_the_failed_gate_at_its_limit_escalates(repo: Path, handoff_home: Path) -> None:
    ctx, gate, _ = at_the_gate(repo, handoff_home, FAILS)
    ctx.state.max_gate_bounces = 1
    gate.run()
    state = ctx.ws.state()
    assert (state.phase, state.round) == ("escalated", 1)
    assert state.reason.startswith("the verification gate failed 1 times")


def test_a_pass_in_a_checkout_something_wrote_into_is_void(repo: Path,
                                                           handoff_home: Path) -> None:
    ctx, gate, commit = at_the_gate(repo, handoff_home, PLANTS)
    gate.run()

    state = ctx.ws.state()
    assert (state.phase, state.after_answer) == ("needs-human", "gating")
    assert "planted.txt" in state.reason
    assert "1" not in state.gates, "nobody's pass"
    void = events(ctx, "gate")[-1]
    assert (void["result"], void["commit"]) == ("void", commit)
    assert "planted.txt" in void["why"]


def test_a_plan_with_no_test_and_no_scanner_skips_the_gate(repo: Path,
                                                            handoff_home: Path) -> None:
    ctx, gate, _ = at_the_gate(repo, handoff_home, None)
    gate.run()
    state = ctx.ws.state()
    assert (state.phase, state.reason, state.gates) == \
        ("reviewing", "the plan names no test command", {"1": "skipped"})
    assert gate_results(ctx) == ["skipped"]
    assert not ctx.tdir.gate_log(1).exists()


def test_a_required_scanner_not_installed_stops_the_gate_for_a_person(
        repo: Path, handoff_home: Path) -> None:
    """`start` refuses one that is missing (doctor.ready_to_start): here it went between the
    start and the gate (uninstalled, or the configuration changed and was re-read)."""
    ctx, gate, commit = at_the_gate(repo, handoff_home, PASSES)
    repo_config(repo, base_tests=False, scanners=[
        {"name": "gitleaks", "command": ["no-such-scanner-xyz", "detect"]}])
    ctx.reread_config()
    gate.run()

    state = ctx.ws.state()
    assert (state.phase, state.after_answer, state.round) == ("needs-human", "gating", 1)
    assert "gitleaks" in state.reason and "not installed" in state.reason
    [stopped] = events(ctx, "gate")
    assert (stopped["result"], stopped["scanners"], stopped["commit"]) == \
        ("stopped", ["gitleaks"], commit)
    assert not ctx.tdir.gate_log(1).exists(), "nothing ran"


def test_a_required_scanner_that_fails_blocks_a_passing_test(repo: Path,
                                                             handoff_home: Path) -> None:
    failing = [PYTHON, "-c", "import sys; print('secret found'); sys.exit(1)"]
    ctx, gate, _ = at_the_gate(repo, handoff_home, PASSES, scanners=[
        {"name": "secrets", "command": failing},
        {"name": "advice", "command": failing, "required": False}])
    gate.run()

    state = ctx.ws.state()
    assert state.scans == {"1": {"secrets": "failed", "advice": "failed"}}
    assert (state.phase, state.round, state.gates) == ("implementing", 2, {"1": "fail"})
    titles = [title for title, _ in state.feedback["notes"]]
    assert titles == ["The scanners failed"], "the test command passed: only the scanner"
    assert [e["name"] for e in events(ctx, "scanner")] == ["secrets", "advice"]


def test_the_bases_tests_are_counted_before_the_first_gate(repo: Path,
                                                           handoff_home: Path) -> None:
    ctx, gate, _ = at_the_gate(repo, handoff_home, ADD_ONLY, base_tests=True)
    gate.run()

    state = ctx.ws.state()
    assert state.tests_ran["base"]["ran"] == 1 and state.tests_ran["base"]["failed"] == 1, \
        "add() subtracts at the base"
    assert state.tests_ran["1"]["ran"] == 1 and state.tests_ran["1"]["failed"] == 0
    base = events(ctx, "gate")[0]
    assert (base["result"], base["commit"]) == ("base", state.base_commit)
    assert state.phase == "reviewing"
