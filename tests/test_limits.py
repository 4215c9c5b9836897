"""handoff.machinery.limits on real cgroups (this machine, as CI's: root, cgroup v1 pids and
memory writable): what a peer or gate run is held to, what it is told it reached, what is left
of its cgroups afterwards; the rlimits fallback on a real user that is not root; and the config
keys that set them."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from handoff import config as config_mod
from handoff.config import Limits
from handoff.errors import UsageError
from handoff.loop.gate import _record, end_left_gate, run_gate
from handoff.machinery import launcher, limits
from handoff.machinery.limits import MEMORY, PIDS, Bounds, Mechanism
from handoff.operations import doctor
from tests.conftest import wait_until

MIB = 1 << 20
#: a fork bomb that ends by itself: every process forks two more to a depth of 9 (1023 in all,
#: none of them Python: a few hundred KiB each) and holds for a few seconds. Bounded by its own
#: depth, so even a broken limit leaves the machine its processes.
BOMB = ("b() { if [ $1 -gt 0 ]; then b $(($1-1)) & b $(($1-1)) & fi; sleep 4; }; "
        "b 9 2>/dev/null; wait")
#: allocates 1 MiB at a time, to at most 2 GiB, then says how far it got
HOG = ("import sys\nheld = []\nfor _ in range(2048):\n    try:\n"
       "        held.append(bytearray(1 << 20))\n    except MemoryError:\n"
       "        print('refused at', len(held), 'MiB', flush=True)\n        sys.exit(3)\n"
       "print('got 2 GiB', flush=True)\n")


def cgroups_here() -> Mechanism:
    held = limits.mechanism()
    assert held.holder(PIDS) is not None and held.holder(MEMORY) is not None, (
        f"this machine is meant to be like CI's (root, cgroup v1 writable): {held}")
    return held


def run_in(bounded: limits.Bounded, argv: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen([*bounded.argv(), *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def test_this_machine_holds_both_limits_in_cgroups_and_doctor_says_so() -> None:
    held = cgroups_here()
    assert held.said() == "cgroup v1 (pids, memory)" and held.weaker() == ""
    check = doctor.limits_check(config_mod.Config())
    assert check.level == "OK" and check.detail.startswith("cgroup v1 (pids, memory): 1024 "
                                                           "processes, 8 GiB of memory")


def test_a_fork_bomb_is_held_to_the_process_limit_and_told(handoff_home: Path) -> None:
    bounded = Bounds(48, None, cgroups_here()).make(handoff_home, "/t/T-1#implementer",
                                                    "T-1.implementer")
    assert len(bounded.dirs) == 1 and bounded.dirs[0].parent.name == "handoff"
    bomb = run_in(bounded, ["sh", "-c", BOMB])
    try:
        most, deadline = 0, time.monotonic() + 30
        # until it is all gone: its first shell may die of a refused fork long before
        while (bomb.poll() is None or limits.members(bounded.dirs[0])) \
                and time.monotonic() < deadline:
            most = max(most, len(limits.members(bounded.dirs[0])))
            time.sleep(0.02)
        assert 0 < most <= 48, most
        said = bounded.hit()
        assert said.startswith("the process limit (48) was reached: ") and "refused" in said
    finally:
        assert bounded.end()
        bomb.wait()
    assert not any(d.exists() for d in bounded.dirs)
    assert not list((handoff_home / limits.RECORDS).iterdir()), "its record went with it"


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


def test_what_left_the_group_is_in_the_cgroup_and_ended_with_it(handoff_home: Path) -> None:
    bounded = Bounds(64, 256 * MIB, cgroups_here()).make(handoff_home, "/t/T-2#gate",
                                                         "T-2.gate")
    # a daemon in a session of its own, its parent gone: no process group reaches it
    leader = run_in(bounded, ["sh", "-c", "setsid sleep 613 </dev/null >/dev/null 2>&1 & "
                              "echo $!"])
    out, _ = leader.communicate(timeout=20)
    daemon = int(out.split()[-1])
    try:
        wait_until(lambda: os.getsid(daemon) == daemon, what="the daemon's own session")
        for folder in bounded.dirs:
            assert daemon in limits.members(folder)
    finally:
        assert bounded.end()
    wait_until(lambda: not Path(f"/proc/{daemon}").exists() or
               Path(f"/proc/{daemon}/stat").read_text().split()[2] == "Z",
               what="the daemon ended with its cgroup")


def test_the_launcher_runs_nothing_it_cannot_hold(tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    plan = {"cgroups": [{"dir": "/proc/handoff-nowhere", "set": [["pids.max", "64", True]]}]}
    done = subprocess.run([*limits.Bounded("x", "", (), plan, 64, None, tmp_path).argv(),
                           "touch", str(ran)], capture_output=True, text=True, timeout=20)
    assert done.returncode == launcher.UNBOUNDED
    assert "touch not started: it cannot be held to its limits" in done.stderr
    assert not ran.exists()


def test_earlier_and_stale_cgroups_go_a_young_or_busy_one_stays(handoff_home: Path) -> None:
    caps = Bounds(64, None, cgroups_here())
    first = caps.make(handoff_home, "/t/T-3#reviewer", "T-3.reviewer")
    busy = caps.make(handoff_home, "/t/T-3#tester", "T-3.tester")
    young = caps.make(handoff_home, "/t/T-3#implementer", "T-3.implementer")
    for made in (first, busy, young):  # what the launcher does before the exec
        subprocess.run([*made.argv(), "true"], check=True, timeout=20)
    held = run_in(busy, ["sleep", "600"])
    wait_until(lambda: limits.members(busy.dirs[0]), what="the sleep in its cgroup")
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


def test_rlimits_alone_hold_a_user_that_is_not_root_to_its_processes_plus_the_limit(
        tmp_path: Path) -> None:
    """RLIMIT_NPROC: run as `nobody` (the kernel exempts root), by the system's Python (the
    launcher is standard library only; root's pyenv is not readable by nobody)."""
    bounded = limits.Bounded("x", "", (), {"cgroups": [], "nproc": 40}, 40, None, tmp_path)
    argv = ["/usr/bin/python3", *bounded.argv()[1:]]
    forks = ("import os, resource, time\nkids = []\nfor _ in range(200):\n    try:\n"
             "        kid = os.fork()\n    except OSError:\n        break\n    if kid == 0:\n"
             "        time.sleep(10)\n        os._exit(0)\n    kids.append(kid)\n"
             "print(len(kids), resource.getrlimit(resource.RLIMIT_NPROC)[0], flush=True)\n"
             "for kid in kids:\n    os.kill(kid, 9)\n")
    done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                           *argv, "/usr/bin/python3", "-I", "-c", forks],
                          capture_output=True, text=True, timeout=60, cwd="/")
    made, limit = map(int, done.stdout.split())
    # the limit is what else nobody ran at the launch (nothing, unless another test is at it)
    # plus 40, which the program (the launcher's pid) and all it starts share
    assert 40 <= limit < 200 and made == 39, done.stdout + done.stderr


