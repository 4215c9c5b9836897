"""The ledger: every must-fix of a ticket, with who raised it and every later answer to it.

A fresh reviewer every round reviews without memory, so left to itself each one raises new
points and none checks what the last one asked for: fresh reviewers rarely converge. The
ledger gives each finding an identity (F1, F2, … in the order raised) that outlives its
round. From the second review on, every reviewer is shown the open findings (all reviewers',
attributed) and must answer each one `fixed` or `not-fixed` with its evidence; a new must-fix
is taken only on a line the fix rounds changed, or for an acceptance criterion of the plan
still unmet (named). A finding answered `not-fixed` in two rounds escalates.

Pure: the state keeps the entries (`fields`), the orchestrator merges each round's reviews in
once all of them are accepted, and `problems` is what `handoff submit` refuses a review for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from handoff.protocol.plan import Plan
from handoff.protocol.reports import NOT_FIXED, QUESTIONED, Finding, Questioned, Report
from handoff.record.ticket import EntryFields

#: lines either side of a changed line where a new finding still counts as on it: a reviewer
#: names the line of a function's `def` or the statement a changed line belongs to
NEAR = 3


@dataclass(frozen=True)
class Entry:
    id: str
    round: int
    raised_by: tuple[str, ...]
    file: str
    line: int
    reason: str
    criterion: str = ""
    #: (round, role, status, evidence), in the order given
    answers: tuple[tuple[int, str, str, str], ...] = ()

    @property
    def open(self) -> bool:
        """Still to be fixed: never answered, or answered not-fixed by a reviewer of the last
        round that answered it."""
        if not self.answers:
            return True
        last = max(r for r, _, _, _ in self.answers)
        return any(status == NOT_FIXED for r, _, status, _ in self.answers if r == last)

    @property
    def not_fixed_rounds(self) -> int:
        return len({r for r, _, status, _ in self.answers if status == NOT_FIXED})

    def key(self) -> str:
        return Finding(self.file, self.line, self.reason).key()

    def render(self) -> str:
        return (f"{self.id} " if self.id else "") + f"{self.file}:{self.line}: {self.reason}"

    def attributed(self) -> str:
        """The finding with who raised it and what its last answers said."""
        return f"{self.render()} ({self.history()})"

    def history(self) -> str:
        """Who raised it, when, for which criterion, and the last round's answers."""
        text = f"raised by {', '.join(self.raised_by)} in round {self.round}"
        if self.criterion:
            text += f", criterion {self.criterion}"
        last = [a for a in self.answers if a[0] == max(r for r, _, _, _ in self.answers)] \
            if self.answers else []
        said = "; ".join(f"{role}: {status} ({evidence})" for _, role, status, evidence in last)
        return text + (f"; round {last[0][0]}: {said}" if last else "")

    def fields(self) -> EntryFields:
        return {"id": self.id, "round": self.round, "raised_by": list(self.raised_by),
                "file": self.file, "line": self.line, "reason": self.reason,
                "criterion": self.criterion, "answers": [list(a) for a in self.answers]}

    @classmethod
    def from_fields(cls, data: Mapping[str, Any]) -> Entry:
        return cls(id=str(data["id"]), round=int(data["round"]),
                   raised_by=tuple(str(r) for r in data.get("raised_by", ())),
                   file=str(data["file"]), line=int(data["line"]), reason=str(data["reason"]),
                   criterion=str(data.get("criterion") or ""),
                   answers=tuple((int(a[0]), str(a[1]), str(a[2]), str(a[3]))
                                 for a in data.get("answers", ())))


