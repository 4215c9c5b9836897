"""Where a ticket stands, read from its directory alone: the rows of `handoff status`, and its
state recovered whatever happened to state.json.

It reads files and the lock's holder only, never tmux or git (except to find the repository
named by --repo): `handoff status` runs often, in scripts and prompts, and must start fast.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import NotRequired, TypedDict, TypeVar

from handoff.errors import HandoffError, NotFound, UsageError
from handoff.machinery.repo import Repo
from handoff.next_steps import next_step
from handoff.phases import FINISHED, LIST_RANK, PHASES, Phase
from handoff.record import overlaps, slots, usage
from handoff.record.lock import holder
from handoff.record.store import repo_key, validate_ticket_id
from handoff.record.ticket import State, TicketDir, all_tickets, find, ticket_dir
from handoff.record.usage import UsageFields

T = TypeVar("T")


class Queued(TypedDict):
    """A queued ticket's place in the machine's queue, as `status --json` says it."""

    place: int
    waiting: int
    at_work: int
    max_parallel: int


@dataclass(frozen=True)
class LastRun:
    """How a ticket's orchestrator stands, from its events: the last keys of its status row."""

    #: running, finished, not started, crashed, stopped or died
    run: str
    #: a crashed run's last error
    error: str
    #: what a person does next
    hint: str
    #: unreadable lines of events.jsonl
    events_skipped: int
    usage: UsageFields | None


class StatusRow(TypedDict):
    """One ticket's row of `handoff status --json` (docs/cli.md's table), keys in the order
    it prints them: a wire format too, since the placing machine reads a host's rows back
    (handoff.operations.hosts). A TypedDict, not a dataclass: the JSON is the dict itself, as
    it was put together here, or on the host."""

    ticket: str
    repo: str
    phase: str
    round: int
    reviews: int
    gate_bounces: int
    dir: str
    branch: str
    commit: str
    reason: str
    orchestrator: int | None
    session: str
    socket: str
    updated: str
    #: role name → its kind, in working order
    team: dict[str, str]
    #: reviewer → verdict, of the current round
    verdicts: dict[str, str]
    #: other open ticket → the files both change
    overlaps: dict[str, list[str]]
    queue: Queued | None
    #: in every row but that of a host that did not answer (handoff.operations.hosts)
    after: NotRequired[list[str]]
    run: str
    error: str
    hint: str
    events_skipped: int
    usage: UsageFields | None
    #: a ticket on a host: its host's own row, with its name and the repository here it was
    #: started from (`repo` and `dir` are paths on the host)
    host: NotRequired[str]
    local_repo: NotRequired[str]


def find_ticket(home: Path, ticket: str, repo: Path | None) -> TicketDir:
    """A ticket's directory: in the given or current repo first, else anywhere if the id is
    unique. Only the directory is looked at, so this works with an unreadable state.json and
    with the repo gone (a deleted --repo is matched by the key it had)."""
    validate_ticket_id(ticket)
    key = _key_of(repo)
    if key is not None:
        tdir = ticket_dir(home, key, ticket)
        if tdir.state_file.exists():
            return tdir
    return find(home, ticket)


def _key_of(repo: Path | None) -> str | None:
    """The repo key of --repo (or of the repo here); None when here is no repo."""
    if repo is not None and not repo.exists():
        top = repo.expanduser().resolve()
        return repo_key(top / ".git", top)  # deleted: the key it had as a plain checkout
    try:
        return Repo.at(repo or Path.cwd()).key
    except FileNotFoundError:  # the shell sits in a deleted folder (e.g. the deleted repo)
        return None
    except (UsageError, NotFound):
        if repo is not None:
            raise
        return None


@dataclass(frozen=True)
class Recovered:
    """A ticket's state as far as its directory still tells it, and where it came from."""

    state: State
    #: "state.json", "state.json.bak" or "events.jsonl"
    source: str
    #: why state.json could not be used
    problem: str = ""

    @property
    def note(self) -> str:
        if self.source == "state.json":
            return ""
        used = "the last state handoff wrote" if self.source == "state.json.bak" else \
            "what the event log records: repo, session, phase, round"
        return f"{self.problem}; using {self.source} ({used})"


def recovered_state(tdir: TicketDir) -> Recovered:
    """The state for the commands that must work whatever happened to state.json (stop, and
    close after restore_state): state.json, else state.json.bak, else events.jsonl."""
    try:
        return Recovered(tdir.load(), "state.json")
    except HandoffError as exc:
        problem = exc.message
    try:
        return Recovered(tdir.load_backup(), "state.json.bak", problem)
    except HandoffError:
        return Recovered(state_from_events(tdir), "events.jsonl", problem)


