"""Bounds on every peer and every gate run: at most so many processes, so much memory.

A fork bomb or a memory hog in a peer's tool call or in a gate's tests must not take the
machine. Each peer launch and each gate run gets cgroups of its own, made and joined by the
launcher before it execs the program (handoff.machinery.launcher `bound`: standard library only,
the same step for a tmux pane and for the gate's subprocess: handoff.machinery.bounded), so
every process the program starts is inside, orphans included, whatever session or process group
they make. The sandbox's PID namespace ends them with the program; the cgroup ends what an
unsandboxed gate left. How this machine holds the limits (cgroup v2, v1, or rlimits only) is
handoff.machinery.limit_mechanism's.

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
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from handoff.config import Limits, show_size
from handoff.machinery.bounded import Bounded, kill_members, members, remove
from handoff.machinery.limit_mechanism import MEMORY, PIDS, Mechanism, mechanism
from handoff.record.store import atomic_write_json, private_dir

if TYPE_CHECKING:
    from handoff.machinery.launcher import BoundPlan, CgroupPlan

#: the folder of the cgroups' records under HANDOFF_HOME
RECORDS = "cgroups"
#: a recorded cgroup this old and empty is no launch's still to come (peers.LAUNCH_FILE_AGE:
#: a launch file is dropped then, unused)
STALE = 600.0


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
        cgroups: list[CgroupPlan] = []
        plan: BoundPlan = {"cgroups": cgroups}
        dirs = []
        for hierarchy in self.mechanism.hierarchies:
            settings = hierarchy.settings(self.processes, self.memory)
            if settings:
                dirs.append(hierarchy.base / name)
                cgroups.append({"dir": str(dirs[-1]), "set": settings})
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


def recorded(home: Path) -> Iterator[tuple[str, dict[str, object]]]:
    """(name, record) of every cgroup handoff made for home's tickets: {owner, dirs,
    processes, memory, made} as `Bounds.make` wrote it, or whatever the file holds now."""
    folder = home / RECORDS
    with contextlib.suppress(OSError):
        for path in sorted(folder.glob("*.json")):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                data = {}
            yield path.stem, data if isinstance(data, dict) else {}


def end_ticket(home: Path, ticket: str, wait: float = 5.0) -> None:
    """Every process still in the ticket's cgroups ended, and waited for within wait: what a
    reap by marker cannot catch up with (a fork bomb's last forks, each a moment old). A
    cgroup holds only what handoff started in it, and the kernel refuses to remove one that
    is not empty, so `sweep` removes them after this."""
    for _, data in list(recorded(home)):
        if str(data.get("owner", "")).startswith(f"{ticket}#"):
            for folder in dirs_of(data):
                kill_members(folder, wait)


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
        dirs = dirs_of(data)
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
    processes, memory = data.get("processes"), data.get("memory")
    return Bounded(name, owner, tuple(dirs_of(data)), {},
                   processes if isinstance(processes, int) else None,
                   memory if isinstance(memory, int) else None, home / RECORDS)


def dirs_of(record: Mapping[str, object]) -> list[Path]:
    """The cgroups a record names (`recorded`)."""
    dirs = record.get("dirs")
    return [Path(d) for d in dirs if isinstance(d, str)] if isinstance(dirs, list) else []


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
