"""Reports in: what `handoff submit` hands over is judged here once (`judge_handed`), and what a
wait finds filed is taken here (`take_report`): forged ones set aside, a reviewer's fail kept
against a later pass of the same turn, bad ones rejected with the peer told why, good ones
accepted with the round's usage recorded.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from handoff.errors import HandoffError, Tampered, UsageError
from handoff.inputs import REPORT_LIMIT, read_text
from handoff.loop import metering, rules, submission
from handoff.loop.context import TicketContext
from handoff.loop.crew import Crew
from handoff.loop.submission import provenance, set_aside
from handoff.protocol import reports
from handoff.protocol.intake import Intake, Reply, Request
from handoff.protocol.reports import Report
from handoff.record.store import digest
from handoff.role import Kind
from handoff.verdicts import Verdict

#: seconds nobody wrote to a report before it is judged even if it does not parse whole
SETTLE = 1.0


class ReportDesk:
    def __init__(self, ctx: TicketContext, crew: Crew) -> None:
        self.ctx = ctx
        self.crew = crew
        #: where `handoff submit` hands reports over while this orchestrator runs
        self.intake = Intake(str(ctx.tdir.path))
        #: the report files this orchestrator judged and filed itself, by name: parsed once
        self.judged: dict[str, submission.Filed] = {}
        #: when each role last filed a report through this orchestrator (time.time_ns())
        self.filed_ns: dict[str, int] = {}
        #: why each role's last `handoff submit` was refused, until one is accepted: what a
        #: person is told when its turn then ends with no report
        self.refused: dict[str, list[str]] = {}

    def judge_handed(self, request: Request) -> Reply:
        """The verdict on a report `handoff submit` handed over: judged here, once."""
        ctx = self.ctx
        if not ctx.team.has(request.role):
            return Reply(None, [f"unknown role {request.role!r}"])
        try:
            filed, problems = submission.judge(ctx.ws, ctx.state, request.role,
                                               request.round, request.report, request.pid)
        except Tampered as exc:  # not the peer's to mend: what it wrote would steer handoff
            ctx.event("tampered", request.role, evidence=exc.message)
            ctx.apply(rules.ask(f"{exc.message}. Fix: {exc.hint}; then 'handoff answer "
                                f"{ctx.state.ticket} go'", after_answer=ctx.state.phase))
            return Reply(None, [f"{exc.message}; nothing was filed, and a person was asked"])
        except HandoffError as exc:  # tmux or git did not answer: nothing filed, said
            return self._refuse(request, [f"{exc.message}; nothing was filed: submit again"])
        if filed is None:
            return self._refuse(request, problems)
        self.refused.pop(request.role, None)
        self.judged[filed.path.name] = filed
        self.filed_ns[request.role] = time.time_ns()
        ctx.event("submitted", request.role, report=filed.path.name, pid=request.pid)
        return Reply(str(filed.path), [])

    def _refuse(self, request: Request, problems: list[str]) -> Reply:
        """A submit refused: the peer is told why, and the record keeps it (`handoff log`, the
        board), so a turn that then ends with no report is said with its real cause."""
        self.refused[request.role] = problems
        self.ctx.event("submission", request.role, accepted=False, filed=False,
                       by="handoff submit", round_asked=request.round, pid=request.pid,
                       problems=problems)
        return Reply(None, problems)

    def forget(self, name: str) -> None:
        """A report this orchestrator judged was set aside: whatever has its name is read anew."""
        self.judged.pop(name, None)

    def whole(self, path: Path, role: str) -> bool:
        """The report at path is ready to be taken: judged and renamed into place by this
        orchestrator, or settled (`report_settled`)."""
        return path.exists() and (path.name in self.judged or report_settled(
            path, self.ctx.team.kind(role), role))

    def take_report(self, role: str, n: int, path: Path) -> Report | None:
        """Parse and check a filed report; a bad one is set aside and the peer told why. One
        this orchestrator judged itself (`judge_handed`) and nobody changed since is neither
        parsed nor checked again."""
        ctx = self.ctx
        kind = ctx.team.kind(role)
        filed = self.judged.pop(path.name, None)
        try:
            text = read_text(path, REPORT_LIMIT, "the report")
            judged = filed is not None and filed.digest == digest(text)
            forged = "" if judged else provenance(ctx.tdir, path, text, role, n)
        except UsageError as exc:  # too large or not text: `handoff submit` never filed it
            text, forged, judged = "", exc.message, False
        if forged:
            self._forged(role, n, path, forged)
            return None
        if kind is Kind.REVIEWER:
            text, path, filed = self.strictest(role, n, path, text, filed)
            judged = filed is not None and filed.digest == digest(text)
        report, problems = self._checked(role, n, text, filed if judged else None)
        if not problems and report is not None:
            ctx.event("submission", role, report=path.name, accepted=True,
                      commit=report.commit, **({"status": report.status} if report.status
                                               else {"verdict": report.verdict}))
            self.record_usage(role)
            return report
        self.reject(role, kind, n, path, problems)
        return None

    def _forged(self, role: str, n: int, path: Path, why: str) -> None:
        ctx = self.ctx
        ctx.state.rejections += 1
        ctx.save()
        event = set_aside(ctx.tdir, path, role, n, why)
        if event is not None:
            ctx.say(event)
        move = rules.after_forgery(ctx.state.rejections, path.name, why)
        if move is not None:
            ctx.apply(move)

    def _checked(self, role: str, n: int, text: str,
                 judged: submission.Filed | None) -> tuple[Report | None, list[str]]:
        """The report and its problems: one judged at filing is taken as it was judged; any
        other is parsed, and its history claims checked (submit checked the worktree when it
        filed it)."""
        ctx = self.ctx
        kind = ctx.team.kind(role)
        if judged is not None:
            report: Report | None = judged.report
            problems: list[str] = []
        else:
            report, problems = reports.parse(text, kind, {"role": role, "round": n,
                                                          "ticket": ctx.state.ticket}, role)
            if report is not None:
                problems = submission.claims(ctx.ws, ctx.state, role, n, report,
                                             worktree_state=False)
        if not problems and report is not None and kind is Kind.REVIEWER and \
                report.verdict == Verdict.PASS:
            changed = ctx.changed_checkout(role, ctx.state.commit_of(n))
            if changed:  # a pass counts only from the exact commit
                problems = [f"the review passed in a checkout that is not the commit under "
                            f"review any more ({changed}): it is reset, review it again"]
        return report, problems

    def strictest(self, role: str, n: int, path: Path, text: str,
                  filed: submission.Filed | None) -> tuple[str, Path, submission.Filed | None]:
        """A reviewer's report of the round as it counts: the last it filed, unless it filed a
        fail earlier in the same turn, which then stands (nothing filed in its name while it
        worked can undo its own fail). (text, path, filed) of the report taken."""
        tdir = self.ctx.tdir
        earlier = submission.filed_before(tdir, path)
        if not earlier or reports.verdict_of(text) == Verdict.FAIL:
            return text, path, filed
        for kept in reversed(earlier):
            try:
                old = read_text(kept, REPORT_LIMIT, "an earlier report")
            except UsageError:
                continue
            if reports.verdict_of(old) != Verdict.FAIL or \
                    provenance(tdir, kept, old, role, n, filed_as=path.name):
                continue
            submission.supersede(tdir, path)
            kept.replace(path)
            receipt = tdir.receipt(kept)
            if receipt.exists():
                receipt.replace(tdir.receipt(path))
            self.ctx.event("verdict-kept", role, report=path.name, verdict=Verdict.FAIL,
                           why=f"it filed a fail earlier in round {n} ({kept.name}): a later "
                               "pass in the same turn does not undo it")
            return old, path, None
        return text, path, filed

    def reject(self, role: str, kind: Kind, n: int, path: Path, problems: list[str]) -> None:
        """A report that does not stand is kept beside the record; the rules say what now."""
        ctx = self.ctx
        ctx.state.rejections += 1
        rejected = ctx.tdir.rejected(path, ctx.state.rejections)
        path.replace(rejected)
        ctx.save()
        ctx.event("submission", role, report=rejected.name, accepted=False, problems=problems)
        move = rules.after_rejection(kind, ctx.state.rejections, problems)
        if move is not None:
            ctx.apply(move)
            return
        if kind is Kind.REVIEWER:  # a tester's checkout keeps its commits for its next go
            ctx.point(role, n)
        self.crew.launch(role, ctx.tdir.brief(role, n), "report rejected")

    def record_usage(self, role: str) -> None:
        """What the role's CLI spent on the round just reported, from its own session files
        (handoff.loop.metering); nothing is recorded for a CLI that keeps none (the scripted
        agent)."""
        ctx = self.ctx
        worktree = ctx.state.worktrees.get(role) or str(ctx.ws.worktrees.path(role))
        provider = ctx.ws.provider(role)
        if not provider.keeps_usage:
            return  # before reading the whole event log: it is on the hand-over's path
        events, _ = ctx.tdir.events.read()
        fields = metering.measure(provider, role, Path(worktree), events, os.environ)
        if fields is not None:
            ctx.event("usage", role, **fields)


def report_settled(path: Path, kind: str, role: str = "") -> bool:
    """Ready to judge: it parses whole (`handoff submit` renames a checked file into place), or
    nobody has written to it for a while (a peer that wrote it in place has finished)."""
    try:
        if time.time() - path.stat().st_mtime >= SETTLE:
            return True
        report, _ = reports.parse(read_text(path, REPORT_LIMIT, "the report"), kind, role=role)
    except FileNotFoundError:
        return False
    except UsageError:
        return True  # judged at once: take_report sets it aside
    return report is not None
