"""The rows of `handoff watch`, collected from the ticket directories: pure, no terminal.

`Board.refresh` is called after every wake-up of the directories' watcher (and now and then as
a safety net); it stats each ticket's state.json, events.jsonl and lock, and reads a ticket
only when one of them changed. events.jsonl is append-only, so only the bytes added since the
last read are parsed and folded into the ticket's `Fold`: a board over 200 tickets reads
nothing while they are quiet.

A peer's state is what the orchestrator last judged of it, with the evidence it recorded
(`peer`, `dialog`, `nudge`, `escalate`, `death` events: handoff/loop/monitor.py), or what was done
to it (launched, recycled, its report accepted, stopped), or a reviewer's verdict. Every role
of the ticket's team has a peer, in working order.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from handoff.errors import HandoffError
from handoff.next_steps import STEPS, Verb, refused
from handoff.operations.render import event_line, listed, words
from handoff.operations.standing import StatusRow
from handoff.phases import PHASES, Phase
from handoff.record import overlaps, slots
from handoff.record.lock import holder
from handoff.record.ticket import TicketDir, all_tickets
from handoff.role import DEFAULT, IMPLEMENTER

ROLES = DEFAULT.names
#: what a person must do, by phase (handoff.next_steps), and a record `status` cannot read:
#: the board marks these rows
NEEDS_PERSON = {**{str(phase): step.needs for (phase, _), step in STEPS.items() if step.needs},
                "unreadable": "unreadable"}
#: the monitor's judgement (handoff/loop/monitor.py Decision.state) as the board names it
_JUDGED = {"working": "working", "turn-ended": "turn ended", "ready": "starting",
           "starting": "starting", "notified": "notified", "stalled": "stalled",
           "waiting for permission": "dialog"}


@dataclass(frozen=True)
class Peer:
    state: str = "-"
    evidence: str = ""
    time: str = ""


@dataclass(frozen=True)
class Row:
    key: str  # the ticket directory: unique across repos
    ticket: str
    repo: str
    phase: str
    round: int
    max_rounds: int
    #: the time the current phase began (ISO 8601), "" when unknown
    phase_since: str
    last_event: str
    peers: dict[str, Peer]
    orchestrator: int | None
    reason: str = ""
    #: the files the ticket's branch changed (its record's `touched`)
    touched: tuple[str, ...] = ()
    #: the other open tickets of its repository that change some of them → those files
    overlaps: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: a queued ticket's place among the waiters (from 1; 0: it holds none), and how many wait
    place: int = 0
    waiting: int = 0
    #: the host it runs on ('' here): its row is what that host's `status` said
    host: str = ""
    #: the tickets it starts after (handoff.loop.after): while `waiting`, what it waits for
    after: tuple[str, ...] = ()

    @property
    def others(self) -> dict[str, Peer]:
        """The testers' and reviewers' peers, in working order."""
        return {role: peer for role, peer in self.peers.items() if role != IMPLEMENTER}

    @property
    def needs(self) -> str:
        """What the person must do ('' when nothing): approve, answer, escalated, unreadable."""
        return NEEDS_PERSON.get(self.phase, "")

    def refusal(self, verb: Verb) -> str:
        """Why the board's key for verb refuses this ticket, with what to do instead ('' when
        it does not: the ticket is in a phase the verb goes on in)."""
        accepted = {Verb.ANSWER: Phase.NEEDS_HUMAN, Verb.APPROVE: Phase.AWAITING_APPROVAL}
        if self.phase == accepted[verb]:
            return ""
        if self.phase not in PHASES:  # unreadable: `status` says what it knows
            return f"{self.ticket}'s record cannot be read (handoff status {self.ticket})"
        exc = refused(verb, self.phase, self.ticket, self.key, self.orchestrator is not None)
        return f"{exc.message} (hint: {exc.hint})"

    @property
    def repo_name(self) -> str:
        name = Path(self.repo).name if self.repo else "?"
        return f"{name} @ {self.host}" if self.host else name

    def in_phase(self, now: datetime) -> str:
        """How long the ticket has been in its phase: <1m, 12m, 3h05m, 2d04h (minutes at
        most: a column of seconds redrawn each second costs the board 5% of a core)."""
        try:
            seconds = int((now - datetime.fromisoformat(self.phase_since)).total_seconds())
        except ValueError:
            return "-"
        seconds = max(seconds, 0)
        if seconds < 60:
            return "<1m"
        if seconds < 3600:
            return f"{seconds // 60}m"
        if seconds < 86400:
            return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
        return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"


@dataclass
class Fold:
    """What the board keeps of a ticket's events, built one event at a time."""

    phase: str = ""
    phase_since: str = ""
    round: int = 0
    last: str = ""
    peers: dict[str, Peer] = field(default_factory=lambda: {r: Peer() for r in ROLES})

    def feed(self, event: Mapping[str, object]) -> None:
        kind, role, when = str(event.get("kind", "")), str(event.get("role", "")), \
            str(event.get("time", ""))
        if isinstance(n := event.get("round"), int):
            self.round = max(self.round, n)
        if kind == "created":
            self.phase, self.phase_since = Phase.AWAITING_APPROVAL, when
        elif kind == "phase":
            self.phase, self.phase_since = str(event.get("to", "")), when
            if self.phase == Phase.CLOSED:
                self._all(Peer("gone", "the ticket was closed", when))
        elif kind == "stopped" and event.get("by") == "hand":
            self._all(Peer("stopped", "handoff stop: the peers' session was ended", when))
        peer = _peer_of(kind, event, when)
        if peer is not None and role and role != "human":
            self.peers[role] = peer
        self.last = event_line(event).split("\n", 1)[0]

    def _all(self, peer: Peer) -> None:
        for role in self.peers:
            self.peers[role] = peer


