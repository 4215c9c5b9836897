"""gc's records and locks: records whose repository is gone (named; deleted only with
--prune-records), and the locks of orchestrators that died mid-run (named, never removed)."""

from __future__ import annotations

import contextlib
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path

from handoff.errors import Busy
from handoff.machinery.tmux import ServerGone, Tmux, TmuxFailure
from handoff.operations.gc.found import Leftover, Options, Record
from handoff.phases import FINISHED
from handoff.processes import alive
from handoff.record.lock import TicketLock, holder
from handoff.record.ticket import TicketDir


def record_leftovers(records: list[Record], options: Options) -> list[Leftover]:
    found = []
    for record in records:
        if record.repo is not None:
            found += _closed_long_ago(record, options)
            continue
        gone = record.state.repo or "(none named)"
        why = f"ticket {record.ticket}'s repository {gone} is gone"
        if not options.prune_records:
            found.append(Leftover("record", str(record.tdir.path), f"{why}: kept (the record is "
                                  "its only history; --prune-records deletes it)", False))
            continue
        running = _still_running(record)
        if running:
            found.append(Leftover("record", str(record.tdir.path),
                                  f"{why}, but {running}: kept", False))
            continue
        item = Leftover("record", str(record.tdir.path), f"{why} (--prune-records)", True)
        if not options.dry_run:
            item.removed = delete_record(record.tdir)
            if not item.removed:
                item.removable, item.why = False, f"{why}, but its orchestrator started: kept"
        found.append(item)
    return found


def _closed_long_ago(record: Record, options: Options) -> list[Leftover]:
    """A record closed longer ago than --older-than days, forgotten as `handoff forget` does
    (its branch stays); nothing without --older-than."""
    if options.older_than is None or not record.closed:
        return []
    try:
        age = datetime.now(UTC) - datetime.fromisoformat(record.state.updated)
    except ValueError:
        return []  # a time that does not read: no age to judge it by, so it stays
    days = age.total_seconds() / 86400
    if days < options.older_than:
        return []
    item = Leftover("record", str(record.tdir.path), f"ticket {record.ticket} was closed "
                    f"{days:.0f} day(s) ago (--older-than {options.older_than:g})", True)
    if not options.dry_run:
        item.removed = delete_record(record.tdir)
        if not item.removed:
            item.removable, item.why = False, f"{item.why}, but an orchestrator holds it: kept"
    return [item]


def _still_running(record: Record) -> str:
    pid = holder(record.tdir.lock_file)
    if pid is not None:
        return f"its orchestrator (pid {pid}) still runs ('handoff stop {record.ticket}')"
    try:
        if Tmux(record.state.socket, record.tdir.path.parent.parent).has_session(
                record.state.session):
            return (f"its tmux session {record.state.session} still runs "
                    f"('handoff stop {record.ticket}')")
    except (ServerGone, TmuxFailure):
        return "tmux cannot tell whether its session still runs"
    return ""


def delete_record(tdir: TicketDir) -> bool:
    """Delete a ticket directory holding its lock, so no orchestrator starts on it meanwhile;
    its repo-key folder goes too when it is left empty. False when the lock is held. (rmtree
    works through file descriptors and removes a link a peer planted as a link.)"""
    lock = TicketLock(tdir.lock_file)
    try:
        lock.acquire()
    except Busy:
        return False
    try:
        shutil.rmtree(tdir.path)
    finally:
        lock.release()
    parent = tdir.path.parent
    with contextlib.suppress(OSError):
        parent.rmdir()  # only when empty
    return True


# ---- records a cut-off start left ---------------------------------------------------------

#: a record being made (handoff.operations.create.STAGING): its ticket and the start's pid
STAGED = re.compile(r"\.(?P<ticket>.+)\.new-(?P<pid>\d+)")


def staging_leftovers(home: Path, options: Options) -> list[Leftover]:
    """The half-made records of starts that were killed before their ticket took its name
    (no ticket ever was: nothing of a person's is in them), once their start is gone."""
    found = []
    for folder in sorted(home.glob("*/.*.new-*")):
        match = STAGED.fullmatch(folder.name)
        if match is None or not folder.is_dir() or folder.is_symlink():
            continue
        if alive(int(match["pid"])):
            continue  # a start at work: its record takes its name in a moment
        item = Leftover("record", str(folder), f"the start of {match['ticket']} (pid "
                        f"{match['pid']}) was cut off before its ticket was made", True)
        if not options.dry_run:
            shutil.rmtree(folder, ignore_errors=True)
            item.removed = not folder.exists()
        found.append(item)
    return found


# ---- abandoned locks --------------------------------------------------------------------------

def lock_leftovers(records: list[Record]) -> list[Leftover]:
    """Named, never removed (why: handoff.operations.gc's docstring)."""
    found = []
    for record in records:
        lock = record.tdir.lock_file
        if record.state.phase in FINISHED or not lock.is_file() or holder(lock) is not None:
            continue
        try:
            text = lock.read_text(encoding="ascii", errors="replace").strip()
        except OSError:
            continue
        if not text.isdigit():
            continue
        found.append(Leftover(
            "lock", str(lock),
            f"ticket {record.ticket}'s orchestrator (pid {text}) died mid-run "
            f"({record.state.phase}); the kernel released its lock, which blocks nothing: kept "
            f"(deleting a lock file could let two orchestrators run the ticket); 'handoff "
            f"resume {record.ticket}' carries it on", False))
    return found
