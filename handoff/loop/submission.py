"""Judging a peer's report: every problem reported at once, or the report filed with the receipt
of its checks. Only the orchestrator judges and files (what `handoff submit` hands it over the
intake socket: handoff.protocol.intake); a report is never filed when no orchestrator runs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from handoff.errors import UsageError
from handoff.inputs import REPORT_LIMIT, read_text
from handoff.loop import drafts, filer, proving, weakened
from handoff.loop.validators import check_implementer, check_reviewer, check_tester
from handoff.loop.workspace import Workspace
from handoff.protocol import diffs, ledger, reports
from handoff.protocol.intake import refusal
from handoff.protocol.reports import Report
from handoff.record.events import now
from handoff.record.grants import Grants
from handoff.record.store import atomic_write, atomic_write_json, digest
from handoff.record.ticket import State, TicketDir
from handoff.role import Kind
from handoff.verdicts import Status


@dataclass(frozen=True)
class Filed:
    """A report judged and filed: where, what it says, and the digest of the text filed (what
    its reader compares, so it is parsed once)."""

    path: Path
    report: Report
    digest: str


def taken_at_turn_end(kind: Kind) -> bool:
    """A tester's or a reviewer's report is taken once its turn is over, not when it is filed:
    both run the code under review, which may file in their name while they work
    (handoff.loop.filer); what they file last, themselves, replaces it."""
    return kind in (Kind.TESTER, Kind.REVIEWER)


def judge(ws: Workspace, state: State, role: str, round_: int | None, text: str,
          pid: int) -> tuple[Filed | None, list[str]]:
    """Check the report (its sender, shape and claims) and file it atomically with its receipt;
    or return every problem. pid: the submitting process, as the kernel names it. The caller
    records the `submitted` event."""
    tdir = ws.tdir
    n = state.round if round_ is None else round_
    if not state.roles.has(role):
        return None, [f"this ticket has no role {role!r} (its roles: "
                      f"{', '.join(state.roles.names)})"]
    kind = state.roles.kind(role)
    refused = refusal(state.phase, state.round, role, n, kind)
    if refused:
        return None, [refused]
    pane = ws.peers(state).pane(role)
    who = filer.judge(pid, role, pane.pid if pane is not None and not pane.dead else None,
                      Grants(tdir.path).granted(role, n), ws.provider(role).core,
                      ws.provider(role).relaunches)
    if who.why:
        # a submit from another session (another role's peer, a test the peer ran, a shell)
        # is a forgery attempt: logged with the lineage, as the README says, though nothing
        # is filed
        tdir.events.append("forgery", round=state.round, role=role, report="",
                           why=f"a submit for the {role} of round {n} was refused: {who.why}",
                           evidence=who.evidence)
        return None, [f"this `handoff submit` is not the {role}'s own for round {n}: {who.why}. "
                      "Only the peer handoff started for the role, running the submit command "
                      "of its brief itself, files its report"]
    target = tdir.report(role, n)
    if target.exists():
        try:
            why = provenance(tdir, target, read_text(target, REPORT_LIMIT, "the filed report"),
                             role, n)
        except UsageError as exc:
            why = exc.message
        if not why and (not taken_at_turn_end(kind) or taken(state, role, n)):
            return None, [f"round {n}'s {role} report is already filed ({target.name})"]
        if why:
            set_aside(tdir, target, role, n, why)
    report, problems = reports.parse(text, kind, {"role": role, "round": n,
                                                  "ticket": state.ticket}, role)
    if report is None:
        return None, problems
    problems = claims(ws, state, role, n, report)
    if problems:
        return None, problems
    if target.exists():  # filed before in this turn, not taken: kept beside, replaced
        supersede(tdir, target)
    # the receipt first: a report that is there always has the receipt of its checks
    write_receipt(tdir, target, text, report.commit, role, n)
    atomic_write(target, text)
    return Filed(target, report, digest(text)), []


def taken(state: State, role: str, n: int) -> bool:
    """The orchestrator took role's report of round n already."""
    return role in state.reviewed.get(str(n), {}) or role in state.tested.get(str(n), {})


def claims(ws: Workspace, state: State, role: str, n: int, report: Report,
           worktree_state: bool = True) -> list[str]:
    """What is wrong with the claims of role's report for round n, checked against git and the
    ticket's record; worktree_state: also the peer's worktree as it is now (only when the
    report is filed: what a peer does after that is not a claim of its report)."""
    kind = state.roles.kind(role)
    if kind is Kind.PLANNER:
        return planned(ws, state, report)
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
    return ledger.problems(report, ledger.Ledger.of(state.ledger).open(), plan, changed,
                           questioned(state, n))