def state_from_events(tdir: TicketDir) -> State:
    """What events.jsonl tells of a ticket: enough to find and stop its peers and to close it,
    not to carry its loop on (accepted commits and verdicts are not rebuilt)."""
    # only for a ticket whose state.json and backup are both gone: their modules start tmux's
    # and git's libraries, which `status` does without
    from handoff.machinery.peers import session_name
    from handoff.machinery.ticket_branch import branch_name
    from handoff.machinery.tmux import socket_name

    events, _ = tdir.events.read()

    def last(kind: str) -> dict[str, object]:
        return next((e for e in reversed(events) if e.get("kind") == kind), {})

    created, session, moved = last("created"), last("session"), last("phase")
    key = tdir.path.parent.name
    state = State(ticket=tdir.ticket, repo=str(created.get("repo") or ""), repo_key=key,
                  base=str(created.get("base") or "HEAD"),
                  base_commit=str(created.get("base_commit") or ""),
                  socket=str(session.get("socket") or socket_name()),
                  session=str(session.get("session") or session_name(tdir.ticket, key)),
                  round=max((n for e in events if isinstance(n := e.get("round"), int)),
                            default=0))
    if moved.get("to") in PHASES:
        state.phase = Phase(str(moved["to"]))
    if last("worktrees"):
        state.branch = branch_name(tdir.ticket)
    return state


def follow(tdir: TicketDir, seen: int) -> Iterator[dict[str, object]]:
    """The ticket's events after the first `seen`, as they are written, for good (`log
    --follow`: the person ends it). It wakes on the directory's changes, and looks once a
    second besides, so a change the watch missed is late, never lost."""
    from handoff.machinery.watch import Watcher  # ctypes: not for `status`, run far more often

    with Watcher([tdir.path]) as watcher:
        while True:
            watcher.wait(1.0)
            events, _ = tdir.events.read()
            yield from events[seen:]
            seen = len(events)


def status_row(tdir: TicketDir, neighbours: list[State] | None = None,
               queue: slots.Standing | None = None, state: State | None = None) -> StatusRow:
    """One ticket's row; neighbours: the open tickets of its repository, queue: the machine's
    slots, and state: its record, when the caller read them already (else they are read
    here)."""
    state = state if state is not None else tdir.load()
    pid = holder(tdir.lock_file)
    home = tdir.path.parent.parent
    if neighbours is None:
        neighbours = overlaps.open_states(home, state.repo_key) if state.touched else []
    if queue is None and state.phase == Phase.QUEUED:
        queue = slots.standing(home)
    last = last_run(tdir, state, pid)
    return {
        "ticket": state.ticket, "repo": state.repo, "phase": state.phase, "round": state.round,
        "reviews": state.reviews, "gate_bounces": state.gate_bounces, "dir": str(tdir.path),
        "branch": state.branch, "commit": state.last_commit(), "reason": state.reason,
        "orchestrator": pid, "session": state.session, "socket": state.socket,
        "updated": state.updated, "team": {r.name: str(r.kind) for r in state.roles.roles},
        "verdicts": dict(state.reviewed.get(str(state.round), {})),
        "overlaps": {o.ticket: list(o.files) for o in overlaps.of(state, neighbours)},
        "queue": queued(tdir, queue) if state.phase == Phase.QUEUED else None,
        "after": list(state.after), "run": last.run, "error": last.error, "hint": last.hint,
        "events_skipped": last.events_skipped, "usage": last.usage,
    }


def queued(tdir: TicketDir, queue: slots.Standing | None) -> Queued | None:
    """A queued ticket's place (None when its orchestrator does not hold one: it is not
    running, and takes its place again when resumed)."""
    place = queue.place(tdir.path) if queue is not None else 0
    if queue is None or not place:
        return None
    return {"place": place, "waiting": len(queue.waiting), "at_work": len(queue.at_work),
            "max_parallel": queue.limit}


