"""The ticket state machine. Resumable from the ticket directory alone.

A round is stages over the team's kinds: the implementer, then each tester in order, then the
gate (handoff.loop.gating), then every reviewer at once. Each stage gathers its inputs, a rule
of handoff.loop.rules decides what follows, and the ticket's context (handoff.loop.context,
the only writer of its State) carries the move out. The peers are launched and briefed by
handoff.loop.crew, watched while they work by handoff.loop.watching, and their reports taken
by handoff.loop.desk; what each is handed is handoff.loop.handing's.

Every step is idempotent: it looks at what is on disk (and what the peers' panes were started
for) before acting, so a `kill -9` at any point followed by `handoff resume` finishes the
ticket with nothing lost and no round done twice.
"""

from __future__ import annotations

import errno
import os
import re
import signal
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType

from handoff import trace
from handoff.inputs import REPORT_LIMIT, read_text
from handoff.loop import after, handing, rules
from handoff.loop.context import EventSink, TicketContext
from handoff.loop.crew import Crew
from handoff.loop.desk import ReportDesk
from handoff.loop.gating import GateStage
from handoff.loop.watching import Watch
from handoff.loop.workspace import Workspace
from handoff.machinery.repo import short_sha
from handoff.machinery.watch import Watcher
from handoff.phases import AT_WORK, FINISHED, Phase
from handoff.protocol import briefs, reports
from handoff.protocol.ledger import Ledger
from handoff.protocol.reports import QUESTIONED, Report
from handoff.record import durable, slots, starts
from handoff.record.lock import TicketLock
from handoff.record.slots import Slot
from handoff.record.store import atomic_write, file_digest, write_failed
from handoff.record.ticket import State, ticket_dir
from handoff.role import IMPLEMENTER, PLANNER, Kind
from handoff.verdicts import Status, Verdict

#: a commit named in full (SHA-1, or SHA-256 for repositories that use it)
FULL_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
#: seconds between looks at the queue when nothing in its folder changed (every slot given
#: back and every waiter gone changes something there: this is only the fallback)
QUEUE_LOOK = 5.0
#: what a write meets when the disk under it is full or read-only
DISK_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)


class Stopped(Exception):
    """SIGTERM/SIGHUP/SIGINT: leave everything as it is for `handoff resume`."""


def _stop(signum: int, frame: FrameType | None) -> None:
    raise Stopped(signal.Signals(signum).name)