def _peer_of(kind: str, event: Mapping[str, object], when: str) -> Peer | None:
    """The peer's state after one of its events (None: the event says nothing of it)."""
    evidence = str(event.get("evidence", ""))
    judged = str(event.get("state", ""))
    if kind == "launch":
        why = f" [{event['reason']}]" if event.get("reason") else ""
        brief = Path(str(event.get("brief", ""))).name
        return Peer("starting", f"launched {event.get('provider', '')} on {brief}{why}", when)
    if kind == "peer":
        return Peer(_name(judged), evidence, when)
    if kind == "dialog":
        return Peer("dialog", f"{evidence}; answered {judged} with "
                              f"{'+'.join(words(event.get('keys')))}", when)
    if kind == "nudge":
        return Peer("turn ended", f"{evidence}; nudged", when)
    if kind == "escalate":
        return Peer(_name(judged), f"{evidence}; handed to a person", when)
    if kind == "death":
        return Peer("dead", f"its process ended (exit {event.get('exit_status')}); relaunch "
                            f"{event.get('relaunches')}", when)
    if kind == "tmux" and judged == "server-gone":
        return Peer("dead", f"the tmux server went away: {event.get('message', '')}", when)
    if kind == "submission":
        if event.get("accepted"):
            return Peer("reported", f"report {event.get('report')} accepted", when)
        if event.get("filed") is False:
            return Peer("working", "handoff submit refused: " + "; ".join(
                words(event.get("problems"))), when)
        return Peer("working", f"report {event.get('report')} rejected; told why", when)
    if kind == "verdict":
        must = len(listed(event.get("must_fix")))
        return Peer(str(event.get("verdict", "?")), f"verdict {event.get('verdict')}"
                    + (f", {must} must-fix" if must else ""), when)
    if kind == "recycle":
        if event.get("stage") == "stopped":
            return Peer("stopped", f"stopped by the {event.get('by')}", when)
        return Peer("starting", f"recycled by {event.get('by')}", when)
    return None


def _name(judged: str) -> str:
    if judged.startswith("dialog"):
        return "dialog"
    if judged.startswith("blocked"):
        return "blocked"
    return _JUDGED.get(judged, judged or "?")


@dataclass
class _Tracked:
    tdir: TicketDir
    stamp: tuple[Any, ...] = ()
    offset: int = 0
    fold: Fold = field(default_factory=Fold)
    row: Row | None = None


