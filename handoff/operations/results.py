"""What the operations a person runs on a ticket answer: typed, with the notes a person reads
beside them, and each said once. `Told` is what every one of them is to its readers: the command
line prints it with `cli.output.show` and the board with `cli.output.line`, nothing else."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from handoff.errors import HandoffError
from handoff.machinery.repo import short_sha
from handoff.record.placed import Placement


class Told(Protocol):
    """A result as a person reads it: the lines that answer the command (a script reads them
    on stdout) and the notes on what handoff mended or worked around beside it (stderr)."""

    @property
    def said(self) -> Sequence[str]: ...

    @property
    def notes(self) -> Sequence[str]: ...


@dataclass(frozen=True)
class Stopped:
    """`handoff stop`: the orchestrator and the peers are gone, the record stays."""

    ticket: str
    #: the orchestrator's pid that was stopped (None: none ran)
    orchestrator: int | None
    #: the ticket's tmux session was there and is gone
    session: bool
    #: the roles whose screens were kept as transcripts
    transcripts: tuple[str, ...] = ()
    #: the roles whose CLI left when asked (the rest were ended with their session)
    exited: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def said(self) -> list[str]:
        return [f"{self.ticket} stopped (orchestrator: {self.orchestrator or 'not running'}, "
                f"peers: {'stopped' if self.session else 'not running'})"]


@dataclass(frozen=True)
class Answered:
    """`handoff answer`: the answer filed, and the orchestrator started again when none ran to
    pass it on."""

    ticket: str
    path: Path
    restarted: bool
    notes: tuple[str, ...] = ()

    @property
    def said(self) -> list[str]:
        return [f"answer filed as {self.path}",
                *([f"orchestrator restarted in tmux; watch with handoff attach {self.ticket}"]
                  if self.restarted else [])]


@dataclass(frozen=True)
class Recycled:
    """`handoff recycle`: the role's CLI started fresh on its current brief."""

    ticket: str
    role: str
    brief: Path
    notes: tuple[str, ...] = ()

    @property
    def said(self) -> list[str]:
        return [f"{self.role} of {self.ticket} restarted on {self.brief}"]


@dataclass(frozen=True)
class Running:
    """A ticket whose orchestrator now runs in its tmux window (`start`, `resume`, the board's
    approve)."""

    ticket: str
    session: str
    record: Path
    #: approved just now: how its peers are fenced in ('' when it was approved before)
    sandbox: str = ""
    notes: tuple[str, ...] = ()

    @property
    def said(self) -> list[str]:
        return [*([self.sandbox] if self.sandbox else []),
                f"{self.ticket}: the orchestrator runs in tmux session {self.session}.",
                f"  watch:  handoff attach {self.ticket}",
                f"  state:  handoff status {self.ticket}",
                f"  record: {self.record}"]


@dataclass(frozen=True)
class Closed:
    """`handoff close`: the worktrees removed (work kept or refused), branch and record kept."""

    ticket: str
    record: Path
    removed: tuple[str, ...]
    #: the ticket's branch, kept ('' when it never had one, or the repository is gone)
    branch: str
    #: what stopping it did (None: it was closed already)
    stopped: Stopped | None
    #: where `close --force` kept the implementer's uncommitted work (None: nothing to keep)
    discarded_work: Path | None
    #: folders under the ticket's worktrees that handoff did not make, left in place
    left: tuple[str, ...]
    repo_gone: bool
    notes: tuple[str, ...] = ()

    @property
    def said(self) -> list[str]:
        if self.repo_gone:
            lines = [f"{self.ticket} closed; its repository is gone, with its worktrees and "
                     f"branch; record in {self.record}"]
        else:
            branch = f"branch {self.branch} kept" if self.branch else "it had no branch"
            lines = [f"{self.ticket} closed; worktrees removed: "
                     f"{', '.join(self.removed) or 'none'}; {branch}; record in {self.record}"]
        if self.discarded_work:
            lines.append(f"the implementer's uncommitted work was saved as "
                         f"{self.discarded_work} (git apply it to get it back)")
        return lines


@dataclass(frozen=True)
class Forgotten:
    """`handoff forget`: a closed ticket's record deleted (its branch, if any, stays)."""

    ticket: str
    record: Path
    #: its branch, which stays in the repository ('' when it had none)
    branch: str
    notes: tuple[str, ...] = ()

    @property
    def said(self) -> list[str]:
        kept = f"; its branch {self.branch} stays" if self.branch else ""
        return [f"{self.ticket} forgotten: its record {self.record} is deleted{kept}"]


