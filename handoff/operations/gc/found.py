"""What gc finds (`Leftover`), how it is asked (`Options`), and the ticket records it reads
(`Record`): state.json, else its backup, else the event log."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NotRequired, TypedDict

from handoff.errors import HandoffError
from handoff.machinery.repo import Repo
from handoff.operations.standing import recovered_state
from handoff.phases import Phase
from handoff.record.store import validate_ticket_id
from handoff.record.ticket import State, TicketDir

#: what a leftover is
Kind = Literal["session", "worktree", "folder", "socket", "record", "lock", "mirror", "cgroup"]
#: the files that make a folder under HANDOFF_HOME/<repo-key>/ a ticket's record
RECORD_FILES = ("state.json", "state.json.bak", "events.jsonl")
#: where the work of a dirty worktree whose ticket record is gone is saved (under HANDOFF_HOME)
DISCARDED = "discarded"


class GcItem(TypedDict):
    """One item of `handoff gc --json`: a Leftover's fields; on a host, that host's item with
    its name (and a host that did not answer, or a placement here whose ticket is gone from
    its host, one item of their own: kind `host`, `placement`)."""

    kind: str
    path: str
    why: str
    removable: bool
    removed: bool
    saved: str
    host: NotRequired[str]


@dataclass
class Leftover:
    """One thing gc found: what it is, where, why it is a leftover (or why it stays)."""

    kind: Kind
    path: str  # a file or folder; for a session, "<socket>:<session>"
    why: str
    #: gc removes it (or would, in a dry run); False: it is only named, `why` says why
    removable: bool
    removed: bool = False
    #: where a dirty worktree's changes were saved before it was removed ('' when none)
    saved: str = ""

    def fields(self) -> GcItem:
        return {"kind": self.kind, "path": self.path, "why": self.why,
                "removable": self.removable, "removed": self.removed, "saved": self.saved}


@dataclass(frozen=True)
class Options:
    dry_run: bool = False
    #: remove dirty worktrees too, their changes first saved as a patch
    force: bool = False
    #: delete the records of tickets whose repository is gone
    prune_records: bool = False
    #: a repository to look in besides those the records name (its vanished tickets' worktrees)
    repo: Path | None = None
    #: forget the records of tickets closed longer ago than this many days (None: keep them)
    older_than: float | None = None


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
        return self.state.phase == Phase.CLOSED


def read_records(home: Path) -> list[Record]:
    """Every ticket directory under home with what its files tell of its state (state.json,
    else its backup, else the event log: a damaged record still has a phase and a session)."""
    found = []
    for folder in sorted(home.glob("*/*")) if home.is_dir() else []:
        if folder.is_symlink() or not folder.is_dir() or not valid_id(folder.name):
            continue
        if not any((folder / name).is_file() for name in RECORD_FILES):
            continue
        tdir = TicketDir(folder)
        state = recovered_state(tdir).state
        found.append(Record(tdir, state, repo_at(state.repo)))
    return found


def valid_id(name: str) -> bool:
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


@contextlib.contextmanager
def failing(item: Leftover) -> Iterator[None]:
    """A removal that fails is said on its item, and gc goes on with the others."""
    try:
        yield
    except HandoffError as exc:
        item.removable, item.why = False, f"{item.why}; removing it failed: {exc.message}"
