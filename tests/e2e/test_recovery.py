"""Crashes, hands on the wheel, cleanup and concurrency — in real tmux and git."""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import git, wait_until
from tests.faults.catalog import fault
from tests.harness import (
    ADD_ONLY,
    ALL_TESTS,
    FIX_ADD,
    FIX_MUL,
    FIX_NEG,
    events,
    handoff,
    plan_text,
    release,
    spawn,
    state,
    ticket_path,
    tmux_alive,
    wait_briefed,
    wait_event,
    wait_phase,
    windows,
    worktree_count,
    write_plan,
)


@pytest.mark.parametrize("where", ["implementing", "testing", "reviewing"])
def test_orchestrator_killed_mid_round_resumes_without_redoing(
        where: str, repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    round1: dict[str, object] = {"edits": [FIX_ADD]}
    role = {"implementing": "implementer", "testing": "tester", "reviewing": "reviewer"}[where]
    if where == "implementing":
        round1["pause_until"] = "go"
    else:
        round1[role] = {"pause_until": "go"}
    if where == "testing":  # a team with a tester, which adds nothing: its commit is the round's
        (repo / ".handoff.yaml").write_text(
            "roles:\n  implementer: {provider: scripted}\n  reviewer: {provider: scripted}\n"
            "  tester: {provider: scripted}\n", encoding="utf-8")
        git(repo, "add", ".handoff.yaml")
        git(repo, "commit", "-q", "-m", "team")
    plan = plan_text({1: round1, 2: {"edits": [FIX_MUL, FIX_NEG]}}, test=ADD_ONLY,
                     review=[ALL_TESTS])
    path = write_plan(tmp_path, plan)
    first = spawn("start", "T-9", "--plan", str(path), "--yes", "--foreground", cwd=repo,
                  log=tmp_path / "first.log")
    # handed its brief (a launch on it, or a warm reviewer's paste) and said so in the record
    wait_briefed(handoff_home, "T-9", role)
    folder = ticket_path(handoff_home, "T-9")
    wait_until(lambda: "paused until" in _screen(folder, role), what=f"{role} paused")
    first.kill()  # SIGKILL: no cleanup of any kind
    first.wait()
    assert state(handoff_home, "T-9")["phase"] == where

    second = spawn("resume", "T-9", "--foreground", cwd=repo, log=tmp_path / "second.log")
    try:
        wait_event(handoff_home, "T-9", "orchestrator", pid=second.pid)
        release(folder, "go")
        final = wait_phase(handoff_home, "T-9", "passed", "escalated")
        assert second.wait(timeout=30) == 0, (tmp_path / "second.log").read_text()
    finally:
        second.kill()
        second.wait()
    assert final["phase"] == "passed" and final["verdicts"] == {"1": "fail", "2": "pass"}
    # each time a peer was handed a brief: a launch on it, or a paste (a warm start has none)
    launches = [(e["round"], e["role"]) for e in events(handoff_home, "T-9")
                if e["kind"] == "brief" or (e["kind"] == "launch" and e["brief"])]
    assert launches.count((1, role)) == 1, f"round 1 {role} was briefed twice: {launches}"
    assert sorted(p.name for p in folder.glob("impl-report-*")) == ["impl-report-1.md",
                                                                     "impl-report-2.md"]
    assert not list(folder.glob("*.rejected-*"))
    commits = git(repo, "rev-list", "--count", "main..handoff/T-9")
    assert commits == "2", "each implementer round committed exactly once"


def reviewer_pid(home: Path, ticket: str) -> int:
    """The process the reviewer's pane runs (its launcher becomes its CLI: one pid)."""
    st = state(home, ticket)
    panes = subprocess.run(["tmux", "-L", st["socket"], "list-panes", "-s", "-t",
                            f"={st['session']}", "-F", "#{window_name} #{pane_pid}"],
                           capture_output=True, text=True, timeout=15, check=True).stdout
    return int(next(line.split()[1] for line in panes.splitlines()
                    if line.startswith("reviewer ")))


def new_process(home: Path, ticket: str, old: int) -> bool | None:
    """The reviewer's pane runs another process than old."""
    return reviewer_pid(home, ticket) != old or None


def _screen(folder: Path, role: str) -> str:
    """What the role's pane shows, read with plain tmux on the ticket's recorded socket."""
    current = json.loads((folder / "state.json").read_text())
    panes = subprocess.run(["tmux", "-L", current["socket"], "capture-pane", "-p", "-t",
                            f"={current['session']}:{role}"], capture_output=True, text=True,
                           timeout=15)
    return panes.stdout


def test_reviewer_recycled_by_hand_mid_review(repo: Path, tmp_path: Path,
                                              handoff_home: Path) -> None:
    plan = plan_text({1: {"edits": [FIX_ADD, FIX_MUL, FIX_NEG], "reviewer": {"hang": "once"}}},
                     test=ALL_TESTS)
    path = write_plan(tmp_path, plan)
    runner = spawn("start", "T-7", "--plan", str(path), "--yes", "--foreground", cwd=repo,
                   log=tmp_path / "orchestrator.log")
    try:
        folder = wait_until(lambda: list(handoff_home.glob("*/T-7/state.json")),
                            what="ticket dir")[0].parent
        wait_until(lambda: "hanging as the plan says" in _screen(folder, "reviewer"),
                   what="the reviewer to hang")
        recycled = handoff("recycle", "T-7", "reviewer", cwd=repo)
        assert recycled.returncode == 0, recycled.stderr
        final = wait_phase(handoff_home, "T-7", "passed", "escalated")
        assert runner.wait(timeout=30) == 0
    finally:
        runner.kill()
        runner.wait()
    assert final["phase"] == "passed" and final["reviews"] == 1
    recycles = [e for e in events(handoff_home, "T-7") if e["kind"] == "recycle"]
    assert [e["by"] for e in recycles] == ["hand"]
    transcripts = [p.read_text() for p in (folder / "transcripts").glob("reviewer-1*.log")]
    assert any("hanging as the plan says" in t for t in transcripts)


def test_close_refuses_a_dirty_worktree_and_loses_nothing(repo: Path, tmp_path: Path,
                                                          handoff_home: Path, socket: str) -> None:
    plan = plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY, review=[ADD_ONLY])
    path = write_plan(tmp_path, plan)
    done = handoff("start", "T-8", "--plan", str(path), "--yes", "--foreground", cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    worktree = repo / ".worktrees" / "T-8" / "implementer"
    precious = worktree / "notes-not-committed.txt"
    precious.write_text("my unsaved thoughts\n")

    refused = handoff("close", "T-8", cwd=repo)
    assert refused.returncode == 5
    assert "notes-not-committed.txt" in refused.stderr and "--force" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert precious.read_text() == "my unsaved thoughts\n"
    assert state(handoff_home, "T-8")["phase"] == "passed"
    assert tmux_alive(socket), "a refused close changes nothing, peers included"

    precious.unlink()
    (repo / ".worktrees" / "T-8" / "reviewer" / "coverage.out").write_text("left by a test run\n")
    closed = handoff("close", "T-8", cwd=repo)
    assert closed.returncode == 0, closed.stderr
    assert worktree_count(repo) == 1 and not (repo / ".worktrees" / "T-8").exists()
    assert git(repo, "rev-parse", "--verify", "handoff/T-8"), "the branch is kept"
    assert state(handoff_home, "T-8")["phase"] == "closed"
    assert not tmux_alive(socket)
    scratch = ticket_path(handoff_home, "T-8") / "transcripts" / "reviewer-scratch-close.patch"
    assert "left by a test run" in scratch.read_text(), "the reviewer's leftovers are kept"
    assert git(repo, "status", "--porcelain") == ""


def test_two_tickets_at_once_in_one_repo(repo: Path, tmp_path: Path, handoff_home: Path,
                                         socket: str) -> None:
    plans = {"T-A": plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY, review=[ADD_ONLY]),
             "T.B": plan_text({1: {"edits": [FIX_NEG]}},
                              test=[*ALL_TESTS[:-1], "tests.test_calc.NegTest"])}
    for ticket, text in plans.items():
        started = handoff("start", ticket, "--plan", str(write_plan(tmp_path, text, ticket)),
                          "--yes", cwd=repo)
        assert started.returncode == 0, started.stderr
        assert "handoff attach" in started.stdout
    for ticket in plans:
        assert wait_phase(handoff_home, ticket, "passed", "escalated")["phase"] == "passed"
    rows = {r["ticket"]: r for r in json.loads(handoff("status", "--json").stdout)}
    assert set(rows) == {"T-A", "T.B"}
    assert rows["T-A"]["session"] != rows["T.B"]["session"]
    for row in rows.values():
        assert set(windows(socket, row["session"])) == {"orchestrator", "implementer",
                                                        "reviewer"}
    assert "return a + b" in git(repo, "show", "handoff/T-A:calc.py")
    assert "return -a" in git(repo, "show", "handoff/T.B:calc.py")
    assert "return a - b" in git(repo, "show", "handoff/T.B:calc.py"), "tickets stay apart"
    for ticket in plans:
        assert handoff("close", ticket, cwd=repo).returncode == 0
    assert worktree_count(repo) == 1
    assert not tmux_alive(socket)


