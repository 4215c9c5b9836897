"""Gate faults: a verification command that hangs, floods its output, or is still running when
its orchestrator is stopped, closed or killed with SIGKILL — driven through the real CLI."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from handoff.errors import EXIT_ESCALATED
from tests.conftest import PYTHON, git, wait_until
from tests.faults.catalog import fault
from tests.harness import (
    ADD_ONLY,
    ALL_TESTS,
    FIX_ADD,
    FIX_MUL,
    events,
    handoff,
    plan_text,
    release,
    spawn,
    state,
    ticket_path,
    wait_event,
    worktree_count,
    write_plan,
)

#: The plan's test command. Only the gate is faulty: the scripted implementer runs the same
#: command in its pane, and gets the plain AddTest run (the gate alone carries the token
#: variable handoff marks its gates with). Each gate run appends "pid child-pid" to runs, and
#: writes `overlap` when a gate of an earlier run is still alive as it starts.
GATE = '''\
import os, subprocess, sys, time
from pathlib import Path

folder, mode = Path(sys.argv[1]), sys.argv[2]
ADD = [sys.executable, "-m", "unittest", "-q", "tests.test_calc.AddTest"]
if "HANDOFF_GATE_TOKEN" not in os.environ:
    sys.exit(subprocess.call(ADD))


def alive(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


runs = folder / "runs"
earlier = [int(p) for p in runs.read_text().split()] if runs.exists() else []
if any(alive(p) for p in earlier):
    (folder / "overlap").write_text(f"{os.getpid()} started while {earlier} ran\\n")
if mode == "flood":
    sys.stdout.write("FIRST " + "x" * 50_000_000 + "\\nGATE-END\\n")
    sys.exit(1)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with runs.open("a") as f:
    f.write(f"{os.getpid()} {child.pid}\\n")
print("gate up", flush=True)
deadline = time.monotonic() + (600 if mode == "hang" else 120)
while not (folder / "go").exists() and time.monotonic() < deadline:
    time.sleep(0.05)
child.kill()
sys.exit(subprocess.call(ADD))
'''


@pytest.fixture(autouse=True)
def unfenced(handoff_home: Path) -> None:
    """These cases follow the gate's processes by the pids it writes into the test's folder,
    which a sandboxed gate can neither write nor name from outside its PID namespace: they run
    with the sandbox off (tests/faults/test_sandbox.py bounds a sandboxed gate)."""
    handoff_home.mkdir(parents=True, exist_ok=True)
    (handoff_home / "config.yaml").write_text("sandbox: off\n", encoding="utf-8")


def gate_plan(tmp_path: Path, mode: str, rounds: dict[int, dict[str, object]] | None = None,
              review: list[list[str]] | None = None) -> Path:
    script = tmp_path / "gate.py"
    script.write_text(GATE, encoding="utf-8")
    # these cases are about the round's gate process: the plan's command is not run at the
    # base as well (handoff.loop.baseline), so every run of it is the one under test
    home = Path(os.environ["HANDOFF_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    with (home / "config.yaml").open("a", encoding="utf-8") as config:
        config.write("base_tests: false\n")
    plan = plan_text(rounds or {1: {"edits": [FIX_ADD]}},
                     test=[PYTHON, str(script), str(tmp_path), mode], review=review or [ADD_ONLY])
    return write_plan(tmp_path, plan)


def configure(repo: Path, text: str) -> None:
    (repo / ".handoff.yaml").write_text(text, encoding="utf-8")
    git(repo, "add", ".handoff.yaml")
    git(repo, "commit", "-q", "-m", "handoff config")


def gone(pid: int) -> bool:
    """The process has ended (a zombie awaiting its reaper has ended too)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"


def gate_runs(tmp_path: Path) -> list[list[int]]:
    runs = tmp_path / "runs"
    if not runs.exists():
        return []
    return [[int(p) for p in line.split()] for line in runs.read_text().splitlines()]


def wait_runs(tmp_path: Path, count: int) -> list[list[int]]:
    return wait_until(lambda: gate_runs(tmp_path) if len(gate_runs(tmp_path)) >= count else None,
                      timeout=60, what=f"gate run {count} to start")


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident set so far (VmHWM), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmHWM for {pid}")