def last_run(tdir: TicketDir, state: State, pid: int | None) -> LastRun:
    """How the ticket's orchestrator stands, from its events: `run` is running, finished,
    starting (started in its window, not yet holding the ticket), not started, crashed (its
    last error is shown), stopped or died (it left no word: a kill -9 or a lost machine);
    `hint` is what a person does next."""
    events, bad = tdir.events.read()
    starts = [i for i, e in enumerate(events) if e.get("kind") == "orchestrator"]
    since = events[starts[-1] + 1:] if starts else []
    error = next((e for e in reversed(since) if e.get("kind") == "error"), None)
    if pid is not None:
        run = "running"
    elif state.phase in FINISHED:
        run = "finished"
    elif starting(events, starts[-1] if starts else -1):
        run = "starting"
    elif not starts:
        run = "not started"
    elif error is not None:
        run = "crashed"
    elif any(e.get("kind") == "stopped" for e in since):
        run = "stopped"
    else:
        run = "died"
    # a running orchestrator carries the ticket on: a person's part shows in its reason (and
    # one starting will: `resume` now would only start it again)
    hint = "" if run in ("running", "starting") else next_step(state.phase, state.ticket)
    spent = usage.totals(events)
    return LastRun(run, str(error.get("message", "")) if error else "", hint, len(bad),
                   usage.status_fields(spent) if spent else None)


#: seconds an orchestrator started in its window has to take its ticket before `status`
#: stops calling it starting (it died before it could: a broken install, a killed tmux)
STARTING_BOUND = 60.0


def starting(events: list[dict[str, object]], last_run: int) -> bool:
    """An orchestrator was started in the ticket's window (a `starting` event after the
    last run's `orchestrator` event at index last_run) within STARTING_BOUND seconds."""
    opened = next((e for e in reversed(events[last_run + 1:]) if e.get("kind") == "starting"),
                  None)
    if opened is None:
        return False
    try:
        since = datetime.now(UTC) - datetime.fromisoformat(str(opened.get("time")))
    except ValueError:
        return False
    return since.total_seconds() < STARTING_BOUND


def status(home: Path, ticket: str | None = None, repo: Path | None = None) -> list[StatusRow]:
    if ticket is not None:
        return [_row_or_problem(find_ticket(home, ticket, repo))]
    tickets = all_tickets(home)
    # every record read once, for its row and for what overlaps each open ticket (not once per
    # row: with 200 tickets that was 40,000 comparisons and each record read twice)
    loaded: dict[Path, State] = {}
    by_repo: dict[str, list[State]] = {}
    for tdir in tickets:
        with contextlib.suppress(HandoffError):  # its row says what is wrong with it
            loaded[tdir.path] = state = tdir.load()
            if state.phase in overlaps.OPEN:
                by_repo.setdefault(tdir.path.parent.name, []).append(state)
    queue = slots.standing(home)
    return [_row_or_problem(t, by_repo.get(t.path.parent.name, []), queue, loaded.get(t.path))
            for t in tickets]


def in_list_order(rows: Iterable[T], phase: Callable[[T], str],
                  active: Callable[[T], str]) -> list[T]:
    """rows as the lists show them (handoff.phases.LIST_RANK, `status` and the board alike);
    active: the row's last activity, an ISO time (the newest first within a rank)."""
    newest_first = sorted(rows, key=active, reverse=True)
    return sorted(newest_first, key=lambda row: LIST_RANK.get(phase(row), 0))


def listed(rows: list[StatusRow], every: bool) -> tuple[list[StatusRow], int]:
    """The rows a list shows, in its order (handoff.phases.LIST_RANK): the open tickets, or
    every one; and how many closed ones it left out."""
    shown = rows if every else [row for row in rows if row["phase"] != Phase.CLOSED]
    return (in_list_order(shown, lambda row: row["phase"], lambda row: row["updated"]),
            len(rows) - len(shown))


def _row_or_problem(tdir: TicketDir, neighbours: list[State] | None = None,
                    queue: slots.Standing | None = None,
                    state: State | None = None) -> StatusRow:
    """One broken ticket directory must not hide all the others from `status`."""
    try:
        return status_row(tdir, neighbours, queue, state)
    except HandoffError as exc:
        found = recovered_state(tdir)
        return {"ticket": tdir.ticket, "repo": found.state.repo, "phase": "unreadable",
                "round": found.state.round, "reviews": 0, "gate_bounces": 0,
                "dir": str(tdir.path), "branch": "", "commit": "", "reason": exc.message,
                "team": {}, "verdicts": {}, "overlaps": {}, "queue": None, "after": [],
                "orchestrator": holder(tdir.lock_file), "session": found.state.session,
                "socket": found.state.socket, "updated": "", "run": "unknown",
                "error": "", "events_skipped": len(tdir.events.read()[1]), "usage": None,
                "hint": f"{found.source} says phase {found.state.phase}, round "
                        f"{found.state.round}: 'handoff resume {tdir.ticket}' or 'handoff close "
                        f"{tdir.ticket}' restores it; 'handoff stop' and 'log' work as they are"}