def test_close_force_still_keeps_a_patch_of_the_discarded_work(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    plan = plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY, review=[ADD_ONLY])
    done = handoff("start", "T-F", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo)
    assert done.returncode == 0, done.stderr
    worktree = repo / ".worktrees" / "T-F" / "implementer"
    (worktree / "calc.py").write_text("# half-done idea\n")
    (worktree / "idea.txt").write_text("untracked thought\n")

    closed = handoff("close", "T-F", "--force", cwd=repo)
    assert closed.returncode == 0, closed.stderr
    assert not worktree.exists()
    patch = ticket_path(handoff_home, "T-F") / "transcripts" / "implementer-discarded-at-close.patch"
    assert str(patch) in closed.stdout
    git(repo, "checkout", "-q", "handoff/T-F")
    git(repo, "apply", str(patch))
    assert (repo / "calc.py").read_text() == "# half-done idea\n"
    assert (repo / "idea.txt").read_text() == "untracked thought\n"


def test_stop_then_resume_in_the_background(repo: Path, tmp_path: Path, handoff_home: Path,
                                            socket: str) -> None:
    plan = plan_text({1: {"edits": [FIX_ADD], "pause_until": "go"}}, test=ADD_ONLY)
    started = handoff("start", "T-S", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                      cwd=repo)
    assert started.returncode == 0, started.stderr
    wait_event(handoff_home, "T-S", "launch", role="implementer")
    folder = ticket_path(handoff_home, "T-S")
    # its screen is what the stop keeps: wait until it shows the pause (under load the agent
    # printed it after the launch event by more than the stop took)
    wait_until(lambda: "paused until" in _screen(folder, "implementer"),
               what="the implementer paused")
    running = json.loads(handoff("status", "T-S", "--json", cwd=repo).stdout)[0]
    assert running["orchestrator"], "the orchestrator runs in its tmux window"

    stopped = handoff("stop", "T-S", cwd=repo)
    assert stopped.returncode == 0, stopped.stderr
    assert not tmux_alive(socket)
    idle = json.loads(handoff("status", "T-S", "--json", cwd=repo).stdout)[0]
    assert idle["orchestrator"] is None and idle["phase"] == "implementing"
    assert any("paused until" in t.read_text() for t in (folder / "transcripts").glob("*"))

    release(folder, "go")
    resumed = handoff("resume", "T-S", cwd=repo)
    assert resumed.returncode == 0, resumed.stderr
    assert wait_phase(handoff_home, "T-S", "passed", "escalated")["phase"] == "passed"
    assert git(repo, "rev-list", "--count", "main..handoff/T-S") == "1"


