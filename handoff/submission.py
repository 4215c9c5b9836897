"""`handoff submit`: a peer files its report; every problem is reported at once, in its turn."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from handoff import reports, seals
from handoff.errors import UsageError
from handoff.events import now
from handoff.inputs import REPORT_LIMIT, read_text
from handoff.seals import Seals
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


def file_report(folder: Path, role: str, round_: int | None, report_file: Path,
                seal: str = "") -> tuple[Path | None, list[str]]:
    """Check the report (its sender, shape and claims) and file it atomically; or return the
    problems. seal: the submitting process's own (from its environment)."""
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
    refused = Seals(tdir.path).check(role, n, seals.stamp(seal, role, n) if seal else "")
    if refused:
        return None, [f"this `handoff submit` did not run in the {role}'s own session for round "
                      f"{n} ({refused}): only the {role} handoff started and briefed for round "
                      f"{n} can file its report; run the submit command from your brief in "
                      "your own terminal"]
    target = tdir.report(role, n)
    if target.exists():
        try:
            why = provenance(tdir, target, read_text(target, REPORT_LIMIT, "the filed report"),
                             role, n)
        except UsageError as exc:
            why = exc.message
        if not why:
            return None, [f"round {n}'s {role} report is already filed ({target.name})"]
        set_aside(tdir, target, role, n, why)
    try:
        text = read_text(report_file, REPORT_LIMIT, "the report")
    except UsageError as exc:
        return None, [exc.message + (f" ({exc.hint})" if exc.hint else "")]
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
    write_receipt(tdir, target, text, report.commit, role, n, seals.stamp(seal, role, n))
    atomic_write(target, text)
    tdir.events.append("submitted", round=n, role=role, report=target.name)
    return target, []


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write_receipt(tdir: TicketDir, report: Path, text: str, commit: str, role: str, round_: int,
                  stamp: str) -> None:
    """What was checked, for whom, and when, for the exact text filed."""
    atomic_write_json(tdir.receipt(report), {
        "report": report.name, "sha256": digest(text), "commit": commit, "checked": now(),
        "worktree_clean": True, "role": role, "round": round_, "stamp": stamp})


def provenance(tdir: TicketDir, report: Path, text: str, role: str, round_: int) -> str:
    """'' when report is exactly what `handoff submit` filed for role's round_, from the
    session handoff started for it; else why it does not count."""
    try:
        data = json.loads(tdir.receipt(report).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return "it has no receipt from `handoff submit`"
    except (OSError, ValueError):
        return "its receipt is unreadable"
    if not isinstance(data, dict):
        return "its receipt is unreadable"
    if data.get("sha256") != digest(text):
        return "it was changed after `handoff submit` filed it"
    if data.get("role") != role or data.get("round") != round_:
        return f"its receipt is for the {data.get('role')}'s round {data.get('round')}"
    return Seals(tdir.path).check(role, round_, str(data.get("stamp") or ""))


def set_aside(tdir: TicketDir, report: Path, role: str, round_: int,
              why: str) -> dict[str, Any] | None:
    """A report that does not count is kept beside the record, never taken, never deleted;
    returns the `forgery` event (None: another process set it aside first)."""
    n = 1
    while (kept := report.with_name(f"{report.stem}.forged-{n}.md")).exists():
        n += 1
    try:
        report.replace(kept)
    except FileNotFoundError:
        return None
    receipt = tdir.receipt(report)
    if receipt.exists():
        receipt.replace(receipt.with_name(f"{kept.stem}.json"))
    return tdir.events.append("forgery", round=round_, role=role, report=kept.name, why=why)


def spend(tdir: TicketDir, report: Path) -> None:
    """The report was judged: its stamp never files another."""
    try:
        data = json.loads(tdir.receipt(report).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(data, dict) and data.get("stamp"):
        Seals(tdir.path).spend(str(data["stamp"]))
