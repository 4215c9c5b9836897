"""Start a program under exactly the environment kept in a private file, then remove the file.

tmux keeps a window's command line (`#{pane_start_command}`) for any client on the socket to
read, and the server forked from the client that created it keeps that client's argv for its
whole life, readable by every local user in /proc. So nothing travels on a command line: the
environment (keys) and the program's argv go into a 0600 file that this script reads
and deletes before it replaces itself with the program (same pid: the pane's pidfd and the
reaper follow it). The argv is there too because tmux refuses a long command line ("command
too long"), which a sandboxed CLI's bubblewrap arguments and a role contract passed as a flag
can reach.

The file may also say `hold`: a file of the machine's queue this process locks, and the program
keeps locked, for as long as it lives (`hold_slot`); `nice`: the program then runs below
handoff's own processes and the person's commands (`yield_cpu`), as every peer does
(`peer_nice`, handoff.config); and `bounds`:
the cgroups it joins and the rlimits it takes before it execs (`bound`, decided by
handoff.machinery.limits), so every process the program ever starts, orphans included, is
inside them. The gate takes the same step without a file (`launcher.py --bound PLAN -- ARGV`):
joining before the exec is what no preexec_fn in a threaded orchestrator can do safely.

Run as a plain script (`python -I -S launcher.py FILE`): the standard library only, nothing of
handoff imported, so it costs a bare interpreter start. handoff's own command (the orchestrator
in its window) it hands to the warm process itself (`relayed`: handoff.machinery.relay, standard
library only too) rather than start a second interpreter to do it.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import sys
import time

TYPE_CHECKING = False  # typing is not imported at run time: it would cost every launch ~3 ms
if TYPE_CHECKING:
    from typing import NoReturn, NotRequired, TypedDict

    # the plan `bound` takes, as JSON on its command line: its shape for mypy alone
    class CgroupPlan(TypedDict):
        """A cgroup to make and join: its folder, and [file, value, required] to write in it
        (handoff.machinery.limit_mechanism.Hierarchy.settings)."""

        dir: str
        set: list[list[str | bool]]

    class BoundPlan(TypedDict):
        """What `bound` does (handoff.machinery.limits.Bounds.make): the cgroups joined, and
        the rlimits that stand in for a controller this machine does not delegate."""

        cgroups: NotRequired[list[CgroupPlan]]
        #: RLIMIT_NPROC: processes the program may add to what its user runs
        nproc: NotRequired[int]
        #: RLIMIT_DATA: bytes
        data: NotRequired[int]


def yield_cpu(nice: int, pid: int = 0, wait: float = 0.0) -> None:
    """Let the process group of pid (0: our own) yield the CPU: its niceness raised to nice,
    and on Linux its session's scheduling group too. Linux gives each session (every tmux pane,
    every gate) a group of its own that shares the CPU evenly with every other (autogroup),
    whatever its processes' niceness, so that group's weight is what a peer's work competes
    with; where there is no such file, niceness alone does it. Only ever raised: lowering needs
    privileges, and a failure leaves the program running as it was.

    Another process (pid) only once it leads a session of its own: one just forked (a tmux
    pane's, whose setsid may not have run yet) still belongs to its parent's session, and that
    session's group (the tmux server's) is not ours to weigh down. wait: how long to wait for
    it to lead its own (on a loaded machine a pane's child ran its setsid some milliseconds
    after tmux said it was made, and was left at full weight)."""
    if nice <= 0:
        return
    if pid:
        deadline = time.monotonic() + wait
        try:
            while os.getsid(pid) != pid:
                if time.monotonic() >= deadline:
                    return
                time.sleep(0.002)
        except OSError:
            return
    with contextlib.suppress(OSError):
        if os.getpriority(os.PRIO_PGRP, pid) < nice:
            os.setpriority(os.PRIO_PGRP, pid, nice)
    with contextlib.suppress(OSError), \
            open(f"/proc/{pid or 'self'}/autogroup", "w", encoding="ascii") as group:
        group.write(str(nice))


#: the exit status of a program that could not be held to its limits, and so never ran
UNBOUNDED = 126


def bound(plan: BoundPlan) -> None:
    """Hold this process, and all it will start, to plan (handoff.machinery.limits.Bounds):
    each cgroup made (if a sweep took it meanwhile), its limits written, then joined (`0`: the
    writer itself), before any rlimit, which could stop the writes. A limit that cannot be set
    raises OSError: the program is not run unbounded."""
    for group in plan.get("cgroups", ()):
        folder = str(group["dir"])
        os.makedirs(folder, exist_ok=True)
        for name, value, required in group["set"]:
            path = os.path.join(folder, str(name))
            if not required and not os.path.exists(path):
                continue  # e.g. no swap accounting on this machine: nothing to bound there
            with open(path, "w", encoding="ascii") as out:
                out.write(str(value))
        with open(os.path.join(folder, "cgroup.procs"), "w", encoding="ascii") as out:
            out.write("0")
    if "nproc" in plan:
        # RLIMIT_NPROC counts every task of this user: the peer may add nproc to what the
        # user runs now, no more
        _lower(resource.RLIMIT_NPROC, _user_tasks() + int(plan["nproc"]))
    if "data" in plan:
        _lower(resource.RLIMIT_DATA, int(plan["data"]))


def _lower(which: int, limit: int) -> None:
    """Soft and hard limit at most limit: the program cannot raise them again."""
    hard = resource.getrlimit(which)[1]
    ceiling = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
    resource.setrlimit(which, (ceiling, ceiling))


def _user_tasks() -> int:
    """The tasks (threads included) of this process's real user but this one, as RLIMIT_NPROC
    counts them: the program this process becomes counts against its own limit."""
    uid, count, me = os.getuid(), 0, str(os.getpid())
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or entry.name == me:
            continue
        try:
            if os.stat(entry.path).st_uid == uid:
                count += len(os.listdir(os.path.join(entry.path, "task")))
        except OSError:
            continue  # gone meanwhile
    return count


def relayed(argv: list[str], env: dict[str, str]) -> int | None:
    """handoff's own command (an orchestrator in its window) handed to the warm process from
    here, as `handoff` would (handoff.machinery.relay), without starting a second interpreter for
    it; its exit status, or None: not relayed, exec it."""
    if argv[1:3] != ["-m", "handoff"] or os.path.realpath(argv[0]) != \
            os.path.realpath(sys.executable):
        return None
    # -S leaves site-packages off the path: handoff's own folder is where this file is
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    os.environ.clear()
    os.environ.update(env)
    from handoff.machinery import relay

    return relay.relay(argv[3:]) if relay.relayable(argv[3:], window=True) else None


def main(args: list[str]) -> None:
    if len(args) >= 4 and args[0] == "--bound" and args[2] == "--":
        _held(args[3], json.loads(args[1]))
        _exec(args[3:], dict(os.environ))
    if len(args) != 1:
        sys.stderr.write("usage: launcher.py LAUNCH_FILE | launcher.py --bound PLAN -- ARGV\n")
        raise SystemExit(2)
    path = args[0]
    try:
        with open(path, encoding="utf-8") as handle:
            launch = json.load(handle)
        env, argv = launch["env"], [str(part) for part in launch["argv"]]
        nice = int(launch.get("nice", 0))
        bounds = launch.get("bounds")
        hold = launch.get("hold")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        sys.stderr.write(f"handoff: the environment file {path} cannot be read ({exc}): "
                         "this launch was used already or its folder was cleaned\n")
        raise SystemExit(127) from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
    yield_cpu(nice)
    if hold:
        hold_slot(str(hold["path"]), str(hold["holder"]))
    env = {str(k): str(v) for k, v in env.items()}
    if bounds:  # a bounded program runs here, never handed to the warm process
        _held(argv[0], bounds)
    else:
        code = relayed(argv, env)
        if code is not None:
            raise SystemExit(code)
    _exec(argv, env)


#: struct flock on 64-bit Linux, as handoff.record.lock packs it (this script imports nothing
#: of handoff): l_type, l_whence, l_start, l_len, l_pid (+ padding)
_FLOCK = "@hhqqi4x"


def hold_slot(path: str, holder: str) -> None:
    """Lock path for as long as this process and the program it becomes live (the descriptor
    is kept across exec), its holder written in it: the ticket's place among the tickets at
    work (handoff.record.slots.PEER). The same lock kind as handoff.record.lock's, which the
    queue tests with: an open-file-description lock where there is one, else a flock. A lock
    that cannot be taken costs the peer nothing: it runs all the same."""
    import fcntl
    import struct

    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return
    try:
        if hasattr(fcntl, "F_OFD_SETLK") and sys.maxsize > 2**32:
            fcntl.fcntl(fd, fcntl.F_OFD_SETLK,
                        struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))
        else:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        data = json.loads(holder)
        data["pid"] = os.getpid()  # the program's, after the exec: the same process
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(data).encode(), 0)
        os.set_inheritable(fd, True)
    except (OSError, ValueError):
        os.close(fd)


def _held(program: str, plan: BoundPlan) -> None:
    """bound, or the program does not run: said on its screen (or the gate's log)."""
    try:
        bound(plan)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        sys.stderr.write(f"handoff: {program} not started: it cannot be held to its limits "
                         f"({exc}); `handoff doctor` says how limits are held here\n")
        raise SystemExit(UNBOUNDED) from None


def _exec(argv: list[str], env: dict[str, str]) -> NoReturn:
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        sys.stderr.write(f"handoff: cannot start {argv[0]}: {exc.strerror}\n")
        raise SystemExit(127) from None


if __name__ == "__main__":
    main(sys.argv[1:])
