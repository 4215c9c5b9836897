"""Judging a peer's report: every problem reported at once, or the report filed with the receipt
of its checks. The orchestrator judges what `handoff submit` hands it (handoff.protocol.intake); the
submitting process judges only when no orchestrator runs (handoff.cli.filing)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from handoff.errors import UsageError
from handoff.inputs import REPORT_LIMIT, read_text
from handoff.loop import weakened
from handoff.loop.validators import check_implementer, check_reviewer, check_tester
from handoff.loop.workspace import Workspace
from handoff.protocol import diffs, ledger, reports
from handoff.protocol.intake import refusal
from handoff.protocol.reports import Report
from handoff.record import seals
from handoff.record.events import now
from handoff.record.seals import Seals
from handoff.record.store import atomic_write, atomic_write_json, digest
from handoff.record.ticket import State, TicketDir
from handoff.role import Kind


@dataclass(frozen=True)
class Filed:
    """A report judged and filed: where, what it says, and the digest of the text filed (what
    its reader compares, so it is parsed once)."""

    path: Path
    report: Report
    digest: str


def file_report(folder: Path, role: str, round_: int | None, text: str,
                seal: str = "") -> tuple[Path | None, list[str]]:
    """Judge and file the report text for role, opening the ticket from its directory (a
    `handoff submit` with no orchestrator to hand it to). seal: the submitting process's own
    (from its environment)."""
    tdir = TicketDir(folder.resolve())
    if not tdir.state_file.exists():
        return None, [f"{folder} is not a handoff ticket directory (no state.json)"]
    ws = Workspace.open(tdir.path.parent.parent, tdir)
    state = ws.state()
    filed, problems = judge(ws, state, role, round_, text, seal)
    if filed is None:
        return None, problems
    tdir.events.append("submitted", round=state.round, role=role, report=filed.path.name)
    return filed.path, problems


def judge(ws: Workspace, state: State, role: str, round_: int | None, text: str,
          seal: str) -> tuple[Filed | None, list[str]]:
    """Check the report (its sender, shape and claims) and file it atomically with its receipt;
    or return every problem. The caller records the `submitted` event."""
    tdir = ws.tdir
    n = state.round if round_ is None else round_
    if not state.roles.has(role):
        return None, [f"this ticket has no role {role!r} (its roles: "
                      f"{', '.join(state.roles.names)})"]
    kind = state.roles.kind(role)
    refused = refusal(state.phase, state.round, role, n, kind)
    if refused:
        return None, [refused]
    refused = Seals(tdir.path).check(role, n, seals.stamp(seal, role, n) if seal else "")
    if refused:
        # a submit from another session (another role's peer, an old round's, a shell) is
        # a forgery attempt: logged, as the README says, though nothing is filed
        tdir.events.append("forgery", round=state.round, role=role, report="",
                           why=f"a submit for the {role} of round {n} was refused: {refused}")
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
    report, problems = reports.parse(text, kind, {"role": role, "round": n,
                                                  "ticket": state.ticket}, role)
    if report is None:
        return None, problems
    problems = claims(ws, state, role, n, report)
    if problems:
        return None, problems
    # the receipt first: a report that is there always has the receipt of its checks
    write_receipt(tdir, target, text, report.commit, role, n, seals.stamp(seal, role, n))
    atomic_write(target, text)
    return Filed(target, report, digest(text)), []


def claims(ws: Workspace, state: State, role: str, n: int, report: Report,
           worktree_state: bool = True) -> list[str]:
    """What is wrong with the claims of role's report for round n, checked against git and the
    ticket's record; worktree_state: also the peer's worktree as it is now (only when the
    report is filed: what a peer does after that is not a claim of its report)."""
    kind = state.roles.kind(role)
    if kind is Kind.IMPLEMENTER:
        return check_implementer(report, ws.repo, ws.worktrees, state.last_commit(),
                                 worktree_state)
    plan = ws.plan()
    if kind is Kind.TESTER:
        named = weakened.named_paths([*(c for c in (plan.test,) if c), *plan.review])
        return check_tester(report, ws.repo, ws.worktrees, role, state.commit_of(n),
                            lambda path: weakened.is_test_path(path, named), worktree_state)
    commit = state.commit_of(n)
    problems = check_reviewer(report, ws.repo, commit)
    if problems:
        return problems
    first = first_reviewed(state, n)
    changed = None if not first else diffs.changed_lines(
        diffs.parse(ws.repo.line_diff(first, commit)))
    shown = [str(w.get("id")) for w in state.weakened.get(str(n), [])]
    return ledger.problems(report, ledger.Ledger.of(state.ledger).open(), plan, changed, shown)


def first_reviewed(state: State, n: int) -> str:
    """The commit of the ticket's first review before round n ('' when round n's review is
    the first): a later review raises new must-fixes only on what changed since."""
    earlier = sorted(int(r) for r in state.verdicts if int(r) < n)
    return state.commit_of(earlier[0]) if earlier else ""


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
    kept = tdir.forged(report)
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
