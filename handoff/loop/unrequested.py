"""Fix rounds kept to their findings: from the second review on, every hunk of what changed
since the last reviewed commit is mapped to the findings the round was asked to fix (same
file, near their line) and to the plan's scope (a file the plan names, or a test file); what
maps to neither is an unrequested change. Every reviewer answers each one, `justified` or
`unjustified`, as it answers a weakened test: a fixer that rewrites beyond the review is
questioned, not trusted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from handoff.loop import weakened
from handoff.protocol import diffs
from handoff.protocol.ledger import Entry
from handoff.protocol.plan import SCRIPT_BLOCK, Plan

#: lines around a finding's line within which a hunk fixes it (a fix moves code a little)
NEAR = 15


@dataclass(frozen=True)
class Unrequested:
    id: str
    file: str
    line: int
    end: int
    first: str

    def fields(self) -> dict[str, object]:
        return {"id": self.id, "file": self.file, "line": self.line, "end": self.end,
                "first": self.first}

    @classmethod
    def of(cls, data: dict[str, object]) -> Unrequested:
        return cls(str(data["id"]), str(data["file"]), int(str(data["line"])),
                   int(str(data["end"])), str(data.get("first", "")))

    def described(self) -> str:
        where = f"{self.file}:{self.line}" + (f"-{self.end}" if self.end > self.line else "")
        return f"{where}: {self.first}" if self.first else where


def found(line_diff: str, findings: Sequence[Entry], plan: Plan) -> list[Unrequested]:
    """The hunks of line_diff (the change since the last review) that no finding asked for
    and that lie outside the plan's scope, numbered U1, U2, …"""
    named = weakened.named_paths([*(c for c in (plan.test,) if c), *plan.review])
    out: list[Unrequested] = []
    for change in diffs.parse(line_diff):
        path = change.path
        if change.binary or weakened.is_test_path(path, named) or _named_by(plan, change):
            continue
        for hunk in change.hunks:
            if _asked(hunk, change, findings):
                continue
            start = hunk.new_start if hunk.new_count else max(hunk.new_start, 1)
            first = next((line.text.strip() for line in (*hunk.added, *hunk.removed)
                          if line.text.strip()), "")
            out.append(Unrequested(f"U{len(out) + 1}", path, start,
                                   start + max(hunk.new_count, 1) - 1, first[:120]))
    return out


def _named_by(plan: Plan, change: diffs.FileDiff) -> bool:
    """The plan names the file (its path, as written anywhere in its prose: not in the
    scripted agent's `handoff-script` blocks, which are no scope a person gave)."""
    prose = SCRIPT_BLOCK.sub("", plan.text)
    return any(path and path in prose for path in (change.new_path, change.old_path))


def _asked(hunk: diffs.Hunk, change: diffs.FileDiff, findings: Sequence[Entry]) -> bool:
    """A finding of the round is in this file, within NEAR lines of the hunk (old side: the
    findings name lines of the last reviewed commit)."""
    low, high = hunk.old_start - NEAR, hunk.old_start + max(hunk.old_count, 1) + NEAR
    return any(f.file in (change.old_path, change.new_path) and low <= f.line <= high
               for f in findings)
