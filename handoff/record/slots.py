"""How many tickets of this machine are at work at once (`max_parallel`), and which one waiting
goes next.

A ticket at work holds a lock on its own file in `$HANDOFF_HOME/queue/` (`<key>.run`), and a
ticket waiting for a slot one on `<key>.wait`: the same kind of lock as a ticket's own
(handoff.record.lock), which the kernel drops when its orchestrator dies, however it dies. So a
crash never keeps a slot and a dead waiter never keeps its place: there is no book to mend, and
what is left of a dead one's file is removed by the next taker. A slot is taken under one more
lock (`$HANDOFF_HOME/queue.lock`), so two waiters never both take the last one. That lock file is
kept out of the folder the waiters watch: each take would wake every one of them.

Waiters go in the order their tickets were made (`order`): a ticket back from a person waits
ahead of the ones started after it. A ticket started with `--now` takes a slot over the limit;
it still counts, so nobody else starts until the tickets at work are below the limit again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from handoff.errors import Busy
from handoff.phases import AT_WORK, Phase
from handoff.record.lock import briefly, is_locked, try_lock

RUN, WAIT = ".run", ".wait"
#: a ticket's peer holds `<key>.peer-<role>` while its process lives (its launcher takes the
#: lock, and the CLI it becomes keeps it): a ticket whose orchestrator was killed is at work
#: as long as its peers are, so nobody else takes its slot meanwhile
PEER = ".peer"
#: how long a taker waits for another's take to finish (each holds it for a few file reads)
TAKE_BOUND = 10.0
#: how often a batch's start looks whether its tickets' orchestrators hold their places
PLACED_LOOK = 0.01


def folder(home: Path) -> Path:
    """What waiters watch: a slot given back or a waiter gone changes something here."""
    return home / "queue"


@dataclass(frozen=True)
class Holder:
    """One ticket in the queue folder: at work, or waiting."""

    ticket: str  # its ticket directory
    order: str  # when it was made, then its directory: the queue's order
    pid: int
    now: bool = False
    #: max_parallel as this holder's config has it (`status` reads no config)
    limit: int = 0

    @property
    def name(self) -> str:
        return Path(self.ticket).name


@dataclass(frozen=True)
class Standing:
    """The tickets at work and the ones waiting (in the order they will start)."""

    at_work: tuple[Holder, ...]
    waiting: tuple[Holder, ...]
    limit: int

    def place(self, ticket: Path | str) -> int:
        """Its place among the waiters, from 1 (0: it does not wait)."""
        places = [str(h.ticket) for h in self.waiting]
        return places.index(str(ticket)) + 1 if str(ticket) in places else 0

    def why(self, ticket: Path | str) -> str:
        """Why ticket waits, for its phase change and `status`."""
        ahead = self.place(ticket) - 1
        return (f"{len(self.at_work)} of {self.limit} tickets at work (max_parallel)"
                + (f", {ahead} ahead of it" if ahead > 0 else ", it is next"))


def key(ticket: Path) -> str:
    return hashlib.sha256(str(ticket).encode()).hexdigest()[:20]


def _phase(ticket: Path) -> object:
    """The phase its record says (None when it cannot be read)."""
    try:
        return json.loads((ticket / "state.json").read_text(encoding="utf-8")).get("phase")
    except (OSError, ValueError, AttributeError):
        return None


def _left_at_work(ticket: Path) -> bool:
    """Its record says it was at work when its orchestrator went (killed mid-round), not done
    or waiting for a person: only then do its peers' holds count (a process a finished peer
    left behind, holding the lock it inherited, never keeps a slot)."""
    return _phase(ticket) in AT_WORK


def peer_hold(home: Path, ticket: Path, order: str, limit: int, role: str) -> dict[str, str]:
    """What a peer's launcher locks for the life of the peer (PEER): the file, and the holder
    written in it as a slot's is."""
    holder = Holder(ticket=str(ticket), order=order, pid=0, limit=limit)
    folder(home).mkdir(parents=True, exist_ok=True)
    return {"path": str(folder(home) / f"{key(ticket)}{PEER}-{role}"),
            "holder": json.dumps(holder.__dict__)}


