"""gc's mirrors: the repositories this machine keeps as a host for machines that place tickets
here (handoff.operations.remote), once no ticket uses one.

A mirror holds only what was pushed to it (a ticket's base, `handoff-base/<ticket>`) and what
its tickets made (`handoff/<ticket>`), and `close` fetches the latter back before it deletes
both. A mirror with neither ref left and no ticket record naming it as its repository holds
nothing of anyone's: it is removed. One with a ref left is named and kept (a close that did
not finish: `handoff close TICKET` on the machine that placed it fetches the branch first).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from handoff.errors import HandoffError
from handoff.machinery.repo import git
from handoff.operations.gc.found import Leftover, Options, Record

MIRRORS = "mirrors"
#: the refs a mirror's tickets live by (handoff.operations.remote.BASE_PREFIX and branch_name)
TICKET_REFS = ("refs/heads/handoff-base/", "refs/heads/handoff/")


def mirror_leftovers(home: Path, records: list[Record], options: Options) -> list[Leftover]:
    folder = home / MIRRORS
    if not folder.is_dir():
        return []
    used = {Path(r.state.repo).resolve() for r in records if r.state.repo and not r.closed}
    found = []
    for mirror in sorted(folder.iterdir()):
        if mirror.is_symlink() or not (mirror / ".git").is_dir():
            continue
        if mirror.resolve() in used:
            continue  # a live ticket's repository
        try:
            refs = git(mirror, "for-each-ref", "--format=%(refname)", *TICKET_REFS)
        except HandoffError as exc:
            found.append(Leftover("mirror", str(mirror), f"git cannot read it: {exc.message}",
                                  removable=False))
            continue
        if refs.strip():
            names = ", ".join(ref.removeprefix("refs/heads/") for ref in refs.split()[:3])
            found.append(Leftover("mirror", str(mirror), f"no live ticket uses it, but it holds "
                                  f"{names}: close those tickets from the machine that placed "
                                  "them (their branches are fetched there first)",
                                  removable=False))
            continue
        item = Leftover("mirror", str(mirror), "a mirror no ticket uses, holding no ticket's "
                        "refs", removable=True)
        if not options.dry_run:
            shutil.rmtree(mirror)
            item.removed = True
        found.append(item)
    return found
