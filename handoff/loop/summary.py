"""final-report.md: what a person reads when the loop ends, in 150 words or fewer: gathered
from the ticket's record (`compose`), then rendered to fit (`final_report`)."""

from __future__ import annotations

from collections.abc import Sequence

from handoff.loop import proving, testcount, weakened
from handoff.loop.baseline import BASE
from handoff.loop.testcount import Count
from handoff.loop.workspace import Workspace
from handoff.machinery.repo import short_sha
from handoff.phases import Phase
from handoff.protocol import reports
from handoff.protocol.ledger import Ledger
from handoff.record import overlaps
from handoff.record.ticket import State
from handoff.record.usage import Usage, cost_text, per_round, tokens_text
from handoff.role import IMPLEMENTER, Kind

WORD_LIMIT = 150


def words(text: str) -> int:
    return len(text.split())


def clip_words(text: str, words: int) -> str:
    """At most words words of text, marked as cut (the final report has a word budget); text
    as it is when it is within them, or words is 0 (no limit)."""
    parts = text.split()
    return text if not words or len(parts) <= words else " ".join(parts[:words]) + " …"


def compose(ws: Workspace, state: State) -> str:
    """The final report of the ticket as its record stands."""
    commit = state.last_commit()
    changed = ws.repo.diffstat(state.base_commit, commit) if commit != state.base_commit else []
    open_findings = [e.attributed() for e in Ledger.of(state.ledger).open()] \
        if state.phase == Phase.ESCALATED else []
    last = max((int(r) for r in state.commits), default=0)
    return final_report(
        ticket=state.ticket, outcome=state.phase, reason=state.reason, branch=state.branch,
        commit=commit, rounds=state.round, reviews=state.reviews, bounces=state.gate_bounces,
        changed=changed, verified=verified(ws, state, last), open_findings=open_findings,
        weakened=[weakened.described(w) for w in state.weakened.get(str(last), [])],
        overlaps=[o.shown() for o in overlaps.for_ticket(ws.home, state)],
        usage=per_round(ws.tdir.events.read()[0], state.roles.names), source=state.source,
        failovers=failed_over(ws, state),
        proven=[*(proving.described(t) for t in proving.listed(state.proofs.get(str(last)))),
                *filter(None, [proving.mutants_said(state.proofs.get(str(last)))])])


def failed_over(ws: Workspace, state: State) -> list[str]:
    """Each role a spent quota moved to a fallback CLI, where it ended; a reviewer now on the
    implementer's CLI said so (its review was not independent)."""
    implementer = ws.spec(IMPLEMENTER).provider
    return [f"{role}: on {ws.spec(role).provider} after {count} failover(s) (a spent quota)"
            + ("; the implementer's CLI: its review was not independent"
               if state.roles.kind(role) is Kind.REVIEWER and ws.spec(role).provider == implementer
               else "")
            for role, count in sorted(state.failovers.items()) if state.roles.has(role)]


def verified(ws: Workspace, state: State, last: int) -> list[str]:
    """What checked the last round's commit: the gate, each scanner, each reviewer (what it
    says it ran, in its own words: the plan only says what it was asked to run)."""
    said_of: list[str] = []
    test = ws.plan().test
    if test and str(last) in state.gates:
        base, now = (Count.from_fields(state.tests_ran.get(key)) for key in (BASE, str(last)))
        ran = testcount.compared(base, now) if base is not None and now is not None else ""
        said_of.append(f"gate `{' '.join(test)}` {state.gates[str(last)]} "
                       f"(orchestrator{f'; {ran}' if ran else ''})")
    for name, result in state.scans.get(str(last), {}).items():
        said_of.append(f"scanner {name} {result}")
    for role, verdict in state.reviewed.get(str(last), {}).items():
        path = ws.tdir.report(role, last)
        review, _ = reports.parse(path.read_text(encoding="utf-8"), Kind.REVIEWER,
                                  role=role) if path.exists() else (None, [])
        said = (review.sections.get("tests run") or "").strip().splitlines() if review else []
        ran = clip_words(said[0], 14) if said else "its report names no tests run"
        said_of.append(f"{role}: {ran}; verdict {verdict} at {short_sha(state.last_commit())}")
    return said_of


