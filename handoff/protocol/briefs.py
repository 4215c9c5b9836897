"""Briefs: the exact instructions each peer gets for a round, rendered from the plan.

Markdown with YAML frontmatter (the scripted agent reads the fields, a person or an AI the
prose). The reviewer's brief never carries the implementer's report: only plan, commit, diff.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from handoff.inputs import KIB, clip
from handoff.protocol.frontmatter import join
from handoff.protocol.plan import Plan
from handoff.protocol.reports import Finding, template

#: bytes of one feedback note, and of one finding's reason, a brief carries at most
NOTE_LIMIT = 16 * KIB
FINDING_LIMIT = 2 * KIB


@dataclass(frozen=True)
class BriefContext:
    ticket: str
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


def _fields(ctx: BriefContext, role: str, **extra: Any) -> dict[str, Any]:
    return {"ticket": ctx.ticket, "role": role, "round": ctx.round, "worktree": str(ctx.worktree),
            "plan": str(ctx.plan_path), **extra,
            "report": str(ctx.draft), "submit": [*ctx.submit, str(ctx.draft)]}


def _commands(commands: Sequence[Sequence[str]]) -> str:
    if not commands:
        return "(the plan names no test command: use your judgement)\n"
    return "".join(f"- `{shlex.join(c)}`\n" for c in commands)


def implementer(ctx: BriefContext, branch: str, findings: Sequence[Finding] = (),
                notes: Sequence[tuple[str, str]] = ()) -> str:
    """notes: (title, text) sections of feedback — a gate failure, a rejected report, an answer."""
    test = [list(ctx.plan.test)] if ctx.plan.test else []
    parts = [
        f"# {ctx.ticket} — implementer brief, round {ctx.round}\n\n",
        _contract(ctx),
        f"\n## Where\n\n- worktree: `{ctx.worktree}`\n- branch: `{branch}`\n- round: {ctx.round}\n",
        f"\n## Ticket\n\n{ctx.ticket_text.strip()}\n",
        f"\n## Plan\n\n(also at `{ctx.plan_path}`)\n\n{ctx.plan.text.strip()}\n",
        f"\n## Verification command\n\n{_commands(test)}",
    ]
    if findings:
        listing = "".join(f"- `{clip(f.file, 500)}:{f.line}` — {clip(f.reason, FINDING_LIMIT)}\n"
                          for f in findings)
        parts.append(f"\n## The reviewer's findings to address this round\n\n{listing}")
    # a note may carry output (a failing gate's end, a rejected report's problems): bounded
    parts.extend(f"\n## {title}\n\n{clip(text.strip(), NOTE_LIMIT)}\n" for title, text in notes)
    parts.append("\n" + _submit_block(ctx))
    parts.append(f"\nReport template:\n\n```markdown\n{template('implementer')}```\n")
    fields = _fields(ctx, "implementer", branch=branch, test=test[0] if test else None,
                     findings=[clip(f.render(), FINDING_LIMIT) for f in findings])
    return join(fields, "".join(parts))


def reviewer(ctx: BriefContext, commit: str, diff: Path) -> str:
    commands = [list(c) for c in ctx.plan.review_commands]
    parts = [
        f"# {ctx.ticket} — reviewer brief, round {ctx.round}\n\n",
        _contract(ctx),
        f"\n## What to review\n\n- commit: `{commit}` (checked out, detached, in "
        f"`{ctx.worktree}`)\n- diff against the base: `{diff}`\n",
        f"\n## Ticket\n\n{ctx.ticket_text.strip()}\n",
        f"\n## Plan\n\n(also at `{ctx.plan_path}`)\n\n{ctx.plan.text.strip()}\n",
        f"\n## Test commands to run in your worktree\n\n{_commands(commands)}",
        "\n" + _submit_block(ctx),
        f"\nReport template:\n\n```markdown\n{template('reviewer', commit)}```\n",
    ]
    fields = _fields(ctx, "reviewer", commit=commit, diff=str(diff), tests=commands)
    return join(fields, "".join(parts))
