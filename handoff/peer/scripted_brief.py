"""What the scripted agent (handoff.peer.scripted_agent) reads of a brief and of the plan's
script for its round."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from handoff.protocol.reports import QUESTIONED

#: a round's `handoff-script` block, or a role's part of it: the plan's YAML as written (the
#: keys in the docstring above), each value narrowed where it is read
Script = Mapping[str, object]


@dataclass(frozen=True)
class Brief:
    """What the agent reads of a brief: its frontmatter, as handoff.protocol.briefs writes it."""

    ticket: str
    role: str
    #: implementer, tester or reviewer (a brief that names none: its role's name)
    kind: str
    round: int
    worktree: Path
    plan: Path
    #: where the report is written, and the command that files it
    report: Path
    submit: list[str]
    #: an implementer's or tester's: the plan's verification command
    test: list[str] | None = None
    #: a reviewer's: the commit under review, the test commands, the ledger's open findings
    #: ({id, file, line, reason}), and the ids it answers under each key of
    #: handoff.protocol.reports.QUESTIONED (weakened tests, unrequested changes, unproven tests)
    commit: str = ""
    tests: tuple[list[str], ...] = ()
    earlier: tuple[Mapping[str, object], ...] = ()
    asked: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: this turn files no report (the plan's `silent`)
    silent: bool = False

    @classmethod
    def read(cls, fields: Mapping[str, object]) -> Brief:
        test = fields.get("test")
        return cls(ticket=str(fields.get("ticket", "")), role=str(fields["role"]),
                   kind=str(fields.get("kind") or fields["role"]),
                   round=int(str(fields["round"])), worktree=Path(str(fields["worktree"])),
                   plan=Path(str(fields["plan"])), report=Path(str(fields["report"])),
                   submit=words(fields["submit"]), test=words(test) if test else None,
                   commit=str(fields.get("commit", "")),
                   tests=tuple(words(argv) for argv in listed(fields.get("tests"))),
                   earlier=tuple(e for e in listed(fields.get("earlier")) if isinstance(e, dict)),
                   asked={q.key: tuple(words(fields.get(q.key))) for q in QUESTIONED})


def listed(value: object) -> list[object]:
    """A list the YAML holds ([] for anything else)."""
    return value if isinstance(value, list) else []


def words(value: object) -> list[str]:
    return [str(item) for item in listed(value)]
