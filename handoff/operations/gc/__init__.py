"""`handoff gc`: find what handoff itself made that no live ticket owns any more, and remove it.

A ticket is live while its record (the ticket directory) exists and its phase is not `closed`:
nothing of a live ticket is ever touched. What gc looks at:

* tmux sessions on handoff's sockets (the one in use and every socket a record names) whose
  ticket is closed, or whose ticket directory is gone. A session no record names counts as a
  vanished ticket's only when its panes say it is this HANDOFF_HOME's (a peer's `@handoff` tag
  is a brief in the ticket directory; a live pane's process carries HANDOFF_HOME): a session of
  another HANDOFF_HOME is none of ours, and one that tells nothing is named and left alone.
* worktrees under `<repo>/.worktrees/<TICKET>/<role>` of closed or vanished tickets, in every
  repository a record names and the one given (`--repo`, else the one here). Only a live git
  worktree of that repository is removed, through git (`TicketWorktrees.remove`); anything
  else there is named and left. One holding uncommitted work is kept, or with `force` its
  changes are first saved as a patch exactly as `handoff close --force` saves them
  (`TicketWorktrees.save_scratch`). One a tmux pane still works in is kept.
* stale socket files of handoff's tmux servers: nothing listens on them any more.
* ticket records whose repository is gone: only named, since deleting a record loses its
  history; `prune_records` deletes them (never one whose orchestrator or session still runs).
* abandoned locks: never removed, only named. The ticket lock (handoff/record/lock.py) is an OFD lock
  the kernel drops when its holder dies, so a dead holder's lock file blocks nothing; deleting
  the file, though, lets an orchestrator that opened it just before lock a file no one else can
  see while a second one creates a new file and locks that: two orchestrators on one ticket.
  gc names the locks whose orchestrator died mid-run (the ticket not finished) and says how to
  carry the ticket on; a finished ticket's lock file naming a dead pid is its normal state.
* on a host, the mirrors no ticket uses and that hold no ticket's refs (gc/mirrors.py).
* the cgroups of closed or vanished tickets' peers and gates, once empty (gc/cgroups.py).

Run on a machine with hosts, `handoff gc` also runs there (handoff.operations.hosts.gc_on), and
forgets the placements whose host no longer has their ticket.
"""

from __future__ import annotations

from pathlib import Path

from handoff.operations.gc.cgroups import cgroup_leftovers
from handoff.operations.gc.found import Leftover, Options, read_records
from handoff.operations.gc.mirrors import mirror_leftovers
from handoff.operations.gc.records import lock_leftovers, record_leftovers, staging_leftovers
from handoff.operations.gc.sessions import session_leftovers
from handoff.operations.gc.sockets import socket_leftovers
from handoff.operations.gc.worktrees import worktree_leftovers

__all__ = ["Leftover", "Options", "collect"]


def collect(home: Path, options: Options | None = None) -> list[Leftover]:
    """Everything gc finds under home (and on handoff's tmux sockets); removed unless
    options.dry_run. Sessions go first: their panes may work in a worktree, and a server left
    without sessions takes its socket with it."""
    options = options or Options()
    known = read_records(home)
    found, busy = session_leftovers(home, known, options)
    found += worktree_leftovers(home, known, options, busy)
    found += socket_leftovers(known, options)
    found += record_leftovers(known, options)
    found += staging_leftovers(home, options)
    found += lock_leftovers(known)
    found += mirror_leftovers(home, known, options)
    found += cgroup_leftovers(home, known, options)
    return found
