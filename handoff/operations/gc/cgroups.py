"""gc's cgroups: the ones handoff made for the peers and gate runs of closed or vanished
tickets (handoff.machinery.limits), each named by its record in `$HANDOFF_HOME/cgroups/`.

A cgroup is removed only once nothing runs in it (the kernel refuses otherwise), so gc never
ends a process here: one that still holds processes is named and kept (`handoff close` ends a
ticket's peers; what is left then is not handoff's to kill). A live ticket's cgroups are its
own launches' to remove."""

from __future__ import annotations

from pathlib import Path

from handoff.machinery import bounded, limits
from handoff.operations.gc.found import Leftover, Options, Record


def cgroup_leftovers(home: Path, records: list[Record], options: Options) -> list[Leftover]:
    live = {str(r.tdir.path) for r in records if not r.closed}
    found = []
    for name, data in list(limits.recorded(home)):
        owner = str(data.get("owner", ""))
        if owner.rsplit("#", 1)[0] in live:
            continue
        dirs = limits.dirs_of(data)
        busy = [d for d in dirs if bounded.members(d)]
        where = ", ".join(map(str, dirs)) or f"{home / limits.RECORDS / name}.json"
        if busy:
            found.append(Leftover("cgroup", where, f"{_whose(owner)}; processes still run in "
                                  f"it ({len(bounded.members(busy[0]))} in {busy[0]}): kept",
                                  removable=False))
            continue
        item = Leftover("cgroup", where, f"{_whose(owner)}, empty", removable=True)
        if not options.dry_run:
            item.removed = bounded.remove(dirs, name, home / limits.RECORDS)
            if not item.removed:
                item.removable, item.why = False, f"{item.why}; the kernel kept it: named"
        found.append(item)
    return found


def _whose(owner: str) -> str:
    ticket_dir, _, role = owner.rpartition("#")
    if not ticket_dir:
        return "a cgroup of handoff's whose record names no owner"
    return f"the {role} of {Path(ticket_dir).name}, whose ticket is closed or gone"

