"""`handoff submit`: a peer files its report; every problem is reported at once, in its turn."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from handoff import reports
from handoff.errors import UsageError
from handoff.events import now
from handoff.store import atomic_write, atomic_write_json
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
    # the receipt first: a report that is there always has the receipt of its checks
    write_receipt(tdir, target, text, report.commit)
    atomic_write(target, text)
    tdir.events.append("submitted", round=n, role=role, report=target.name)
    return target, []


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write_receipt(tdir: TicketDir, report: Path, text: str, commit: str) -> None:
    """What was checked, and when, for the exact text filed."""
    atomic_write_json(tdir.receipt(report), {"report": report.name, "sha256": digest(text),
                                             "commit": commit, "checked": now(),
                                             "worktree_clean": True})


def has_receipt(tdir: TicketDir, report: Path, text: str) -> bool:
    """report was filed through `handoff submit`, unchanged since its checks."""
    try:
        data = json.loads(tdir.receipt(report).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("sha256") == digest(text)