def questioned(state: State, n: int) -> dict[str, list[str]]:
    """The ids round n's reviewers were shown under each key of reports.QUESTIONED: each
    one's answer is due."""
    return {reports.WEAKENED.key: [str(w.get("id")) for w in state.weakened.get(str(n), [])],
            reports.UNREQUESTED.key: [str(u.get("id"))
                                      for u in state.unrequested.get(str(n), [])],
            reports.UNPROVEN.key: [ident for ident, _ in
                                   proving.unproven(state.proofs.get(str(n)))]}


def planned(ws: Workspace, state: State, report: Report) -> list[str]:
    """A planner's report: drafted at the base commit, and (done) a plan a person may approve
    (handoff.loop.drafts); a blocked one asks its question and drafts nothing."""
    if not state.base_commit.startswith(report.commit):
        return [f"'commit' must be the base commit you read, {state.base_commit}, not "
                f"{report.commit}"]
    if report.status == Status.BLOCKED:
        return []
    return drafts.problems(report, ws.repo.paths_at(state.base_commit), ws.config.test)


def first_reviewed(state: State, n: int) -> str:
    """The commit of the ticket's first review before round n ('' when round n's review is
    the first): a later review raises new must-fixes only on what changed since."""
    earlier = sorted(int(r) for r in state.verdicts if int(r) < n)
    return state.commit_of(earlier[0]) if earlier else ""


def write_receipt(tdir: TicketDir, report: Path, text: str, commit: str, role: str,
                  round_: int) -> None:
    """What was checked, for whom, and when, for the exact text filed; signed with the
    ticket's key, which no peer holds."""
    fields = {"report": report.name, "sha256": digest(text), "commit": commit, "role": role,
              "round": round_}
    atomic_write_json(tdir.receipt(report), {
        **fields, "checked": now(), "worktree_clean": True,
        "signature": Grants(tdir.path).sign(_signed(fields))})


def _signed(fields: Mapping[str, object]) -> str:
    return json.dumps({k: fields.get(k) for k in ("report", "sha256", "commit", "role",
                                                  "round")}, sort_keys=True)


def provenance(tdir: TicketDir, report: Path, text: str, role: str, round_: int,
               filed_as: str = "") -> str:
    """'' when report is exactly what handoff filed for role's round_ (its receipt, signed with
    the ticket's key, says so); else why it does not count. filed_as: the name it was filed
    under, when it was kept beside the record since (`supersede`)."""
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
    if data.get("report") != (filed_as or report.name) or \
            not Grants(tdir.path).signed(_signed(data), str(data.get("signature") or "")):
        return "its receipt was not written by handoff (its signature does not check out)"
    return ""


def supersede(tdir: TicketDir, report: Path) -> Path:
    """A report filed earlier in the same turn, replaced by a later one of the same peer: kept
    beside the record (`<name>.filed-N.md`, with its receipt) for the orchestrator to weigh
    (a reviewer's fail stands) and for a person to read."""
    n = 1
    while (kept := report.with_name(f"{report.stem}.filed-{n}.md")).exists():
        n += 1
    receipt = tdir.receipt(report)
    if receipt.exists():
        receipt.replace(tdir.receipt(kept))
    report.replace(kept)
    return kept


def filed_before(tdir: TicketDir, report: Path) -> list[Path]:
    """The reports of the same role and round that later ones replaced, oldest first."""
    return sorted(report.parent.glob(f"{report.stem}.filed-*.md"),
                  key=lambda p: int(p.stem.rsplit("-", 1)[-1]) if
                  p.stem.rsplit("-", 1)[-1].isdigit() else 0)


def set_aside(tdir: TicketDir, report: Path, role: str, round_: int, why: str,
              kind: str = "forgery") -> dict[str, object] | None:
    """A report that does not count is kept beside the record, never taken, never deleted;
    returns its event (None: another process set it aside first). kind: `forgery` (handoff did
    not file it, or it changed since), or `void` (filed, by a session that ended before its
    turn did)."""
    kept = tdir.forged(report) if kind == "forgery" else tdir.voided(report)
    try:
        report.replace(kept)
    except FileNotFoundError:
        return None
    receipt = tdir.receipt(report)
    if receipt.exists():
        receipt.replace(receipt.with_name(f"{kept.stem}.json"))
    if kind == "forgery":
        return tdir.events.append("forgery", round=round_, role=role, report=kept.name, why=why)
    return tdir.events.append("voided", round=round_, role=role, report=kept.name, why=why)
