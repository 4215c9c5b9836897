"""Briefs: the exact instructions each peer gets for a round, rendered from the plan.

Markdown with YAML frontmatter (the scripted agent reads the fields, a person or an AI the
prose). A reviewer's brief never carries the implementer's report, a tester's or another
reviewer's: only the plan, the commit, the diffs, the ledger of earlier must-fix findings and
the tests the change weakened (with the changes to what decides which tests run, and a gate
that ran fewer tests than at the base: handoff.loop.weakened).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from handoff.inputs import KIB, clip
from handoff.protocol.frontmatter import join
from handoff.protocol.ledger import Entry
from handoff.protocol.plan import Plan
from handoff.protocol.reports import UNPROVEN, UNREQUESTED, WEAKENED, template
from handoff.role import Kind

#: bytes of one feedback note, and of one finding's reason, a brief carries at most
NOTE_LIMIT = 16 * KIB
FINDING_LIMIT = 2 * KIB


@dataclass(frozen=True)
class BriefContext:
    ticket: str
    role: str
    kind: Kind
    round: int
    ticket_text: str
    plan: Plan
    plan_path: Path
    worktree: Path
    submit: tuple[str, ...]
    draft: Path
    #: the role contract's file; inline: the brief carries its text (the CLI has no
    #: system-prompt mechanism), else the brief only points at it
    contract: Path | None = None
    contract_inline: bool = True


def _contract(ctx: BriefContext) -> str:
    if ctx.contract is None:
        return ""
    if ctx.contract_inline:
        return ctx.contract.read_text(encoding="utf-8").strip() + "\n"
    return (f"Your role contract is in your system prompt (also at `{ctx.contract}`): follow it.\n")


def _submit_block(ctx: BriefContext) -> str:
    command = shlex.join([*ctx.submit, str(ctx.draft)])
    return (
        "## How to hand back\n\n"
        f"Write your report to `{ctx.draft}` (outside your worktree), then run:\n\n"
        f"```\n{command}\n```\n\n"
        "It checks the report at once and prints every problem; mend them and run it again.\n"
    )


class Earlier(TypedDict):
    """An open finding of the ledger, as a reviewer's brief names it."""

    id: str
    file: str
    line: int
    reason: str


class RoundFields(TypedDict, total=False):
    """What a brief's frontmatter says of its round, by kind: the implementer's branch, its
    verification command (`test`) and the findings to address; a tester's or reviewer's
    commit and diff; a reviewer's test commands, the ledger's open findings, the weakened
    tests' ids and the diff since the last review (`increment`)."""

    branch: str
    commit: str
    diff: str
    test: list[str] | None
    findings: list[str]
    tests: list[list[str]]
    earlier: list[Earlier]
    weakened: list[str]
    unrequested: list[str]
    unproven: list[str]
    increment: str


class BriefFields(RoundFields):
    """A brief's YAML frontmatter, which the scripted agent reads (handoff.peer.scripted_agent
    .Brief): keys in the order written, the round's own between `plan` and `report`."""

    ticket: str
    role: str
    kind: str
    round: int
    worktree: str
    plan: str
    report: str
    #: the command that files the report, its draft's path last
    submit: list[str]


def _fields(ctx: BriefContext, extra: RoundFields) -> BriefFields:
    return {"ticket": ctx.ticket, "role": ctx.role, "kind": str(ctx.kind), "round": ctx.round,
            "worktree": str(ctx.worktree), "plan": str(ctx.plan_path), **extra,
            "report": str(ctx.draft), "submit": [*ctx.submit, str(ctx.draft)]}


def _criteria(plan: Plan) -> str:
    if not plan.listed_criteria():
        return ""
    listing = "".join(f"- {clip(c, 2000)}\n" for c in plan.listed_criteria())
    return f"\n## Acceptance criteria\n\n{listing}"


def finding_line(entry: Entry) -> str:
    """One must-fix as a brief lists it, with who raised it and its last answers."""
    where = clip(f"{entry.file}:{entry.line}", 500)
    ident = f"`{entry.id}` " if entry.id else ""
    return (f"- {ident}`{where}` — {clip(entry.reason, FINDING_LIMIT)} "
            f"({clip(entry.history(), FINDING_LIMIT)})\n")


def _commands(commands: Sequence[Sequence[str]]) -> str:
    if not commands:
        return "(the plan names no test command: use your judgement)\n"
    return "".join(f"- `{shlex.join(c)}`\n" for c in commands)