def final_report(*, ticket: str, outcome: str, reason: str, branch: str, commit: str,
                 rounds: int, reviews: int, bounces: int,
                 changed: Sequence[tuple[str, int, int]], verified: Sequence[str],
                 open_findings: Sequence[str], weakened: Sequence[str] = (),
                 overlaps: Sequence[str] = (),
                 usage: Sequence[tuple[int, str, Usage]] = (), source: str = "",
                 failovers: Sequence[str] = (), proven: Sequence[str] = ()) -> str:
    """Render the report, dropping detail (never the outcome) until it fits the word limit.
    open_findings: the ledger's open must-fixes (an escalated ticket's); weakened: the tests
    the change weakened, each as one line; usage: (round, role, tokens) as the CLIs recorded
    them; its table is the first detail to go (its total stays); overlaps: the other open
    tickets that change the same files, each as one line; proven: what each test the ticket
    added or changed did at the base (handoff.loop.proof), each as one line."""
    files = [f"{path} (+{added} −{removed})" for path, added, removed in changed]
    findings = list(open_findings)
    for keep_files, keep_findings, cut, table in ((8, 5, 0, True), (8, 5, 0, False),
                                                  (4, 3, 0, False), (2, 2, 12, False),
                                                  (1, 1, 8, False), (0, 0, 5, False)):
        text = _render(ticket, outcome, reason, branch, commit, rounds, reviews, bounces,
                       files, keep_files, verified, findings, keep_findings, cut, source)
        text += _listed("Tests weakened", weakened, keep_findings, cut)
        text += _listed("New tests at the base", proven, keep_findings, cut)
        text += _listed("Overlaps", overlaps, keep_findings, cut)
        text += _listed("Failovers", failovers, keep_findings, cut)
        text += _usage(usage, table)
        if words(text) <= WORD_LIMIT:
            return text
    return " ".join(text.split()[:WORD_LIMIT]) + "\n"


def _usage(rows: Sequence[tuple[int, str, Usage]], table: bool) -> str:
    """The peers' tokens: a total, and a table per round and role when there is room."""
    if not rows:
        return ""
    total = Usage()
    for _, _, one in rows:
        total = total.plus(one)
    costs = any(one.cost_usd is not None for _, _, one in rows)
    line = f"**Usage:** {tokens_text(total.tokens)} tokens"
    if costs:  # only the CLIs' own figures, never a price handoff made up
        line += f", {cost_text(total.cost_usd)} as the CLIs recorded it"
    if not table:
        return line + "\n"
    lines = ["", line, "", "| Round | Role | Tokens |" + (" Cost |" if costs else ""),
             "|---|---|---|" + ("---|" if costs else "")]
    for n, role, one in rows:
        cost = f" {cost_text(one.cost_usd) or '-'} |" if costs else ""
        lines.append(f"| {n} | {role} | {tokens_text(one.tokens)} |{cost}")
    return "\n".join(lines) + "\n"


def _listed(title: str, items: Sequence[str], keep: int, cut: int) -> str:
    """A titled list (kept to `keep` items, each cut to `cut` words): never dropped whole,
    so a person always learns that tests were weakened."""
    if not items:
        return ""
    lines = ["", f"**{title}:**", *(f"- {clip_words(i, cut)}" for i in items[:max(keep, 1)])]
    if len(items) > max(keep, 1):
        lines.append(f"- and {len(items) - max(keep, 1)} more")
    return "\n".join(lines) + "\n"


def _render(ticket: str, outcome: str, reason: str, branch: str, commit: str, rounds: int,
            reviews: int, bounces: int, files: list[str], keep_files: int,
            verified: Sequence[str], findings: list[str], keep_findings: int, cut: int,
            source: str = "") -> str:
    lines = [f"# {ticket}: {outcome}", ""]
    head = f"**Outcome:** {outcome}"
    if reason:
        head += f": {clip_words(reason, cut or 30)}"
    lines.append(head)
    lines.append(f"**Branch:** {branch}@{short_sha(commit) if commit else '(no commit)'}")
    if source:  # the issue it came from: the report (and a pull request made of it) links back
        lines.append(f"**Issue:** {source}")
    lines.append(f"**Rounds:** {rounds} implementer, {reviews} review, {bounces} gate bounce(s)")
    shown = files[:keep_files]
    more = f" and {len(files) - len(shown)} more" if len(files) > len(shown) else ""
    lines.append(f"**Changed:** {', '.join(shown) + more if files else 'nothing'}")
    lines.append("**Verified:** " + ("; ".join(clip_words(v, cut) for v in verified) or "nothing"))
    if findings:
        lines.append("")
        lines.append("**Open findings:**")
        lines.extend(f"- {clip_words(f, cut)}" for f in findings[:keep_findings])
        if len(findings) > keep_findings:
            lines.append(f"- and {len(findings) - keep_findings} more")
    return "\n".join(lines) + "\n"