def taking(home: Path) -> contextlib.AbstractContextManager[None]:
    """The lock every take and every clean-up of dead files holds."""
    return briefly(home / "queue.lock", TAKE_BOUND, "the queue",
                   "another handoff holds it (stopped with ^Z?): resume or end it, then run "
                   "this again")


def _holder(path: Path) -> Holder | None:
    """The holder named in a file whose lock is held; None when nobody holds it (a dead one's)
    or it is still being written."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        if not is_locked(fd):
            return None
        data = json.loads(os.pread(fd, 8192, 0) or b"null")
        return Holder(ticket=str(data["ticket"]), order=str(data["order"]),
                      pid=int(data["pid"]), now=bool(data.get("now", False)),
                      limit=int(data.get("limit", 0)))
    except (ValueError, KeyError, TypeError):
        return None
    finally:
        os.close(fd)


def standing(home: Path, limit: int = 0, clean: bool = False, mine: str = "") -> Standing:
    """Who is at work and who waits, from the files whose locks are held. limit 0: the one the
    holders wrote (`status`). clean (under `taking` only): remove the files nobody holds.
    mine: a key left out (the asker's own)."""
    at_work: list[Holder] = []
    waiting: list[Holder] = []
    peers: list[Holder] = []
    base = folder(home)
    names = sorted(os.listdir(base)) if base.is_dir() else []
    for name in names:
        stem, dot, suffix = name.rpartition(".")
        kind = f".{suffix}" if f".{suffix}" in (RUN, WAIT) else \
            PEER if suffix.startswith(PEER[1:] + "-") else ""
        if not dot or not kind or stem == mine:
            continue
        holder = _holder(base / name)
        if holder is None:
            if clean:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(base / name)
            continue
        {RUN: at_work, WAIT: waiting, PEER: peers}[kind].append(holder)
    # a ticket at work whose peers live on holds its slot even while no orchestrator does
    # (killed, or its process exiting: its locks are not all dropped at one instant); one
    # that gave its slot back to ask a person is not at work
    working = {h.ticket for h in at_work}
    for one in peers:
        if one.ticket not in working and _left_at_work(Path(one.ticket)):
            working.add(one.ticket)
            at_work.append(one)
    waiting = [h for h in waiting if h.ticket not in working]
    waiting.sort(key=lambda h: (h.order, h.ticket))
    limit = limit or max((h.limit for h in (*at_work, *waiting)), default=0)
    return Standing(tuple(at_work), tuple(waiting), limit)


class Slot:
    """One ticket's slot: `take` it before its peers work, `release` it when they are done."""

    def __init__(self, home: Path, ticket: Path, order: str, limit: int,
                 now: bool = False) -> None:
        self.home, self.ticket, self.limit, self.now = home, ticket, limit, now
        self.holder = Holder(ticket=str(ticket), order=order, pid=os.getpid(), now=now,
                             limit=limit)
        self.key = key(ticket)
        self._run: int | None = None
        self._wait: int | None = None

    @property
    def held(self) -> bool:
        return self._run is not None

    def take(self) -> Standing | None:
        """Take a slot if one is free and no waiter made earlier is owed it: None once taken,
        else where it stands (and it now waits: its place is kept while this process lives)."""
        if self.held:
            return None
        with taking(self.home):
            now = standing(self.home, self.limit, clean=True, mine=self.key)
            ahead = [h for h in now.waiting if (h.order, h.ticket) < (self.holder.order,
                                                                      self.holder.ticket)]
            if self.now or len(now.at_work) + len(ahead) < self.limit:
                self._run = self._hold(RUN)
                self._drop(WAIT)
                return None
            if self._wait is None:
                self._wait = self._hold(WAIT)
            return Standing(now.at_work, tuple(sorted(
                (*now.waiting, self.holder), key=lambda h: (h.order, h.ticket))), self.limit)

    def stand_in_line(self) -> None:
        """Take a place in the queue now, before asking for a slot: the tickets of one batch
        (`start --plans`) are let go together once all are made, and each takes its place
        first, so the slots then go in the order the tickets were made, not to whichever
        orchestrator asks first."""
        if self.held or self._wait is not None:
            return
        with taking(self.home):
            self._wait = self._hold(WAIT)

    def release(self) -> None:
        """Give the slot back (and any place in the queue), and the files of this ticket's
        peers that no peer holds any more."""
        if self._run is None and self._wait is None:
            return
        with taking(self.home):
            self._drop(RUN)
            self._drop(WAIT)
            for path in folder(self.home).glob(f"{self.key}{PEER}-*"):
                if _holder(path) is None:
                    with contextlib.suppress(FileNotFoundError):
                        path.unlink()

    def _hold(self, suffix: str) -> int:
        base = folder(self.home)
        base.mkdir(parents=True, exist_ok=True)
        fd = os.open(base / f"{self.key}{suffix}", os.O_RDWR | os.O_CREAT, 0o600)
        if not try_lock(fd):  # only another orchestrator of this ticket could: its lock says no
            os.close(fd)
            raise Busy(f"another process holds {self.ticket.name}'s place in {base}",
                       "handoff stop it first")
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(self.holder.__dict__).encode(), 0)
        return fd

    def _drop(self, suffix: str) -> None:
        fd = self._run if suffix == RUN else self._wait
        if fd is None:
            return
        # unlinked while still locked: a taker cleaning up never removes a live one's file
        with contextlib.suppress(FileNotFoundError):
            os.unlink(folder(self.home) / f"{self.key}{suffix}")
        os.close(fd)
        if suffix == RUN:
            self._run = None
        else:
            self._wait = None


