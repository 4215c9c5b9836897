"""Tickets that build on each other: a ticket started `after` others waits until they pass,
then starts from a base that holds their passed work.

A plan's frontmatter `after: [PROJ-11]` (or `start --after PROJ-11`) names them. At start each
must be a ticket of the repository (or of the same `start --plans` batch), and no chain of
`after` may come back to the ticket. The orchestrator then waits in phase `waiting`, holding no
slot, until every one of them has passed (or passed and been finished into the base); it starts
from its base with their reviewed commits merged in (`base_for`), or goes to a person when one
of them escalated, was closed without being merged, or their work conflicts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from handoff.errors import HandoffError, UsageError
from handoff.machinery.repo import Repo, git, short_sha
from handoff.phases import Phase
from handoff.record.ticket import TicketDir, ticket_dir


@dataclass(frozen=True)
class Dependency:
    """One ticket another waits for, as its record stands."""

    ticket: str
    #: its phase ('' : no record of it in the repository)
    phase: str
    #: the commit it passed review at ('' before it passed)
    commit: str = ""
    #: it was finished: its passed work is merged into its base branch already
    merged: bool = False

    @property
    def done(self) -> bool:
        return bool(self.commit) and (self.phase == Phase.PASSED or self.merged)

    @property
    def failed(self) -> str:
        """Why it will never pass ('' : it may yet)."""
        if not self.phase:
            return f"{self.ticket} does not exist (its record is gone)"
        if self.phase == Phase.ESCALATED:
            return f"{self.ticket} escalated without passing"
        if self.phase == Phase.CLOSED and not self.merged:
            return f"{self.ticket} was closed without being merged"
        return ""

    def shown(self) -> str:
        return f"{self.ticket} ({'merged' if self.merged else self.phase or 'gone'})"


@dataclass(frozen=True)
class Decision:
    """What a waiting ticket does now: wait, start (every dependency done) or ask a person."""

    action: str  # wait, start, ask
    reason: str


def read(home: Path, repo_key: str, names: Sequence[str]) -> list[Dependency]:
    """Each named ticket as its record says (unreadable: not yet decided, it is waited on)."""
    return [_read(ticket_dir(home, repo_key, name)) for name in names]


def _read(tdir: TicketDir) -> Dependency:
    if not tdir.state_file.exists():
        return Dependency(tdir.ticket, "")
    try:
        state = tdir.load()
    except HandoffError:
        return Dependency(tdir.ticket, "unreadable")
    if state.phase == Phase.PASSED:
        return Dependency(tdir.ticket, state.phase, state.last_commit())
    if state.phase == Phase.CLOSED:
        events, _ = tdir.events.read()
        merged = [e for e in events if e.get("kind") == "finish" and e.get("merged")]
        if merged:
            return Dependency(tdir.ticket, state.phase, str(merged[-1]["merged"]), True)
    return Dependency(tdir.ticket, state.phase)


def decide(found: Sequence[Dependency]) -> Decision:
    """Pure: start when every dependency is done, ask a person when one never will be, else
    wait (naming what for)."""
    failed = [d.failed for d in found if d.failed]
    if failed:
        return Decision("ask", "; ".join(failed))
    waiting = [d for d in found if not d.done]
    if waiting:
        return Decision("wait", "waits for " + ", ".join(d.shown() for d in waiting))
    return Decision("start", ", ".join(d.ticket for d in found) + " passed")


def cycle(ticket: str, graph: Mapping[str, Sequence[str]]) -> list[str]:
    """Pure: a chain of `after` from ticket back to itself ([] : none). graph: each ticket's
    dependencies, the new ones with those of the tickets that exist."""
    path: list[str] = [ticket]
    seen: set[str] = set()

    def walk(name: str) -> bool:
        for dep in graph.get(name, ()):
            if dep == ticket:
                path.append(dep)
                return True
            if dep in seen:
                continue
            seen.add(dep)
            path.append(dep)
            if walk(dep):
                return True
            path.pop()
        return False

    return path if walk(ticket) else []


def check(home: Path, repo_key: str, ticket: str, after: Sequence[str],
          batch: Mapping[str, Sequence[str]] | None = None) -> None:
    """At start: every dependency is a ticket of the repository (or of the batch being
    started), none is the ticket itself, and no chain of them comes back to it."""
    batch = batch or {}
    for name in after:
        if name == ticket:
            raise UsageError(f"{ticket} cannot wait for itself (after: {name})",
                             "name the tickets it builds on")
        if name not in batch and not ticket_dir(home, repo_key, name).state_file.exists():
            raise UsageError(f"{ticket} is to start after {name}, which is no ticket of this "
                             "repository", f"start {name} first (or give its plan in the same "
                             "'handoff start --plans'), or drop it from after:")
    graph: dict[str, Sequence[str]] = {ticket: list(after), **batch}
    todo = [name for deps in list(graph.values()) for name in deps]
    while todo:  # the records' own after:, as far as the chains reach
        name = todo.pop()
        if name not in graph:
            graph[name] = _after_of(ticket_dir(home, repo_key, name))
            todo += graph[name]
    loop = cycle(ticket, graph)
    if loop:
        raise UsageError(f"the tickets wait for each other: {' -> '.join(loop)}",
                         "drop one of them from after: so the chain has an end")


def _after_of(tdir: TicketDir) -> list[str]:
    try:
        return list(tdir.load().after) if tdir.state_file.exists() else []
    except HandoffError:
        return []


def base_for(repo: Repo, base: str, found: Sequence[Dependency],
             ticket: str) -> tuple[str, list[str]]:
    """The commit a waiting ticket starts from: its base with each dependency's passed commit
    merged in (the commit itself when it builds on the base), in order; and the files that
    conflict when their work does not merge ([] : none)."""
    head = base
    for dep in found:
        if repo.is_ancestor(dep.commit, head):
            continue
        if repo.is_ancestor(head, dep.commit):
            head = dep.commit
            continue
        tree, conflicts = repo.merge(head, dep.commit)
        if conflicts is not None:
            return head, [f"{dep.ticket}: {', '.join(conflicts)}"]
        head = git(repo.top, "commit-tree", tree, "-p", head, "-p", dep.commit, "-m",
                   f"handoff: {ticket} starts from {dep.ticket}'s passed work\n\n"
                   f"{dep.ticket} passed review at {short_sha(dep.commit)}.\n")
    return head, []