class Orchestrator:
    def __init__(self, ws: Workspace, say: EventSink | None = None) -> None:
        self.ctx = TicketContext(ws, say)
        self.crew = Crew(self.ctx)
        self.desk = ReportDesk(self.ctx, self.crew)
        self.watch = Watch(self.ctx, self.crew, self.desk)
        self.gate = GateStage(self.ctx, self.crew)
        state = self.ctx.state
        #: one of the machine's max_parallel slots, held while the ticket is at work
        self.slot = Slot(ws.home, ws.tdir.path, state.created, ws.config.parallel,
                         now=state.jumps_queue)

    @property
    def state(self) -> State:
        return self.ctx.state

    @property
    def ws(self) -> Workspace:
        """The ticket's workspace, as its context holds it (a person's answer re-reads its
        configuration: TicketContext.reread_config)."""
        return self.ctx.ws

    # ---- the loop ----------------------------------------------------------------------
    def run(self) -> State:
        ctx = self.ctx
        with TicketLock(ctx.tdir.lock_file), durable.deferred(ctx.tdir.path), self.desk.intake, \
                self.watch.file_watcher() as watcher:
            # one watcher for the whole run: closing an inotify descriptor waits for the
            # kernel (about 9 ms, measured), and a watcher a wait closed would put that on
            # every hand-over
            self.watch.watcher = watcher
            trace.to_file(ctx.tdir.debug_log)
            old_term = signal.signal(signal.SIGTERM, _stop)
            old_hup = signal.signal(signal.SIGHUP, _stop)  # its tmux window was closed
            try:
                self._begin()
                self._steps()
            except (Stopped, KeyboardInterrupt):
                ctx.event("stopped", phase=ctx.state.phase)
            except OSError as exc:
                if exc.errno not in DISK_ERRORS:
                    raise
                # a full or read-only disk under any write of the run (a grant, a signal, a
                # draft), not only the record's own: one clear error naming the file and the mend
                failed = write_failed(Path(exc.filename or ctx.tdir.path), exc)
                ctx.event("error", phase=ctx.state.phase, message=failed.message)
                raise failed from None
            except Exception as exc:  # recorded for `handoff log`, then shown as usual
                ctx.event("error", phase=ctx.state.phase,
                          message=getattr(exc, "message", None) or repr(exc))
                raise
            finally:
                self.slot.release()
                signal.signal(signal.SIGTERM, old_term)
                signal.signal(signal.SIGHUP, old_hup)
        return ctx.state

    def _begin(self) -> None:
        """The record read afresh under the lock, and the run's start said."""
        ctx = self.ctx
        ctx.state = self.ws.state()
        # a person started this run: the peers' relaunch budget starts afresh
        carried, ctx.state.relaunched = ctx.state.relaunches, {}
        if carried:
            ctx.save()
        fenced = self.ws.sandbox()
        if ctx.state.phase in (*AT_WORK, Phase.QUEUED) and not self.slot.now:
            self.slot.stand_in_line()  # its place before the starts it waits for end
        # the starts a person is waiting for go first (handoff.record.starts)
        waited = starts.wait_for_starts(self.ws.home)
        ctx.event("orchestrator", pid=os.getpid(), relaunches_before=carried,
                  after_starts=f"{waited:.2f} s",
                  intake=self.desk.intake.error or "listening",
                  sandbox=fenced.why if fenced is not None else "none",
                  team=[f"{r.name}:{r.kind}" for r in ctx.team.roles],
                  max_parallel=self.slot.limit)

    def _steps(self) -> None:
        """Each phase's step until the ticket is finished, or waits for approval."""
        ctx = self.ctx
        table: dict[Phase, Callable[[], None] | None] = {
            Phase.PLANNING: self.planning,
            Phase.AWAITING_APPROVAL: None,
            Phase.QUEUED: self.queued,
            Phase.WAITING: self.waiting,
            Phase.IMPLEMENTING: self.implementing,
            Phase.TESTING: self.testing,
            Phase.GATING: self.gate.run,
            Phase.REVIEWING: self.reviewing,
            Phase.NEEDS_HUMAN: self.needs_human,
        }
        while ctx.state.phase not in FINISHED:
            if not self.hold_slot():
                continue
            step = table[Phase(ctx.state.phase)]
            if step is None:
                return
            step()
            ctx.check_budget()
        ctx.finish()
        ctx.keep_evidence()  # what decided a pass, for anyone to check again
        if ctx.state.phase in (Phase.PASSED, Phase.ESCALATED):
            self.crew.leave_finished(f"the ticket {ctx.state.phase}")

    # ---- the machine's slots, and the tickets it starts after ----------------------------
    def hold_slot(self) -> bool:
        """A phase at work needs one of the machine's slots, taken before its step; without
        one the ticket queues (False). Any other phase gives its slot back."""
        phase = Phase(self.ctx.state.phase)
        if phase not in AT_WORK:
            if phase != Phase.QUEUED:
                self.slot.release()
            return True
        standing = self.slot.take()
        if standing is None:
            return True
        self.ctx.apply(rules.no_slot(phase, standing.why(self.ctx.tdir.path)))
        return False

    def queued(self) -> None:
        """Wait for a slot, then go back to the phase the ticket queued from."""
        slots.folder(self.ws.home).mkdir(parents=True, exist_ok=True)
        with Watcher([slots.folder(self.ws.home)]) as watcher:
            while self.slot.take() is not None:
                watcher.wait(QUEUE_LOOK)
        move = rules.got_slot(self.ctx.state.queued_for, self.slot.limit)
        self.ctx.state.queued_for = ""
        self.ctx.apply(move)

    def waiting(self) -> None:
        """Until every ticket it starts after has passed (handoff.loop.after), holding no slot;
        each change of what it waits for is an event. Then it starts from their passed work,
        or a person is asked why it cannot."""
        ctx, home, key = self.ctx, self.ws.home, self.ws.repo.key
        folders = [ctx.tdir.path.parent, *(path for name in ctx.state.after
                                           if (path := ticket_dir(home, key, name).path).is_dir())]
        said = ""
        with Watcher(folders) as watcher:
            while True:
                found = after.read(home, key, ctx.state.after)
                decision = after.decide(found)
                if decision.action != "wait":
                    break
                if decision.reason != said:  # status and the board show it as the reason
                    said = ctx.state.reason = decision.reason
                    ctx.save()
                    ctx.event("waiting", reason=said, after=list(ctx.state.after))
                watcher.wait(QUEUE_LOOK)
        if decision.action == "ask":
            ctx.apply(rules.after_unmet(decision.reason, ctx.state.ticket))
            return
        base, conflicts = after.base_for(self.ws.repo, ctx.state.base_commit, found,
                                         ctx.state.ticket)
        if conflicts:
            ctx.apply(rules.after_conflicts(conflicts, ctx.state.ticket))
            return
        ctx.event("waiting", reason=decision.reason, after=list(ctx.state.after),
                  base=base, before=ctx.state.base_commit,
                  commits={d.ticket: d.commit for d in found})
        ctx.state.base_commit = base
        ctx.apply(rules.started_after(decision.reason, short_sha(base)))

    # ---- the planner ----------------------------------------------------------------------
    def planning(self) -> None:
        """The planner drafts the plan from the ticket's text, in a read-only checkout of the
        base; what it files is checked as a plan (handoff.loop.drafts) before it is taken."""
        ctx = self.ctx
        ctx.setup_planner()
        n = ctx.state.round
        brief = ctx.tdir.brief(PLANNER, n)
        ctx.hand(brief, lambda: handing.planner_brief(ctx, n))
        self._brief({PLANNER: brief}, fresh=False)
        got = self.watch.wait_for_reports({PLANNER: brief})
        if got:
            self.accept_plan(n, got[PLANNER])

    def accept_plan(self, n: int, report: Report) -> None:
        """The planner's accepted report: its question asked of a person, or its plan written
        as the ticket's (approved only by --yes, never by the planner), and the planner let go."""
        ctx, state = self.ctx, self.ctx.state
        if report.status == Status.BLOCKED:
            question = report.sections.get("open questions", "").strip()
            ctx.apply(rules.ask(f"the planner asks: {question}", after_answer=Phase.PLANNING))
            return
        atomic_write(ctx.tdir.plan_md, report.plan)
        plan = self.ws.plan()
        ctx.event("plan-drafted", PLANNER, draft=n, digest=file_digest(ctx.tdir.plan_md),
                  test=list(plan.test) if plan.test else None,
                  grounding=report.sections.get("grounding", "").splitlines()[:40])
        self.crew.retire_finished()  # its work ends here: it sees nothing of what follows
        if state.approve_drafted:
            state.round = 1
            state.plan_digest = file_digest(ctx.tdir.plan_md)
            ctx.event("plan-approved", by="--yes", digest=state.plan_digest)
        ctx.apply(rules.plan_drafted(n, state.approve_drafted, state.after))

    # ---- the implementer and the testers ------------------------------------------------
    def implementing(self) -> None:
        ctx = self.ctx
        if not ctx.plan_unchanged():
            return
        ctx.setup([IMPLEMENTER])
        n = ctx.state.round
        self.gate.start_baseline()
        brief = ctx.tdir.brief(IMPLEMENTER, n)
        ctx.hand(brief, lambda: handing.implementer_brief(ctx, n))
        self._brief({IMPLEMENTER: brief}, fresh=False)
        # while it works: the crew's checkouts made (round 1), the last round's reviewers
        # asked to leave; each was on the ticket's path before (bench floor)
        ctx.setup_crew()
        self.crew.retire_finished()
        got = self.watch.wait_for_reports({IMPLEMENTER: brief})
        if got:
            self.accept_work(IMPLEMENTER, n, got[IMPLEMENTER])

    def next_tester(self, n: int) -> str | None:
        return rules.next_tester(self.ctx.team.testers, self.ctx.state.tested.get(str(n), {}))

    def testing(self) -> None:
        """The next tester of the round adds tests on top of the round's commit so far."""
        ctx = self.ctx
        if not ctx.plan_unchanged():
            return
        ctx.setup()
        n = ctx.state.round
        tester = self.next_tester(n)
        if tester is None:  # every tester reported before a crash: on to the gate
            ctx.apply(rules.round_tested())
            return
        diff = ctx.hand_diff(n)
        brief = ctx.tdir.brief(tester, n)
        if self.ws.peers(ctx.state).working_on(tester) != str(brief):
            ctx.point(tester, n)
        ctx.hand(brief, lambda: handing.tester_brief(ctx, tester, n, diff))
        self._brief({tester: brief}, fresh=True)
        got = self.watch.wait_for_reports({tester: brief})
        if got:
            self.accept_work(tester, n, got[tester])

    def _brief(self, briefed: Mapping[str, Path], fresh: bool) -> None:
        """Each peer of the stage on its brief, and a person's answer passed on."""
        for role, brief in briefed.items():
            self.crew.ensure_briefed(role, brief, fresh=fresh)
        self.crew.pass_on_note(briefed)

    def accept_work(self, role: str, n: int, report: Report) -> None:
        """The implementer's or a tester's accepted report: its commit becomes the round's
        (a tester's is put on the ticket branch first), and the rules say what follows."""
        ctx = self.ctx
        kind = ctx.team.kind(role)
        if report.status != Status.BLOCKED:
            # judged: the commit exists; a full sha is its own resolution (no git call)
            commit = report.commit if FULL_SHA.fullmatch(report.commit) \
                else self.ws.repo.resolve(report.commit)
            # handoff alone moves the ticket branch: no peer writes a ref
            if not self.onto_branch(role, commit):
                return
            if kind is Kind.TESTER:
                ctx.state.tested.setdefault(str(n), {})[role] = commit
            ctx.state.commits[str(n)] = commit
        question = report.sections.get("open questions", "").strip()
        ctx.apply(rules.after_work(kind, role, report.status, question, self.next_tester(n)))
        if report.status != Status.BLOCKED:
            # what another ticket of the repository may overlap (handoff.record.overlaps):
            # bookkeeping for the others, so after the next action is on its way (a git call
            # and a save, which under a crowd of tickets would double the hand-over)
            ctx.state.touched = self.ws.repo.changed_paths(ctx.state.base_commit,
                                                           ctx.state.commits[str(n)])
            ctx.save()

    def onto_branch(self, role: str, commit: str) -> bool:
        """Move the ticket branch forward to an accepted commit (the implementer's, or a
        tester's: it builds on the last accepted one, the validators checked), as a plain ref,
        and the implementer's checkout with it."""
        ctx = self.ctx
        made = self.ws.ensure_worktree(ctx.state, IMPLEMENTER)
        if made:
            ctx.event("worktree", IMPLEMENTER, **made)
        previous = ctx.state.last_commit()
        problem = self.ws.worktrees.advance_branch(previous, commit)
        if not problem:
            if commit != previous:
                ctx.event("branch", role, commit=commit, branch=self.ws.branch(),
                          by="fast-forward")
            return True
        ctx.apply(rules.ask(f"the {role}'s commit {short_sha(commit)} cannot be put on "
                            f"{self.ws.branch()}: {problem}. Mend the implementer's worktree, "
                            f"then 'handoff answer {ctx.state.ticket} go'",
                            after_answer=ctx.state.phase))
        return False

    # ---- the reviewers --------------------------------------------------------------------
    def reviewing(self) -> None:
        """Every reviewer at once, each fresh in its own checkout of the commit; the round is
        judged when all of them have reported."""
        ctx = self.ctx
        if not ctx.plan_unchanged():
            return
        ctx.setup()
        n = ctx.state.round
        commit = ctx.state.commit_of(n)
        review = handing.review_of(ctx, n, commit, ctx.hand_diff(n))
        done = ctx.state.reviewed.get(str(n), {})
        peers = self.ws.peers(ctx.state)
        waiting: dict[str, Path] = {}
        for role in (r for r in ctx.team.reviewers if r not in done):
            brief = ctx.tdir.brief(role, n)
            # a reviewer warmed for this round sits at the commit already, its CLI in it
            if peers.working_on(role) != str(brief) and self.crew.warmed.get(role) != n:
                ctx.point(role, n)
            ctx.hand(brief, lambda role=role: briefs.reviewer(  # type: ignore[misc]
                self.ws.brief_context(ctx.state, role, n), review))
            waiting[role] = brief
        self._brief(waiting, fresh=True)
        got = self.watch.wait_for_reports(waiting, self.record_review)
        if got is not None:
            self.judge_round(n, got)

    def record_review(self, role: str, n: int, report: Report) -> None:
        """One reviewer's accepted verdict, said at once (the others may still be at work)."""
        ctx = self.ctx
        ctx.state.reviewed.setdefault(str(n), {})[role] = report.verdict
        ctx.save()
        extra: dict[str, list[str]] = {}
        if report.ledger:
            extra["ledger"] = [f"{a.id} {a.status}" for a in report.ledger]
        for asked in QUESTIONED:
            if report.answered(asked):
                extra[asked.key] = [f"{a.id} {a.answer}" for a in report.answered(asked)]
        ctx.event("verdict", role, verdict=report.verdict, commit=report.commit,
                  must_fix=[f.render() for f in report.must_fix],
                  should_fix=[f.render() for f in report.should_fix], **extra)

    def judge_round(self, n: int, got: Mapping[str, Report]) -> None:
        """Every reviewer reported: their findings go into the ledger, and the rules judge."""
        ctx, state = self.ctx, self.ctx.state
        reviews = [(role, got.get(role) or self.filed_review(role, n))
                   for role in ctx.team.reviewers]
        ledger = Ledger.of(state.ledger).merged(n, reviews)
        raised = [f for _, report in reviews for f in report.must_fix]
        earlier = {key for r, keys in state.findings.items() if r != str(n) for key in keys}
        repeated = rules.repeated(raised, earlier)
        verdicts = {role: state.reviewed.get(str(n), {}).get(role, report.verdict)
                    for role, report in reviews}
        state.verdicts[str(n)] = rules.round_verdict(verdicts)
        state.findings[str(n)] = sorted({f.key() for f in raised})
        state.ledger = ledger.records()
        if len(verdicts) > 1 or state.ledger:
            ctx.event("reviews", verdict=state.verdicts[str(n)], verdicts=verdicts,
                      open=[e.id for e in ledger.open()])
        ctx.apply(rules.after_reviews(verdicts, ledger, repeated, state.reviews,
                                      state.max_rounds))

    def filed_review(self, role: str, n: int) -> Report:
        """A review accepted by an earlier run, read from its file."""
        path = self.ctx.tdir.report(role, n)
        report, _ = reports.parse(read_text(path, REPORT_LIMIT, "the report"), Kind.REVIEWER,
                                  role=role)
        verdict = self.ctx.state.reviewed.get(str(n), {}).get(role, Verdict.FAIL)
        return report or Report(role=role, commit=self.ctx.state.commit_of(n), verdict=verdict)

    # ---- a person -------------------------------------------------------------------------
    def needs_human(self) -> None:
        """Wait for `handoff answer`; the answer starts the implementer's next round."""
        ctx, state = self.ctx, self.ctx.state
        number = state.answers_used + 1
        path = ctx.tdir.answer(number)
        self.watch.wait_for_answer(path)
        ctx.reread_config()  # what the hint asked them to change in a file counts from now
        state.answers_used = number
        text = path.read_text(encoding="utf-8")
        approved = file_digest(ctx.tdir.plan_md)
        if approved != state.plan_digest:  # the person was told it changed, and answered
            state.plan_digest = approved
            ctx.event("plan-approved", by="answer", digest=approved)
        answered = rules.after_answer(text, state.after_answer, state.asked_changes)
        state.asked_changes, state.after_answer = [], ""
        if answered.allowed:
            state.allowed_changes = sorted({*state.allowed_changes, *answered.allowed})
            ctx.event("protected-allowed", files=list(answered.allowed))
        if not answered.move.next_round:  # the same round: its peers are told the answer
            state.relaunched = {}
            state.note_for_peer = answered.note
            self.crew.views.clear()
        ctx.apply(answered.move)
