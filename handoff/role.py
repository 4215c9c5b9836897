"""A ticket's team: its roles, each a name and a kind, in the order they work.

One implementer, named `implementer`; testers, in order, after it; one or more reviewers, side
by side. A role's name is free (validated here): it names its tmux window, its worktree
(`.worktrees/<TICKET>/<role>`), its inbox, its reports and every event about it.

Stdlib only, and light: `handoff submit` (handoff.cli.filing) imports it in every peer's short
process, so its two classes are written out rather than made with `dataclasses` (whose import,
`inspect` and `ast` with it, was a quarter of that process's CPU: measured with -X importtime).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from enum import StrEnum

from handoff.errors import UsageError


class Kind(StrEnum):
    IMPLEMENTER = "implementer"
    TESTER = "tester"
    REVIEWER = "reviewer"
    #: drafts the plan from a ticket's text, before the loop (a ticket started from a plan
    #: has none)
    PLANNER = "planner"


#: the one implementer's name: its branch, its report file and the loop's first stage
IMPLEMENTER = "implementer"
#: the one planner's name (a ticket started from its text: handoff.loop.planning)
PLANNER = "planner"
#: names a role may not take: they name other parts of a ticket (the gate's checkout, the
#: orchestrator's window, a person's answers) or would make a report's file another's
RESERVED = ("gate", "orchestrator", "human", "impl", "review", "final", "test", "scan")
#: no '.', ':' or '/': a window name is part of a tmux target (`session:window.pane`)
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}")
NAME_HINT = ("a role's name is 1–32 letters, digits, '-' or '_', starting with a letter, e.g. "
             "security; not " + ", ".join(RESERVED))


def check_name(name: str) -> str:
    """name unchanged, or a clear refusal: it becomes a window, a folder and file names."""
    if not isinstance(name, str) or not NAME.fullmatch(name) or name.lower() in RESERVED:
        raise UsageError(f"invalid role name {name!r:.40}", NAME_HINT)
    return name


def kind_named(name: str) -> Kind | None:
    """The kind a role's name says by itself (`tester`, `reviewer`), else None."""
    try:
        return Kind(name)
    except ValueError:
        return None


class _Frozen:
    """A value: set once at its making, equal to another of its class with the same fields."""

    __slots__: tuple[str, ...] = ()

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: cannot set {name}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Frozen) and type(other) is type(self) and \
            other._fields() == self._fields()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._fields()))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({shown})"

    def __reduce__(self) -> tuple[object, ...]:
        """Copied and pickled by its making again (the default way sets each field)."""
        return (type(self), self._fields())


class Role(_Frozen):
    __slots__ = ("kind", "name")
    name: str
    kind: Kind

    def __init__(self, name: str, kind: Kind) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "kind", kind)


class Team(_Frozen):
    """The roles of one ticket, implementer first, then the testers in their order, then the
    reviewers. Frozen into the ticket's state when it is created: a later config change never
    reshapes a ticket under way."""

    __slots__ = ("roles",)
    roles: tuple[Role, ...]

    def __init__(self, roles: tuple[Role, ...]) -> None:
        object.__setattr__(self, "roles", roles)

    @classmethod
    def of(cls, kinds: Iterable[tuple[str, Kind]]) -> Team:
        """The team of these (name, kind) pairs, put in working order, or a clear refusal."""
        roles = [Role(check_name(name), Kind(kind)) for name, kind in kinds]
        implementers = [r.name for r in roles if r.kind is Kind.IMPLEMENTER]
        if implementers != [IMPLEMENTER]:
            raise UsageError(f"a team has exactly one implementer, the role named "
                             f"{IMPLEMENTER!r} (found: {', '.join(implementers) or 'none'})",
                             "roles: {implementer: {provider: claude}, reviewer: {provider: "
                             "codex}}")
        if not any(r.kind is Kind.REVIEWER for r in roles):
            raise UsageError("a team needs at least one reviewer",
                             "roles: {reviewer: {provider: claude}} (any name, kind reviewer)")
        if len({r.name for r in roles}) != len(roles):
            raise UsageError("two roles have the same name")
        if [r.name for r in roles if r.kind is Kind.PLANNER] not in ([], [PLANNER]):
            raise UsageError(f"a team has at most one planner, the role named {PLANNER!r}")
        # the planner last: the loop's roles keep their places (the implementer first)
        order = {Kind.IMPLEMENTER: 0, Kind.TESTER: 1, Kind.REVIEWER: 2, Kind.PLANNER: 3}
        return cls(tuple(sorted(roles, key=lambda r: order[r.kind])))  # stable: config order

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, str]]) -> Team:
        """The team state.json keeps (a list of {name, kind}); none: the team of two every
        ticket had before teams were data."""
        found = [(str(r.get("name", "")), Kind(str(r.get("kind", "")))) for r in records]
        return cls.of(found) if found else DEFAULT

    def records(self) -> list[dict[str, str]]:
        return [{"name": r.name, "kind": str(r.kind)} for r in self.roles]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.roles)

    def of_kind(self, kind: Kind) -> tuple[str, ...]:
        return tuple(r.name for r in self.roles if r.kind is kind)

    @property
    def testers(self) -> tuple[str, ...]:
        return self.of_kind(Kind.TESTER)

    @property
    def reviewers(self) -> tuple[str, ...]:
        return self.of_kind(Kind.REVIEWER)

    @property
    def loop(self) -> tuple[str, ...]:
        """The roles of the review loop: all but the planner, whose work ends at the plan."""
        return tuple(r.name for r in self.roles if r.kind is not Kind.PLANNER)

    @property
    def planned(self) -> bool:
        """A planner drafts this ticket's plan (it was started from its text)."""
        return bool(self.of_kind(Kind.PLANNER))

    def with_planner(self) -> Team:
        return self if self.planned else Team.of(
            [*((r.name, r.kind) for r in self.roles), (PLANNER, Kind.PLANNER)])

    def kind(self, name: str) -> Kind:
        """The role's kind; a clear refusal for a name not on the team."""
        for role in self.roles:
            if role.name == name:
                return role.kind
        raise UsageError(f"this ticket has no role {name!r}",
                         f"its roles are: {', '.join(self.names)}")

    def has(self, name: str) -> bool:
        return name in self.names


DEFAULT = Team((Role(IMPLEMENTER, Kind.IMPLEMENTER), Role("reviewer", Kind.REVIEWER)))
