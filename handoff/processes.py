"""What handoff knows of live processes: the one place that reads them, through psutil, on Linux
and macOS alike.

A process is named by its pid, its start and the machine's boot: a reused pid starts later, and
neither means anything across a reboot. Two of those facts are read from Linux's /proc by hand,
where there is one (`Identity`), because psutil's are derived from the wall clock and move
with it: `Process.create_time()` is boot time plus the start in clock ticks, and since psutil
7.0.0 that boot time is read afresh from the clock (giampaolo/psutil#2526, #2541), so a clock
step between recording a gate and checking it after a crash would make the gate a stranger
and leave it running. /proc gives the start in ticks since boot and the boot's own id, which
no clock moves. Everywhere else psutil answers (measured on this machine, 68 processes, 30
reads: a scan of every environment 1.2 ms by hand against 2.0 ms through psutil, a scan of the
process groups 2.4 against 2.5 ms, "who works in this folder" 3.3 against 1.7 ms; nothing
here runs in a loop tighter than 50 ms).

psutil is imported on first use (28 ms): the lean lanes (`submit`, `status`) never read a
process.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psutil


# ---- a process's identity: its start and this boot ------------------------------------------


class Identity:
    """When a process started and which boot this is, as psutil gives them (the clock's
    seconds; see the module's note), for every platform psutil knows."""

    name = "psutil"

    def boot(self) -> str:
        import psutil

        return f"{psutil.boot_time():.0f}"

    def start(self, pid: int) -> str:
        import psutil

        try:
            return f"{psutil.Process(pid).create_time():.2f}"
        except (psutil.Error, ValueError):
            return ""


class ProcIdentity(Identity):
    """The same from Linux's /proc: the start in clock ticks since boot, and the boot's id,
    which no clock step moves."""

    name = "/proc"

    def boot(self) -> str:
        try:
            return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
        except OSError:
            return ""

    def start(self, pid: int) -> str:
        try:
            text = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
            return text.rsplit(")", 1)[1].split()[19]  # the command may hold spaces and ')'
        except (OSError, IndexError):
            return ""


def _identity() -> Identity:
    linux = sys.platform.startswith("linux") and Path("/proc/self/stat").is_file()
    return ProcIdentity() if linux else Identity()


#: the one this platform uses (tests run both)
IDENTITY = _identity()


def boot_id() -> str:
    """This boot of the machine: start times and pids mean nothing across a reboot."""
    return IDENTITY.boot()


def start_time(pid: int) -> str:
    """When pid started ('' when it is gone or unknown): with the pid and the boot, a
    process's identity."""
    return IDENTITY.start(pid)


# ---- what a process is and does -------------------------------------------------------------


def alive(pid: int) -> bool:
    """pid names a live process of any user; a zombie is not alive (it has let go of its files
    and locks and only awaits reaping)."""
    if pid <= 0:
        return False
    import psutil

    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:  # another user's, which psutil may not read: it exists
        return True


def environ(pid: int | str) -> dict[str, str]:
    """A live process's environment; {} when it cannot be read (another user's process, or
    one gone meanwhile)."""
    import psutil

    try:
        return dict(psutil.Process(int(pid)).environ())
    except (psutil.Error, ValueError, OSError):
        return {}


def command(pid: int) -> list[str]:
    """A live process's command line; [] when it cannot be read."""
    import psutil

    try:
        return list(psutil.Process(pid).cmdline())
    except (psutil.Error, ValueError, OSError):
        return []


@dataclass(frozen=True)
class Seen:
    """One process as its lineage is judged: pid, parent, the name of the program it runs
    (its executable's file name, which a process cannot rewrite as it can its argv), its
    command line (for messages only) and its start."""

    pid: int
    parent: int
    program: str
    argv: tuple[str, ...]
    start: str

    def shown(self) -> str:
        return f"pid {self.pid} ({' '.join(self.argv)[:120] or self.program})"


def seen(pid: int) -> Seen | None:
    """What pid is now; None when it is gone or cannot be read."""
    import psutil

    try:
        process = psutil.Process(pid)
        with process.oneshot():
            parent = process.ppid()
            try:
                program = os.path.basename(process.exe())
            except (psutil.AccessDenied, psutil.ZombieProcess, OSError):
                program = process.name()
            argv = tuple(process.cmdline())
    except (psutil.Error, ValueError, OSError):
        return None
    return Seen(pid, parent, program, argv, start_time(pid))


def lineage(pid: int, limit: int = 12) -> list[Seen]:
    """pid and its ancestors, nearest first, at most limit of them (a gone one ends it)."""
    found: list[Seen] = []
    while pid > 0 and len(found) < limit:
        one = seen(pid)
        if one is None:
            break
        found.append(one)
        pid = one.parent
    return found


def children(pid: int) -> list[int]:
    """The direct children of pid, oldest first."""
    import psutil

    try:
        kids = psutil.Process(pid).children()
    except (psutil.Error, ValueError, OSError):
        return []

    def started(child: psutil.Process) -> float:
        try:
            return float(child.create_time())
        except psutil.Error:
            return float("inf")
    return [child.pid for child in sorted(kids, key=started)]


def _live() -> list[psutil.Process]:
    """Every process we can see but this one, zombies left out."""
    import psutil

    found = []
    for process in psutil.process_iter(["status"]):
        if process.pid != os.getpid() and process.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(process)
    return found


def carrying(name: str, match: Callable[[str], bool]) -> list[int]:
    """The live processes (this one left out) whose environment variable name matches."""
    if os.path.isdir("/proc/self"):
        return _carrying_in_proc(name, match)
    return _carrying_through_psutil(name, match)


def _carrying_through_psutil(name: str, match: Callable[[str], bool]) -> list[int]:
    """`carrying` where there is no /proc (macOS)."""
    found = []
    for process in _live():
        value = environ(process.pid)
        if name in value and match(value[name]):
            found.append(int(process.pid))
    return found


def _carrying_in_proc(name: str, match: Callable[[str], bool]) -> list[int]:
    """`carrying` from /proc itself: each environment read as bytes and parsed only when it
    holds the name (every launch and every close asks; through psutil, an object and a parsed
    environment for every process, it was 10 ms with 74 processes on the machine). A zombie's
    environment reads empty, another user's cannot be read: neither is found."""
    me, key = os.getpid(), f"{name}=".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as stream:
                data = stream.read()
        except OSError:  # gone meanwhile, or not ours
            continue
        for pair in data.split(b"\0") if key in data else ():
            if pair.startswith(key) and \
                    match(pair[len(key):].decode("utf-8", "surrogateescape")):
                found.append(int(entry))
                break
    return found


def in_group(pgid: int) -> list[int]:
    """The live processes of a process group (this one and zombies left out)."""
    if os.path.isdir("/proc/self"):
        return _in_group_in_proc(pgid)
    return _in_group_through_psutil(pgid)


def _in_group_through_psutil(pgid: int) -> list[int]:
    found = []
    for process in _live():
        pid = int(process.pid)
        try:
            if os.getpgid(pid) == pgid:
                found.append(pid)
        except OSError:  # gone meanwhile
            continue
    return found


def _in_group_in_proc(pgid: int) -> list[int]:
    """`in_group` from each process's /proc/<pid>/stat: its state and group are fields 3 and
    5, after the command name in parentheses (which may hold any character, so read from its
    last ')'). Every gate's end asks; through psutil, an object and a status for every
    process, it was about 40 ms a gate (bench floor)."""
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stream:
                fields = stream.read().rpartition(b")")[2].split()
        except OSError:  # gone meanwhile
            continue
        if len(fields) > 2 and fields[0] not in (b"Z", b"X") and fields[2] == str(pgid).encode():
            found.append(int(entry))
    return found


def group_alive(pgid: int) -> bool:
    """Some process of the group still runs (a zombie has finished)."""
    return bool(in_group(pgid))


def working_in(folder: Path, spared: tuple[str, str] = ("", "")) -> str:
    """A live process whose current directory, or one of whose open files, is in folder:
    "pid N (its command)", or '' (none found). Another user's processes cannot be read and are
    not seen. spared: (variable, prefix): a process whose environment has that variable
    starting so is not counted (the peers gc ends)."""
    import psutil

    folder = folder.resolve()
    name, prefix = spared
    for process in _live():
        try:
            places = [process.cwd(), *(f.path for f in process.open_files())]
        except (psutil.Error, OSError):
            continue
        if not any(Path(p) == folder or Path(p).is_relative_to(folder) for p in places if p):
            continue
        pid = int(process.pid)
        if name and environ(pid).get(name, "").startswith(prefix):
            continue
        try:
            said = process.name()
        except psutil.Error:
            said = "?"
        return f"pid {pid} ({said})"
    return ""
