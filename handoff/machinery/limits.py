"""Bounds on every peer and every gate run: at most so many processes, so much memory.

A fork bomb or a memory hog in a peer's tool call or in a gate's tests must not take the
machine. Each peer launch and each gate run gets cgroups of its own, made and joined by the
launcher before it execs the program (handoff.machinery.launcher `bound`: standard library only,
the same step for a tmux pane and for the gate's subprocess), so every process the program
starts is inside, orphans included, whatever session or process group they make. The sandbox's
PID namespace ends them with the program; the cgroup ends what an unsandboxed gate left.

How the limits are held is decided once per process, here alone (`mechanism`), per controller,
the strongest first:

* cgroup v2, where a cgroup with the pids and memory controllers is ours to divide: our own
  when it is its hierarchy's root, else its parent (the kernel keeps controllers off the
  children of a cgroup that holds processes, and ours holds us): pids.max, memory.max and
  memory.swap.max 0 (the limit is the limit: a hog is killed, not swapped out for hours);
* cgroup v1, where its hierarchy is writable (root on a v1 or hybrid machine): our own cgroup's
  child; pids.max, memory.limit_in_bytes, memory.memsw.limit_in_bytes the same;
* rlimits where neither is, which are weaker (`Mechanism.weaker` says how, `handoff doctor`
  shows it): RLIMIT_NPROC counts every task of the user and binds no root (the kernel exempts
  uid 0), so it is set to what the user runs at the launch plus the limit; memory is
  RLIMIT_DATA, per process. Never RLIMIT_AS: measured (docs/configuration.md), 8 GiB of address
  space stops Node's WebAssembly and shrinks a JVM's heap; RLIMIT_DATA leaves both alone
  (Claude Code, a Bun binary, sizes its heap reservation to either).

Each cgroup is named `<base>/handoff/<ticket>.<role>.<8 hex>` and recorded in
`$HANDOFF_HOME/cgroups/<name>.json` with whose it is (`<ticket dir>#<role>`, the reaper's mark)
and its folders: whoever removes one, from whatever cgroup of its own, knows where it is. A
cgroup can only be removed once empty (the kernel refuses otherwise), so removal never ends a
process (but a gate's own, `Bounded.end`): a gate run removes its own at its end, once its
processes ended; a peer's next launch its previous ones; a ticket's stop or close all of its
own (`Peers.stop`); every launch any other that is empty and older than a launch file lives
(a younger one may not be joined yet), recorded or not (a deleted home's); `handoff gc` those
of closed or vanished tickets. The one cost of removing an empty cgroup: what its counters
said. A peer's are read at its death, milliseconds after it, and a sweep takes only a cgroup
ten minutes old.

What a limit did is read from the cgroup's own counters (`Bounded.hit`): pids.events `max`
(forks refused), memory.events or memory.oom_control `oom_kill` (processes the kernel killed).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from handoff.config import Limits, show_size
from handoff.machinery import launcher
from handoff.record.store import atomic_write_json, private_dir

PIDS, MEMORY = "pids", "memory"
#: the folder of handoff's cgroups under each base, and of their records under HANDOFF_HOME
FOLDER = "handoff"
RECORDS = "cgroups"
#: a recorded cgroup this old and empty is no launch's still to come (peers.LAUNCH_FILE_AGE:
#: a launch file is dropped then, unused)
STALE = 600.0


@dataclass(frozen=True)
class Hierarchy:
    """Where handoff makes its cgroups for some controllers: a cgroup v1 hierarchy of one or
    more controllers, or the v2 one."""

    version: int
    controllers: tuple[str, ...]
    #: the folder handoff's cgroups go into (`…/handoff`)
    base: Path

    def settings(self, processes: int | None, memory: int | None) -> list[list[Any]]:
        """[file, value, required] of one cgroup in it, in the order they must be written
        (v1's memory+swap limit can never be below its memory limit)."""
        found: list[list[Any]] = []
        if PIDS in self.controllers and processes is not None:
            found.append(["pids.max", str(processes), True])
        if MEMORY in self.controllers and memory is not None:
            if self.version == 2:
                found += [["memory.max", str(memory), True], ["memory.swap.max", "0", False]]
            else:
                found += [["memory.limit_in_bytes", str(memory), True],
                          ["memory.memsw.limit_in_bytes", str(memory), False]]
        return found


@dataclass(frozen=True)
class Mechanism:
    """How limits are held on this machine: the cgroups per controller, rlimits for the
    rest."""

    hierarchies: tuple[Hierarchy, ...]
    #: handoff runs as root: RLIMIT_NPROC does not bind it
    root: bool
    #: why a controller is not held by a cgroup ('' when both are)
    why: str = ""
    #: the rlimits stand in for a missing controller (Linux, where they were measured and
    #: /proc counts a user's tasks); elsewhere nothing does
    rlimits: bool = True

    def holder(self, controller: str) -> Hierarchy | None:
        return next((h for h in self.hierarchies if controller in h.controllers), None)

    def said(self) -> str:
        """One line: `cgroup v1 (pids, memory)`, `cgroup v2 (pids, memory)`, or what is
        rlimits only."""
        held = []
        for version in sorted({h.version for h in self.hierarchies}, reverse=True):
            controllers = [c for h in self.hierarchies if h.version == version
                           for c in h.controllers]
            held.append(f"cgroup v{version} ({', '.join(controllers)})")
        rest = [c for c in (PIDS, MEMORY) if self.holder(c) is None]
        if not rest:
            return ", ".join(held)
        if not self.rlimits:
            return f"none: {self.why}"
        limits = {PIDS: "processes by RLIMIT_NPROC", MEMORY: "memory by RLIMIT_DATA"}
        return "; ".join([*held, f"rlimits only: {', '.join(limits[c] for c in rest)}"])

    def weaker(self) -> str:
        """What is weaker here than with both controllers in cgroups ('' : nothing)."""
        if not self.rlimits:
            return "nothing bounds a peer's processes or memory here"
        found = []
        if self.holder(PIDS) is None:
            found.append("the process limit does not bind: handoff runs as root, which the "
                         "kernel exempts from RLIMIT_NPROC" if self.root else
                         "the process limit counts all your processes (a peer may add the limit "
                         "to what you run when it starts)")
        if self.holder(MEMORY) is None:
            found.append("memory is bounded per process (RLIMIT_DATA: an allocation past it "
                         "fails), not per peer, and no log says which limit a failure met")
        if found and self.why:
            found.append(f"no cgroup: {self.why}")
        return "; ".join(found)


@functools.cache
def mechanism() -> Mechanism:
    """How limits are held for this process's peers and gates (probed once per process: the
    cgroups it is in decide where its own go)."""
    if sys.platform != "linux":
        return Mechanism((), _root(), f"no cgroups on {sys.platform}", rlimits=False)
    try:
        membership = Path("/proc/self/cgroup").read_text(encoding="utf-8")
        mounts = Path("/proc/self/mountinfo").read_text(encoding="utf-8")
    except OSError as exc:
        return Mechanism((), _root(), f"no cgroups to read ({exc.strerror})")
    return decide(membership, mounts, _root())


def _root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def decide(membership: str, mounts: str, root: bool) -> Mechanism:
    """The mechanism from /proc/self/cgroup (membership) and /proc/self/mountinfo (mounts):
    each controller in v2 where it can be divided there, else in v1 where writable."""
    found: list[Hierarchy] = []
    why: list[str] = []
    unified = _unified(membership, mounts, why)
    if unified is not None:
        found.append(unified)
    for controller in (PIDS, MEMORY):
        if any(controller in h.controllers for h in found):
            continue
        legacy = _legacy(controller, membership, mounts, why)
        if legacy is not None:
            found.append(legacy)
    held = {c for h in found for c in h.controllers}
    return Mechanism(tuple(found), root, "" if held == {PIDS, MEMORY} else "; ".join(why))


def _mounts(mounts: str, fstype: str) -> Iterator[tuple[str, str, set[str]]]:
    """(root, mount point, super options) of each mount of fstype."""
    for line in mounts.splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        dash = fields.index("-")
        if len(fields) > dash + 3 and fields[dash + 1] == fstype:
            yield fields[3], _unescape(fields[4]), set(fields[dash + 3].split(","))


def _unescape(path: str) -> str:
    """mountinfo writes a space, tab, newline and backslash in a path as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        path = path.replace(code, char)
    return path


def _within(mount_root: str, mount_point: str, path: str) -> Path:
    """The folder of cgroup path (as /proc/self/cgroup says it) under a mount of the
    hierarchy whose own root is mount_root (a container's mount shows its own subtree)."""
    if mount_root != "/" and (path == mount_root or path.startswith(mount_root + "/")):
        path = path[len(mount_root):]
    return Path(mount_point, path.lstrip("/"))


def _membership(membership: str) -> Iterator[tuple[str, set[str], str]]:
    for line in membership.splitlines():
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        yield number, set(controllers.split(",")) if controllers else set(), path


def _unified(membership: str, mounts: str, why: list[str]) -> Hierarchy | None:
    """cgroup v2: our cgroup when it is the root (which may hold processes and still divide),
    else its parent; its pids and memory given to handoff's folder there."""
    path = next((p for n, c, p in _membership(membership) if n == "0" and not c), None)
    mount = next(iter(_mounts(mounts, "cgroup2")), None)
    if path is None or mount is None:
        return None
    own = _within(mount[0], mount[1], path)
    where = own if own == Path(mount[1]) else own.parent
    try:
        wanted = [c for c in (PIDS, MEMORY)
                  if c in (where / "cgroup.controllers").read_text(encoding="ascii").split()]
        if not wanted:
            why.append(f"cgroup v2 at {where} has no pids or memory controller")
            return None
        _enable(where, wanted)
        base = where / FOLDER
        base.mkdir(exist_ok=True)
        _enable(base, wanted)
        held = tuple(c for c in wanted if (base / f"{c}.max").exists())
    except OSError as exc:
        why.append(f"cgroup v2 at {where} is not ours to divide ({exc.strerror or exc})")
        return None
    if not held:
        why.append(f"cgroup v2 at {where} does not pass pids or memory on to its children")
        return None
    return Hierarchy(2, held, base)


def _enable(folder: Path, controllers: list[str]) -> None:
    """controllers on for folder's children (what is on already stays on)."""
    control = folder / "cgroup.subtree_control"
    missing = [c for c in controllers if c not in control.read_text(encoding="ascii").split()]
    if missing:
        control.write_text(" ".join(f"+{c}" for c in missing), encoding="ascii")


def _legacy(controller: str, membership: str, mounts: str, why: list[str]) -> Hierarchy | None:
    """cgroup v1: handoff's folder in our own cgroup of controller's hierarchy, if we may
    write there."""
    path = next((p for _, c, p in _membership(membership) if controller in c), None)
    mount = next((m for m in _mounts(mounts, "cgroup") if controller in m[2]), None)
    if path is None or mount is None:
        why.append(f"no {controller} controller")
        return None
    base = _within(mount[0], mount[1], path) / FOLDER
    limit = "pids.max" if controller == PIDS else "memory.limit_in_bytes"
    try:
        base.mkdir(exist_ok=True)
    except OSError as exc:
        why.append(f"cgroup v1 {controller} at {base.parent} is not writable "
                   f"({exc.strerror or exc})")
        return None
    if not (base / limit).exists() or not os.access(base / "cgroup.procs", os.W_OK):
        why.append(f"cgroup v1 {controller} at {base.parent} is not writable")
        return None
    held = tuple(c for c in (PIDS, MEMORY) if c in mount[2])
    return Hierarchy(1, held, base)


# ---- one peer's or one gate run's cgroups -------------------------------------------------------


@dataclass(frozen=True)
class Bounded:
    """The cgroups of one peer launch or gate run, and the launcher's plan to join them."""

    name: str
    #: whose they are: `<ticket dir>#<role>` (reaper.marker)
    owner: str
    dirs: tuple[Path, ...]
    #: what the launcher does before it execs (launcher.bound)
    plan: dict[str, Any]
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
    points = [Path(m[1]) for kind in ("cgroup", "cgroup2") for m in _mounts(mounts, kind)]
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


@dataclass(frozen=True)
class Bounds:
    """The limits of one kind of run (a peer, a gate) and how this machine holds them."""

    processes: int | None
    memory: int | None
    mechanism: Mechanism

    def make(self, home: Path, owner: str, label: str) -> Bounded:
        """The cgroups of one launch of owner (`<ticket dir>#<role>`; label: `<ticket>.<role>`,
        which names them), recorded under home before any process can be in them; the owner's
        earlier ones and every stale one removed where empty."""
        name = f"{label}.{uuid.uuid4().hex[:8]}"
        records = private_dir(home / RECORDS)
        plan: dict[str, Any] = {"cgroups": []}
        dirs = []
        for hierarchy in self.mechanism.hierarchies:
            settings = hierarchy.settings(self.processes, self.memory)
            if settings:
                dirs.append(hierarchy.base / name)
                plan["cgroups"].append({"dir": str(dirs[-1]), "set": settings})
        stand_in = self.mechanism.rlimits
        if self.processes is not None and self.mechanism.holder(PIDS) is None \
                and stand_in and not self.mechanism.root:
            plan["nproc"] = self.processes
        if self.memory is not None and self.mechanism.holder(MEMORY) is None and stand_in:
            plan["data"] = self.memory
        atomic_write_json(records / f"{name}.json",
                          {"owner": owner, "dirs": [str(d) for d in dirs],
                           "processes": self.processes, "memory": self.memory,
                           "made": time.time()})
        sweep(home, owner, keep=name, bases=[h.base for h in self.mechanism.hierarchies])
        return Bounded(name, owner, tuple(dirs), plan, self.processes, self.memory, records)


def bounds(limits: Limits) -> Bounds | None:
    """The bounds of config's sandbox.limits on this machine; None when it sets none."""
    if limits.processes is None and limits.memory is None:
        return None
    return Bounds(limits.processes, limits.memory, mechanism())


def said(limits: Limits, sandboxed: bool) -> str:
    """The limits in force and how they are held, in one line (an event, `handoff doctor`)."""
    if limits.processes is None and limits.memory is None and (
            limits.tmp is None or not sandboxed):
        return "none (sandbox.limits)"
    held = mechanism()
    parts = [f"{limits.processes} processes" if limits.processes is not None
             else "any number of processes",
             f"{show_size(limits.memory)} of memory" if limits.memory is not None
             else "any memory"]
    if sandboxed:
        parts.append(f"/tmp {show_size(limits.tmp)}" if limits.tmp is not None
                     else "/tmp as large as memory")
    return f"{held.said()}: {', '.join(parts)} per peer and per gate run"


# ---- the records: whose each cgroup is, and removing those nobody runs in ---------------------


def recorded(home: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(name, record) of every cgroup handoff made for home's tickets."""
    folder = home / RECORDS
    with contextlib.suppress(OSError):
        for path in sorted(folder.glob("*.json")):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                data = {}
            yield path.stem, data if isinstance(data, dict) else {}


def sweep(home: Path, owner: str = "", keep: str = "", stale: float = STALE,
          ticket: str = "", bases: Sequence[Path] = ()) -> list[str]:
    """Remove the cgroups nobody runs in: of home's records, owner's (its earlier launches),
    ticket's (a ticket folder: all its roles', when it stops), and every stale one; in bases
    (handoff's folders of this machine's hierarchies), any stale one whatever home recorded it
    (a test's home, or a person's, deleted with its records). keep is never touched. The names
    removed."""
    now, gone = time.time(), []
    for name, data in list(recorded(home)):
        if name == keep:
            continue
        made, whose = data.get("made"), str(data.get("owner", ""))
        due = (bool(owner) and whose == owner) or (bool(ticket) and whose.startswith(
            f"{ticket}#")) or not isinstance(made, int | float) or now - made > stale
        dirs = [Path(d) for d in data.get("dirs", []) if isinstance(d, str)]
        if due and remove(dirs, name, home / RECORDS):
            gone.append(name)
    for base in bases:
        with contextlib.suppress(OSError), os.scandir(base) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):  # busy (EBUSY), or gone meanwhile
                    if entry.name != keep and entry.is_dir(follow_symlinks=False) and \
                            now - entry.stat().st_mtime > stale and not members(Path(entry.path)):
                        os.rmdir(entry.path)
                        gone.append(entry.name)
    return gone


def last_of(home: Path, owner: str) -> Bounded | None:
    """The latest cgroups made for owner (its live or last peer), None when there are none."""
    found = [(data.get("made", 0), name, data) for name, data in recorded(home)
             if data.get("owner") == owner]
    if not found:
        return None
    _, name, data = max(found, key=lambda item: item[0] if isinstance(item[0], int | float)
                        else 0)
    return Bounded(name, owner, tuple(Path(d) for d in data.get("dirs", [])), {},
                   data.get("processes"), data.get("memory"), home / RECORDS)


def death(home: Path, owner: str) -> dict[str, str]:
    """What a dead peer's cgroups say of its end, for its `death` event: {"limit": …} when it
    reached one."""
    made = last_of(home, owner)
    hit = made.hit() if made is not None else ""
    return {"limit": hit} if hit else {}


@dataclass(frozen=True)
class Fenced:
    """What runs one command (a gate run, a scanner) in the sandbox and within its limits:
    called, it puts argv in the sandbox (wrap; None: none); `bounded` makes the cgroups of one
    run. Limits are part of the fence: it travels where the sandbox's wrap did."""

    wrap: Callable[[Sequence[str]], list[str]] | None
    bounds: Bounds | None
    home: Path
    owner: str
    label: str

    def __call__(self, argv: Sequence[str]) -> list[str]:
        return self.wrap(argv) if self.wrap is not None else list(argv)

    def bounded(self) -> Bounded | None:
        return self.bounds.make(self.home, self.owner, self.label) if self.bounds else None
