"""gc's records and locks: records whose repository is gone (named; deleted only with
--prune-records), and the locks of orchestrators that died mid-run (named, never removed)."""

from __future__ import annotations

import contextlib
import shutil

from handoff.errors import Busy
from handoff.machinery.tmux import ServerGone, Tmux, TmuxFailure
from handoff.operations.gc.found import Leftover, Options, Record
from handoff.phases import FINISHED
from handoff.record.lock import TicketLock, holder


def record_leftovers(records: list[Record], options: Options) -> list[Leftover]:
    found = []
    for record in records:
        if record.repo is not None:
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
            item.removed = _delete_record(record)
            if not item.removed:
                item.removable, item.why = False, f"{why}, but its orchestrator started: kept"
        found.append(item)
    return found


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


def _delete_record(record: Record) -> bool:
    """Delete a ticket directory holding its lock, so no orchestrator starts on it meanwhile;
    its repo-key folder goes too when it is left empty. False when the lock is held."""
    lock = TicketLock(record.tdir.lock_file)
    try:
        lock.acquire()
    except Busy:
        return False
    try:
        shutil.rmtree(record.tdir.path)
    finally:
        lock.release()
    parent = record.tdir.path.parent
    with contextlib.suppress(OSError):
        parent.rmdir()  # only when empty
    return True


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
