"""Whole tickets with the real Claude Code as peers, against the stand-in Anthropic server.

The real `claude` (pinned, from the npm registry, cached in ~/.cache/handoff-tests) runs in
handoff's tmux panes, reads its brief with its own Read tool, edits with Edit, commits and files
its report through `handoff submit` with Bash: the stand-in model only decides which tool to
call next (tests/standins/brain.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import git
from tests.harness import (
    ADD_ONLY,
    ALL_TESTS,
    FIX_ADD,
    FIX_MUL,
    FIX_NEG,
    events,
    handoff,
    plan_text,
    processes_of,
    spawn,
    state,
    ticket_path,
    wait_phase,
    write_plan,
)
from tests.realcli import configure, role, stand_in_errors
from tests.standins.anthropic import AnthropicStandIn
from tests.standins.homes import claude_home


def both_claude(binary: Path, **implementer: object) -> dict[str, dict[str, object]]:
    return {"implementer": role("claude", binary, **implementer),
            "reviewer": role("claude", binary)}


def test_claude_as_both_peers_fails_then_passes_each_round_briefed_once(
        repo: Path, tmp_path: Path, handoff_home: Path, isolated: dict[str, str],
        claude: Path, anthropic: AnthropicStandIn) -> None:
    claude_home(Path(isolated["HOME"]), [repo])
    configure(handoff_home, both_claude(claude))
    plan = plan_text({1: {"edits": [FIX_ADD]}, 2: {"edits": [FIX_MUL, FIX_NEG]}},
                     test=ADD_ONLY, review=[ALL_TESTS])
    done = handoff("start", "CC-1", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr + stand_in_errors(anthropic)
    final = state(handoff_home, "CC-1")
    assert final["phase"] == "passed" and final["verdicts"] == {"1": "fail", "2": "pass"}

    folder = ticket_path(handoff_home, "CC-1")
    prompts = anthropic.turn_prompts()
    for who, n in (("implementer", 1), ("implementer", 2), ("reviewer", 1), ("reviewer", 2)):
        brief = folder / "inbox" / who / f"brief-{n}.md"
        assert prompts.count(f"Read and follow {brief}") == 1, (who, n, prompts)
    log = events(handoff_home, "CC-1")
    assert [e["by"] for e in log if e["kind"] == "brief" and e["role"] == "implementer"] == \
        ["paste"], "round 2 reached the live implementer once, by paste"
    # each round's reviewer was started while the gate ran, and took its brief when it passed
    assert [(e["round"], e["reason"]) for e in log if e["kind"] == "launch"
            and e["role"] == "reviewer"] == [(1, "warm"), (2, "warm")]
    assert [(e["round"], e["by"], e.get("warm")) for e in log if e["kind"] == "brief"
            and e["role"] == "reviewer"] == [(1, "paste", True), (2, "paste", True)]
    assert [e for e in log if e["kind"] in ("nudge", "escalate", "delivery-failed")] == []
    # claude's hooks reach handoff: the prompt's arrival or the turn's end is judged by one
    # (which of the screen and the hook is seen first for an arrival is the machine's load)
    heard = [e["evidence"] for e in log if e["kind"] == "peer"]
    assert any(said.startswith(("hook UserPromptSubmit", "hook Stop")) for said in heard), heard
    # the work was done by claude's own tools: its commits are on the branch
    subjects = git(repo, "log", "--format=%s", "handoff/CC-1").splitlines()
    assert subjects[:2] == ["CC-1: round 2", "CC-1: round 1"]
    assert "return a * b" in git(repo, "show", "handoff/CC-1:calc.py")
    review = (folder / "review-report-1.md").read_text()
    assert "verdict: fail" in review and "test_mul" in review

    # the idle reviewer was asked to exit before it was recycled: its session was saved, and
    # claude's own log of it (the whole conversation) kept beside the pane's transcript
    assert "claude --resume" in (folder / "transcripts" / "reviewer-1.log").read_text()
    session = (folder / "transcripts" / "reviewer-1.session.jsonl").read_text()
    assert f"Read and follow {folder / 'inbox' / 'reviewer' / 'brief-1.md'}" in session

    # a passed ticket runs no CLI: both left by themselves when asked, windows kept
    left = [e for e in events(handoff_home, "CC-1") if e["kind"] == "left"]
    assert {(e["role"], e["pane"]) for e in left} == {("implementer", "kept"),
                                                       ("reviewer", "kept")}
    assert "claude --resume" in (folder / "transcripts" / "implementer-2.log").read_text()
    closed = handoff("close", "CC-1", cwd=repo)
    assert closed.returncode == 0, closed.stderr
    stopped = [e for e in events(handoff_home, "CC-1") if e["kind"] == "stopped"]
    assert stopped[-1]["exited"] == [], "nobody was left to ask"
    assert processes_of(handoff_home, str(claude.parent.parent), "claude") == []


def test_claude_ending_its_turn_without_a_report_is_nudged_once_then_files_it(
        repo: Path, tmp_path: Path, handoff_home: Path, isolated: dict[str, str],
        claude: Path, anthropic: AnthropicStandIn) -> None:
    claude_home(Path(isolated["HOME"]), [repo])
    configure(handoff_home, both_claude(claude), turn_grace=1)
    plan = plan_text({1: {"edits": [FIX_ADD, FIX_MUL, FIX_NEG], "cli": {"silent": "once"}}},
                     test=ALL_TESTS)
    done = handoff("start", "CC-2", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr + stand_in_errors(anthropic)
    log = events(handoff_home, "CC-2")
    nudges = [e for e in log if e["kind"] == "nudge"]
    assert len(nudges) == 1 and nudges[0]["role"] == "implementer" and nudges[0]["delivered"]
    assert "hook Stop" in nudges[0]["evidence"], "the Stop hook, not the screen, said so"
    folder = ticket_path(handoff_home, "CC-2")
    brief = folder / "inbox" / "implementer" / "brief-1.md"
    prompts = anthropic.turn_prompts()
    assert prompts.count(f"Read and follow {brief}") == 1
    assert sum("You ended your turn without filing your report" in p for p in prompts) == 1
    assert state(handoff_home, "CC-2")["phase"] == "passed"


def test_claude_that_never_reports_is_nudged_then_handed_to_a_person(
        repo: Path, tmp_path: Path, handoff_home: Path, isolated: dict[str, str],
        claude: Path, anthropic: AnthropicStandIn) -> None:
    claude_home(Path(isolated["HOME"]), [repo])
    configure(handoff_home, both_claude(claude), turn_grace=1)
    plan = plan_text({1: {"edits": [FIX_ADD], "cli": {"silent": "always"}}}, test=ADD_ONLY)
    runner = spawn("start", "CC-3", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo, log=tmp_path / "orch.log")
    try:
        waiting = wait_phase(handoff_home, "CC-3", "needs-human", timeout=120)
    finally:
        runner.kill()
        runner.wait()
    assert "after 1 nudge(s)" in waiting["reason"]
    log = events(handoff_home, "CC-3")
    assert [e["kind"] for e in log].count("nudge") == 1
    escalated = [e for e in log if e["kind"] == "escalate"]
    assert len(escalated) == 1 and "hook Stop" in escalated[0]["evidence"]
    closed = handoff("close", "CC-3", "--force", cwd=repo)
    assert closed.returncode == 0, closed.stderr
    assert processes_of(handoff_home, "claude") == []


def test_claude_as_planner_grounds_a_one_line_ticket_and_its_plan_runs_to_passed(
        repo: Path, tmp_path: Path, handoff_home: Path, isolated: dict[str, str],
        claude: Path, anthropic: AnthropicStandIn) -> None:
    """The real Claude Code plans: it reads the ticket and the files in its read-only checkout
    with its own Read tool, runs the test command, and files its plan with `handoff submit`
    through Bash; a first draft naming a file the base lacks is sent back, the second is the
    plan (approved by --yes), and the scripted team carries it to passed."""
    from tests.e2e.test_planner import GROUNDED, MADE_UP, ticket_file

    claude_home(Path(isolated["HOME"]), [repo])
    configure(handoff_home, {"planner": role("claude", claude),
                             "implementer": {"provider": "scripted"},
                             "reviewer": {"provider": "scripted"}})
    ticket = ticket_file(tmp_path, [{"test": ADD_ONLY, "body": MADE_UP},
                                    {"test": ADD_ONLY, "body": GROUNDED}])
    done = handoff("start", "CP-1", "--ticket-file", str(ticket), "--yes", "--foreground",
                   cwd=repo, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr + stand_in_errors(anthropic)
    log = events(handoff_home, "CP-1")
    launched = [e for e in log if e["kind"] == "launch" and e["role"] == "planner"]
    assert [e["provider"] for e in launched] == ["claude"], launched
    said = [e for e in log if e["kind"] == "submission" and e["role"] == "planner"]
    assert said[0]["accepted"] is False and "calc_utils.py" in " ".join(said[0]["problems"])
    assert any(e["kind"] == "plan-drafted" for e in log)
    plan = (ticket_path(handoff_home, "CP-1") / "plan.md").read_text(encoding="utf-8")
    assert "In `calc.py`, make `add` return the sum." in plan
    assert state(handoff_home, "CP-1")["phase"] == "passed"
    prompts = anthropic.turn_prompts()
    brief = ticket_path(handoff_home, "CP-1") / "inbox" / "planner" / "brief-1.md"
    assert prompts.count(f"Read and follow {brief}") == 1, prompts
    # claude's own record of the turn: it read the code in its checkout before it planned
    checkout = repo / ".worktrees" / "CP-1" / "planner"
    session = (ticket_path(handoff_home, "CP-1") / "transcripts" /
               "planner-1.session.jsonl").read_text(encoding="utf-8")
    assert str(checkout / "calc.py") in session, "it read the code"
    assert "tests.test_calc.AddTest 2>&1; echo handoff-exit" in session, "it ran the test"
    assert session.count("submit --dir") >= 2, "it filed, was sent back, and filed again"


def test_a_claude_reviewer_out_of_quota_is_taken_over_by_its_fallback_and_the_ticket_passes(
        repo: Path, tmp_path: Path, handoff_home: Path, isolated: dict[str, str],
        claude: Path, anthropic: AnthropicStandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    """The API answers the reviewer's requests as Anthropic answers a spent usage limit; Claude
    Code (its retries off, as they would be spent) shows it, handoff reads it as a spent quota
    and hands the role to its fallback (a second Claude), which reviews on the same brief; the
    implementer is untouched."""
    claude_home(Path(isolated["HOME"]), [repo])
    monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "0")
    configure(handoff_home, {"implementer": role("claude", claude),
                             "reviewer": {**role("claude", claude),
                                          "env": ["CLAUDE_CODE_MAX_RETRIES"],
                                          "fallback": [role("claude", claude)]}},
              api_patience=2)
    anthropic.refuse["inbox/reviewer/brief-1.md"] = (
        "You have reached your specified API usage limits. You will regain access on "
        "2026-12-06 at 00:00 UTC.")
    plan = plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY, review=[ADD_ONLY])
    done = handoff("start", "CQ-1", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr + stand_in_errors(anthropic)
    log = events(handoff_home, "CQ-1")
    [moved] = [e for e in log if e["kind"] == "failover"]
    assert (moved["role"], moved["from"], moved["to"]) == ("reviewer", "claude", "claude")
    assert "usage limits" in moved["evidence"]
    launched = [(e["role"], e["reason"]) for e in log if e["kind"] == "launch"]
    assert launched.count(("reviewer", "failover")) == 1
    assert [r for r, _ in launched].count("implementer") == 1, "the implementer untouched"
    assert state(handoff_home, "CQ-1")["phase"] == "passed"