def placed(home: Path, ticket: Path) -> bool:
    """Its orchestrator holds a place in the queue, or a slot."""
    base, name = folder(home), key(ticket)
    return any(_holder(base / f"{name}{suffix}") is not None for suffix in (WAIT, RUN))


def stands_in_line(ticket: Path) -> bool:
    """Its orchestrator takes a place in the queue first (Slot.stand_in_line): it is at work
    or queued by its record (not one waiting for a person, or for the tickets it builds on)."""
    return _phase(ticket) in (*AT_WORK, Phase.QUEUED)


def wait_placed(home: Path, tickets: list[Path], bound: float) -> list[Path]:
    """Until the orchestrator of each ticket that stands in line holds its place, at most
    bound seconds: a batch (`start --plans`) lets its tickets' orchestrators go once its
    start ends, and one that had not begun by then held no place, so a later plan's could
    take the slot first. The tickets not placed in time (an orchestrator that died first)."""
    waiting = [t for t in tickets if stands_in_line(t)]
    deadline = time.monotonic() + bound
    while True:
        waiting = [t for t in waiting if not placed(home, t)]
        if not waiting or time.monotonic() >= deadline:
            return waiting
        time.sleep(PLACED_LOOK)


#: what one ticket at work takes, for the default: two CLIs (Claude Code is about 300 MB of
#: node each) and a gate's tests, rounded up
TICKET_MEMORY = 1 << 30
#: tickets at work per core: peers mostly wait on their model; the gates' tests use the cores
PER_CORE = 2


def default_limit() -> int:
    """max_parallel when the person's config does not say: what the memory and cores hold
    (4 on a 2-core machine with 24 GiB)."""
    cores = os.cpu_count() or 1
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not on every platform
        memory = 0
    by_memory = memory // TICKET_MEMORY if memory > 0 else PER_CORE * cores
    return max(1, min(PER_CORE * cores, by_memory))
