"""handoff.machinery.limits on real cgroups (this machine, as CI's: root, cgroup v1 pids and
memory writable): each run's cgroups made and recorded, what a dead peer's say of its end, what
is left of them afterwards (swept, gc); the rlimits that stand in for a missing cgroup; a gate
run within its limits; and the config keys that set them."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from handoff.loop.gate import _record, end_left_gate, run_gate
from handoff.machinery import limits
from handoff.machinery.bounded import members
from handoff.machinery.limit_mechanism import PIDS, Mechanism
from handoff.machinery.limits import Bounds
from tests.cgroup_runs import HOG, MIB, cgroups_here, run_in
from tests.conftest import wait_until


def test_a_memory_hog_is_killed_by_the_kernel_and_told(handoff_home: Path) -> None:
    bounded = Bounds(None, 96 * MIB, cgroups_here()).make(handoff_home, "/t/T-1#gate",
                                                          "T-1.gate")
    hog = run_in(bounded, [sys.executable, "-c", HOG])
    out, _ = hog.communicate(timeout=60)
    try:
        assert hog.returncode == -9, (hog.returncode, out)
        assert bounded.hit() == ("the memory limit (96 MiB) was reached: the kernel killed 1 "
                                 "process")
        assert limits.death(handoff_home, "/t/T-1#gate") == {"limit": bounded.hit()}
        assert limits.death(handoff_home, "/t/T-1#other") == {}
    finally:
        assert bounded.end()


def test_earlier_and_stale_cgroups_go_a_young_or_busy_one_stays(handoff_home: Path) -> None:
    caps = Bounds(64, None, cgroups_here())
    first = caps.make(handoff_home, "/t/T-3#reviewer", "T-3.reviewer")
    busy = caps.make(handoff_home, "/t/T-3#tester", "T-3.tester")
    young = caps.make(handoff_home, "/t/T-3#implementer", "T-3.implementer")
    for made in (first, busy, young):  # what the launcher does before the exec
        subprocess.run([*made.argv(), "true"], check=True, timeout=20)
    held = run_in(busy, ["sleep", "600"])
    wait_until(lambda: members(busy.dirs[0]), what="the sleep in its cgroup")
    try:
        second = caps.make(handoff_home, "/t/T-3#reviewer", "T-3.reviewer")
        assert not first.dirs[0].exists(), "the reviewer's earlier cgroup went at its next launch"
        assert young.dirs[0].exists() and busy.dirs[0].exists()
        # later than a launch file lives: the empty ones go (the second's launcher never ran),
        # the busy one stays
        assert limits.sweep(handoff_home, stale=-1) == sorted([young.name, second.name])
        assert busy.dirs[0].exists()
        assert [name for name, _ in limits.recorded(handoff_home)] == [busy.name]
    finally:
        held.kill()
        held.wait()
        assert busy.end()


def test_rlimits_alone_hold_memory_per_process(handoff_home: Path) -> None:
    bounded = Bounds(None, 256 * MIB, Mechanism((), root=True)).make(
        handoff_home, "/t/T-4#gate", "T-4.gate")
    assert bounded.plan == {"cgroups": [], "data": 256 * MIB}
    hog = run_in(bounded, [sys.executable, "-c", HOG])
    out, _ = hog.communicate(timeout=60)
    assert hog.returncode == 3 and "refused at" in out, out
    assert int(out.split()[2]) < 256, out


# ---- the gate: each run in cgroups of its own --------------------------------------------------


def gate_fence(home: Path, processes: int | None, memory: int | None) -> limits.Fenced:
    return limits.Fenced(None, Bounds(processes, memory, cgroups_here()), home,
                         "/t/T-5#gate", "T-5.gate")


def test_a_gate_that_reached_a_limit_fails_and_its_log_says_which(tmp_path: Path,
                                                                   handoff_home: Path) -> None:
    log = tmp_path / "gate-1.log"
    # it says it passed, but the kernel killed one of its processes
    argv = ["sh", "-c", f"{sys.executable} -c {shlex.quote(HOG)}; echo tests ok; exit 0"]
    result = run_gate(argv, tmp_path, {"PATH": os.environ["PATH"]}, 60, log,
                      fence=gate_fence(handoff_home, None, 96 * MIB))
    assert result.exit_code == 0 and not result.passed
    reached = "the memory limit (96 MiB) was reached: the kernel killed 1 process"
    assert result.limit == reached and result.summary().endswith(reached)
    assert log.read_text().rstrip().endswith(reached)
    assert not list((handoff_home / limits.RECORDS).iterdir()), "its cgroups went with it"
    # the same run within its limits passes
    calm = run_gate(["sh", "-c", "echo tests ok"], tmp_path, {"PATH": os.environ["PATH"]}, 60,
                    log, fence=gate_fence(handoff_home, 64, 96 * MIB))
    assert calm.passed and calm.limit == ""


def test_a_gate_s_daemon_outside_its_group_ends_with_the_gate(tmp_path: Path,
                                                              handoff_home: Path) -> None:
    pid_file = tmp_path / "daemon.pid"
    argv = ["sh", "-c", f"setsid sh -c 'echo $$ > {pid_file}; exec sleep 617' "
                        "</dev/null >/dev/null 2>&1 & sleep 0.5; echo ok"]
    result = run_gate(argv, tmp_path, {"PATH": os.environ["PATH"]}, 60, tmp_path / "g.log",
                      fence=gate_fence(handoff_home, 64, None))
    assert result.passed, result.output
    daemon = int(pid_file.read_text())
    wait_until(lambda: not Path(f"/proc/{daemon}").exists() or
               Path(f"/proc/{daemon}/stat").read_text().split()[2] == "Z",
               what="the gate's daemon ended with the gate's cgroup")


def test_a_gate_a_dead_orchestrator_left_is_ended_to_its_last_process(
        tmp_path: Path, handoff_home: Path) -> None:
    """The record names the gate's cgroups: `stop`, `close` and a resume end what left its
    process group there too."""
    record = tmp_path / "gate-running.json"
    bounded = Bounds(64, None, cgroups_here()).make(handoff_home, "/t/T-6#gate", "T-6.gate")
    leader = run_in(bounded, ["sh", "-c", "setsid sleep 619 </dev/null >/dev/null 2>&1 & "
                              "echo $!; exec sleep 619"])
    assert leader.stdout is not None
    daemon = int(leader.stdout.readline())
    wait_until(lambda: os.getsid(daemon) == daemon, what="the daemon's own session")
    record.write_text(json.dumps(_record(["sh"], "tok", leader.pid,
                                         [str(d) for d in bounded.dirs])))
    try:
        assert daemon in members(bounded.dirs[0])
        end_left_gate(record, grace=1.0)
        assert leader.wait(timeout=10) == -15
        wait_until(lambda: not Path(f"/proc/{daemon}").exists() or
                   Path(f"/proc/{daemon}/stat").read_text().split()[2] == "Z",
                   what="the daemon that left the gate's group ended with its cgroup")
        assert not bounded.dirs[0].exists(), "the emptied cgroup was removed"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(daemon, 9)
        bounded.end()
        assert leader.stdout is not None
        leader.stdout.close()


def test_gc_removes_a_gone_ticket_s_empty_cgroups_and_names_a_busy_one(
        handoff_home: Path) -> None:
    from handoff.operations import gc

    caps = Bounds(64, None, cgroups_here())
    empty = caps.make(handoff_home, "/gone/T-7#implementer", "T-7.implementer")
    busy = caps.make(handoff_home, "/gone/T-7#reviewer", "T-7.reviewer")
    subprocess.run([*empty.argv(), "true"], check=True, timeout=20)
    held = run_in(busy, ["sleep", "600"])
    wait_until(lambda: members(busy.dirs[0]), what="the sleep in its cgroup")
    try:
        found = {item.path: item for item in gc.collect(handoff_home) if item.kind == "cgroup"}
        assert found[str(empty.dirs[0])].removed and not empty.dirs[0].exists()
        kept = found[str(busy.dirs[0])]
        assert not kept.removable and "processes still run in it" in kept.why
        assert "the reviewer of T-7, whose ticket is closed or gone" in kept.why
        assert busy.dirs[0].exists()
    finally:
        held.kill()
        held.wait()
        assert busy.end()


def test_a_stale_empty_cgroup_no_record_names_goes_a_busy_one_stays(
        handoff_home: Path) -> None:
    """A home deleted with its records (a test's, a person's) leaves its cgroups to the next
    sweep of the machine's own folders."""
    pids = cgroups_here().holder(PIDS)
    assert pids is not None
    base = pids.base / f"sweep-test-{os.getpid()}"  # a folder of this test's own to sweep
    empty, busy = base / "T-8.implementer.0", base / "T-8.reviewer.0"
    for folder in (empty, busy):
        folder.mkdir(parents=True)
    held = subprocess.Popen(["sh", "-c", f"echo $$ > {busy}/cgroup.procs && exec sleep 600"])
    wait_until(lambda: members(busy), what="the sleep in its cgroup")
    try:
        assert limits.sweep(handoff_home, bases=[base]) == [], "young ones stay"
        assert limits.sweep(handoff_home, bases=[base], stale=-1) == [empty.name]
        assert not empty.exists() and busy.exists()
    finally:
        held.kill()
        held.wait()
        wait_until(lambda: not members(busy), what="the sleep gone")
        busy.rmdir()
        base.rmdir()
