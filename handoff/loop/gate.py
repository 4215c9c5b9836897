"""The verification gate: the orchestrator runs the test command itself.

A report saying "tests pass" is a claim; this is the evidence. argv without a shell, an
allowlisted environment, a timeout, output kept up to a number of bytes (head and tail) while
it streams, never all of it in memory.

The gate runs in a process group of its own, and nothing of it outlives the gate: when the
command exits, times out or the orchestrator is stopped, the whole group is ended (TERM, then
KILL). While it runs, a record in the ticket directory names the group and proves whose it is
(the leader's start time, the boot, a token in the gate's environment), so `stop`, `close` and
a resumed orchestrator can end a gate that a killed orchestrator left behind, and only that.

Where the config sets limits (sandbox.limits, handoff.machinery.limits), each run also has
cgroups of its own, joined before its command starts: at most so many processes and so much
memory, and whatever of it left the group (an unsandboxed daemon) ended with them. A run that
reached a limit fails, its log and summary saying which: what it proved was not the code's
alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NotRequired, TypedDict

from handoff.inputs import clip, joined
from handoff.machinery.bounded import end_left as end_cgroup
from handoff.machinery.groups import GRACE, end_group
from handoff.machinery.launcher import yield_cpu
from handoff.machinery.limits import Fenced
from handoff.processes import boot_id, environ, in_group, start_time
from handoff.record.events import now
from handoff.record.store import atomic_write, atomic_write_json
from handoff.record.ticket import TicketDir

#: bytes of a gate's output kept in its log (half head, half tail)
CAP = 64 * 1024
#: bytes of the output's end shown in the implementer's next brief
EXCERPT = 4 * 1024
#: the variable that marks every process of one gate run
TOKEN = "HANDOFF_GATE_TOKEN"
CHUNK = 64 * 1024


@dataclass(frozen=True)
class GateResult:
    argv: tuple[str, ...]
    exit_code: int | None
    seconds: float
    timed_out: bool
    #: what the command printed (stdout and stderr), capped at CAP bytes
    output: str
    #: which limit it reached, said for a person ('' : none); handoff.machinery.limits
    limit: str = ""

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.limit

    def summary(self) -> str:
        command = clip(" ".join(self.argv), 300)
        reached = f": {self.limit}" if self.limit else ""
        if self.timed_out:
            return f"`{command}` timed out after {self.seconds:.0f}s{reached}"
        if self.limit and self.exit_code == 0:
            return f"`{command}` exited 0 in {self.seconds:.1f}s, yet fails{reached}"
        state = "passed" if self.passed else f"failed (exit {self.exit_code})"
        return f"`{command}` {state} in {self.seconds:.1f}s{reached}"


def excerpt(output: str, lines: int = 15, limit: int = EXCERPT) -> str:
    """The last lines of output, at most limit bytes of them, for a brief."""
    tail = "\n".join(output.strip().splitlines()[-lines:])
    data = tail.encode("utf-8", "replace")
    if len(data) <= limit:
        return tail
    return joined(b"", data[len(data) - limit:], len(data) - limit).lstrip("\n")


class Kept:
    """The head and the tail of a stream, at most limit bytes in memory however long it runs."""

    def __init__(self, limit: int) -> None:
        self.half = limit // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            del self.tail[:max(0, len(self.tail) - self.half)]

    def text(self) -> str:
        return joined(bytes(self.head), bytes(self.tail),
                      self.total - len(self.head) - len(self.tail))


def niced(command: list[str], nice: int) -> list[str]:
    """command started at niceness nice already (through coreutils' `nice`): `yield_cpu` after
    the fork also weights its session, but its first instructions would run as nice as we
    are."""
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    program = shutil.which("nice") if nice > mine else None
    return [program, "-n", str(nice - mine), *command] if program else command


def run_gate(argv: Sequence[str], cwd: Path, env: dict[str, str], timeout: float,
             log: Path, record: Path | None = None,
             fence: Callable[[Sequence[str]], list[str]] | None = None,
             nice: int = 0, meanwhile: Callable[[], None] | None = None) -> GateResult:
    """Run argv in its own process group and wait for it, at most timeout seconds; record:
    where to note the running gate (see end_left_gate); fence: what runs it in the sandbox
    (the log and the result name argv itself), and within its limits when it is a
    limits.Fenced; meanwhile: work of the caller's done once the command started (or could
    not), before its end is awaited (an error from it ends the command first)."""
    started = time.monotonic()
    token = uuid.uuid4().hex
    # its cgroups, joined by the launcher before the command starts (no preexec_fn: the
    # orchestrator has threads, and a fork may not run Python code in a threaded process)
    bounded = fence.bounded() if isinstance(fence, Fenced) else None
    held = bounded.argv() if bounded is not None else []
    groups = [str(d) for d in bounded.dirs] if bounded is not None else []
    if record is not None:  # before it starts: a crash right after the fork still leaves a trace
        atomic_write_json(record, _record(argv, token, None, groups))
    try:
        child = subprocess.Popen(
            [*held, *niced(fence(argv) if fence is not None else list(argv), nice)], cwd=cwd,
            env={**env, TOKEN: token}, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        )
    except OSError as exc:  # not found, not executable, not a program (ENOEXEC), bad cwd
        if record is not None:
            record.unlink(missing_ok=True)
        if bounded is not None:
            bounded.end()
        if meanwhile is not None:
            meanwhile()
        result = GateResult(tuple(argv), 127, 0.0, False, f"cannot run {argv[0]}: {exc}\n")
    else:
        reached = ""
        try:
            yield_cpu(nice, child.pid)  # its session and group are its own (a peer's work)
            if record is not None:
                atomic_write_json(record, _record(argv, token, child.pid, groups))
            if meanwhile is not None:
                meanwhile()
            kept, exit_code = _collect(child, started + timeout)
        finally:  # however we leave (a timeout, SIGTERM from `handoff stop`): the group ends
            _end_own(child)
            if bounded is not None:  # what it reached, then whatever left the group
                reached = bounded.hit()
                bounded.end()
            if record is not None:
                record.unlink(missing_ok=True)
        result = GateResult(tuple(argv), exit_code, time.monotonic() - started,
                            exit_code is None, kept.text(), reached)
    atomic_write(log, f"$ {' '.join(result.argv)}\n# cwd: {cwd}\n{result.output}\n"
                      f"# {result.summary()}\n")
    return result


def _collect(child: subprocess.Popen[bytes], deadline: float) -> tuple[Kept, int | None]:
    """Keep the child's output until it exits (its exit code) or the deadline (None).

    The leader's exit ends the gate even when a process it left behind still holds the pipe;
    the leader is not reaped here, so its pid (the group's id) cannot be reused meanwhile."""
    assert child.stdout is not None
    kept = Kept(CAP)
    fd = child.stdout.fileno()
    open_ = True
    # the leader's exit wakes the wait itself (a pidfd is readable once it has exited): the
    # pipe closes a moment before the exit can be seen, and a 50 ms sleep between looks was
    # on every gate's path (bench floor)
    exit_fd = _exit_fd(child.pid)
    with selectors.DefaultSelector() as selector, _closing(exit_fd):
        selector.register(fd, selectors.EVENT_READ)
        if exit_fd is not None:
            selector.register(exit_fd, selectors.EVENT_READ)
        while True:
            code = _exited(child)
            if code is not None:
                if exit_fd is not None:
                    selector.unregister(exit_fd)  # readable from now on: the pipe's turn
                if open_:
                    _drain(fd, kept, selector, min(deadline, time.monotonic() + 1.0))
                return kept, code
            left = deadline - time.monotonic()
            if left <= 0:
                return kept, None
            if not open_ and exit_fd is None:
                time.sleep(min(left, 0.05))  # the pipe is closed: only the exit is awaited
                continue
            for key, _ in selector.select(min(left, 0.2)):
                if key.fd != fd:
                    continue  # the exit: seen at the top of the loop
                chunk = os.read(fd, CHUNK)
                kept.add(chunk)
                if not chunk:
                    open_ = False
                    selector.unregister(fd)


def _exit_fd(pid: int) -> int | None:
    """A descriptor that becomes readable when pid exits (Linux 5.3 and later), else None."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # no pidfd here (macOS, an older kernel)
        return None


@contextlib.contextmanager
def _closing(descriptor: int | None) -> Iterator[None]:
    try:
        yield
    finally:
        if descriptor is not None:
            os.close(descriptor)


def _drain(fd: int, kept: Kept, selector: selectors.BaseSelector, until: float) -> None:
    """What the leader wrote before it exited; a straggler that holds the pipe open (or keeps
    writing) is not waited for beyond until."""
    while (left := until - time.monotonic()) > 0 and selector.select(min(left, 0.2)):
        chunk = os.read(fd, CHUNK)
        if not chunk:
            return
        kept.add(chunk)


def _exited(child: subprocess.Popen[bytes]) -> int | None:
    """The exit code once the child has exited (a signal n: -n), leaving it unreaped; else
    None."""
    if not hasattr(os, "waitid"):  # macOS before Python 3.13: poll() reaps it
        return child.poll()
    info = os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    if info is None:
        return None
    return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status


def _end_own(child: subprocess.Popen[bytes]) -> None:
    """End the gate's whole group, then reap its leader. The leader is our unreaped child
    until then, so the group id is still ours: no other group can have it."""
    try:
        end_group(child.pid)
    finally:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=GRACE)  # a leader stuck in the kernel is left, not awaited
        if child.stdout is not None:
            child.stdout.close()


# ---- the record of a running gate, and ending one a dead orchestrator left ----------------------


class RunningGate(TypedDict):
    """The record of a running gate (TicketDir.gate_running): what proves its process group
    is this gate's, should its orchestrator die with it running."""

    argv: list[str]
    #: in the environment of each of its processes (TOKEN)
    token: str
    orchestrator: int
    started: str
    boot: str
    #: the folders of its cgroups (handoff.machinery.limits)
    cgroups: list[str]
    #: once it started: its leader's pid, which leads its group, and the leader's start time
    pid: NotRequired[int]
    pgid: NotRequired[int]
    start: NotRequired[str]


class LeftGate(TypedDict):
    """A gate a dead orchestrator left, ended: the fields of its `gate` event. What its record
    said is as it said it (the record may be damaged: these are shown, never acted on)."""

    pid: object
    command: object
    left_by: object
    started: object
    #: each group ended → the last signal it was sent
    ended: dict[str, str]


def _record(argv: Sequence[str], token: str, pid: int | None,
            groups: Sequence[str] = ()) -> RunningGate:
    data: RunningGate = {"argv": [clip(a, 300) for a in argv[:50]], "token": token,
                         "orchestrator": os.getpid(), "started": now(), "boot": boot_id(),
                         "cgroups": list(groups)}
    if pid is not None:
        data.update({"pid": pid, "pgid": pid, "start": start_time(pid)})
    return data


def end_left(tdir: TicketDir, round_: int, by: str) -> LeftGate | None:
    """end_left_gate for a command a person runs (stop, close), which records the event."""
    left = end_left_gate(tdir.gate_running)
    if left is not None:
        tdir.events.append("gate", round=round_, result="ended", reason=f"ended by {by}", **left)
    return left


def end_left_gate(record: Path, grace: float | None = None) -> LeftGate | None:
    """End a gate that an orchestrator left running (it was killed, or stopped without its
    cleanup) and remove its record. None when no gate was recorded; else what was found and
    done, for an event. A group is ended only when it is provably this gate's."""
    try:
        said = json.loads(record.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        said = {}
    data: dict[str, object] = said if isinstance(said, dict) else {}  # a RunningGate, or junk
    groups = sorted(ours(data))
    ended = {str(pgid): end_group(pgid, GRACE if grace is None else grace) for pgid in groups}
    if data.get("boot") == boot_id():  # its cgroups: what left the group is in them still
        cgroups = data.get("cgroups")
        for folder in cgroups if isinstance(cgroups, list) else []:
            if isinstance(folder, str):
                end_cgroup(Path(folder), GRACE)
    record.unlink(missing_ok=True)
    return {"pid": data.get("pid"), "command": data.get("argv", []),
            "left_by": data.get("orchestrator"), "started": data.get("started"),
            "ended": {g: s for g, s in ended.items() if s}}


def ours(data: Mapping[str, object]) -> set[int]:
    """The recorded gate's process group, when it still runs and is provably this gate's: its
    leader is the very process recorded (same pid, start time and boot), or, the leader gone,
    a process of that group carries the run's token in its environment. Else nothing."""
    pgid, start, token = data.get("pgid"), data.get("start"), data.get("token")
    boot = boot_id()
    if not boot or data.get("boot") != boot or not isinstance(pgid, int) \
            or pgid <= 1 or pgid == os.getpgrp():
        return set()  # nothing can be proven: leave it rather than kill a stranger's group
    if start and start_time(pgid) == start:
        return {pgid}
    if isinstance(token, str) and token and any(
            environ(pid).get(TOKEN) == token for pid in in_group(pgid)):
        return {pgid}
    return set()


