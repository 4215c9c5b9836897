"""`handoff submit`: a peer files its report; every problem is reported at once, in its turn."""

from __future__ import annotations

import os
from pathlib import Path

from handoff import reports
from handoff.errors import UsageError
from handoff.store import atomic_write
from handoff.ticket import TicketDir
from handoff.validators import check_implementer, check_reviewer
from handoff.workspace import Workspace, check_role


def context(directory: str | None, role: str | None, round_: int | None) -> tuple[Path, str]:
    """The ticket directory and role from the flags, else from the peer's environment."""
    folder = directory or os.environ.get("HANDOFF_TICKET_DIR")
    who = role or os.environ.get("HANDOFF_ROLE")
    if not folder or not who:
        raise UsageError("submit needs the ticket directory and role",
                         "run the exact submit command from your brief (it passes --dir and "
                         "--role), or set HANDOFF_TICKET_DIR and HANDOFF_ROLE")
    return Path(folder), check_role(who)


def file_report(folder: Path, role: str, round_: int | None,
                report_file: Path) -> tuple[Path | None, list[str]]:
    """Check the report (shape and claims) and file it atomically; or return the problems."""
    tdir = TicketDir(folder.resolve())
    if not tdir.state_file.exists():
        return None, [f"{folder} is not a handoff ticket directory (no state.json)"]
    ws = Workspace.open(tdir.path.parent.parent, tdir)
    state = ws.state()
    current = state.round
    n = current if round_ is None else round_
    if n != current:
        return None, [f"this report is for round {n}, but the ticket is in round {current}; "
                      "read your newest brief"]
    expected_phase = "implementing" if role == "implementer" else "reviewing"
    if state.phase != expected_phase:
        return None, [f"the ticket is {state.phase}, not waiting for the {role}'s report"]
    target = tdir.report(role, n)
    if target.exists():
        return None, [f"round {n}'s {role} report is already filed ({target.name})"]
    try:
        text = report_file.read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError, UnicodeDecodeError) as exc:
        return None, [f"cannot read {report_file}: {exc}"]
    report, problems = reports.parse(text, role, {"role": role, "round": n,
                                                  "ticket": state.ticket})
    if report is None:
        return None, problems
    if role == "implementer":
        problems = check_implementer(report, ws.repo, ws.worktrees, state.last_commit())
    else:
        problems = check_reviewer(report, ws.repo, state.commit_of(n))
    if problems:
        return None, problems
    atomic_write(target, text)
    tdir.events.append("submitted", round=n, role=role, report=target.name)
    return target, []