@dataclass(frozen=True)
class Ledger:
    entries: tuple[Entry, ...] = ()

    @classmethod
    def of(cls, records: Iterable[Mapping[str, Any]]) -> Ledger:
        return cls(tuple(Entry.from_fields(r) for r in records))

    def records(self) -> list[EntryFields]:
        return [e.fields() for e in self.entries]

    def open(self) -> list[Entry]:
        return [e for e in self.entries if e.open]

    def get(self, ident: str) -> Entry | None:
        return next((e for e in self.entries if e.id == ident), None)

    def merged(self, round_: int, reviews: Sequence[tuple[str, Report]]) -> Ledger:
        """The ledger after round_'s reviews (role, report), in the team's order: their answers
        added to the findings they answer, their must-fixes added as new findings, one per
        file:line and reason however many reviewers raised it. Merging a round twice adds
        nothing twice (a resumed orchestrator)."""
        entries = {e.id: e for e in self.entries if e.round != round_}
        for ident, entry in list(entries.items()):  # this round's answers, afresh
            entries[ident] = replace(entry, answers=tuple(
                a for a in entry.answers if a[0] != round_))
        for role, report in reviews:
            for answer in report.ledger:
                answered = entries.get(answer.id)
                if answered is not None:
                    entries[answer.id] = replace(answered, answers=(
                        *answered.answers, (round_, role, answer.status, answer.evidence)))
        number = max((int(e.id[1:]) for e in entries.values()), default=0)
        for role, report in reviews:
            for finding in report.must_fix:
                same = next((e for e in entries.values() if e.round == round_
                             and (e.file, e.line) == (finding.file, finding.line)
                             and e.key() == finding.key()), None)
                if same is not None:
                    if role not in same.raised_by:
                        entries[same.id] = replace(same, raised_by=(*same.raised_by, role))
                    continue
                number += 1
                entries[f"F{number}"] = Entry(f"F{number}", round_, (role,), finding.file,
                                              finding.line, finding.reason, finding.criterion)
        return Ledger(tuple(sorted(entries.values(), key=lambda e: int(e.id[1:]))))

    def twice_not_fixed(self) -> Entry | None:
        """The first finding answered not-fixed in two rounds: the loop does not converge."""
        return next((e for e in self.entries if e.open and e.not_fixed_rounds >= 2), None)


def problems(report: Report, open_entries: Sequence[Entry], plan: Plan,
             changed: Mapping[str, set[int]] | None,
             asked: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """What a review must mend before it is taken: an open finding left unanswered (or one
    answered that is not open), a new must-fix outside the fix rounds' lines that names no
    criterion still unmet, an item of a questioned list left unanswered (asked: the ids its
    brief listed under each key of reports.QUESTIONED). changed: the lines the fix rounds
    changed (new side, by file); None for the first review, which may raise anything."""
    found: list[str] = []
    ids = [a.id for a in report.ledger]
    wanted = {e.id: e for e in open_entries}
    for entry in open_entries:
        if entry.id not in ids:
            found.append(f"earlier must-fix {entry.attributed()} is not answered: add "
                         f"{{id: {entry.id}, status: fixed or not-fixed, evidence: the test "
                         "name or file:line that shows it} under 'ledger:'")
    for ident in sorted({i for i in ids if i not in wanted}):
        listed = ", ".join(wanted) or "none"
        found.append(f"ledger answers {ident}, which is not an open finding of this ticket "
                     f"(open: {listed})")
    for ident in sorted({i for i in ids if ids.count(i) > 1}):
        found.append(f"ledger answers {ident} more than once: answer each finding once")
    if changed is not None:
        found += [p for i, f in enumerate(report.must_fix)
                  if (p := _out_of_scope(i, f, plan, changed))]
    for question in QUESTIONED:
        found += _justified(question, (asked or {}).get(question.key, ()),
                            [a.id for a in report.answered(question)])
    return found


def _justified(question: Questioned, listed: Sequence[str], given: Sequence[str]) -> list[str]:
    """Each id the brief listed under the question's key answered, and no other."""
    key = question.key
    found = [f"{question.noun} {ident} is not answered: add {{id: {ident}, answer: justified or "
             f"unjustified, reason: …}} under '{key}:'" for ident in listed if ident not in given]
    found += [f"{key} answers {ident}, which your brief does not list "
              f"({', '.join(listed) or 'none'})"
              for ident in sorted({i for i in given if i not in listed})]
    return found


def _out_of_scope(i: int, finding: Finding, plan: Plan,
                  changed: Mapping[str, set[int]]) -> str:
    """Why a later review may not raise this new must-fix ('' when it may)."""
    where = f"must_fix[{i}] ({finding.file}:{finding.line})"
    if finding.criterion:
        if plan.criterion(finding.criterion) is not None:
            return ""
        known = ", ".join(c.split(":", 1)[0] for c in plan.listed_criteria()) or \
            "the plan lists no acceptance criteria"
        return (f"{where}.criterion {finding.criterion!r} is not a criterion of the plan "
                f"({known})")
    lines = changed.get(finding.file)
    if lines is not None and (finding.line == 0 or any(
            abs(finding.line - n) <= NEAR for n in lines)):
        return ""
    listed = [c.split(":", 1)[0] for c in plan.listed_criteria()]
    criteria = (f"name the acceptance criterion it leaves unmet (criterion: one of "
                f"{', '.join(listed)})") if listed else \
        "the plan lists no acceptance criteria, so it cannot be raised as one"
    return (f"{where} is on no line the fix rounds changed: a later review raises a new "
            f"must-fix only there, or for an acceptance criterion still unmet; {criteria}, "
            "or move it to should_fix")
