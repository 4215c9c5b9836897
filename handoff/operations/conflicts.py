"""`handoff conflicts`: which open tickets of a repository change the same files, and which of
them would really conflict, at the merge or with each other, seen before anyone merges.

Each ticket's branch is compared with its base (the files it changed since its base commit),
and every overlapping pair, and every ticket against its base branch's current head, is merged
in the object store alone (`git merge-tree --write-tree`): no checkout, no index, no branch is
touched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import TypedDict

from handoff.machinery.repo import Repo
from handoff.record import overlaps
from handoff.record.ticket import State


@dataclass(frozen=True)
class Branch:
    """One open ticket's branch as it stands."""

    ticket: str
    phase: str
    branch: str
    tip: str
    #: the branch it merges into, and that branch's head ('' when it has none)
    base: str
    base_head: str
    changed: tuple[str, ...]
    #: the files that conflict when it is merged into its base's head now (None: it merges)
    conflicts: tuple[str, ...] | None
    #: its changed files that git does not merge line against line (Repo.merge_drivers)
    drivers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Pair:
    """Two open tickets that change some of the same files."""

    tickets: tuple[str, str]
    files: tuple[str, ...]
    #: the files that conflict when their branches are merged together (None: they merge)
    conflicts: tuple[str, ...] | None
    #: of the shared files, those git does not merge line against line (Repo.merge_drivers)
    drivers: dict[str, str] = field(default_factory=dict)


class TicketFields(TypedDict):
    """A ticket of `handoff conflicts --json` (docs/cli.md): a Branch."""

    ticket: str
    phase: str
    branch: str
    commit: str
    base: str
    changed: list[str]
    conflicts: list[str] | None
    drivers: dict[str, str]


class PairFields(TypedDict):
    """An overlap of `handoff conflicts --json`: a Pair."""

    tickets: list[str]
    files: list[str]
    conflicts: list[str] | None
    drivers: dict[str, str]


class SurveyFields(TypedDict):
    tickets: list[TicketFields]
    overlaps: list[PairFields]


@dataclass(frozen=True)
class Survey:
    branches: tuple[Branch, ...]
    pairs: tuple[Pair, ...]

    @property
    def conflicting(self) -> bool:
        return any(b.conflicts for b in self.branches) or any(p.conflicts for p in self.pairs)

    def fields(self) -> SurveyFields:
        """`handoff conflicts --json` (docs/cli.md)."""
        return {"tickets": [{"ticket": b.ticket, "phase": b.phase, "branch": b.branch,
                             "commit": b.tip, "base": b.base, "changed": list(b.changed),
                             "conflicts": None if b.conflicts is None else list(b.conflicts),
                             "drivers": b.drivers}
                            for b in self.branches],
                "overlaps": [{"tickets": list(p.tickets), "files": list(p.files),
                              "conflicts": None if p.conflicts is None else list(p.conflicts),
                              "drivers": p.drivers}
                             for p in self.pairs]}


def survey(home: Path, repo: Repo) -> Survey:
    """Every open ticket of repo with a branch, and every pair of them that overlaps."""
    branches = [b for state in overlaps.open_states(home, repo.key)
                if (b := _branch(repo, state)) is not None]
    pairs = []
    for one, other in combinations(branches, 2):
        shared = tuple(sorted(set(one.changed) & set(other.changed)))
        if shared:
            found = repo.merge_conflicts(one.tip, other.tip)
            pairs.append(Pair((one.ticket, other.ticket), shared,
                              None if found is None else tuple(found),
                              repo.merge_drivers([one.tip, other.tip], shared)))
    return Survey(tuple(branches), tuple(pairs))


def _branch(repo: Repo, state: State) -> Branch | None:
    """The ticket's branch, its changes since its base and how it merges into its base now;
    None before it has a branch (a plan not yet approved)."""
    name = state.branch or ""
    tip = repo.branch_head(name) if name else ""
    if not tip or not state.base_commit:
        return None
    changed = tuple(repo.changed_paths(state.base_commit, tip))
    base = repo.base_of(state.base)
    head = repo.branch_head(base) if base else ""
    conflicts: tuple[str, ...] | None = None
    if head and not repo.is_ancestor(tip, head):
        found = repo.merge_conflicts(head, tip)
        conflicts = None if found is None else tuple(found)
    drivers = repo.merge_drivers([t for t in (head, tip) if t], changed)
    return Branch(state.ticket, state.phase, name, tip, base, head, changed, conflicts, drivers)


def lines(found: Survey) -> list[str]:
    """The survey as a person reads it."""
    if not found.branches:
        return ["no open ticket of this repository has a branch yet"]
    out = []
    for b in found.branches:
        shown = ", ".join(b.changed[:6]) + (f" and {len(b.changed) - 6} more"
                                            if len(b.changed) > 6 else "")
        out.append(f"{b.ticket:<22} {b.phase:<18} {b.branch}: changes {shown or 'nothing'}")
        if not b.base_head:
            out.append(f"    its base {b.base or '(none)'} has no head to merge into")
        elif b.conflicts:
            out.append(f"    CONFLICTS with {b.base} at its head now, in "
                       f"{', '.join(b.conflicts)}")
        else:
            out.append(f"    merges cleanly into {b.base}{_drivers(b.drivers)}")
    for pair in found.pairs:
        one, other = pair.tickets
        said = f"CONFLICT in {', '.join(pair.conflicts)}" if pair.conflicts else \
            f"they merge cleanly with each other{_drivers(pair.drivers)}"
        out.append(f"overlap {one} ~ {other}: both change {', '.join(pair.files)}: {said}")
    return out


def _drivers(drivers: dict[str, str]) -> str:
    """What "clean" is worth where a merge driver, not git's line merge, said it."""
    if not drivers:
        return ""
    named = ", ".join(f"{path} (merge={driver})" for path, driver in sorted(drivers.items()))
    return (f", but only as its merge driver sees it: {named}: a union keeps the lines of "
            "both sides and never conflicts, a custom driver's clean is its own word; "
            "'handoff finish' tests the merged result before it moves the base")
