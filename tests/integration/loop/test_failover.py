"""A reviewer whose CLI says its quota is spent is taken over by its fallback on the same brief,
the implementer untouched, and the ticket passes; the final report says so, and that the
fallback is the implementer's CLI. Without a fallback a person is asked, as before. Real tmux,
git and scripted agents (`quota: first` shows a CLI's usage-limit message once)."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.harness import (
    ADD_ONLY,
    FIX_ADD,
    events,
    handoff,
    plan_text,
    state,
    ticket_path,
    wait_phase,
    write_plan,
)


def config(home: Path, reviewer: dict[str, object]) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump({"roles": {
        "implementer": {"provider": "scripted"}, "reviewer": reviewer}}), encoding="utf-8")


def test_a_spent_quota_hands_the_reviewer_to_its_fallback_and_the_ticket_passes(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    config(handoff_home, {"provider": "scripted", "fallback": [{"provider": "scripted"}]})
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD],
                                               "reviewer": {"quota": "first"}}}, test=ADD_ONLY))
    done = handoff("start", "Q-1", "--plan", str(plan), "--yes", "--foreground", cwd=repo,
                   timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    log = events(handoff_home, "Q-1")
    [moved] = [e for e in log if e["kind"] == "failover"]
    assert (moved["role"], moved["from"], moved["to"], moved["left"]) == \
        ("reviewer", "scripted", "scripted", 0)
    assert "usage limit reached" in moved["evidence"]
    assert "not independent" in moved["independence"], "onto the implementer's CLI: said"
    launches = [(e["role"], e["reason"]) for e in log if e["kind"] == "launch"]
    assert ("reviewer", "failover") in launches
    assert [r for r, _ in launches].count("implementer") == 1, "the implementer untouched"
    assert not [e for e in log if e["kind"] == "escalate"], "no person was asked"
    final = state(handoff_home, "Q-1")
    assert final["phase"] == "passed" and final["failovers"] == {"reviewer": 1}
    report = (ticket_path(handoff_home, "Q-1") / "final-report.md").read_text(encoding="utf-8")
    assert "**Failovers:**" in report and "reviewer: on scripted after 1 failover(s)" in report
    assert "its review was not independent" in report


def test_with_no_fallback_left_a_spent_quota_goes_to_a_person(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    config(handoff_home, {"provider": "scripted"})
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD],
                                               "reviewer": {"quota": "first"}}}, test=ADD_ONLY))
    done = handoff("start", "Q-2", "--plan", str(plan), "--yes", cwd=repo)
    assert done.returncode == 0, done.stderr
    asked = wait_phase(handoff_home, "Q-2", "needs-human", "passed", timeout=60)
    assert asked["phase"] == "needs-human" and "blocked (quota)" in asked["reason"]
    assert not [e for e in events(handoff_home, "Q-2") if e["kind"] == "failover"]
    handoff("stop", "Q-2", cwd=repo)
