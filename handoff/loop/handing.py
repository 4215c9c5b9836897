"""What each role is handed for a round, beside the plan: the implementer its feedback (the
ledger's open findings, the notes, what other tickets did to its files), a tester the answer
to its question, a reviewer the diff since the last review, the open findings, the tests the
change weakened and what the advisory scanners found. handoff.protocol.briefs renders them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from handoff.loop import proving, rules, unrequested, weakened
from handoff.loop.baseline import BASE
from handoff.loop.context import TicketContext
from handoff.loop.scanners import ScanState
from handoff.loop.testcount import Count
from handoff.phases import Phase
from handoff.protocol import briefs
from handoff.protocol.ledger import Entry, Ledger
from handoff.record import overlaps
from handoff.role import IMPLEMENTER, PLANNER


def implementer_brief(ctx: TicketContext, n: int) -> str:
    feedback = ctx.state.feedback if ctx.state.feedback.get("round") == n else {}
    findings = [_entry(f) for f in feedback.get("findings", [])]
    notes = [(str(t), str(x)) for t, x in feedback.get("notes", [])]
    notes += elsewhere(ctx)
    return briefs.implementer(ctx.ws.brief_context(ctx.state, IMPLEMENTER, n), ctx.ws.branch(),
                              findings, notes)


#: files at the top of a repository that say how its work is done: a planner reads them first
CONTRACT_FILES = ("CLAUDE.md", "AGENTS.md", "GEMINI.md", "CONTRIBUTING.md", "README.md")


def planner_brief(ctx: TicketContext, n: int) -> str:
    """The planner's brief for draft n: the ticket, the base, the repository's gate and
    contract files, and (a later draft) what the person asked of it."""
    state = ctx.state
    paths = ctx.ws.repo.paths_at(state.base_commit)
    feedback = state.feedback if state.feedback.get("round") == n else {}
    notes = [(str(t), str(x)) for t, x in feedback.get("notes", [])]
    return briefs.planner(ctx.ws.brief_context(state, PLANNER, n), state.base_commit,
                          ctx.ws.config.test, [name for name in CONTRACT_FILES if name in paths],
                          notes)


def tester_brief(ctx: TicketContext, tester: str, n: int, diff: Path) -> str:
    feedback = ctx.state.feedback if ctx.state.feedback.get("round") == n else {}
    answers = [(str(t), str(x)) for t, x in feedback.get("notes", [])
               if t == rules.ANSWERED]  # a blocked tester's question, answered
    return briefs.tester(ctx.ws.brief_context(ctx.state, tester, n), ctx.state.commit_of(n),
                         diff, answers)


def elsewhere(ctx: TicketContext) -> list[tuple[str, str]]:
    """What other tickets did to the files this one changes: merged into the base branch
    since this ticket started, or passed and waiting to be. Said so the implementer can
    keep its change apart from theirs before the merge, not find it out at the merge."""
    state, repo = ctx.state, ctx.ws.repo
    touched = set(state.touched)
    if not touched:
        return []
    lines = [f"- {o.shown()}: it passed review and will be merged into the base branch"
             for o in overlaps.for_ticket(ctx.ws.home, state) if o.phase == Phase.PASSED]
    base = repo.base_of(state.base)
    head = repo.branch_head(base) if base else ""
    if head and head != state.base_commit and repo.is_ancestor(state.base_commit, head):
        moved = sorted(touched & set(repo.changed_paths(state.base_commit, head)))
        if moved:
            lines.append(f"- {base} changed since this ticket started, in files you change "
                         f"too: {', '.join(moved[:10])}" + (" …" if len(moved) > 10 else ""))
    if not lines:
        return []
    return [("Other tickets change your files", "\n".join(lines) + "\n\nKeep your change "
             "to what the plan asks; where you must touch these files, expect to merge with "
             "their change.")]


def hand_diffs(ctx: TicketContext, n: int, commit: str) -> tuple[str, Path | None]:
    """Round n's diffs for its reviewers, written once: against the base, and (from the second
    review on) since the last reviewed commit. (That commit, and the second diff's path.)"""
    ctx.hand_diff(n)
    earlier = sorted(int(r) for r in ctx.state.verdicts if int(r) < n)
    last = ctx.state.commit_of(earlier[-1]) if earlier else ""
    if not last or last == commit:
        return last, None
    increment = ctx.tdir.diff_since(n, earlier[-1])
    ctx.hand(increment, lambda: ctx.ws.repo.diff(last, commit) + "\n")
    return last, increment


def review_of(ctx: TicketContext, n: int, commit: str, diff: Path) -> briefs.Review:
    """What every reviewer of round n is shown beside the plan: the diff since the last
    review, the ledger's open findings, the tests the change weakened, what the scanners
    that do not block found."""
    state = ctx.state
    last, increment = hand_diffs(ctx, n, commit)
    if str(n) not in state.weakened:
        _find_weakened(ctx, n, commit)
    shown_weak = tuple((str(w["id"]), weakened.described(w)) for w in state.weakened[str(n)])
    if str(n) not in state.unrequested:
        # what the round was asked to fix: the findings still open when it began
        asked = [_entry(f) for f in state.feedback.get("findings", [])] \
            if state.feedback.get("round") == n else list(Ledger.of(state.ledger).open())
        found = unrequested.found(ctx.ws.repo.line_diff(last, commit), asked,
                                  ctx.ws.plan()) if last and last != commit else []
        state.unrequested[str(n)] = [u.fields() for u in found]
        ctx.save()
        if found:
            ctx.event("unrequested", changes=[u.described() for u in found], commit=commit)
    shown_asked = tuple((str(u["id"]), unrequested.Unrequested.of(u).described())
                        for u in state.unrequested[str(n)])
    advisory = [f"- `{name}` {result}: see `{ctx.tdir.scan_log(n, name)}`"
                for name, result in state.scans.get(str(n), {}).items() if result == ScanState.FAILED]
    notes: tuple[tuple[str, str], ...] = (("What the scanners that do not block found",
              "\n".join(advisory) + "\n"),) if advisory else ()
    record = state.proofs.get(str(n))
    others = [proving.described(t) for t in proving.listed(record) if not t.get("id")]
    if others:
        notes += (("What the other new tests did at the base",
                   "handoff ran each test this ticket added or changed at the base, the "
                   "change's test files laid over it:\n\n"
                   + "".join(f"- {line}\n" for line in others)),)
    mutated = proving.mutants_said(record)
    if mutated:
        notes += (("Mutants of the changed lines (the plan's `prove: mutants`)",
                   f"{mutated}. A survivor is a line the new tests do not pin down: weigh "
                   "whether the plan needs a test that would catch it.\n"),)
    return briefs.Review(commit, diff, increment, tuple(Ledger.of(state.ledger).open()),
                         shown_weak, notes, shown_asked, tuple(proving.unproven(record)))


def _find_weakened(ctx: TicketContext, n: int, commit: str) -> None:
    """The tests round n's commit weakened, found once and kept in the record."""
    plan, state = ctx.ws.plan(), ctx.state
    found = weakened.with_fewer_tests(
        weakened.weakened(ctx.ws.repo, state.base_commit, commit,
                          [*(c for c in (plan.test,) if c), *plan.review]),
        Count.from_fields(state.tests_ran.get(BASE)),
        Count.from_fields(state.tests_ran.get(str(n))))
    state.weakened[str(n)] = [w.fields() for w in found]
    ctx.save()
    if found:
        ctx.event("weakened", tests=[w.render() for w in found], commit=commit)


def _entry(data: Mapping[str, Any]) -> Entry:
    """A finding a brief carries: a ledger entry, or (a ticket from before the ledger) a bare
    {file, line, reason} the reviewer raised."""
    if "id" in data:
        return Entry.from_fields(data)
    return Entry("", 0, ("reviewer",), str(data.get("file", "")), int(data.get("line", 0)),
                 str(data.get("reason", "")))
