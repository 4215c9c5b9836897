"""How this machine holds the limits of a peer or a gate run (`mechanism`): decided once per
process, here alone, per controller, the strongest first:

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

handoff's cgroups go into a folder of their own (`FOLDER`) under each hierarchy's base.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PIDS, MEMORY = "pids", "memory"
#: the folder of handoff's cgroups under each base
FOLDER = "handoff"


@dataclass(frozen=True)
class Hierarchy:
    """Where handoff makes its cgroups for some controllers: a cgroup v1 hierarchy of one or
    more controllers, or the v2 one."""

    version: int
    controllers: tuple[str, ...]
    #: the folder handoff's cgroups go into (`…/handoff`)
    base: Path

    def settings(self, processes: int | None, memory: int | None) -> list[list[str | bool]]:
        """[file, value, required] of one cgroup in it, in the order they must be written
        (v1's memory+swap limit can never be below its memory limit)."""
        found: list[list[str | bool]] = []
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


def mounts_of(mounts: str, fstype: str) -> Iterator[tuple[str, str, set[str]]]:
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
    mount = next(iter(mounts_of(mounts, "cgroup2")), None)
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
    mount = next((m for m in mounts_of(mounts, "cgroup") if controller in m[2]), None)
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
