"""final-report.md: what a person reads when the loop ends, in 150 words or fewer."""

from __future__ import annotations

from collections.abc import Sequence

from handoff.reports import Finding

WORD_LIMIT = 150


def words(text: str) -> int:
    return len(text.split())


def final_report(*, ticket: str, outcome: str, reason: str, branch: str, commit: str,
                 rounds: int, reviews: int, bounces: int,
                 changed: Sequence[tuple[str, int, int]], verified: Sequence[str],
                 open_findings: Sequence[Finding]) -> str:
    """Render the report, dropping detail (never the outcome) until it fits the word limit."""
    files = [f"{path} (+{added} −{removed})" for path, added, removed in changed]
    findings = [f.render() for f in open_findings]
    for keep_files, keep_findings, cut in ((8, 5, 0), (4, 3, 0), (2, 2, 12), (1, 1, 8), (0, 0, 5)):
        text = _render(ticket, outcome, reason, branch, commit, rounds, reviews, bounces,
                       files, keep_files, verified, findings, keep_findings, cut)
        if words(text) <= WORD_LIMIT:
            return text
    return " ".join(text.split()[:WORD_LIMIT]) + "\n"


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
    lines.append(f"**Branch:** {branch}@{commit[:10] if commit else '(no commit)'}")
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