def implementer(ctx: BriefContext, branch: str, findings: Sequence[Entry] = (),
                notes: Sequence[tuple[str, str]] = ()) -> str:
    """findings: the ledger's open must-fixes; notes: (title, text) sections of feedback — a
    gate failure, a rejected report, an answer."""
    test = [list(ctx.plan.test)] if ctx.plan.test else []
    parts = [
        f"# {ctx.ticket} — implementer brief, round {ctx.round}\n\n",
        _contract(ctx),
        f"\n## Where\n\n- worktree: `{ctx.worktree}` (detached: commit there; handoff puts "
        f"your commits on the branch)\n- branch: `{branch}`\n- round: {ctx.round}\n",
        f"\n## Ticket\n\n{ctx.ticket_text.strip()}\n",
        f"\n## Plan\n\n(also at `{ctx.plan_path}`)\n\n{ctx.plan.text.strip()}\n",
        f"\n## Verification command\n\n{_commands(test)}",
    ]
    if findings:
        listing = "".join(finding_line(f) for f in findings)
        parts.append(f"\n## The reviewers' must-fix findings to address this round\n\n"
                     f"{listing}\nChange what these findings need, and what the plan names: "
                     "every other change of this round is shown to the reviewers as "
                     "unrequested, and each must be justified.\n")
    # a note may carry output (a failing gate's end, a rejected report's problems): bounded
    parts.extend(f"\n## {title}\n\n{clip(text.strip(), NOTE_LIMIT)}\n" for title, text in notes)
    parts.append("\n" + _submit_block(ctx))
    parts.append(f"\nReport template:\n\n```markdown\n{template(Kind.IMPLEMENTER)}```\n")
    fields = _fields(ctx, {"branch": branch, "test": test[0] if test else None,
                           "findings": [clip(f.render(), FINDING_LIMIT) for f in findings]})
    return join(fields, "".join(parts))


def tester(ctx: BriefContext, commit: str, diff: Path,
           notes: Sequence[tuple[str, str]] = ()) -> str:
    """A tester's brief: the implementer's commit (or the last tester's), the plan and its
    criteria; it adds tests on top, and handoff puts its commit on the branch. notes: what a
    person answered for this round (a blocked tester's question)."""
    test = [list(ctx.plan.test)] if ctx.plan.test else []
    parts = [
        f"# {ctx.ticket} — {ctx.role} (tester) brief, round {ctx.round}\n\n",
        _contract(ctx),
        f"\n## Where\n\n- worktree: `{ctx.worktree}`, detached at `{commit}`: add your "
        f"tests on top of it\n- the change so far, against the base: `{diff}`\n",
        f"\n## Ticket\n\n{ctx.ticket_text.strip()}\n",
        f"\n## Plan\n\n(also at `{ctx.plan_path}`)\n\n{ctx.plan.text.strip()}\n",
        _criteria(ctx.plan),
        f"\n## Verification command\n\n{_commands(test)}",
        *(f"\n## {title}\n\n{clip(text.strip(), NOTE_LIMIT)}\n" for title, text in notes),
        "\n" + _submit_block(ctx),
        f"\nReport template:\n\n```markdown\n{template(Kind.TESTER, commit)}```\n",
    ]
    fields = _fields(ctx, {"commit": commit, "diff": str(diff),
                           "test": test[0] if test else None})
    return join(fields, "".join(parts))


def planner(ctx: BriefContext, base: str, gate: Sequence[str] | None,
            contracts: Sequence[str], notes: Sequence[tuple[str, str]] = ()) -> str:
    """A planner's brief: the ticket's text, the base commit it reads in its checkout, the
    repository's default gate and contract files; it drafts the plan as its report. notes:
    a person's note for another draft, the problems of the last one."""
    gate_line = (f"The repository's default verification command is `{shlex.join(gate)}`: "
                 "keep it as `test:` unless a narrower command runs the tests that matter, "
                 "or name one of your own.\n") if gate else (
        "The repository sets no default verification command: `test:` must name the exact "
        "command that runs the relevant tests.\n")
    listed = "".join(f"- `{name}`\n" for name in contracts) or "- none\n"
    parts = [
        f"# {ctx.ticket} — planner brief, draft {ctx.round}\n\n",
        _contract(ctx),
        f"\n## Where\n\n- checkout: `{ctx.worktree}`, detached at the base commit `{base}`: "
        "read it, change nothing\n",
        f"\n## Ticket\n\n{ctx.ticket_text.strip()}\n",
        f"\n## Verification\n\n{gate_line}",
        f"\n## The repository's contract files\n\n{listed}",
        *(f"\n## {title}\n\n{clip(text.strip(), NOTE_LIMIT)}\n" for title, text in notes),
        "\n" + _submit_block(ctx),
        f"\nReport template (the report is the plan):\n\n```markdown\n"
        f"{template(Kind.PLANNER, base)}```\n",
    ]
    fields = _fields(ctx, {"commit": base, "test": list(gate) if gate else None})
    return join(fields, "".join(parts))