def test_the_mechanism_said_where_cgroups_are_missing(tmp_path: Path) -> None:
    none = Mechanism((), root=True, why="cgroup v1 pids at / is not writable")
    assert none.said() == "rlimits only: processes by RLIMIT_NPROC, memory by RLIMIT_DATA"
    assert "does not bind: handoff runs as root" in none.weaker()
    assert "per process (RLIMIT_DATA: an allocation past it fails)" in none.weaker()
    assert none.weaker().endswith("no cgroup: cgroup v1 pids at / is not writable")
    user = Mechanism((), root=False)
    assert "counts all your processes" in user.weaker()
    elsewhere = Mechanism((), root=False, why="no cgroups on darwin", rlimits=False)
    assert elsewhere.said() == "none: no cgroups on darwin"
    made = Bounds(64, 64 * MIB, elsewhere).make(tmp_path, "/t/T#x", "T.x")
    assert made.plan == {"cgroups": []}, "no rlimit where /proc cannot count a user's tasks"


def test_cgroup_v2_is_divided_from_our_cgroup_s_parent(tmp_path: Path) -> None:
    """The v2 choice, on a folder laid out as the kernel's cgroup2 files are (this machine's
    v2 hierarchy holds no pids or memory controller to try it on): handoff's folder goes into
    the parent of our cgroup, which holds us and so cannot pass controllers on."""
    mount = tmp_path / "unified"
    parent = mount / "user.slice"
    own = parent / "session-1.scope"
    own.mkdir(parents=True)
    (parent / "cgroup.controllers").write_text("cpu io memory pids\n")
    (parent / "cgroup.subtree_control").write_text("memory pids\n")
    # what the kernel shows in a new child once its parent passes the controllers on
    (parent / "handoff").mkdir()
    for name in ("cgroup.subtree_control", "pids.max", "memory.max"):
        (parent / "handoff" / name).write_text("")
    mounts = f"35 25 0:30 / {mount} rw,relatime shared:9 - cgroup2 cgroup2 rw\n"
    held = limits.decide("0::/user.slice/session-1.scope\n", mounts, root=False)
    assert held.hierarchies == (limits.Hierarchy(2, (PIDS, MEMORY), parent / "handoff"),)
    assert held.said() == "cgroup v2 (pids, memory)" and held.weaker() == ""
    assert (parent / "handoff" / "cgroup.subtree_control").read_text() == "+pids +memory"
    assert held.hierarchies[0].settings(100, 5 * MIB) == [
        ["pids.max", "100", True], ["memory.max", str(5 * MIB), True],
        ["memory.swap.max", "0", False]]
    # a parent that passes nothing on: rlimits, and why
    (parent / "cgroup.controllers").write_text("cpu io\n")
    fallback = limits.decide("0::/user.slice/session-1.scope\n", mounts, root=False)
    assert fallback.hierarchies == () and "no pids or memory controller" in fallback.why


