"""What a person reads of a ticket besides where it stands (`handoff diff`, the board's views):
its plan as approved, its change (all of it, or one round's), and the last report filed.
Nothing here changes anything."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from handoff.errors import UsageError
from handoff.inputs import REPORT_LIMIT, read_text
from handoff.loop.workspace import Workspace
from handoff.machinery.repo import short_sha
from handoff.record.ticket import State


@dataclass(frozen=True)
class Span:
    """The two commits a change lies between, and what it is, as a person reads it."""

    base: str
    commit: str
    what: str


def span(state: State, round_: int | None = None) -> Span:
    """The ticket's whole change (its base to its newest accepted commit), or round_'s own
    (the commit before it, or the base, to round_'s). UsageError, naming the rounds there are,
    when there is no such change."""
    rounds = sorted(int(n) for n in state.commits)
    if not rounds:
        raise UsageError(f"{state.ticket} has no accepted work yet (phase {state.phase})",
                         f"its peers' work shows once a round's report is accepted: "
                         f"'handoff status {state.ticket}' says where it stands")
    if round_ is None:
        return Span(state.base_commit, state.last_commit(),
                    f"{state.ticket}: its whole change, {short_sha(state.base_commit)}.."
                    f"{short_sha(state.last_commit())} ({len(rounds)} round(s))")
    if str(round_) not in state.commits:
        raise UsageError(f"{state.ticket} has no accepted commit for round {round_}",
                         f"rounds with one: {', '.join(map(str, rounds))}")
    before = [n for n in rounds if n < round_]
    base = state.commits[str(before[-1])] if before else state.base_commit
    return Span(base, state.commits[str(round_)],
                f"{state.ticket}: round {round_}'s change, {short_sha(base)}.."
                f"{short_sha(state.commits[str(round_)])}")


def diff(ws: Workspace, round_: int | None = None) -> tuple[Span, str]:
    """The change's diff as git shows it, whatever the person's git config says (no external
    diff or textconv program runs: the repository's attributes are the ticket's to change)."""
    found = span(ws.state(), round_)
    if ws.repo_gone:
        raise UsageError(f"the repository of {ws.tdir.ticket} is gone: its change went with it",
                         f"its record stays in {ws.tdir.path}")
    return found, ws.repo.readable_diff(found.base, found.commit)


def plan(ws: Workspace) -> str:
    """The plan as the person approved it (or will)."""
    return read_text(ws.tdir.plan_md, REPORT_LIMIT, "the plan")


#: a report as it was taken (not one set aside: rejected, voided, forged)
TAKEN = re.compile(r"[a-z0-9-]+-report-\d+\.md")


def last_report(ws: Workspace) -> tuple[Path, str] | None:
    """The newest report taken for the ticket, by any role (None: none yet)."""
    found = sorted((p for p in ws.tdir.path.iterdir()
                    if TAKEN.fullmatch(p.name) and p.is_file() and not p.is_symlink()),
                   key=lambda p: p.stat().st_mtime_ns)
    if not found:
        return None
    return found[-1], read_text(found[-1], REPORT_LIMIT, "the report")
