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
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket as socketlib
import stat
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from handoff import config as config_mod
from handoff.errors import Busy, HandoffError, WorkAtRisk
from handoff.machinery.peers import Peers
from handoff.machinery.processes import environ
from handoff.machinery.repo import Repo
from handoff.machinery.tmux import ServerGone, Tmux, TmuxFailure, failure_kind, socket_name
from handoff.machinery.worktrees import WORKTREES_DIR, TicketWorktrees
from handoff.operations.standing import recovered_state
from handoff.record.lock import TicketLock, holder
from handoff.record.store import validate_ticket_id
from handoff.record.ticket import FINISHED, State, TicketDir
from handoff.role import ROLES

KINDS = ("session", "worktree", "folder", "socket", "record", "lock")
#: the files that make a folder under HANDOFF_HOME/<repo-key>/ a ticket's record
RECORD_FILES = ("state.json", "state.json.bak", "events.jsonl")
#: where the work of a dirty worktree whose ticket record is gone is saved (under HANDOFF_HOME)
DISCARDED = "discarded"


@dataclass
class Leftover:
    """One thing gc found: what it is, where, why it is a leftover (or why it stays)."""

    kind: str  # one of KINDS
    path: str  # a file or folder; for a session, "<socket>:<session>"
    why: str
    #: gc removes it (or would, in a dry run); False: it is only named, `why` says why
    removable: bool
    removed: bool = False
    #: where a dirty worktree's changes were saved before it was removed ('' when none)
    saved: str = ""

    def fields(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Options:
    dry_run: bool = False
    #: remove dirty worktrees too, their changes first saved as a patch
    force: bool = False
    #: delete the records of tickets whose repository is gone
    prune_records: bool = False
    #: a repository to look in besides those the records name (its vanished tickets' worktrees)
    repo: Path | None = None


@dataclass(frozen=True)
class Record:
    tdir: TicketDir
    state: State
    #: its repository; None when that is gone
    repo: Repo | None

    @property
    def ticket(self) -> str:
        return self.tdir.ticket

    @property
    def closed(self) -> bool:
        return self.state.phase == "closed"


def collect(home: Path, options: Options = Options()) -> list[Leftover]:
    """Everything gc finds under home (and on handoff's tmux sockets); removed unless
    options.dry_run. Sessions go first: their panes may work in a worktree, and a server left
    without sessions takes its socket with it."""
    records = read_records(home)
    sessions, busy = _sessions(home, records, options)
    found = sessions
    found += _worktrees(home, records, options, busy)
    found += _sockets(records, options)
    found += _records(records, options)
    found += _locks(records)
    return found


# ---- ticket records ---------------------------------------------------------------------------

def read_records(home: Path) -> list[Record]:
    """Every ticket directory under home with what its files tell of its state (state.json,
    else its backup, else the event log: a damaged record still has a phase and a session)."""
    found = []
    for folder in sorted(home.glob("*/*")) if home.is_dir() else []:
        if folder.is_symlink() or not folder.is_dir() or not _valid_id(folder.name):
            continue
        if not any((folder / name).is_file() for name in RECORD_FILES):
            continue
        tdir = TicketDir(folder)
        state = recovered_state(tdir).state
        found.append(Record(tdir, state, repo_at(state.repo)))
    return found


def _valid_id(name: str) -> bool:
    try:
        validate_ticket_id(name)
    except HandoffError:
        return False
    return True


def repo_at(top: str) -> Repo | None:
    """The repository whose top folder is top; None when it is gone (or the folder is no
    repository's top any more: git would find a repository around it instead)."""
    if not top:
        return None
    path = Path(top)
    try:
        repo = Repo.at(path)
    except (HandoffError, OSError):
        return None
    return repo if repo.top == path.resolve() else None


# ---- tmux sessions ----------------------------------------------------------------------------

def handoff_sockets(records: list[Record]) -> list[str]:
    """The sockets handoff's servers may listen on: the one in use and those records name."""
    return sorted({socket_name(), *(r.state.socket for r in records if r.state.socket)})


@dataclass(frozen=True)
class PaneInfo:
    pid: int
    dead: bool
    cwd: str
    tag: str


@dataclass
class InUse:
    """Folders tmux panes that stay work in (their current directories)."""

    paths: list[tuple[Path, str]] = field(default_factory=list)

    def user_of(self, folder: Path) -> str:
        folder = folder.resolve()
        for path, who in self.paths:
            if path == folder or path.is_relative_to(folder):
                return who
        return ""


def _sessions(home: Path, records: list[Record],
              options: Options) -> tuple[list[Leftover], InUse]:
    found: list[Leftover] = []
    busy = InUse()
    by_session = {(r.state.socket, r.state.session): r for r in records}
    by_dir = {r.tdir.path.resolve(): r for r in records}
    if shutil.which("tmux") is None:
        return found, busy
    for name in handoff_sockets(records):
        tmux = Tmux(name, home)
        try:
            listing = tmux.call("list-sessions", "-F", "#{session_name}")
            said = listing.said if listing.returncode != 0 else ""
        except TmuxFailure as exc:
            said = exc.message
        if said:
            if failure_kind(said) != "no-server":
                found.append(Leftover("socket", name, f"tmux on socket {name} failed "
                                      f"({said}): its sessions were not looked at",
                                      removable=False))
            continue
        for session in listing.stdout:
            panes = _panes(tmux, session)
            record = by_session.get((name, session))
            ticket_dir = record.tdir.path if record else _ticket_dir_of(home, panes)
            if record is None and ticket_dir is not None:
                record = by_dir.get(ticket_dir.resolve())
            where = f"{name}:{session}"
            why, unsure = _why_session(home, record, ticket_dir, panes)
            if unsure:
                found.append(Leftover("session", where, unsure, removable=False))
            if not why:  # kept: what its panes work in stays too
                busy.paths += [(Path(p.cwd).resolve(), f"tmux session {where}")
                               for p in panes if not p.dead and p.cwd]
                continue
            item = Leftover("session", where, why, removable=True)
            if not options.dry_run and ticket_dir is not None:
                # Peers.stop: the session, then whatever its peers left running past it
                with _failing(item):
                    item.removed = Peers(tmux, session, ticket_dir).stop()
            found.append(item)
    return found, busy


def _why_session(home: Path, record: Record | None, ticket_dir: Path | None,
                 panes: list[PaneInfo]) -> tuple[str, str]:
    """(why the session is a leftover, or ''; why it is named but left alone, or '')."""
    if record is not None:
        return (f"ticket {record.ticket} is closed" if record.closed else ""), ""
    if ticket_dir is not None and not ticket_dir.exists():
        return f"the directory of its ticket {ticket_dir.name} is gone ({ticket_dir})", ""
    if ticket_dir is not None:
        return "", f"its ticket directory {ticket_dir} holds no state: left alone"
    if _others(home, panes):
        return "", ""  # another HANDOFF_HOME's: none of ours
    return "", f"nothing ties it to a ticket of {home}: left alone"


def _panes(tmux: Tmux, session: str) -> list[PaneInfo]:
    args = ("list-panes", "-s", "-t", f"={session}:", "-F",
            "#{pane_pid}\t#{pane_dead}\t#{pane_current_path}\t#{@handoff}")
    try:
        result = tmux.call(*args)
    except TmuxFailure:
        return []
    panes = []
    for line in result.stdout if result.returncode == 0 else []:
        parts = line.split("\t")
        if len(parts) == 4:
            pid, dead, cwd, tag = parts
            panes.append(PaneInfo(int(pid) if pid.isdigit() else 0, dead == "1", cwd, tag))
    return panes


def _ticket_dir_of(home: Path, panes: list[PaneInfo]) -> Path | None:
    """The ticket directory under home a session's panes were started for: a peer's tag (its
    brief, inbox/<role>/brief-N.md in the ticket directory) or its HANDOFF_TICKET_DIR."""
    home = home.resolve()
    for pane in panes:
        env = {} if pane.dead else environ(pane.pid)
        for value in (pane.tag, env.get("HANDOFF_TICKET_DIR", "")):
            if not value or not os.path.isabs(value):
                continue
            path = Path(value)
            if path.is_relative_to(home) and len(path.relative_to(home).parts) >= 2:
                return home.joinpath(*path.relative_to(home).parts[:2])
    return None


def _others(home: Path, panes: list[PaneInfo]) -> bool:
    """The session's panes say it belongs to another HANDOFF_HOME."""
    for pane in panes:
        env = {} if pane.dead else environ(pane.pid)
        if env.get("HANDOFF_HOME") and Path(env["HANDOFF_HOME"]).resolve() != home.resolve():
            return True
        if pane.tag and os.path.isabs(pane.tag) and not Path(pane.tag).is_relative_to(home):
            return True
    return False


# ---- worktrees --------------------------------------------------------------------------------

def _repos(records: list[Record], extra: Path | None) -> list[Repo]:
    repos: dict[Path, Repo] = {}
    for record in records:
        if record.repo is not None:
            repos.setdefault(record.repo.top, record.repo)
    if extra is not None:
        repo = Repo.at(extra)
        repos.setdefault(repo.top, repo)
    return [repos[top] for top in sorted(repos)]


def _worktrees(home: Path, records: list[Record], options: Options,
               busy: InUse) -> list[Leftover]:
    found: list[Leftover] = []
    by_dir = {r.tdir.path.resolve(): r for r in records}
    for repo in _repos(records, options.repo):
        folder = repo.top / WORKTREES_DIR
        if folder.is_symlink() or not folder.is_dir():
            continue
        try:
            cfg = config_mod.load(home, repo.top)
            shares, post_create = cfg.share, cfg.post_create
        except HandoffError:  # a broken config: no shares known, so they count as work (kept)
            shares, post_create = (), ()
        for entry in sorted(folder.iterdir()):
            if entry.is_symlink() or not entry.is_dir() or not _valid_id(entry.name):
                found.append(_not_ours(entry, repo))
                continue
            record = by_dir.get((home / repo.key / entry.name).resolve())
            if record is not None and not record.closed:
                continue  # a live ticket's: never touched
            why = f"ticket {entry.name} is closed" if record else \
                f"ticket {entry.name} has no record in {home}"
            wt = TicketWorktrees(repo, entry.name, tuple(shares), tuple(post_create))
            found += _ticket_worktrees(home, wt, record, why, options, busy)
    return found


def _not_ours(path: Path, repo: Repo) -> Leftover:
    return Leftover("folder", str(path), f"not a worktree of {repo.top} that handoff made: "
                    "left alone", removable=False)


def _ticket_worktrees(home: Path, wt: TicketWorktrees, record: Record | None, why: str,
                      options: Options, busy: InUse) -> list[Leftover]:
    found = []
    live = 0
    for path in sorted(wt.root.iterdir()):
        role = path.name
        if role not in ROLES or path.is_symlink() or not wt.is_live(path):
            found.append(_not_ours(path, wt.repo))
            continue
        live += 1
        item = _one_worktree(home, wt, role, record, why, options, busy)
        live -= item.removed
        found.append(item)
    if not live and not options.dry_run:
        with contextlib.suppress(HandoffError):  # tidying only: every removal is done
            wt.remove_all()  # drops the empty folders and git's stale worktree records
    return found


def _one_worktree(home: Path, wt: TicketWorktrees, role: str, record: Record | None, why: str,
                  options: Options, busy: InUse) -> Leftover:
    path = wt.path(role)
    user = busy.user_of(path)
    if user:
        return Leftover("worktree", str(path), f"{why}, but a pane of {user} works in it: kept",
                        removable=False)
    dirty = wt.dirty(path)
    if dirty and not options.force:
        listing = ", ".join(e[3:] for e in dirty[:3]) + (" …" if len(dirty) > 3 else "")
        return Leftover("worktree", str(path), f"{why}; it holds uncommitted work ({listing}): "
                        "kept (--force saves it as a patch, then removes it)", removable=False)
    item = Leftover("worktree", str(path), why + ("; its uncommitted work is saved as a patch "
                                                  "first" if dirty else ""), removable=True)
    if options.dry_run:
        return item
    if dirty:
        patch = _patch_path(home, wt, role, record)
        if wt.save_scratch(path, patch):  # exactly what `handoff close --force` keeps
            item.saved = str(patch)
    try:
        item.removed = wt.remove(role, force=bool(dirty))
    except WorkAtRisk as exc:  # work appeared meanwhile (checked again under the repo lock)
        item.removable, item.why = False, f"{why}; {exc.message}: kept"
    except HandoffError as exc:
        item.removable, item.why = False, f"{why}; removing it failed: {exc.message}"
    return item


def _patch_path(home: Path, wt: TicketWorktrees, role: str, record: Record | None) -> Path:
    """A new file for a dirty worktree's changes: in its ticket's transcripts/ like close's,
    or, the record being gone, under HANDOFF_HOME/discarded/<repo-key>/ (never making a
    folder where the record was: a new ticket of that id would take it for an old record)."""
    if record is not None:
        folder, stem = record.tdir.path / "transcripts", f"{role}-discarded-at-gc"
    else:
        folder, stem = home / DISCARDED / wt.repo.key, f"{wt.ticket}-{role}-discarded-at-gc"
    candidate, n = folder / f"{stem}.patch", 2
    while candidate.exists():
        candidate, n = folder / f"{stem}.{n}.patch", n + 1
    return candidate


@contextlib.contextmanager
def _failing(item: Leftover) -> Iterator[None]:
    """A removal that fails is said on its item, and gc goes on with the others."""
    try:
        yield
    except HandoffError as exc:
        item.removable, item.why = False, f"{item.why}; removing it failed: {exc.message}"


# ---- stale sockets ----------------------------------------------------------------------------

def tmux_dir() -> Path:
    """Where tmux keeps its sockets for this user (as tmux.stop_if_empty finds it)."""
    return Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}"


