"""What handoff knows of live processes: process groups, start times and environments, read
from /proc where there is one; and ending a group of our own.

A process is named by its pid, its start time and the machine's boot: a reused pid starts
later. A group is ended only when the caller has proved it ours (its own unreaped child, or a
recorded identity).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

#: how long a group has to go after TERM before it gets KILL
GRACE = 5.0


def end_group(pgid: int, grace: float = GRACE) -> str:
    """TERM the group, KILL what is left after grace ; the last signal sent
    ('' when the group was already gone)."""
    if not has_proc():  # no way to watch the group empty: no grace, KILL at once
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
            return "SIGKILL"
        return ""
    sent = ""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        if not group_alive(pgid):
            return sent
        try:
            os.killpg(pgid, signum)
        except ProcessLookupError:
            return sent
        except PermissionError:  # not ours after all: never pursue it
            return sent
        sent = signal.Signals(signum).name
        deadline = time.monotonic() + grace
        while group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
    return sent


def has_proc() -> bool:
    return Path("/proc/self/stat").is_file()


def boot_id() -> str:
    """This boot of the machine: start times and pids mean nothing across a reboot."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except OSError:
        return ""


def start_time(pid: int) -> str:
    """When pid started, in clock ticks since boot ('' when it is gone or unknown): with the
    pid and the boot, a process's identity — a reused pid starts later."""
    try:
        return stat(pid)[2]
    except (OSError, IndexError, ValueError):
        return ""


def stat(pid: int | str) -> tuple[int, str, str]:
    """(process group, state letter, start time) of pid, from /proc/<pid>/stat."""
    text = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    fields = text.rsplit(")", 1)[1].split()  # the command name may hold spaces and ')'
    return int(fields[2]), fields[0], fields[19]


def processes() -> Iterator[tuple[str, int, str]]:
    """(pid, process group, state) of every process we can see."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                pgid, state, _ = stat(entry.name)
            except (OSError, IndexError, ValueError):
                continue
            yield entry.name, pgid, state


def environ(pid: int | str) -> dict[str, str]:
    """A live process's environment (Linux /proc); {} when it cannot be read (another user's
    process, one gone meanwhile, or no /proc)."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.decode(errors="replace").split("=", 1) for item in raw.split(b"\0") if item)
    return {pair[0]: pair[1] for pair in pairs if len(pair) == 2}


def working_in(folder: Path, spared: tuple[str, str] = ("", "")) -> str:
    """A live process whose current directory, or one of whose open files, is in folder:
    "pid N (its command)", or '' (none found; without /proc nothing can be found). Another
    user's processes cannot be read and are not seen. spared: (variable, prefix): a process
    whose environment has that variable starting so is not counted (the peers gc ends)."""
    folder = folder.resolve()
    name, prefix = spared
    for proc in Path("/proc").iterdir() if has_proc() else ():
        if not proc.name.isdigit() or proc.name == str(os.getpid()):
            continue
        for link in _places(proc):
            if link == folder or link.is_relative_to(folder):
                if name and environ(proc.name).get(name, "").startswith(prefix):
                    break
                try:
                    command = (proc / "comm").read_text(encoding="utf-8").strip()
                except OSError:
                    command = "?"
                return f"pid {proc.name} ({command})"
    return ""


def _places(proc: Path) -> Iterator[Path]:
    """Where a process works: its cwd, then each open file (paths, not sockets or pipes)."""
    try:
        yield Path(os.readlink(proc / "cwd"))
        fds = list((proc / "fd").iterdir())
    except OSError:
        return
    for fd in fds:
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("/"):
            yield Path(target)


def process_alive(pid: int) -> bool:
    """pid names a live process (of any user)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return pid > 0


def group_alive(pgid: int) -> bool:
    """Some process of the group still runs (a zombie has finished: it only awaits reaping)."""
    if not has_proc():
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    return any(group == pgid and state != "Z" for _, group, state in processes())
