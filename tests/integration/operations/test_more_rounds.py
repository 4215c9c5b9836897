"""`handoff resume TICKET --more-rounds N` (handoff.operations.more_rounds): an escalated ticket
carried on, through the real CLI with the scripted agents, real tmux and git; and which limit a
ticket stopped at, and what is refused, read from real ticket directories."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from handoff.errors import EXIT_ESCALATED, EXIT_USAGE, UsageError
from handoff.loop.rules import Limits
from handoff.machinery.repo import short_sha
from handoff.operations.more_rounds import Bound, bound_hit, check_more_rounds, extend, limits_of
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
    paused_ticket,
    plan_text,
    state,
    stop_runner,
    ticket_path,
    write_plan,
)
from tests.tickets import moved, new_ticket

FINDINGS = "## The reviewers' must-fix findings to address this round"
GATE = "## The verification gate failed"


def start(repo: Path, tmp_path: Path, ticket: str, plan: str, *extra: str) -> tuple[int, str]:
    path = write_plan(tmp_path, plan, f"{ticket}.md")
    done = handoff("start", ticket, "--plan", str(path), "--yes", "--foreground", *extra,
                   cwd=repo, timeout=120)
    return done.returncode, done.stdout + done.stderr


def more(repo: Path, ticket: str, *args: str) -> tuple[int, str]:
    done = handoff("resume", ticket, "--foreground", *args, cwd=repo, timeout=120)
    return done.returncode, done.stdout + done.stderr


def transitions(home: Path, ticket: str) -> list[tuple[str, str]]:
    return [(e["from"], e["to"]) for e in events(home, ticket) if e["kind"] == "phase"]


def test_an_escalated_ticket_gets_more_rounds_with_its_open_findings(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    # round 1 fixes add only: the reviewer (every test) fails it, and --max-rounds 1 stops it
    plan = plan_text({1: {"edits": [FIX_ADD]}, 2: {"edits": [FIX_MUL, FIX_NEG]}},
                     test=ADD_ONLY, review=[ALL_TESTS])
    code, out = start(repo, tmp_path, "M-1", plan, "--max-rounds", "1")
    assert code == EXIT_ESCALATED, out
    folder = ticket_path(handoff_home, "M-1")
    escalated_report = (folder / "final-report.md").read_text()

    code, out = more(repo, "M-1", "--more-rounds", "1")
    assert code == 0, out
    current = state(handoff_home, "M-1")
    assert current["phase"] == "passed" and current["round"] == 2
    assert current["max_rounds"] == 2 and current["verdicts"] == {"1": "fail", "2": "pass"}
    assert "had stopped at max-rounds" in out and "max-rounds 1 -> 2" in out

    brief = (folder / "inbox" / "implementer" / "brief-2.md").read_text()
    assert FINDINGS in brief, brief
    review = yaml.safe_load((folder / "review-report-1.md").read_text().split("---")[1])
    assert review["verdict"] == "fail" and review["must_fix"]
    carried = brief.split(FINDINGS)[1]
    for finding in review["must_fix"]:  # every must-fix finding of the last review
        assert f"`{finding['file']}:{finding['line']}` — {finding['reason']}" in carried, finding
    assert "test_mul" in carried

    extended = [e for e in events(handoff_home, "M-1") if e["kind"] == "more-rounds"]
    assert len(extended) == 1
    assert extended[0]["by"] == "hand" and extended[0]["more"] == 1
    assert extended[0]["bound"] == "max-rounds"
    assert extended[0]["before"]["max_rounds"] == 1 and extended[0]["after"]["max_rounds"] == 2
    assert ("escalated", "implementing") in transitions(handoff_home, "M-1")
    assert (folder / "final-report.escalated-1.md").read_text() == escalated_report
    assert "passed" in (folder / "final-report.md").read_text()

    # a passed ticket is at no bound: refused, naming what to do instead
    code, out = more(repo, "M-1", "--more-rounds", "1")
    assert code == EXIT_USAGE, out
    assert "passed, not escalated" in out and "handoff finish M-1" in out
    assert handoff("close", "M-1", cwd=repo).returncode == 0
    code, out = more(repo, "M-1", "--more-rounds", "2")
    assert code == EXIT_USAGE and "closed, not escalated" in out, out
    assert [e["kind"] for e in events(handoff_home, "M-1")].count("more-rounds") == 1


def test_a_ticket_stopped_by_its_gate_gets_a_new_gate_budget(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    (repo / ".handoff.yaml").write_text("max_gate_bounces: 1\n", encoding="utf-8")
    git(repo, "add", ".handoff.yaml")
    git(repo, "commit", "-q", "-m", "one failed gate escalates")
    # rounds 1 and 2 fix the wrong things: the gate (add) fails, and one failure escalates
    plan = plan_text({1: {"edits": [FIX_MUL]}, 2: {"edits": [FIX_NEG]}, 3: {"edits": [FIX_ADD]}},
                     test=ADD_ONLY, review=[ADD_ONLY])
    code, out = start(repo, tmp_path, "G-1", plan)
    assert code == EXIT_ESCALATED, out
    assert state(handoff_home, "G-1")["gate_bounces"] == 1

    # two more rounds: the gate may fail once more (round 2) without escalating again
    code, out = more(repo, "G-1", "--more-rounds", "2")
    assert code == 0, out
    current = state(handoff_home, "G-1")
    assert current["phase"] == "passed" and current["round"] == 3
    assert current["max_gate_bounces"] == 3 and current["gate_bounces"] == 2
    inbox = ticket_path(handoff_home, "G-1") / "inbox" / "implementer"
    brief = (inbox / "brief-2.md").read_text()
    assert GATE in brief and FINDINGS not in brief, brief
    note = brief.split(GATE)[1]
    assert "failed (exit 1)" in note and "gate-1.log" in note and "test_add" in note, note
    assert "gate-2.log" in (inbox / "brief-3.md").read_text(), "the next failure goes on as usual"
    extended = [e for e in events(handoff_home, "G-1") if e["kind"] == "more-rounds"]
    assert extended[0]["bound"] == "max-gate-bounces"
    assert extended[0]["before"]["max_gate_bounces"] == 1
    assert extended[0]["after"]["max_gate_bounces"] == 3


def test_more_rounds_refuses_what_is_at_no_bound(repo: Path, tmp_path: Path,
                                                 handoff_home: Path) -> None:
    # the same failure answered not-fixed in rounds 2 and 3, the last round --max-rounds
    # allows: the ledger stopped it, not the limit
    plan = plan_text({1: {"edits": [FIX_ADD]}, 2: {"edits": [TOUCH_README]},
                      3: {"edits": [{"file": "NOTES.md", "content": "again\n"}]}},
                     test=ADD_ONLY, review=[ALL_TESTS])
    code, out = start(repo, tmp_path, "R-1", plan, "--max-rounds", "3")
    assert code == EXIT_ESCALATED, out
    before = state(handoff_home, "R-1")
    assert before["reviews"] == before["max_rounds"] == 3
    assert "not-fixed in two rounds" in before["reason"]

    code, out = more(repo, "R-1", "--more-rounds", "0")
    assert code == EXIT_USAGE and "--more-rounds must be at least 1" in out, out
    code, out = more(repo, "R-1", "--more-rounds", "2")
    assert code == EXIT_USAGE, out
    assert "escalated without reaching a limit" in out and "not-fixed in two rounds" in out
    assert "hint:" in out
    after = state(handoff_home, "R-1")
    assert after["phase"] == "escalated" and after["max_rounds"] == before["max_rounds"]
    assert after["round"] == before["round"]
    assert after["max_gate_bounces"] == before["max_gate_bounces"]
    assert (ticket_path(handoff_home, "R-1") / "final-report.md").is_file()
    assert not any(e["kind"] == "more-rounds" for e in events(handoff_home, "R-1"))

    # a plan still waiting for approval is not escalated either
    path = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}), "W-1.md")
    assert handoff("start", "W-1", "--plan", str(path), cwd=repo).returncode == 1
    code, out = more(repo, "W-1", "--more-rounds", "1")
    assert code == EXIT_USAGE and "awaiting-approval, not escalated" in out, out
    assert "--yes" in out
    assert state(handoff_home, "W-1")["phase"] == "awaiting-approval"


def test_more_rounds_refuses_a_running_ticket(repo: Path, tmp_path: Path,
                                              handoff_home: Path) -> None:
    runner, _, _ = paused_ticket(repo, tmp_path, handoff_home, "P-1")
    try:
        code, out = more(repo, "P-1", "--more-rounds", "1")
        assert code == EXIT_USAGE, out
        assert "implementing, not escalated" in out and "at work" in out
        assert "handoff attach P-1" in out, "what to do while it runs, never a resume"
        assert state(handoff_home, "P-1")["max_rounds"] == 3
    finally:
        stop_runner(runner)


def test_a_tickets_limits_are_those_of_the_config_when_it_was_created(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    """Every limit is frozen at create: a config changed while the plan waits for approval
    (or while the ticket runs) does not move its limits; only --more-rounds does."""
    (repo / ".handoff.yaml").write_text("max_gate_bounces: 1\nmax_relaunches: 4\n",
                                        encoding="utf-8")
    git(repo, "add", ".handoff.yaml")
    git(repo, "commit", "-q", "-m", "one failed gate escalates")
    path = write_plan(tmp_path, plan_text({1: {"edits": [FIX_MUL]}, 2: {"edits": [FIX_ADD]}},
                                          test=ADD_ONLY, review=[ADD_ONLY]), "L-1.md")
    waiting = handoff("start", "L-1", "--plan", str(path), "--max-rounds", "4", cwd=repo)
    assert waiting.returncode == 1, waiting.stdout + waiting.stderr  # no terminal: not approved
    created = state(handoff_home, "L-1")
    assert (created["max_rounds"], created["max_gate_bounces"], created["max_relaunches"]) == (
        4, 1, 4)
    (repo / ".handoff.yaml").write_text("max_gate_bounces: 7\nmax_relaunches: 0\n",
                                        encoding="utf-8")
    code, out = more(repo, "L-1", "--yes")
    assert code == EXIT_ESCALATED, out
    ended = state(handoff_home, "L-1")
    assert ended["gate_bounces"] == 1 and "gate failed 1 times" in ended["reason"]
    assert (ended["max_gate_bounces"], ended["max_relaunches"]) == (1, 4)


def test_a_ticket_directory_from_before_teams_still_resumes(repo: Path, tmp_path: Path,
                                                           handoff_home: Path) -> None:
    """A state.json as the handoff before teams wrote it: no team (implementer and reviewer),
    no ledger (its last review's must-fixes become one), one relaunch counter."""
    import json

    plan = plan_text({1: {"edits": [FIX_ADD]}, 2: {"edits": [FIX_MUL, FIX_NEG]}},
                     test=ADD_ONLY, review=[ALL_TESTS])
    code, out = start(repo, tmp_path, "O-1", plan, "--max-rounds", "1")
    assert code == EXIT_ESCALATED, out
    folder = ticket_path(handoff_home, "O-1")
    data = json.loads((folder / "state.json").read_text())
    for key in ("team", "reviewed", "tested", "ledger", "scans", "weakened", "held",
                "relaunched"):
        data.pop(key)
    data["relaunches"] = 0
    old = json.dumps(data, indent=2, sort_keys=True) + "\n"
    for name in ("state.json", "state.json.bak"):
        (folder / name).write_text(old)

    code, out = more(repo, "O-1", "--more-rounds", "1")
    assert code == 0, out
    current = state(handoff_home, "O-1")
    assert current["phase"] == "passed" and current["verdicts"] == {"1": "fail", "2": "pass"}
    assert [r["name"] for r in current["team"]] == ["implementer", "reviewer"]
    brief = (folder / "inbox" / "implementer" / "brief-2.md").read_text()
    carried = brief.split(FINDINGS)[1]
    assert "`F1` `tests/test_calc.py:" in carried and "test_mul" in carried


# ---- the limits and the refusals, read from the ticket directory ---------------------------

@pytest.mark.parametrize(("phase", "hint"), [
    ("passed", "handoff finish T-1 (merges it)"),
    ("closed", "start a new ticket"),
    ("needs-human", "handoff answer T-1 TEXT"),
    ("awaiting-approval", "handoff resume T-1 --yes"),
    ("reviewing", "no orchestrator runs it (it was stopped, or cut off): handoff resume T-1"),
])
def test_only_an_escalated_ticket_gets_more_rounds(repo: Path, handoff_home: Path, phase: str,
                                                   hint: str) -> None:
    ws = new_ticket(handoff_home, repo)
    moved(ws, phase)
    with pytest.raises(UsageError) as refused:
        check_more_rounds(ws.tdir, 1)
    assert refused.value.message.startswith(f"T-1 is {phase}, not escalated")
    assert hint in (refused.value.hint or "")
    moved(ws, "escalated")
    check_more_rounds(ws.tdir, 1)
    with pytest.raises(UsageError) as none:
        check_more_rounds(ws.tdir, 0)
    assert none.value.message == "--more-rounds must be at least 1 (got 0)"
    ws.tdir.state_file.write_text("{", encoding="utf-8")  # read from its backup, not mended
    check_more_rounds(ws.tdir, 2)
    assert ws.tdir.state_file.read_text(encoding="utf-8") == "{"


def test_a_last_review_that_failed_at_max_rounds_is_the_round_limit(
        repo: Path, handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    state = moved(ws, "escalated", round=2, max_rounds=2, verdicts={"1": "fail", "2": "fail"},
                  findings={"1": ["calc.py:a"], "2": ["calc.py:b"]})
    assert limits_of(state) == Limits(2, state.max_gate_bounces)
    assert bound_hit(ws, state) == Bound("max-rounds", [])
    state.max_rounds = 3  # below its limit: it escalated for another reason
    assert bound_hit(ws, state) is None
    state.max_rounds, state.verdicts["2"] = 2, "pass"
    assert bound_hit(ws, state) is None


def test_a_must_fix_that_came_back_is_no_limit(repo: Path, handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    state = moved(ws, "escalated", round=2, max_rounds=2, verdicts={"1": "fail", "2": "fail"},
                  findings={"1": ["calc.py:a"], "2": ["calc.py:a"]}, reason="came back")
    assert bound_hit(ws, state) is None
    before = ws.tdir.state_file.read_text(encoding="utf-8")
    with pytest.raises(UsageError) as refused:
        extend(ws, 1)
    assert "escalated without reaching a limit (came back)" in refused.value.message
    assert "handoff/T-1" in (refused.value.hint or "")
    assert ws.tdir.state_file.read_text(encoding="utf-8") == before  # nothing changed
    assert not [e for e in ws.tdir.events.read()[0] if e["kind"] == "more-rounds"]


def test_a_failed_gate_at_its_limit_carries_its_log_to_the_next_round(
        repo: Path, handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    commit = git(repo, "rev-parse", "HEAD")
    state = moved(ws, "escalated", round=1, gate_bounces=1, max_gate_bounces=1,
                  gates={"1": "fail"}, commits={"1": commit})
    log = ws.tdir.gate_log(1)
    log.write_text("$ python -m unittest\n# cwd /work\nFAIL: test_add\n# the gate failed "
                   "(exit 1)\n", encoding="utf-8")
    bound = bound_hit(ws, state)
    assert bound is not None and bound.name == "max-gate-bounces"
    [(title, note)] = bound.notes
    assert title == "The verification gate failed"
    assert note == (f"the gate failed (exit 1) at {short_sha(commit)}; the full output is in "
                    f"`{log}`. Its end:\n\n```\nFAIL: test_add\n```")
    log.unlink()  # no log: the note still says the gate failed
    bound = bound_hit(ws, state)
    assert bound is not None and bound.notes[0][1].startswith("the gate failed at ")
