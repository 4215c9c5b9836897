"""Small mutations of the lines a change added (a plan's `prove: mutants`): each flips one
operator or constant of one line, and the ticket's new tests run against it
(handoff.loop.proof). A mutant they still pass is a survivor: the tests do not pin that line
down, and every reviewer is shown it.

Written here rather than taken from mutmut: mutmut mutates whole Python modules through its
own copy of the project and runs pytest in its own process, where this needs a few mutants of
the changed lines only, of any language, each run by the plan's own command in the gate's
fence. The operators are textual: a line's strings and its trailing comment are left alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from handoff.loop import weakened
from handoff.protocol.diffs import DELETED, FileDiff

#: mutants tried per round, at most: each is one run of the new tests
LIMIT = 12
#: characters of a line kept in the record
SHOWN = 120

#: (its pattern, what it becomes): one operator or constant flipped per mutant
OPERATORS: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    (re.compile(r"=="), lambda m: "!="),
    (re.compile(r"!="), lambda m: "=="),
    (re.compile(r"<="), lambda m: "<"),
    (re.compile(r">="), lambda m: ">"),
    (re.compile(r"(?<![<=!-])<(?![<=])"), lambda m: ">="),
    (re.compile(r"(?<![>=-])>(?![>=])"), lambda m: "<="),
    (re.compile(r"(?<![+*/=<>!e])\+(?![+=])"), lambda m: "-"),
    (re.compile(r"(?<=[\w)\]] )-(?= [\w(])"), lambda m: "+"),
    (re.compile(r"\bTrue\b"), lambda m: "False"),
    (re.compile(r"\bFalse\b"), lambda m: "True"),
    (re.compile(r"\band\b"), lambda m: "or"),
    (re.compile(r"\bor\b"), lambda m: "and"),
    (re.compile(r"(?<![\w.])\d+(?![\w.])"), lambda m: str(int(m.group()) + 1)),
)
COMMENT = re.compile(r"(?:#|//).*$")
STRING = re.compile(r"'(?:\\.|[^'\\])*'|\"(?:\\.|[^\"\\])*\"")


@dataclass(frozen=True)
class Mutant:
    file: str
    line: int
    #: the line as it is at the commit, and as the mutant has it
    was: str
    now: str

    def fields(self) -> dict[str, object]:
        return {"file": self.file, "line": self.line, "was": self.was[:SHOWN],
                "now": self.now[:SHOWN]}


def mutants(files: Sequence[FileDiff], named: Collection[str] = (),
            limit: int = LIMIT) -> list[Mutant]:
    """Up to limit mutants of the lines files added, outside the test files: a line's first
    mutation before any line's second, in the order of the diff."""
    per_line = [list(_of_line(diff.new_path, line.number, line.text))
                for diff in files
                if diff.status != DELETED and not diff.binary
                and not weakened.is_test_path(diff.new_path, named)
                for hunk in diff.hunks for line in hunk.added]
    out: list[Mutant] = []
    depth = 0
    while len(out) < limit and any(depth < len(found) for found in per_line):
        out += [found[depth] for found in per_line if depth < len(found)]
        depth += 1
    return out[:limit]


def _of_line(file: str, number: int, text: str) -> list[Mutant]:
    """Each mutation of one line: every operator at each place it matches in the code part
    of the line (strings blanked, the comment cut)."""
    code = COMMENT.sub("", STRING.sub(lambda m: " " * len(m.group()), text))
    if not code.strip():
        return []
    found = []
    for pattern, becomes in OPERATORS:
        for match in pattern.finditer(code):
            now = text[:match.start()] + becomes(match) + text[match.end():]
            found.append(Mutant(file, number, text, now))
    return found


def apply(text: str, mutant: Mutant) -> str | None:
    """The file's text with the mutant in its line; None when that line is no longer what
    the mutant was made from."""
    lines = text.split("\n")
    if not 0 < mutant.line <= len(lines) or lines[mutant.line - 1] != mutant.was:
        return None
    lines[mutant.line - 1] = mutant.now
    return "\n".join(lines)
