"""Watching peers end to end, with the scripted agent: a turn that ends without a report is
nudged once, then handed to a person; the answer reaches the live peer."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from tests.harness import (
    ADD_ONLY,
    ALL_TESTS,
    FIX_ADD,
    FIX_MUL,
    FIX_NEG,
    events,
    handoff,
    plan_text,
    spawn,
    ticket_path,
    wait_phase,
    write_plan,
)


def quick_watch(handoff_home: Path) -> None:
    handoff_home.mkdir(parents=True, exist_ok=True)
    (handoff_home / "config.yaml").write_text("turn_grace: 1\n", encoding="utf-8")


def test_a_turn_ended_without_a_report_is_nudged_once_and_the_nudge_files_it(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    quick_watch(handoff_home)
    plan = plan_text({1: {"edits": [FIX_ADD], "silent": "once"}}, test=ADD_ONLY)
    done = handoff("start", "T-1", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", "--max-rounds", "1", cwd=repo, timeout=90)
    assert done.returncode == 0, done.stdout + done.stderr
    log = events(handoff_home, "T-1")
    nudges = [e for e in log if e["kind"] == "nudge"]
    assert len(nudges) == 1 and nudges[0]["delivered"] is True
    assert "no report" in nudges[0]["evidence"]
    ended = [e for e in log if e["kind"] == "peer" and e["state"] == "turn-ended"]
    # the scripted agent signals its turn's end as a CLI's Stop hook does; should a look at
    # its screen come first, the screen's line is the evidence
    assert ended and ("hook Stop" in ended[0]["evidence"]
                      or "scripted: waiting for the next message" in ended[0]["evidence"])
    assert [e["state"] for e in log if e["kind"] == "escalate"] == []
    screen = (ticket_path(handoff_home, "T-1") / "events.jsonl").read_text()
    assert screen.count('"kind": "nudge"') == 1


def test_a_peer_that_never_reports_is_handed_to_a_person_and_the_answer_reaches_it(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    quick_watch(handoff_home)
    plan = plan_text({1: {"edits": [FIX_ADD], "silent": "always"}}, test=ADD_ONLY)
    runner = spawn("start", "T-2", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", "--max-rounds", "1", cwd=repo, log=tmp_path / "orch.log")
    try:
        waiting = wait_phase(handoff_home, "T-2", "needs-human", timeout=60)
        assert "turn-ended" in waiting["reason"] and "after 1 nudge(s)" in waiting["reason"]
        assert "handoff answer T-2" in waiting["reason"]
        escalated = [e for e in events(handoff_home, "T-2") if e["kind"] == "escalate"]
        assert len(escalated) == 1 and escalated[0]["role"] == "implementer"
        shown = ticket_path(handoff_home, "T-2") / "transcripts" / escalated[0]["screen"]
        assert "not filing my report" in shown.read_text()

        answered = handoff("answer", "T-2", "Please file it now.", cwd=repo)
        assert answered.returncode == 0, answered.stderr
        passed_on = wait_phase(handoff_home, "T-2", "implementing", timeout=30)
        assert passed_on["round"] == 1
        # still silent (the plan says always): the answer was taken, then a second escalation
        again = wait_phase(handoff_home, "T-2", "needs-human", timeout=60)
        assert again["answers_used"] == 1
    finally:
        runner.kill()
        runner.wait()
    log = events(handoff_home, "T-2")
    passed = [e for e in log if e["kind"] == "answer-passed-on"]
    assert len(passed) == 1 and passed[0]["delivered"] is True
    assert [e["kind"] for e in log].count("launch") == 1, "the peer was told, not restarted"


def test_a_peer_that_shows_no_progress_is_handed_to_a_person_then_restarted_on_an_answer(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    handoff_home.mkdir(parents=True, exist_ok=True)
    # 5 s: long enough that a busy machine does not make the peer that works look stalled
    (handoff_home / "config.yaml").write_text("stall_timeout: 5\n", encoding="utf-8")
    plan = plan_text({1: {"edits": [FIX_ADD], "reviewer": {"hang": "once"}}}, test=ADD_ONLY,
                     review=[ADD_ONLY])
    runner = spawn("start", "T-3", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", "--max-rounds", "1", cwd=repo, log=tmp_path / "orch.log")
    try:
        waiting = wait_phase(handoff_home, "T-3", "needs-human", timeout=60)
        assert "the reviewer needs a person (stalled)" in waiting["reason"]
        assert "nothing changed on screen or in hooks" in waiting["reason"]
        assert "stall_timeout" in waiting["reason"]
        # the hung process cannot take the answer: it is started afresh on the same brief
        assert handoff("answer", "T-3", "Try again.", cwd=repo).returncode == 0
        final = wait_phase(handoff_home, "T-3", "passed", "escalated", timeout=60)
        assert runner.wait(timeout=30) == 0
    finally:
        runner.kill()
        runner.wait()
    assert final["phase"] == "passed"
    passed_on = [e for e in events(handoff_home, "T-3") if e["kind"] == "answer-passed-on"]
    assert len(passed_on) == 1 and passed_on[0]["delivered"] is False
    launches = [e for e in events(handoff_home, "T-3") if e["kind"] == "launch"
                and e["role"] == "reviewer"]
    # started warm while the gate ran (briefed by paste), then afresh on the answer
    assert [e["reason"] for e in launches] == ["warm", "answered"]


def test_any_command_can_be_a_peer(repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    """The command provider fills its argv template; here the template runs the scripted agent,
    the way a person would wire in a CLI handoff has no module for."""
    handoff_home.mkdir(parents=True, exist_ok=True)
    spec = {"provider": "command",
            "command": [sys.executable, "-m", "handoff.peer.scripted_agent", "{role}", "{message}"],
            "markers": {"turn_ended": "^scripted: waiting for the next message",
                        "busy": "^scripted: took"}}
    (handoff_home / "config.yaml").write_text(yaml.safe_dump(
        {"roles": {"implementer": spec, "reviewer": spec}}), encoding="utf-8")
    plan = plan_text({1: {"edits": [FIX_ADD]}, 2: {"edits": [FIX_MUL, FIX_NEG]}},
                     test=ADD_ONLY, review=[ALL_TESTS])
    done = handoff("start", "T-4", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    log = events(handoff_home, "T-4")
    assert {e["provider"] for e in log if e["kind"] == "launch"} == {"command"}
    assert [e["by"] for e in log if e["kind"] == "brief" and e["role"] == "implementer"] == ["paste"]
    assert [e["verdict"] for e in log if e["kind"] == "verdict"] == ["fail", "pass"]