def test_answer_restarts_an_orchestrator_that_is_gone(repo: Path, tmp_path: Path,
                                                      handoff_home: Path) -> None:
    plan = plan_text({1: {"status": "blocked", "question": "Which rounding?"},
                      2: {"edits": [FIX_ADD]}}, test=ADD_ONLY, review=[ADD_ONLY])
    runner = spawn("start", "T-Q", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo, log=tmp_path / "run.log")
    wait_phase(handoff_home, "T-Q", "needs-human")
    runner.kill()
    runner.wait()

    answered = handoff("answer", "T-Q", "Round half to even.", cwd=repo)
    assert answered.returncode == 0, answered.stderr
    assert "orchestrator restarted" in answered.stdout
    assert wait_phase(handoff_home, "T-Q", "passed", "escalated")["phase"] == "passed"
    brief = ticket_path(handoff_home, "T-Q") / "inbox" / "implementer" / "brief-2.md"
    assert "Round half to even." in brief.read_text()


@fault("21", "`handoff stop` while the implementer works on round 2 and round 1's reviewer is "
             "still on screen",
       "each transcript is named after the round its peer worked on",
       "implementer-2.log and reviewer-1.log")
def test_stop_names_each_transcript_after_the_round_its_peer_worked_on(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    plan = plan_text({1: {"edits": [FIX_ADD]}, 2: {"edits": [FIX_MUL], "pause_until": "go"}},
                     review=[ALL_TESTS])
    runner = spawn("start", "T-21", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo, log=tmp_path / "run.log")
    try:
        wait_event(handoff_home, "T-21", "brief", role="implementer", round=2)
        stopped = handoff("stop", "T-21", cwd=repo)
        assert stopped.returncode == 0, stopped.stderr
        runner.wait(timeout=30)
    finally:
        runner.kill()
        runner.wait()
    kept = sorted(p.name for p in (ticket_path(handoff_home, "T-21") / "transcripts").glob("*.log"))
    # the reviewer still on screen reviewed round 1; the implementer works on round 2
    assert kept == ["implementer-2.log", "reviewer-1.log"], kept


@fault("18.8", "`handoff recycle` of the same peer three times in one round",
       "each is one fresh start of the peer and none a death: the orchestrator sees the "
       "recycle's marker, waits for the new process and judges it afresh",
       "the round, its relaunch budget and the ticket's phase")
def test_recycles_by_hand_are_no_deaths_and_start_the_peer_once_each(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    plan = plan_text({1: {"edits": [FIX_ADD, FIX_MUL, FIX_NEG],
                          "reviewer": {"pause_until": "go"}}}, test=ALL_TESTS)
    runner = spawn("start", "T-11", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo, log=tmp_path / "orchestrator.log")
    try:
        folder = wait_until(lambda: list(handoff_home.glob("*/T-11/state.json")),
                            what="ticket dir")[0].parent
        for n in range(1, 4):
            wait_until(lambda: "paused until" in _screen(folder, "reviewer"),
                       what="the reviewer to wait")
            before = reviewer_pid(handoff_home, "T-11")
            recycled = handoff("recycle", "T-11", "reviewer", cwd=repo)
            assert recycled.returncode == 0, recycled.stderr
            wait_until(functools.partial(new_process, handoff_home, "T-11", before),
                       what=f"recycle {n} done")
            wait_event(handoff_home, "T-11", "peer", role="reviewer", state="recycled",
                       timeout=30)
        release(folder, "go")
        final = wait_phase(handoff_home, "T-11", "passed", "escalated", "needs-human")
        assert runner.wait(timeout=30) == 0
    finally:
        runner.kill()
        runner.wait()
    assert final["phase"] == "passed" and final["relaunches"] == 0
    log = events(handoff_home, "T-11")
    assert [e for e in log if e["kind"] == "death"] == []
    assert len([e for e in log if e["kind"] == "launch" and e["role"] == "reviewer"]) == 1, \
        "the orchestrator launched it once; the three recycles started it themselves"
    assert [e["by"] for e in log if e["kind"] == "recycle"] == ["hand"] * 3
