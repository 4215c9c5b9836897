"""handoff.machinery.bounded on real cgroups: one run's cgroups hold what it starts, a daemon
that left its group included; what a limit did is read from their counters; the launcher runs
nothing it cannot hold; their end kills what is in them, and only in a cgroup of handoff's."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

from handoff.machinery import launcher
from handoff.machinery.bounded import Bounded, end_left, made_by_handoff, members, remove
from handoff.machinery.limits import RECORDS, Bounds
from tests.cgroup_runs import BOMB, MIB, cgroups_here, run_in
from tests.conftest import wait_until

if TYPE_CHECKING:
    from handoff.machinery.launcher import BoundPlan


def test_a_fork_bomb_is_held_to_the_process_limit_and_told(handoff_home: Path) -> None:
    bounded = Bounds(48, None, cgroups_here()).make(handoff_home, "/t/T-1#implementer",
                                                    "T-1.implementer")
    assert len(bounded.dirs) == 1 and bounded.dirs[0].parent.name == "handoff"
    bomb = run_in(bounded, ["sh", "-c", BOMB])
    try:
        most, deadline = 0, time.monotonic() + 30
        # until it is all gone: its first shell may die of a refused fork long before
        while (bomb.poll() is None or members(bounded.dirs[0])) \
                and time.monotonic() < deadline:
            most = max(most, len(members(bounded.dirs[0])))
            time.sleep(0.02)
        assert 0 < most <= 48, most
        said = bounded.hit()
        assert said.startswith("the process limit (48) was reached: ") and "refused" in said
    finally:
        assert bounded.end()
        bomb.wait()
    assert not any(d.exists() for d in bounded.dirs)
    assert not list((handoff_home / RECORDS).iterdir()), "its record went with it"


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
            assert daemon in members(folder)
    finally:
        assert bounded.end()
    wait_until(lambda: not Path(f"/proc/{daemon}").exists() or
               Path(f"/proc/{daemon}/stat").read_text().split()[2] == "Z",
               what="the daemon ended with its cgroup")


def test_the_launcher_runs_nothing_it_cannot_hold(tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    plan: BoundPlan = {"cgroups": [{"dir": "/proc/handoff-nowhere",
                                    "set": [["pids.max", "64", True]]}]}
    done = subprocess.run([*Bounded("x", "", (), plan, 64, None, tmp_path).argv(),
                           "touch", str(ran)], capture_output=True, text=True, timeout=20)
    assert done.returncode == launcher.UNBOUNDED
    assert "touch not started: it cannot be held to its limits" in done.stderr
    assert not ran.exists()


def test_rlimits_alone_hold_a_user_that_is_not_root_to_its_processes_plus_the_limit(
        tmp_path: Path) -> None:
    """RLIMIT_NPROC: run as `nobody` (the kernel exempts root), by the system's Python (the
    launcher is standard library only; root's pyenv is not readable by nobody)."""
    bounded = Bounded("x", "", (), {"cgroups": [], "nproc": 40}, 40, None, tmp_path)
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



def test_only_a_cgroup_of_handoffs_is_ended_and_its_record_goes_once_it_is_gone(
        tmp_path: Path, handoff_home: Path) -> None:
    """A record may name any folder (a home's files are not the kernel's): one outside the
    machine's cgroup mounts is never acted on, even named like handoff's and listing a pid."""
    real = Bounds(64, None, cgroups_here()).make(handoff_home, "/t/T-9#gate", "T-9.gate")
    subprocess.run([*real.argv(), "true"], check=True, timeout=20)  # the launcher makes them
    assert real.dirs and all(made_by_handoff(folder) for folder in real.dirs)
    assert real.end()
    fake = tmp_path / "handoff" / "T-9.gate.0"
    fake.mkdir(parents=True)
    bystander = subprocess.Popen(["sleep", "600"])
    try:
        (fake / "cgroup.procs").write_text(f"{bystander.pid}\n")
        assert members(fake) == [bystander.pid] and not made_by_handoff(fake)
        end_left(fake, 0.5)
        assert bystander.poll() is None and fake.exists(), "nothing done outside a cgroup mount"
    finally:
        bystander.kill()
        bystander.wait()
    records = tmp_path / "records"
    records.mkdir()
    (records / "T-9.gate.0.json").write_text("{}")
    assert not remove([fake], "T-9.gate.0", records), "a folder that is not empty stays"
    assert (records / "T-9.gate.0.json").exists(), "and so does its record"
    (fake / "cgroup.procs").unlink()
    assert remove([fake, tmp_path / "gone"], "T-9.gate.0", records)
    assert not fake.exists() and not (records / "T-9.gate.0.json").exists()