@pytest.mark.parametrize(("given", "expected"), [
    ({"processes": 200, "memory": "512M", "tmp": "1.5GiB"},
     Limits(200, 512 * MIB, 1536 * MIB)),
    ({"memory": 1 << 30, "tmp": "64 MiB"}, Limits(1024, 1 << 30, 64 * MIB)),
    ({"processes": "none", "memory": None}, Limits(None, None, 1 << 30)),
])
def test_sandbox_limits_in_the_person_s_config(tmp_path: Path, given: dict[str, object],
                                                expected: Limits) -> None:
    home = tmp_path / "hh"
    home.mkdir()
    (home / "config.yaml").write_text(
        "sandbox:\n  limits:\n" + "".join(f"    {k}: {v if v is not None else 'null'}\n"
                                          for k, v in given.items()))
    assert config_mod.load(home, None).sandbox.limits == expected


@pytest.mark.parametrize(("text", "said"), [
    ("limits: {memory: lots}", "sandbox.limits.memory must be a size"),
    ("limits: {processes: 4}", "sandbox.limits.processes must be at least 32 processes"),
    ("limits: {processes: 1.5}", "sandbox.limits.processes must be a whole number"),
    ("limits: {tmp: 10}", "sandbox.limits.tmp must be at least 1 MiB"),
    ("limits: {swap: 1G}", "sandbox.limits: unknown key(s) ['swap']"),
    ("limits: 1G", "'sandbox.limits' must be a mapping"),
])
def test_a_bad_limit_is_named_with_its_file_and_key(tmp_path: Path, text: str,
                                                     said: str) -> None:
    home = tmp_path / "hh"
    home.mkdir()
    (home / "config.yaml").write_text(f"sandbox: {{{text}}}\n")
    with pytest.raises(UsageError) as raised:
        config_mod.load(home, None)
    assert str(home / "config.yaml") in raised.value.message
    assert said in raised.value.message and raised.value.hint


def test_a_repository_may_lower_limits_never_raise_them(tmp_path: Path) -> None:
    home, repo = tmp_path / "hh", tmp_path / "repo"
    home.mkdir()
    repo.mkdir()
    (home / "config.yaml").write_text("sandbox: {limits: {memory: 4G}}\n")
    (repo / ".handoff.yaml").write_text("sandbox: {limits: {memory: 2G, processes: 300}}\n")
    assert config_mod.load(home, repo).sandbox.limits == Limits(300, 2 << 30, 1 << 30)
    for looser in ("memory: 6G", "processes: none", "tmp: 2G"):
        (repo / ".handoff.yaml").write_text(f"sandbox: {{limits: {{{looser}}}}}\n")
        with pytest.raises(UsageError, match="never loosen them") as raised:
            config_mod.load(home, repo)
        assert "$HANDOFF_HOME/config.yaml" in raised.value.hint


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
        assert daemon in limits.members(bounded.dirs[0])
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
    wait_until(lambda: limits.members(busy.dirs[0]), what="the sleep in its cgroup")
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
    wait_until(lambda: limits.members(busy), what="the sleep in its cgroup")
    try:
        assert limits.sweep(handoff_home, bases=[base]) == [], "young ones stay"
        assert limits.sweep(handoff_home, bases=[base], stale=-1) == [empty.name]
        assert not empty.exists() and busy.exists()
    finally:
        held.kill()
        held.wait()
        wait_until(lambda: not limits.members(busy), what="the sleep gone")
        busy.rmdir()
        base.rmdir()
