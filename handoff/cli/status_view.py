"""`handoff status`, printed: a table for people, or the rows as JSON.

Scripts, prompts and status bars run it often, so a plain `status` is run from here without the
full command line (typer and its click): handoff.cli.entry sends it here, and `status --help` or
anything unusual on its line to app.py, whose `status` command prints through the same `text`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from handoff.errors import HandoffError, describe

if TYPE_CHECKING:  # the rows' modules load only for the rows: a plain `status` stays lean
    from handoff.operations.standing import StatusRow


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st …"""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def text(rows: Sequence[StatusRow], one: bool, as_json: bool, closed: int = 0) -> str:
    """What `status` prints for rows (one: a single ticket was asked for; closed: how many
    closed tickets the list left out)."""
    from handoff.machinery.repo import short_sha
    from handoff.record.usage import usage_line

    if as_json:
        return json.dumps(rows, indent=2)
    left_out = f"{closed} closed ticket(s) not shown: handoff status --all" if closed else ""
    if not rows:
        return f"no open tickets ({left_out})" if closed else \
            "no tickets yet: handoff start TICKET --plan plan.md (or try handoff demo)"
    lines = [f"{'TICKET':<22} {'PHASE':<18} {'ROUND':<5} {'ORCHESTRATOR':<20} REPO"]
    for row in rows:
        running = f"running (pid {row['orchestrator']})" if row["orchestrator"] else \
            {"finished": "-", "not started": "-"}.get(row["run"], row["run"])
        where = f"{Path(row['local_repo']).name} @ {row['host']}" if row.get("host") else \
            Path(row['repo']).name
        lines.append(f"{row['ticket']:<22} {row['phase']:<18} {row['round']:<5} {running:<20} "
                     f"{where}")
        queue = row.get("queue")
        if queue:  # live: the reason it queued with names the queue as it was then
            lines.append(f"    queue: {ordinal(queue['place'])} of {queue['waiting']} waiting; "
                         f"{queue['at_work']} of {queue['max_parallel']} tickets at work "
                         "(max_parallel); it starts by itself when a slot frees")
        elif row["reason"]:
            lines.append(f"    {row['reason']}")
        if row.get("verdicts") and (one or len(row["verdicts"]) > 1):
            lines.append("    reviews this round: " + ", ".join(
                f"{role} {verdict}" for role, verdict in row["verdicts"].items()))
        if row.get("overlaps"):
            lines.append("    overlaps: " + "; ".join(
                f"{other} also changes {', '.join(files[:3])}" + (" …" if len(files) > 3 else "")
                for other, files in row["overlaps"].items()) + " (handoff conflicts says more)")
        if one and row.get("team") and len(row["team"]) > 2:
            lines.append("    team: " + ", ".join(f"{name} ({kind})"
                                                  for name, kind in row["team"].items()))
        if row["error"]:
            lines.append(f"    error: {row['error']}")
        if row["hint"]:
            lines.append(f"    next: {row['hint']}")
        if row["events_skipped"]:
            lines.append(f"    events.jsonl: {row['events_skipped']} unreadable line(s) skipped")
        if spent := row.get("usage"):
            lines.append(f"    usage: {usage_line(spent)}")
        if one:
            lines.append(f"    branch {row['branch']} @ {short_sha(row['commit'])}\n"
                         f"    dir {row['dir']}")
    return "\n".join([*lines, *([f"({left_out})"] if left_out else [])])


def show(ticket: str | None, repo: Path | None, as_json: bool, every: bool = False) -> str:
    """One ticket, or the list: the open tickets (every: the closed too), what waits for a
    person first (handoff.operations.standing.listed)."""
    from handoff.operations import standing
    from handoff.record import placed
    from handoff.record.store import state_home

    home = state_home()
    elsewhere = placed.every(home)  # tickets on hosts: each host asked, side by side
    if ticket is not None and elsewhere and any(p.ticket == ticket for p in elsewhere):
        from handoff import config
        from handoff.operations import hosts

        return text(hosts.rows(home, config.load(home, None), ticket), True, as_json)
    rows = standing.status(home, ticket, repo)
    if ticket is not None:
        return text(rows, True, as_json)
    if elsewhere:
        from handoff import config
        from handoff.operations import hosts

        rows += hosts.rows(home, config.load(home, None))
    shown, closed = standing.listed(rows, every)
    return text(shown, False, as_json, closed)


def parse(argv: list[str]) -> tuple[str | None, Path | None, bool, bool] | None:
    """`status [TICKET] [--repo PATH] [--json] [--all]` (--repo=PATH too); None for anything
    else."""
    ticket: str | None = None
    repo: Path | None = None
    as_json = every = False
    args = iter(argv)
    for arg in args:
        name, eq, value = arg.partition("=")
        if arg == "--json" and not as_json:
            as_json = True
        elif arg == "--all" and not every:
            every = True
        elif name == "--repo" and repo is None:
            value = value if eq else next(args, "")
            if not value:
                return None
            repo = Path(value)
        elif arg.startswith("-") or ticket is not None:
            return None
        else:
            ticket = arg
    return ticket, repo, as_json, every


def main(argv: list[str]) -> int | None:
    """Run `handoff status` from argv (after "status"); None: the full command line takes it."""
    parsed = parse(argv)
    if parsed is None:
        return None
    try:
        print(show(*parsed))
    except HandoffError as exc:
        print(describe(exc), file=sys.stderr)
        return exc.exit_code
    return 0
