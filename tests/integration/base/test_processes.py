"""handoff.processes: what handoff knows of live processes, read through psutil (and the two
Linux facts read from /proc, each tested beside psutil's). Real processes, started here."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from handoff import processes
from handoff.machinery.groups import end_group
from handoff.processes import Identity, ProcIdentity
from tests.conftest import PYTHON, wait_until
from tests.unit.base.test_processes import BOTH, uptime

#: a child that sleeps until it is ended
SLEEPER = [PYTHON, "-c", "import time; time.sleep(120)"]


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[bytes]]]:
    """The children a test starts, each in a session of its own; all ended afterwards."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for child in started:
        if child.poll() is None:
            child.kill()
        child.wait(timeout=10)


def start(children: list[subprocess.Popen[bytes]], env: dict[str, str] | None = None,
          cwd: Path | None = None, argv: list[str] | None = None) -> subprocess.Popen[bytes]:
    child = subprocess.Popen(argv or SLEEPER, env={**os.environ, **(env or {})}, cwd=cwd,
                             start_new_session=True, stdin=subprocess.DEVNULL)
    children.append(child)
    return child


@BOTH
def test_a_process_start_is_stable_and_tells_it_from_an_older_one(
        identity: Identity, children: list[subprocess.Popen[bytes]]) -> None:
    child = start(children)
    first = identity.start(child.pid)
    assert first and identity.start(child.pid) == first
    assert identity.start(os.getpid()) not in ("", first), "this test's process started earlier"


def test_the_proc_start_is_in_clock_ticks_since_boot(
        children: list[subprocess.Popen[bytes]]) -> None:
    before = uptime()
    child = start(children)
    ticks = int(ProcIdentity().start(child.pid))
    assert abs(ticks / os.sysconf("SC_CLK_TCK") - before) < 2


def test_the_psutil_start_is_the_clock_time_it_started(
        children: list[subprocess.Popen[bytes]]) -> None:
    before = time.time()
    child = start(children)
    assert abs(float(Identity().start(child.pid)) - before) < 2


@BOTH
def test_a_gone_process_has_no_start(identity: Identity) -> None:
    gone = subprocess.Popen([PYTHON, "-c", "pass"])
    gone.wait(timeout=30)
    assert identity.start(gone.pid) == ""


def test_alive_is_false_for_a_zombie_and_a_gone_pid(
        children: list[subprocess.Popen[bytes]]) -> None:
    child = start(children)
    assert processes.alive(child.pid)
    os.kill(child.pid, signal.SIGKILL)
    # killed but not reaped: a zombie, which holds no lock and no file
    wait_until(lambda: not processes.alive(child.pid) or None, 10, "the child to die")
    assert os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    child.wait(timeout=10)
    assert not processes.alive(child.pid)
    assert not processes.alive(0) and not processes.alive(-1)


def test_environ_and_command_of_a_live_process(children: list[subprocess.Popen[bytes]]) -> None:
    child = start(children, env={"HANDOFF_TEST_MARK": "seen"})
    # a busy machine may still be carrying out the exec when Popen returns (seen in loaded
    # CI runs: the mark was not there yet): read once it is the program's
    wait_until(lambda: processes.command(child.pid) == SLEEPER, 10, "the program to run")
    assert processes.environ(child.pid)["HANDOFF_TEST_MARK"] == "seen"
    child.kill()
    child.wait(timeout=10)
    assert processes.environ(child.pid) == {} and processes.command(child.pid) == []


def runs(pid: int) -> bool:
    return processes.command(pid) == SLEEPER


