"""The cgroups of one peer launch or gate run (`Bounded`): the launcher's plan to join them
before it execs the program, so every process the program starts is inside, orphans included,
whatever session or process group they make; what a limit did, read from the cgroup's own
counters (`Bounded.hit`): pids.events `max` (forks refused), memory.events or
memory.oom_control `oom_kill` (processes the kernel killed); and their end.

A cgroup can only be removed once empty (the kernel refuses otherwise): `remove` never ends a
process; `Bounded.end` (a gate run's end) and `end_left` (a gate a dead orchestrator left) first
end what runs in their cgroups (`kill_members`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from handoff.config import show_size
from handoff.machinery import launcher
from handoff.machinery.limit_mechanism import FOLDER, mounts_of

if TYPE_CHECKING:  # the launcher's types are there for mypy only (it imports no typing)
    from handoff.machinery.launcher import BoundPlan


@dataclass(frozen=True)
class Bounded:
    """The cgroups of one peer launch or gate run, and the launcher's plan to join them."""

    name: str
    #: whose they are: `<ticket dir>#<role>` (reaper.marker)
    owner: str
    dirs: tuple[Path, ...]
    #: what the launcher does before it execs (launcher.bound)
    plan: BoundPlan
    processes: int | None
    memory: int | None
    #: where its record is (HANDOFF_HOME/cgroups)
    records: Path

    def argv(self) -> list[str]:
        """The launcher's step that holds a subprocess to the plan, put before its argv."""
        return [sys.executable, "-I", "-S", str(Path(launcher.__file__)), "--bound",
                json.dumps(self.plan), "--"]

    def hit(self) -> str:
        """Which limit the processes in these cgroups reached, said for a person ('' : none,
        or this machine cannot tell: rlimits only)."""
        found = []
        for folder in self.dirs:
            refused = _counter(folder / "pids.events", "max")
            if refused:
                found.append(f"the process limit ({self.processes}) was reached: {refused} "
                             f"fork{'s' if refused > 1 else ''} refused")
            killed = _counter(folder / "memory.events", "oom_kill") or \
                _counter(folder / "memory.oom_control", "oom_kill")
            if killed:
                found.append(f"the memory limit ({show_size(self.memory)}) was reached: the "
                             f"kernel killed {killed} process{'es' if killed > 1 else ''}")
        return "; ".join(found)

    def end(self, wait: float = 3.0) -> bool:
        """End whatever still runs in these cgroups (ours alone: each was made for this run)
        and remove them with their record; False when one could not be emptied within wait
        (left for a later sweep)."""
        for folder in self.dirs:
            kill_members(folder, wait)
        return remove(self.dirs, self.name, self.records)


def _counter(path: Path, key: str) -> int:
    """The value of `key N` in a cgroup's flat-keyed file (0 when it or the file is not
    there)."""
    try:
        for line in path.read_text(encoding="ascii").splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        return 0
    return 0


def members(folder: Path) -> list[int]:
    try:
        return [int(pid) for pid in (folder / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def kill_members(folder: Path, wait: float) -> bool:
    """KILL every process in the cgroup folder until it is empty (True) or wait passes. v2
    kills them all at once (cgroup.kill); v1 one by one, each through a pidfd taken while it
    is still listed there, so a pid reused meanwhile by a stranger is never signalled."""
    deadline = time.monotonic() + wait
    with contextlib.suppress(OSError):
        (folder / "cgroup.kill").write_text("1", encoding="ascii")
    while pids := members(folder):
        for pid in pids:
            with contextlib.suppress(OSError):
                handle = os.pidfd_open(pid)
                try:
                    if pid in members(folder):
                        signal.pidfd_send_signal(handle, signal.SIGKILL)
                finally:
                    os.close(handle)
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)  # KILLed processes leave the cgroup when the kernel has ended them
    return True


def made_by_handoff(folder: Path) -> bool:
    """folder is a cgroup of handoff's: in its folder of a mounted cgroup hierarchy (a record
    naming any other folder is never acted on)."""
    if folder.parent.name != FOLDER or not (folder / "cgroup.procs").is_file():
        return False
    try:
        mounts = Path("/proc/self/mountinfo").read_text(encoding="utf-8")
    except OSError:
        return False
    points = [Path(m[1]) for kind in ("cgroup", "cgroup2") for m in mounts_of(mounts, kind)]
    return any(folder.parent.parent.is_relative_to(point) for point in points)


def end_left(folder: Path, wait: float) -> None:
    """End what runs in a cgroup of handoff's a dead orchestrator's gate left, and remove it
    (its record goes with the next sweep)."""
    if made_by_handoff(folder) and kill_members(folder, wait):
        with contextlib.suppress(OSError):
            folder.rmdir()


def remove(dirs: Sequence[Path], name: str, records: Path) -> bool:
    """Remove the cgroups dirs (empty ones only: the kernel refuses the others) and, once all
    are gone, their record (records/name.json)."""
    gone = True
    for folder in dirs:
        try:
            folder.rmdir()
        except FileNotFoundError:
            continue
        except OSError:
            gone = False
    if gone:
        (records / f"{name}.json").unlink(missing_ok=True)
    return gone