@fault("", "the verification command hangs (and has a child of its own)",
       "ended after gate_timeout: TERM, then KILL, to its whole process group; the gate counts "
       "as failed and the ticket escalates at max_gate_bounces",
       "the round's commit on the branch, its report, the gate's output in gate-1.log")
def test_a_hanging_gate_is_bounded_and_leaves_no_process(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    configure(repo, "gate_timeout: 3\nmax_gate_bounces: 1\n")
    plan = gate_plan(tmp_path, "hang")
    done = handoff("start", "G-1", "--plan", str(plan), "--yes", "--foreground", cwd=repo,
                   timeout=120)
    assert done.returncode == EXIT_ESCALATED, done.stdout + done.stderr
    final = state(handoff_home, "G-1")
    assert final["phase"] == "escalated" and "timed out after 3s" in final["reason"]
    [[leader, child]] = gate_runs(tmp_path)
    assert gone(leader) and gone(child), "the hanging gate's processes outlived it"
    folder = ticket_path(handoff_home, "G-1")
    log = (folder / "gate-1.log").read_text()
    assert "gate up" in log and "timed out" in log
    assert not (folder / "gate-running.json").exists()
    assert git(repo, "rev-list", "--count", "main..handoff/G-1") == "1"
    assert (folder / "impl-report-1.md").is_file()


@fault("6", "the verification command prints one 50 MB line, twice",
       "its output streams through a byte cap (head and tail kept, never all in memory): the "
       "gate log, the next brief's excerpt and state.json stay small, the orchestrator's peak "
       "RSS stays far below the flood",
       "both rounds' commits, both gate logs (capped, with the first and the last line), "
       "brief-2 with the end of the output")
def test_a_flooding_gate_keeps_every_file_and_the_orchestrator_small(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    configure(repo, "max_gate_bounces: 2\n")
    plan = gate_plan(tmp_path, "flood", {1: {"edits": [FIX_ADD]},
                                         2: {"edits": [FIX_MUL], "pause_until": "go"}},
                     review=[ALL_TESTS])
    runner = spawn("start", "G-2", "--plan", str(plan), "--yes", "--foreground", cwd=repo,
                   log=tmp_path / "orchestrator.log")
    try:
        # events.jsonl is written just after state.json: wait for the file that is read
        wait_until(lambda: list(handoff_home.glob("*/G-2/events.jsonl")) and any(
            e["kind"] in ("brief", "launch") and e["round"] == 2
            for e in events(handoff_home, "G-2")), timeout=60, what="round 2's brief")
        rss = peak_rss_mib(runner.pid)  # alive: round 2's implementer waits for "go"
        folder = ticket_path(handoff_home, "G-2")
        release(folder, "go")
        assert runner.wait(timeout=120) == EXIT_ESCALATED, (tmp_path / "orchestrator.log").read_text()[-3000:]
    finally:
        runner.kill()
        runner.wait()
    assert rss < 120, f"the orchestrator's peak RSS was {rss:.0f} MiB for a 50 MB line"
    final = state(handoff_home, "G-2")
    assert final["phase"] == "escalated" and "failed 2 times" in final["reason"]
    assert (folder / "state.json").stat().st_size < 32 * 1024
    brief = (folder / "inbox" / "implementer" / "brief-2.md").read_text()
    assert len(brief.encode()) < 64 * 1024
    assert "GATE-END" in brief and "bytes cut by handoff" in brief
    for n in (1, 2):
        log = (folder / f"gate-{n}.log").read_text()
        assert len(log.encode()) < 66 * 1024
        assert "FIRST xxx" in log and "GATE-END" in log and "bytes cut by handoff" in log
    assert git(repo, "rev-list", "--count", "main..handoff/G-2") == "2"
    print(f"RSS orchestrator peak {rss:.0f} MiB")


@fault("5", "`handoff stop` while the gate runs",
       "the orchestrator's SIGTERM ends the gate's whole process group before it exits; "
       "`resume` runs the gate again and carries on",
       "the phase (gating) and the round's commit; after resume, the ticket passes with that "
       "same commit")
def test_stop_during_the_gate_ends_it_and_resume_reruns_it(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    plan = gate_plan(tmp_path, "wait")
    runner = spawn("start", "G-3", "--plan", str(plan), "--yes", "--foreground", cwd=repo,
                   log=tmp_path / "orchestrator.log")
    try:
        [[leader, child]] = wait_runs(tmp_path, 1)
        stopped = handoff("stop", "G-3", cwd=repo)
        assert stopped.returncode == 0, stopped.stderr
        assert runner.wait(timeout=30) == 130
    finally:
        runner.kill()
        runner.wait()
    assert gone(leader) and gone(child), "the gate outlived `handoff stop`"
    assert state(handoff_home, "G-3")["phase"] == "gating"
    folder = ticket_path(handoff_home, "G-3")
    assert not (folder / "gate-running.json").exists()
    commit = state(handoff_home, "G-3")["commits"]["1"]

    (tmp_path / "go").write_text("go\n")
    resumed = handoff("resume", "G-3", "--foreground", cwd=repo, timeout=120)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    final = state(handoff_home, "G-3")
    assert final["phase"] == "passed" and final["commits"] == {"1": commit}
    assert len(gate_runs(tmp_path)) == 2 and not (tmp_path / "overlap").exists()


@fault("5", "the orchestrator is killed with SIGKILL while the gate runs, then resumed",
       "the gate keeps running without it; `resume` finds it by its record (pid, start time, "
       "boot, token), ends its group with an event, and only then runs the gate again: never "
       "two gates at once",
       "the round's commit and report; the ticket passes with that same commit")
def test_kill_9_during_the_gate_then_resume_runs_one_gate_at_a_time(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    plan = gate_plan(tmp_path, "wait")
    first = spawn("start", "G-4", "--plan", str(plan), "--yes", "--foreground", cwd=repo,
                  log=tmp_path / "first.log")
    [[leader, child]] = wait_runs(tmp_path, 1)
    first.kill()
    first.wait()
    assert not gone(leader) and not gone(child), "the fault: SIGKILL leaves the gate running"

    second = spawn("resume", "G-4", "--foreground", cwd=repo, log=tmp_path / "second.log")
    try:
        ended = wait_event(handoff_home, "G-4", "gate", result="ended")
        assert ended["pid"] == leader and ended["left_by"] == first.pid
        assert ended["ended"] == {str(leader): "SIGTERM"}
        assert gone(leader) and gone(child)
        runs = wait_runs(tmp_path, 2)
        assert len(runs) == 2 and not (tmp_path / "overlap").exists(), "two gates ran at once"
        (tmp_path / "go").write_text("go\n")
        assert second.wait(timeout=120) == 0, (tmp_path / "second.log").read_text()[-3000:]
    finally:
        second.kill()
        second.wait()
    final = state(handoff_home, "G-4")
    assert final["phase"] == "passed"
    assert git(repo, "rev-list", "--count", "main..handoff/G-4") == "1"
    kinds = [(e["kind"], e.get("result")) for e in events(handoff_home, "G-4")
             if e["kind"] == "gate"]
    assert kinds == [("gate", "running"), ("gate", "ended"), ("gate", "running"),
                     ("gate", "pass")]


@fault("5", "the orchestrator is killed with SIGKILL while the gate runs, then the ticket is "
            "closed",
       "`close` (through `stop`) ends the gate a dead orchestrator left, before the worktree it "
       "runs in is removed; an event says so",
       "the branch with the round's commit, the ticket record")
def test_close_after_kill_9_during_the_gate_ends_the_gate(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    plan = gate_plan(tmp_path, "hang")
    first = spawn("start", "G-5", "--plan", str(plan), "--yes", "--foreground", cwd=repo,
                  log=tmp_path / "first.log")
    [[leader, child]] = wait_runs(tmp_path, 1)
    first.kill()
    first.wait()
    assert not gone(leader)
    closed = handoff("close", "G-5", cwd=repo)
    assert closed.returncode == 0, closed.stdout + closed.stderr
    assert gone(leader) and gone(child), "the gate outlived `handoff close`"
    assert worktree_count(repo) == 1
    assert git(repo, "rev-list", "--count", "main..handoff/G-5") == "1"
    ended = [e for e in events(handoff_home, "G-5") if e["kind"] == "gate"
             and e.get("result") == "ended"]
    assert len(ended) == 1 and ended[0]["pid"] == leader and "stop" in ended[0]["reason"]
    assert state(handoff_home, "G-5")["phase"] == "closed"
    assert not (ticket_path(handoff_home, "G-5") / "gate-running.json").exists()

