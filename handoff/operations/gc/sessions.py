"""gc's tmux sessions: those on handoff's sockets whose ticket is closed or whose directory is
gone; a session no record names is ours only when its panes say so (see handoff.operations.gc)."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from handoff.machinery.peers import Peers
from handoff.machinery.tmux import Tmux, TmuxFailure, failure_kind, socket_name
from handoff.operations.gc.found import Leftover, Options, Record, failing
from handoff.processes import environ


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


def session_leftovers(home: Path, records: list[Record],
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
                with failing(item):
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
