"""One ticket while its loop runs: the only writer of its `State`.

Every phase change is a rule's `Move` carried out by `apply`, every event goes through `event`,
and the acts on the ticket's parts that every stage shares live here too: the worktrees and the
session set up, a detached checkout pointed at a round's commit, a file handed to a peer, the
plan and the control files checked. So a stage reads as "gather → a rule decides → apply".

It is light to build (no slot, no intake, no watcher): `resume --more-rounds` and
`resume --onto` carry a stopped ticket into its next round with one, without an Orchestrator.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from handoff import config as config_mod
from handoff.errors import HandoffError
from handoff.loop import evidence, failover, notify, rules, summary
from handoff.loop.rules import Move
from handoff.loop.workspace import Workspace
from handoff.machinery.peers import self_argv
from handoff.machinery.repo import short_sha
from handoff.machinery.worktrees import GATE
from handoff.phases import FINISHED, Phase
from handoff.protocol import protected
from handoff.protocol.ledger import Ledger
from handoff.record.events import EventKind
from handoff.record.store import atomic_write, digest, file_digest
from handoff.record.ticket import State
from handoff.record.usage import over_budget
from handoff.role import IMPLEMENTER, PLANNER, Team

#: where each recorded event is shown as it happens (a foreground run prints them)
EventSink = Callable[[Mapping[str, object]], None]


class TicketContext:
    def __init__(self, ws: Workspace, say: EventSink | None = None) -> None:
        self.ws = ws
        self.tdir = ws.tdir
        self.say = say or (lambda event: None)
        self.state = ws.state()
        #: how a phase change reaches the person: the session's status line, and a notice when
        #: it is one they are told of (handoff.loop.notify); a test of the stages records it
        self.tell: Callable[[State], None] = self._tell_person

    @property
    def team(self) -> Team:
        return self.state.roles

    # ---- the record ----------------------------------------------------------------------
    def event(self, kind: EventKind, role: str = "", **fields: Any) -> None:
        self.say(self.tdir.events.append(kind, round=self.state.round, role=role, **fields))

    def save(self) -> None:
        self.tdir.save(self.state)

    def apply(self, move: Move) -> None:
        """Carry out what the rules decided: the only way the phase changes while a loop runs."""
        if move.next_round:
            self._next_round(move)
            return
        if move.phase == Phase.NEEDS_HUMAN:
            self.state.after_answer = move.after_answer
        if move.phase == Phase.QUEUED:
            self.state.queued_for = move.back_to
        self._enter(move.phase, move.reason)

    def _enter(self, phase: Phase, reason: str) -> None:
        self.say(self.tdir.move(self.state, phase, reason))
        if phase in FINISHED:
            self.finish()  # before the person is told: the final report is there to read
        self.tell(self.state)

    def _tell_person(self, state: State) -> None:
        notify.phase_changed(state, self.ws.peers(state).tmux, self.ws.config.notify,
                             self.ws.repo.top, self.event)

    def _next_round(self, move: Move) -> None:
        """The implementer's next round: its brief carries the ledger's open findings and the
        notes (a failed gate, a rejected report, an answer)."""
        self.state.round += 1
        self.state.relaunched = {}
        self.state.held = []
        self.state.feedback = {"round": self.state.round,
                               "findings": [e.fields() for e in Ledger.of(self.state.ledger).open()],
                               "notes": [list(n) for n in move.notes]}
        self._enter(move.phase, move.reason)

    def reread_config(self) -> None:
        """After a person's answer: the configuration as its files say now (a hint may have
        asked them to change it, such as a scanner's `required`), for every launch, gate and
        scan from here on. A file that no longer reads keeps the configuration the run had,
        and says why."""
        try:  # the roles its quota moved stay where they were moved
            fresh = failover.applied(config_mod.load(self.ws.home, self.ws.repo.top),
                                     self.state.failovers)
        except HandoffError as exc:
            self.event("config", reread=False, error=exc.message)
            return
        changed = [f.name for f in fields(fresh)
                   if getattr(fresh, f.name) != getattr(self.ws.config, f.name)]
        if changed:
            self.ws = replace(self.ws, config=fresh)
            self.event("config", reread=True, changed=changed)

    def finish(self) -> None:
        """The final report, written once when the ticket ends (never for a closed one)."""
        if self.state.phase == Phase.CLOSED or self.tdir.final_report.exists():
            return
        atomic_write(self.tdir.final_report, summary.compose(self.ws, self.state))
        self.event("final-report", outcome=self.state.phase, reason=self.state.reason)

    def keep_evidence(self) -> None:
        """A passed ticket's evidence bundle, written once (a resumed run finds it)."""
        if self.state.phase != Phase.PASSED or \
                evidence.bundle_path(self.ws, self.state.last_commit()).exists():
            return
        path, signer = evidence.write(self.ws, self.state)
        self.event("evidence", bundle=path.name, signer=signer)

    # ---- the ticket's parts ----------------------------------------------------------------
    def setup(self, roles: Sequence[str] | None = None) -> None:
        """Worktrees and the tmux session: created once, found again on resume. roles: the
        checkouts needed now (default: the whole loop's); a round's start asks for the
        implementer's alone, and the others are made while it works (`setup_crew`)."""
        self.make_worktrees(self.team.loop if roles is None else roles)
        state = self.state
        booked = {name: ports for name in (*self.team.names, GATE)
                  if (ports := self.ws.ports(name))}
        if booked != state.ports:
            state.ports = booked
            self.save()
        self.ensure_session()

    def make_worktrees(self, roles: Sequence[str]) -> None:
        """Each role's worktree: made the first time (the `worktrees` event), else made again
        if deleted by hand and set up again if its setup had failed (a `worktree` event)."""
        state, wt = self.state, self.ws.worktrees
        created = {role: str(wt.ensure(role, state.base_commit).path)
                   for role in roles if role not in state.worktrees}
        if created:
            state.worktrees.update(created)
            state.branch = self.ws.branch()
            self.save()
            self.event("worktrees", **created)
        for role in (r for r in roles if r not in created):
            rev = state.base_commit if role == IMPLEMENTER else state.last_commit()
            made = wt.ensure(role, rev, recreate=True)
            if made.changed:
                self.event("worktree", role, **made.fields())

    def setup_crew(self) -> None:
        """The rest of the loop's worktrees (reviewers', testers'), each with its post_create,
        made while the implementer works on round 1: off the ticket's path (about 90 ms each
        with a fenced set-up, bench floor)."""
        self.make_worktrees([role for role in self.team.loop if role != IMPLEMENTER])

    def setup_planner(self) -> None:
        """The planner's checkout of the base (the loop's worktrees come after approval: a
        refused plan leaves nothing of them) and the tmux session."""
        state = self.state
        made = self.ws.worktrees.ensure(PLANNER, state.base_commit, recreate=PLANNER in
                                        state.worktrees)
        if PLANNER not in state.worktrees:
            state.worktrees[PLANNER] = str(made.path)
            self.save()
            self.event("worktrees", **{PLANNER: str(made.path)})
        elif made.changed:
            self.event("worktree", PLANNER, **made.fields())
        self.ensure_session()

    def ensure_session(self, reason: str = "") -> None:
        """The ticket's tmux session, made again (with its log window) when it is gone."""
        peers = self.ws.peers(self.state)
        follow = self_argv("log", self.state.ticket, "--repo", str(self.ws.repo.top), "--follow")
        if peers.ensure_session(self.ws.repo.top, follow):
            notify.show_phase(self.state, peers.tmux)
            self.event("session", session=self.state.session, socket=self.state.socket,
                       **({"reason": reason} if reason else {}))

    def hand(self, path: Path, render: Callable[[], str]) -> None:
        """Write what handoff hands a peer (a brief, a diff) and record its digest. A file of
        that name whose digest is not the recorded one (planted by a peer before handoff wrote
        it, or changed since) is written again, and that is said; a resumed orchestrator finds
        its own file and leaves it."""
        name = str(path.relative_to(self.tdir.path))
        found = file_digest(path)
        if found and found == self.state.handed.get(name):
            return
        text = render()
        if found and found != digest(text):
            self.event("replaced", file=name, why="it was not what handoff wrote: a peer's file "
                       "is never handed on as handoff's")
        atomic_write(path, text)
        self.state.handed[name] = digest(text)
        self.save()

    def add_to_brief(self, brief: Path, title: str, text: str) -> None:
        """A section added to a brief handed this round (a person's answer): a peer started
        afresh on it later in the round (it died, or could not take the answer as a message)
        reads it there. Added to what handoff wrote, whatever the file now holds."""
        name = str(brief.relative_to(self.tdir.path))
        if not brief.is_file() or file_digest(brief) != self.state.handed.get(name):
            return  # not ours as it stands: hand() writes it afresh, and says so, first
        whole = brief.read_text(encoding="utf-8").rstrip("\n") + f"\n\n## {title}\n\n{text}\n"
        atomic_write(brief, whole)
        self.state.handed[name] = digest(whole)
        self.save()

    def hand_diff(self, n: int) -> Path:
        """The round's diff against the base, handed to its testers and reviewers."""
        diff, commit = self.tdir.diff(n), self.state.commit_of(n)
        self.hand(diff, lambda: self.ws.repo.diff(self.state.base_commit, commit) + "\n")
        return diff

    def point(self, name: str, n: int) -> None:
        """A detached checkout (a tester's, a reviewer's, the gate's) back at round n's
        commit, whatever was left in it kept as a patch."""
        self.ws.worktrees.point(name, self.state.commit_of(n), self.tdir.scratch_patch(name, n))

    def changed_checkout(self, name: str, commit: str, untracked: bool = False) -> str:
        """Why a detached checkout (a reviewer's, where its review ran; the gate's) is no longer
        exactly commit: its HEAD moved, tracked files changed, or (untracked: for the gate,
        which starts on a checkout cleaned of them) files not ignored appeared, such as a
        planted conftest.py; '' when it is exactly commit."""
        head = self.ws.worktrees.head(name)
        if head != commit:
            return f"its HEAD is {short_sha(head)}, not {short_sha(commit)}"
        entries = self.ws.worktrees.dirty(self.ws.worktrees.path(name))
        changed = [e[3:] for e in entries if not e.startswith("??")]
        if changed:
            return f"tracked files changed: {', '.join(changed[:5])}"
        new = [e[3:] for e in entries if e.startswith("??")] if untracked else []
        return (f"files appeared that .gitignore does not cover: {', '.join(new[:5])} (a test "
                "that writes files should write them where .gitignore says)") if new else ""

    # ---- what every stage checks first ----------------------------------------------------------
    def plan_unchanged(self) -> bool:
        """The plan is the one a person approved; else the ticket waits for a person."""
        now = file_digest(self.tdir.plan_md)
        if not self.state.plan_digest:  # approved by a handoff that kept no digest
            self.state.plan_digest = now
            self.save()
        if now == self.state.plan_digest:
            return True
        self.event("plan-changed", approved=self.state.plan_digest, now=now)
        self.apply(rules.plan_changed(str(self.tdir.plan_md), self.state.ticket,
                                      Phase(self.state.phase)))
        return False

    def control_files_allowed(self) -> bool:
        """The round's commit changes no control file the plan or a person did not allow;
        else the ticket waits for a person, naming the files."""
        n = self.state.round
        commit = self.state.commit_of(n)
        touched = protected.touched(
            self.ws.repo.changed_paths(self.state.base_commit, commit),
            (*protected.DEFAULT, *self.ws.config.protected),
            (*self.ws.plan().may_change, *self.state.allowed_changes))
        if not touched:
            return True
        self.state.asked_changes = touched
        self.event("protected", files=touched, commit=commit)
        self.apply(rules.protected(touched, n, self.state.ticket))
        return False

    def check_budget(self) -> None:
        """After each step: when the peers' usage has passed the budget, a person decides
        whether the ticket goes on; their answer carries it on where it stood."""
        budget = self.ws.config.budget
        if budget is None or self.state.phase in (*FINISHED, Phase.NEEDS_HUMAN,
                                                  Phase.AWAITING_APPROVAL):
            return
        events, _ = self.tdir.events.read()
        over = over_budget(events, budget.tokens, budget.cost_usd)
        if over is None:
            return
        self.event("budget", **over)
        spent = f"${over['total']}" if over["over"] == "cost_usd" else f"{over['total']:,} tokens"
        limit = f"${over['limit']}" if over["over"] == "cost_usd" else f"{over['limit']:,} tokens"
        self.apply(rules.over_budget(spent, limit, over["over"], self.state.ticket,
                                     self.state.phase))