def _stat(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


class Board:
    """Every ticket under home (or of one repo key), kept up to date by `refresh`."""

    def __init__(self, home: Path, repo_key: str | None = None) -> None:
        self.home = home
        self.repo_key = repo_key
        self._tracked: dict[str, _Tracked] = {}
        #: how many ticket reads the refreshes made: what `handoff watch` stays light by
        self.reads = 0
        #: the tickets on hosts, as their hosts last said (`ask_hosts`)
        self.remote: list[Row] = []

    def folders(self) -> list[Path]:
        """What the watcher must watch: home (a new repo), each repo folder (a new ticket) and
        each ticket folder (its state, events and lock): every one on disk, not only those
        already read. A ticket's folder is made a moment before its state.json: a board that
        watched only the tickets it had read saw a new one only at its next rescan (10 s)."""
        repos = [self.home / self.repo_key] if self.repo_key else _subfolders(self.home)
        tickets = [t for repo in repos for t in _subfolders(repo)]
        return [f for f in (self.home, *repos, *tickets) if f.is_dir()]

    def _ticket_dirs(self) -> list[Path]:
        return [tdir.path for tdir in all_tickets(self.home, self.repo_key)]

    def refresh(self) -> bool:
        """Look at every ticket's files; read those that changed. True when a row changed,
        a ticket came or went."""
        changed = False
        present = self._ticket_dirs()
        keys = {str(p) for p in present}
        for gone in set(self._tracked) - keys:
            del self._tracked[gone]
            changed = True
        for path in present:
            tracked = self._tracked.setdefault(str(path), _Tracked(TicketDir(path)))
            tdir = tracked.tdir
            stamp = (_stat(tdir.state_file), _stat(tdir.events.path), _stat(tdir.lock_file))
            if stamp == tracked.stamp and tracked.row is not None:
                continue
            tracked.stamp = stamp
            row = self._read(tracked)
            if row != tracked.row:
                tracked.row, changed = row, True
        return changed

    def recheck_orchestrators(self) -> bool:
        """A killed orchestrator drops its lock without touching a file: ask the lock of each
        ticket that claims a running one. True when one was found gone."""
        changed = False
        for tracked in self._tracked.values():
            row = tracked.row
            if row is not None and row.orchestrator is not None:
                pid = holder(tracked.tdir.lock_file)
                if pid != row.orchestrator:
                    tracked.row, changed = replace(row, orchestrator=pid), True
        return changed

    def rows(self) -> list[Row]:
        rows = [t.row for t in self._tracked.values() if t.row is not None]
        queue = slots.standing(self.home) if any(r.phase == Phase.QUEUED for r in rows) \
            else None
        return [replace(row, overlaps=_overlaps(row, rows),
                        place=queue.place(row.key) if queue else 0,
                        waiting=len(queue.waiting) if queue else 0) for row in rows] + \
            self.remote

    def ask_hosts(self) -> bool:
        """Ask each host with a ticket of ours how they stand (side by side, each bounded: a
        host that does not answer gives its tickets an `unreachable` row). True when a row
        changed. Slow as the network is: the board calls it from a thread of its own."""
        from handoff.record import placed

        rows: list[Row] = []
        if placed.every(self.home):
            from handoff import config
            from handoff.operations import hosts

            cfg = config.load(self.home, None)
            rows = [remote_row(said) for said in hosts.rows(self.home, cfg)
                    if self.repo_key is None or self._of_repo(str(said.get("local_repo")))]
        changed = rows != self.remote
        self.remote = rows
        return changed

    def _of_repo(self, repo: str) -> bool:
        """Whether a ticket started from repo belongs on a board of one repository."""
        return _key_of(repo) == self.repo_key

    def _read(self, tracked: _Tracked) -> Row:
        self.reads += 1
        tdir, fold = tracked.tdir, tracked.fold
        tracked.offset = _fold_new_events(tdir.events.path, tracked.offset, fold)
        pid = holder(tdir.lock_file)
        try:
            state = tdir.load()
        except HandoffError as exc:
            return Row(str(tdir.path), tdir.ticket, "", "unreadable", fold.round, 0,
                       fold.phase_since, fold.last, dict(fold.peers), pid, exc.message)
        since = fold.phase_since if fold.phase == state.phase else state.updated
        team = state.roles.names
        peers = {role: fold.peers.get(role, Peer()) for role in team}
        peers.update({r: p for r, p in fold.peers.items() if r not in peers})
        return Row(str(tdir.path), state.ticket, state.repo, state.phase, state.round,
                   state.max_rounds, since, fold.last, peers, pid, state.reason,
                   tuple(state.touched), after=tuple(state.after))


def _key_of(repo: str) -> str:
    from handoff.machinery.repo import Repo

    try:
        return Repo.at(Path(repo)).key
    except HandoffError:
        return ""


def remote_row(said: StatusRow) -> Row:
    """A row of a ticket on a host, from that host's `status --json` row: its peers' states
    are the host's own board's (`handoff attach` or `handoff watch` there shows them)."""
    host = str(said.get("host", "?"))
    team = said.get("team") if isinstance(said.get("team"), dict) else {}
    known = "unreachable" if said.get("phase") == "unreachable" else f"on {host}"
    peers = {str(role): Peer(known, f"its evidence is on {host}: handoff attach "
                                    f"{said.get('ticket')}") for role in team or [IMPLEMENTER]}
    orchestrator = said.get("orchestrator")
    return Row(key=f"{host}:{said.get('ticket')}", ticket=str(said.get("ticket", "?")),
               repo=str(said.get("local_repo", "")), phase=str(said.get("phase", "?")),
               round=int(said.get("round") or 0), max_rounds=0,
               phase_since=str(said.get("updated", "")),
               last_event=str(said.get("reason", "")), peers=peers,
               orchestrator=orchestrator if isinstance(orchestrator, int) else None,
               reason=str(said.get("reason", "")), host=host)


def _overlaps(row: Row, rows: list[Row]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The other open tickets of the row's repository that change some of its files (in memory:
    the rows hold what each record says it touched)."""
    if row.phase == Phase.CLOSED:
        return ()
    others = ((r.ticket, r.phase, r.touched) for r in rows
              if r.repo == row.repo and r.key != row.key)
    return tuple((o.ticket, o.files) for o in overlaps.among(row.ticket, row.touched, others))


def _fold_new_events(path: Path, offset: int, fold: Fold) -> int:
    """Feed fold the whole lines added to the event log since offset; the new offset. A log
    that shrank (replaced) is read from the start again into a fresh fold."""
    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size < offset:
                offset = 0
                fresh = Fold()
                fold.__dict__.update(fresh.__dict__)
            handle.seek(offset)
            data = handle.read(size - offset)
    except FileNotFoundError:
        return 0
    end = data.rfind(b"\n") + 1  # a line still being written waits for its newline
    for line in data[:end].splitlines():
        try:
            event = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue  # a torn line: `handoff log` names it, the board skips it
        if isinstance(event, dict):
            fold.feed(event)
    return offset + end


def _subfolders(folder: Path) -> list[Path]:
    """folder's own folders, sorted (handoff's hidden ones, such as .launch, aside)."""
    try:
        return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return []
