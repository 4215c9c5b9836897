"""handoff.cli.looking: the commands that look and change nothing: status (every ticket, a
broken one listed beside the rest), log (a torn line skipped and said; --follow)."""

from __future__ import annotations

import json
from pathlib import Path

from handoff.record.events import EventLog
from tests.conftest import wait_until
from tests.harness import (
    ADD_ONLY,
    ALL_TESTS,
    FIX_ADD,
    FIX_MUL,
    FIX_NEG,
    assert_clean_error,
    handoff,
    plan_text,
    spawn,
    ticket_path,
    wait_event,
    write_plan,
)


def test_status_empty_and_log_survives_a_torn_line(repo: Path, tmp_path: Path,
                                                   handoff_home: Path) -> None:
    assert json.loads(handoff("status", "--json").stdout) == []
    assert "no tickets yet" in handoff("status").stdout
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    assert handoff("start", "T-6", "--plan", str(plan), "--yes", "--foreground",
                   cwd=repo).returncode == 0
    log_file = ticket_path(handoff_home, "T-6") / "events.jsonl"
    whole = len(log_file.read_text().splitlines())
    with log_file.open("a") as handle:
        handle.write('{"time": "2026-01-01T00:00:00", "kind": "torn')
    done = handoff("log", "T-6", "--json", cwd=repo)
    assert done.returncode == 0
    assert len(json.loads(done.stdout)) == whole
    assert "skipped 1 unreadable line" in done.stderr


def test_status_lists_a_broken_ticket_without_hiding_the_others(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    for ticket in ("T-8", "T-9"):
        assert handoff("start", ticket, "--plan", str(plan), cwd=repo,
                       input_text="").returncode == 1
    (ticket_path(handoff_home, "T-8") / "state.json").write_text("[]")
    rows = {r["ticket"]: r for r in json.loads(handoff("status", "--json").stdout)}
    assert rows["T-9"]["phase"] == "awaiting-approval"
    assert rows["T-8"]["phase"] == "unreadable" and "state.json" in rows["T-8"]["reason"]
    text = handoff("status")
    assert text.returncode == 0 and "unreadable" in text.stdout and "T-9" in text.stdout


def test_log_follow_prints_new_events_as_they_come(repo: Path, tmp_path: Path,
                                                   handoff_home: Path) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    assert handoff("start", "T-L", "--plan", str(plan), cwd=repo).returncode == 1
    out = tmp_path / "follow.log"
    follower = spawn("log", "T-L", "--follow", cwd=repo, log=out)
    try:
        wait_until(lambda: "ticket created" in out.read_text(), what="the existing events")
        EventLog(ticket_path(handoff_home, "T-L") / "events.jsonl").append(
            "answer", round=1, role="human", file="answer-1.md")
        wait_until(lambda: "answered (answer-1.md)" in out.read_text(), what="the new event")
    finally:
        follower.kill()
        follower.wait()


def test_attach_from_no_terminal_says_so_instead_of_tmuxs_error(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD], "pause_until": "go"}},
                                          test=ADD_ONLY))
    assert handoff("start", "T-7", "--plan", str(plan), "--yes", cwd=repo).returncode == 0
    try:
        wait_event(handoff_home, "T-7", "launch", role="implementer")
        done = handoff("attach", "T-7", cwd=repo)  # its stdin and stdout are pipes
        assert_clean_error(done, 2, "attach needs a terminal to show T-7's panes in",
                           "'handoff status T-7'")
        assert "not a terminal" not in done.stderr.replace("this is not one", "")
    finally:
        handoff("stop", "T-7", cwd=repo)


def test_status_lists_the_open_tickets_and_says_how_many_closed_it_left_out(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    assert handoff("start", "T-1", "--plan", str(plan), "--yes", "--foreground",
                   cwd=repo).returncode == 0
    assert handoff("close", "T-1", cwd=repo).returncode == 0
    assert handoff("start", "T-2", "--plan", str(plan), cwd=repo, input_text="").returncode == 1
    for lean in (True, False):  # the lean lane and the full command line say the same
        args = ("status",) if lean else ("status", "--repo", str(repo))
        shown = handoff(*args, cwd=repo).stdout
        assert "T-2" in shown and "T-1" not in shown, shown
        assert shown.rstrip().endswith("(1 closed ticket(s) not shown: handoff status --all)")
    every = handoff("status", "--all", cwd=repo).stdout
    assert every.index("T-2") < every.index("T-1"), "awaiting its person, above the closed"
    assert [r["ticket"] for r in json.loads(handoff("status", "--json").stdout)] == ["T-2"]
    assert handoff("close", "T-2", cwd=repo).returncode == 0
    assert handoff("status", cwd=repo).stdout.strip() == \
        "no open tickets (2 closed ticket(s) not shown: handoff status --all)"


def test_diff_shows_the_whole_change_or_one_rounds(repo: Path, tmp_path: Path,
                                                    handoff_home: Path) -> None:
    """Round 1 fixes add and its reviewer (every test) fails it; round 2 fixes mul and neg."""
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]},
                                           2: {"edits": [FIX_MUL, FIX_NEG]}},
                                          test=ADD_ONLY, review=[ALL_TESTS]))
    early = handoff("start", "D-1", "--plan", str(plan), cwd=repo, input_text="")
    assert early.returncode == 1
    assert_clean_error(handoff("diff", "D-1", cwd=repo), 2,
                       "D-1 has no accepted work yet (phase awaiting-approval)")
    assert handoff("resume", "D-1", "--yes", "--foreground", cwd=repo).returncode == 0
    whole = handoff("diff", "D-1", cwd=repo)
    assert whole.returncode == 0, whole.stderr
    assert whole.stderr.startswith("# D-1: its whole change,") and "(2 round(s))" in whole.stderr
    assert "+    return a + b" in whole.stdout and "+    return -a" in whole.stdout
    first = handoff("diff", "D-1", "--round", "1", cwd=repo).stdout
    second = handoff("diff", "D-1", "--round", "2", cwd=repo).stdout
    assert "+    return a + b" in first and "return -a" not in first
    assert "+    return -a" in second and "+    return a + b" not in second
    assert_clean_error(handoff("diff", "D-1", "--round", "3", cwd=repo), 2,
                       "D-1 has no accepted commit for round 3", "rounds with one: 1, 2")