def test_carrying_finds_only_the_processes_whose_variable_matches(
        children: list[subprocess.Popen[bytes]], tmp_path: Path) -> None:
    mark = f"{tmp_path}#"
    ours = start(children, env={"HANDOFF_TEST_MARK": f"{mark}reviewer"})
    other = start(children, env={"HANDOFF_TEST_MARK": f"{tmp_path}-2#reviewer"})
    ended = start(children, env={"HANDOFF_TEST_MARK": f"{mark}implementer"})
    for child in (ours, other, ended):  # each read once it runs the program (see above)
        wait_until(partial(runs, child.pid), 10, "the program to run")
    ended.kill()  # a zombie until reaped: it carries nothing any more
    wait_until(lambda: processes.command(ended.pid) == [], 10, "the killed child to end")

    def mine(value: str) -> bool:
        return value.startswith(mark)
    found = processes.carrying("HANDOFF_TEST_MARK", mine)
    assert found == [ours.pid]
    assert other.pid not in found and os.getpid() not in found
    # /proc read directly (Linux) and psutil (elsewhere) find the same
    assert processes._carrying_through_psutil("HANDOFF_TEST_MARK", mine) == found


def test_a_group_is_alive_until_its_last_process_ends(
        children: list[subprocess.Popen[bytes]]) -> None:
    leader = start(children, argv=[PYTHON, "-c", "import subprocess, sys, time; "
                                   f"subprocess.Popen({SLEEPER!r}); time.sleep(120)"])
    wait_until(lambda: len(processes.in_group(leader.pid)) == 2 or None, 20,
               "the leader and its child")
    assert processes.group_alive(leader.pid)
    assert end_group(leader.pid, grace=5) == "SIGTERM"
    assert not processes.group_alive(leader.pid), "a zombie leader is not a live group"
    assert processes.in_group(leader.pid) == []


def test_a_group_read_from_proc_holds_what_psutil_finds_whatever_its_command_is_named(
        children: list[subprocess.Popen[bytes]], tmp_path: Path) -> None:
    # a command name may hold ') ' and what looks like the fields after it: they are read from
    # its last ')'
    odd = tmp_path / "a) Z 1 (b"
    odd.symlink_to(PYTHON)
    leader = start(children, argv=[str(odd), "-c", "import subprocess, time; "
                                   f"subprocess.Popen({SLEEPER!r}); "
                                   "subprocess.Popen(['true']); time.sleep(120)"])
    wait_until(lambda: len(processes.in_group(leader.pid)) == 2 or None, 20,
               "the leader and its sleeping child (the other one a zombie)")
    found = processes.in_group(leader.pid)
    assert leader.pid in found and os.getpid() not in found
    assert sorted(processes._in_group_through_psutil(leader.pid)) == sorted(found)


def test_working_in_sees_a_cwd_and_an_open_file_and_spares_the_marked(
        children: list[subprocess.Popen[bytes]], tmp_path: Path) -> None:
    folder = tmp_path / "worktree"
    (folder / "src").mkdir(parents=True)
    assert processes.working_in(folder) == ""
    inside = start(children, cwd=folder / "src")
    found = wait_until(lambda: processes.working_in(folder) or None, 10, "the child to be seen")
    assert found.startswith(f"pid {inside.pid} (python")
    inside.kill()
    inside.wait(timeout=10)
    (folder / "notes.txt").write_text("x")
    holder = start(children, cwd=tmp_path, argv=[
        PYTHON, "-c", "import sys, time; f = open(sys.argv[1]); time.sleep(120)",
        str(folder / "notes.txt")])
    found = wait_until(lambda: processes.working_in(folder) or None, 10, "the open file")
    assert found.startswith(f"pid {holder.pid} (")
    assert processes.working_in(folder, ("HANDOFF_TEST_MARK", "peer")) == found
    holder.kill()
    holder.wait(timeout=10)
    spared = start(children, cwd=folder, env={"HANDOFF_TEST_MARK": "peer#reviewer"})
    wait_until(lambda: processes.working_in(folder) or None, 10, "the marked child")
    assert processes.working_in(folder, ("HANDOFF_TEST_MARK", "peer")) == ""
    assert processes.working_in(folder).startswith(f"pid {spared.pid} (")