@dataclass(frozen=True)
class Finished:
    """`handoff finish`: the reviewed commit merged into the base branch, then closed."""

    closed: Closed
    mode: str  # merge or squash
    base: str
    before: str
    #: the base branch's new commit ('' when it already held the change: nothing merged)
    after: str
    merged: str
    notes: tuple[str, ...] = ()

    @property
    def said(self) -> list[str]:
        lines = []
        if self.after:
            lines.append(f"{self.closed.ticket} merged into {self.base} ({self.mode}): "
                         f"{short_sha(self.before)} -> {short_sha(self.after)} (not pushed)")
        return lines + self.closed.said


@dataclass(frozen=True)
class Train:
    """`handoff finish A B C`: the tickets merged (in order), and why the rest were not."""

    finished: tuple[Finished, ...]
    #: why the train stopped before its end (None: every ticket was merged)
    refused: HandoffError | None = None
    notes: tuple[str, ...] = ()
    #: how the merged result was tested before the base moved ('' : nothing was merged)
    tested: str = ""
    #: finish --push: what was pushed and opened, as a person reads it
    pushed: tuple[str, ...] = ()

    @property
    def said(self) -> list[str]:
        tested = [f"merged result: {self.tested}"] if self.tested else []
        return tested + [line for done in self.finished for line in [*done.notes, *done.said]] \
            + list(self.pushed)


@dataclass(frozen=True)
class StartedOnHost:
    """`handoff start --host`: the ticket placed on its host and started there."""

    placement: Placement
    #: what the host's `handoff start` printed (its notes, its session)
    host_said: str
    notes: tuple[str, ...] = ()

    @property
    def said(self) -> list[str]:
        where = self.placement
        return [*([self.host_said] if self.host_said else []),
                f"{where.ticket}: runs on host {where.host} (its mirror of "
                f"{Path(where.repo).name}: {where.mirror}); handoff status, attach "
                f"{where.ticket} and the rest reach it there"]


@dataclass(frozen=True)
class ClosedOnHost:
    """`handoff close` of a ticket on a host: its work fetched here, closed there; its record
    stays on the host, its placement here is gone."""

    ticket: str
    host: str
    #: what the host's own `close` printed
    host_said: str
    #: its branch, here now ('' when it had made none)
    branch: str
    #: its final report, kept here (None: it had none, or it could not be fetched)
    report: Path | None
    #: why its final report stays on the host only ('' when it was kept or it had none)
    report_left: str = ""
    notes: tuple[str, ...] = ()

    @property
    def said(self) -> list[str]:
        note = f"its branch {self.branch} is here now" if self.branch else "it had made no branch"
        if self.report is not None:
            note += f", its final report is {self.report}"
        if self.report_left:
            note += f", its final report stays on the host only ({self.report_left})"
        return [*([self.host_said] if self.host_said else []),
                f"{self.ticket}: closed on host {self.host}; {note}"]


@dataclass(frozen=True)
class FinishedOnHost:
    """`handoff finish` of a ticket on a host: the commit that passed there merged into the
    base branch here, then the ticket closed there."""

    closed: ClosedOnHost
    mode: str  # merge or squash
    base: str
    before: str
    #: the base branch's new commit ('' when it already held the change: nothing merged)
    after: str
    #: the commit reviewed on the host, and its branch here
    commit: str
    branch: str
    #: the base had moved since the review: the merged result was tested nowhere
    untested: bool
    #: what the merge said (printed with the rest, as a hosted finish always printed it)
    merge_said: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def said(self) -> list[str]:
        ticket, host = self.closed.ticket, self.closed.host
        lines = list(self.merge_said)
        if self.after:
            lines.append(f"{ticket}: {self.branch} ({short_sha(self.commit)}) merged into "
                         f"{self.base}: {short_sha(self.before)} → {short_sha(self.after)} "
                         f"({self.mode}; nothing pushed)")
        if self.untested:
            # its plan, gate checkout and fence are on the host: nothing here can test it
            lines.append(f"note: {self.base} had moved since {ticket} was reviewed on {host}: "
                         "the merged result was not tested here; run your tests before you push")
        return lines + self.closed.said
