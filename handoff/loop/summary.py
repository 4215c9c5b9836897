"""final-report.md: what a person reads when the loop ends, in 150 words or fewer."""

from __future__ import annotations

from collections.abc import Sequence

from handoff.machinery.repo import short_sha
from handoff.record.usage import Usage, cost_text, tokens_text

WORD_LIMIT = 150


def words(text: str) -> int:
    return len(text.split())


def final_report(*, ticket: str, outcome: str, reason: str, branch: str, commit: str,
                 rounds: int, reviews: int, bounces: int,
                 changed: Sequence[tuple[str, int, int]], verified: Sequence[str],
                 open_findings: Sequence[str], weakened: Sequence[str] = (),
                 overlaps: Sequence[str] = (),
                 usage: Sequence[tuple[int, str, Usage]] = ()) -> str:
    """Render the report, dropping detail (never the outcome) until it fits the word limit.
    open_findings: the ledger's open must-fixes (an escalated ticket's); weakened: the tests
    the change weakened, each as one line; usage: (round, role, tokens) as the CLIs recorded
    them; its table is the first detail to go (its total stays); overlaps: the other open
    tickets that change the same files, each as one line."""
    files = [f"{path} (+{added} −{removed})" for path, added, removed in changed]
    findings = list(open_findings)
    for keep_files, keep_findings, cut, table in ((8, 5, 0, True), (8, 5, 0, False),
                                                  (4, 3, 0, False), (2, 2, 12, False),
                                                  (1, 1, 8, False), (0, 0, 5, False)):
        text = _render(ticket, outcome, reason, branch, commit, rounds, reviews, bounces,
                       files, keep_files, verified, findings, keep_findings, cut)
        text += _listed("Tests weakened", weakened, keep_findings, cut)
        text += _listed("Overlaps", overlaps, keep_findings, cut)
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
    lines = ["", f"**{title}:**", *(f"- {_clip(i, cut)}" for i in items[:max(keep, 1)])]
    if len(items) > max(keep, 1):
        lines.append(f"- and {len(items) - max(keep, 1)} more")
    return "\n".join(lines) + "\n"


def _clip(text: str, cut: int) -> str:
    parts = text.split()
    return text if not cut or len(parts) <= cut else " ".join(parts[:cut]) + " …"


def _render(ticket: str, outcome: str, reason: str, branch: str, commit: str, rounds: int,
            reviews: int, bounces: int, files: list[str], keep_files: int,
            verified: Sequence[str], findings: list[str], keep_findings: int, cut: int) -> str:
    lines = [f"# {ticket}: {outcome}", ""]
    head = f"**Outcome:** {outcome}"
    if reason:
        head += f": {_clip(reason, cut or 30)}"
    lines.append(head)
    lines.append(f"**Branch:** {branch}@{short_sha(commit) if commit else '(no commit)'}")
    lines.append(f"**Rounds:** {rounds} implementer, {reviews} review, {bounces} gate bounce(s)")
    shown = files[:keep_files]
    more = f" and {len(files) - len(shown)} more" if len(files) > len(shown) else ""
    lines.append(f"**Changed:** {', '.join(shown) + more if files else 'nothing'}")
    lines.append("**Verified:** " + ("; ".join(_clip(v, cut) for v in verified) or "nothing"))
    if findings:
        lines.append("")
        lines.append("**Open findings:**")
        lines.extend(f"- {_clip(f, cut)}" for f in findings[:keep_findings])
        if len(findings) > keep_findings:
            lines.append(f"- and {len(findings) - keep_findings} more")
    return "\n".join(lines) + "\n"