def _answers(path: Path) -> bool:
    """Something listens on the socket file (or cannot be ruled out)."""
    with socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM) as probe:
        probe.settimeout(2.0)
        try:
            probe.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError):
            return False
        except OSError:
            return True
    return True


@contextlib.contextmanager
def _tmux_start_lock(path: Path) -> Iterator[bool]:
    """tmux's own lock for starting a server on the socket (a client holds <socket>.lock while
    it starts one): held, no server can appear on the socket while gc looks at it and removes
    it. Yields False when a client holds it now. A lock file made here is removed while held,
    as tmux's server does with its own."""
    lock = path.with_name(f"{path.name}.lock")
    made = not lock.exists()
    fd = os.open(lock, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            if made:
                lock.unlink(missing_ok=True)
    finally:
        os.close(fd)


def _sockets(records: list[Record], options: Options) -> list[Leftover]:
    found = []
    for name in handoff_sockets(records):
        path = tmux_dir() / name
        try:
            if not stat.S_ISSOCK(path.lstat().st_mode):
                continue
        except OSError:
            continue
        if _answers(path):
            continue
        item = Leftover("socket", str(path), "no tmux server answers on it", removable=True)
        if not options.dry_run:
            with _tmux_start_lock(path) as locked:
                if locked and not _answers(path):
                    path.unlink(missing_ok=True)
                    item.removed = True
                else:
                    item.removable, item.why = False, "a tmux server is starting on it: kept"
        found.append(item)
    return found


# ---- records whose repository is gone ---------------------------------------------------------

def _records(records: list[Record], options: Options) -> list[Leftover]:
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

def _locks(records: list[Record]) -> list[Leftover]:
    """Named, never removed (see the module's docstring)."""
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