@dataclass(frozen=True)
class Review:
    """What a reviewer's brief shows of the round beyond the plan: the commit, its diffs,
    the ledger's open findings, the tests the change weakened (id, line), and what the
    scanners that do not block found (title, text)."""

    commit: str
    diff: Path
    #: the diff since the last reviewed commit (None for the first review)
    increment: Path | None = None
    earlier: tuple[Entry, ...] = ()
    weakened: tuple[tuple[str, str], ...] = ()
    notes: tuple[tuple[str, str], ...] = ()
    #: the changes since the last review no finding asked for (id, where and what)
    unrequested: tuple[tuple[str, str], ...] = ()
    #: the new tests that pass at the base too (id, which)
    unproven: tuple[tuple[str, str], ...] = ()

    def asked(self) -> dict[str, tuple[str, ...]]:
        """The ids the reviewer answers, under each key of reports.QUESTIONED."""
        return {WEAKENED.key: tuple(i for i, _ in self.weakened),
                UNREQUESTED.key: tuple(i for i, _ in self.unrequested),
                UNPROVEN.key: tuple(i for i, _ in self.unproven)}


def _to_answer(title: str, key: str, items: Sequence[tuple[str, str]], what: str) -> str:
    """A brief's section of items the reviewer answers justified or not under key ('' when
    there are none)."""
    if not items:
        return ""
    listing = "".join(f"- `{ident}` {clip(line, FINDING_LIMIT)}\n" for ident, line in items)
    return f"\n## {title}: answer every one under `{key}:`\n\n{what}\n\n{listing}"


def reviewer(ctx: BriefContext, review: Review) -> str:
    commands = [list(c) for c in ctx.plan.review_commands]
    since = (f"- what changed since the last reviewed commit: `{review.increment}`\n"
             if review.increment is not None else "")
    parts = [
        f"# {ctx.ticket} — {ctx.role} brief, round {ctx.round}\n\n"
        if ctx.role != Kind.REVIEWER else f"# {ctx.ticket} — reviewer brief, round {ctx.round}\n\n",
        _contract(ctx),
        f"\n## What to review\n\n- commit: `{review.commit}` (checked out, detached, in "
        f"`{ctx.worktree}`)\n- diff against the base: `{review.diff}`\n{since}",
        f"\n## Ticket\n\n{ctx.ticket_text.strip()}\n",
        f"\n## Plan\n\n(also at `{ctx.plan_path}`)\n\n{ctx.plan.text.strip()}\n",
        _criteria(ctx.plan),
        f"\n## Test commands to run in your worktree\n\n{_commands(commands)}",
    ]
    if review.earlier:
        listing = "".join(finding_line(e) for e in review.earlier)
        parts.append("\n## Earlier must-fix findings: answer every one under `ledger:`\n\n"
                     "Each is `fixed` or `not-fixed` at this commit, with your evidence. A new "
                     "must-fix is taken only on a line the fix rounds changed (see the diff "
                     "since the last review) or for an acceptance criterion still unmet "
                     f"(`criterion: AC…`); anything else is a should_fix.\n\n{listing}")
    parts.append(_to_answer(
        "Tests this change weakened", "weakened", review.weakened,
        "Each is a test removed, emptied or skipped, a change to what decides which tests run "
        "(test configuration: the gate may now leave tests out, or pass them whatever they "
        "do), or the gate running fewer tests than at the base. `justified` when the plan "
        "means it (for test configuration: or every test that ran before still runs and can "
        "still fail), else `unjustified` (a must-fix)."))
    parts.append(_to_answer(
        "Changes no finding asked for", "unrequested", review.unrequested,
        "Each is a hunk of the change since the last review that is near none of the findings "
        "the round had to fix, in a file the plan does not name. `justified` when a finding or "
        "the plan needed it (say which), else `unjustified` (a must-fix: a fix round changes "
        "what it was asked to)."))
    parts.append(_to_answer(
        "New tests that pass without the change", "unproven", review.unproven,
        "Each is a test this ticket added or changed that passed when handoff ran it at the "
        "base, the change's test files laid over it: it does not show the change does "
        "anything. `justified` when it need not fail there (it guards behaviour the change "
        "must keep, and the plan or a finding asks for that; say which), else `unjustified` "
        "(a must-fix: write a test that fails without the change)."))
    parts.extend(f"\n## {title}\n\n{clip(text.strip(), NOTE_LIMIT)}\n"
                 for title, text in review.notes)
    earlier = tuple(e.id for e in review.earlier)
    asked = review.asked()
    parts += ["\n" + _submit_block(ctx),
              f"\nReport template:\n\n```markdown\n"
              f"{template(Kind.REVIEWER, review.commit, earlier, asked)}```\n"]
    round_fields: RoundFields = {
        "commit": review.commit, "diff": str(review.diff), "tests": commands,
        "earlier": [{"id": e.id, "file": e.file, "line": e.line, "reason": e.reason}
                    for e in review.earlier], "weakened": list(asked[WEAKENED.key]),
        "unrequested": list(asked[UNREQUESTED.key]), "unproven": list(asked[UNPROVEN.key])}
    if review.increment:
        round_fields["increment"] = str(review.increment)
    fields = _fields(ctx, round_fields)
    return join(fields, "".join(parts))
