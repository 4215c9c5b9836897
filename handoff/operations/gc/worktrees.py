"""gc's worktrees: `<repo>/.worktrees/<TICKET>/<role>` of closed or vanished tickets, removed
through git; a dirty one kept, or with --force saved as a patch first (as `close --force`
does); one a tmux pane still works in kept."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from handoff import config as config_mod
from handoff import processes
from handoff.errors import HandoffError, WorkAtRisk
from handoff.machinery import reaper
from handoff.machinery.repo import Repo
from handoff.machinery.repo_worktrees import WORKTREES_DIR
from handoff.machinery.worktrees import TicketWorktrees
from handoff.operations.gc.found import DISCARDED, Leftover, Options, Record, valid_id
from handoff.operations.gc.sessions import InUse
from handoff.phases import Phase
from handoff.record.ticket import free
from handoff.role import NAME


def _repos(records: list[Record], extra: Path | None) -> list[Repo]:
    repos: dict[Path, Repo] = {}
    for record in records:
        if record.repo is not None:
            repos.setdefault(record.repo.top, record.repo)
    if extra is not None:
        repo = Repo.at(extra)
        repos.setdefault(repo.top, repo)
    return [repos[top] for top in sorted(repos)]


def worktree_leftovers(home: Path, records: list[Record], options: Options,
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
            if entry.is_symlink() or not entry.is_dir() or not valid_id(entry.name):
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
        # any role's name, or the gate's: what handoff names the worktrees it makes
        if not NAME.fullmatch(role) or path.is_symlink() or not wt.is_live(path):
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
    owner = _other_owner(home, wt, path)
    if owner:
        return Leftover("worktree", str(path), f"{why}, but {owner}: kept", removable=False)
    # the ticket's own peers are not counted: gc ends them with its session
    worker = processes.working_in(path, (reaper.MARKER, f"{home / wt.repo.key / wt.ticket}#"))
    if worker:
        return Leftover("worktree", str(path), f"{why}, but {worker} works in it: kept",
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


def _other_owner(home: Path, wt: TicketWorktrees, path: Path) -> str:
    """The live ticket of another HANDOFF_HOME that made this worktree, said as such; '' when
    this home made it, an older handoff did (no owner recorded), or the other home's record of
    it is gone or closed."""
    owner = wt.owner(path)
    other = Path(owner.get("home") or home)
    if other == home.resolve() or other == home:
        return ""
    record = other / wt.repo.key / owner.get("ticket", wt.ticket)
    if not record.exists():
        return ""  # provably gone: no record of it anywhere
    try:
        phase = json.loads((record / "state.json").read_text(encoding="utf-8")).get("phase")
    except (OSError, ValueError, AttributeError):
        phase = None  # unreadable: not provably closed
    if phase == Phase.CLOSED:
        return ""
    return (f"it belongs to ticket {wt.ticket} of HANDOFF_HOME {other}, whose record lives "
            f"({record})")


def _patch_path(home: Path, wt: TicketWorktrees, role: str, record: Record | None) -> Path:
    """A new file for a dirty worktree's changes: in its ticket's transcripts/ like close's,
    or, the record being gone, under HANDOFF_HOME/discarded/<repo-key>/ (never making a
    folder where the record was: a new ticket of that id would take it for an old record)."""
    if record is not None:
        return record.tdir.discarded(role, by="gc")
    stem = home / DISCARDED / wt.repo.key / f"{wt.ticket}-{role}-discarded-at-gc"
    return free(lambda n: stem.with_name(stem.name + (f".{n}" if n > 1 else "") + ".patch"))
