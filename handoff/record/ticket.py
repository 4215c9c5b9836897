"""The durable per-ticket directory: its layout and its state.json.

<home>/<repo-key>/<TICKET>/ holds everything that passes between the roles; the files are the
truth and the orchestrator can be rebuilt from them alone.

state.json is rewritten atomically and on disk (fsync) before it replaces the old one, and every
save writes the same text a second time as state.json.bak, a file of its own (not a hard link,
which an in-place edit would corrupt too), without waiting for the disk: it guards against a
damaged state.json, a power cut is state.json's own fsync's to survive. While an orchestrator
runs, both waits for the disk are a worker's, after the step's event (handoff.record.durable).
When state.json is unreadable, the backup holds the last state handoff wrote; the commands
that must work without either (stop, log) fall back on what events.jsonl records
(`handoff.operations.standing.recovered_state`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, TypedDict

from handoff.errors import NotFound, UsageError
from handoff.inputs import REASON_LIMIT, clip
from handoff.phases import PHASES, Phase
from handoff.record import durable
from handoff.record.events import EventLog, now
from handoff.record.store import atomic_write, validate_ticket_id
from handoff.role import DEFAULT, IMPLEMENTER, Team

# The loop's limits, the config's defaults. Each ticket records its own when it is created
# (State, from the config then, and --max-rounds): changing the config later does not move a
# started ticket's limits; only `resume --more-rounds` does.
MAX_ROUNDS = 3
MAX_GATE_BOUNCES = 3
MAX_RELAUNCHES = 2


class EntryFields(TypedDict):
    """A finding of the ledger (handoff.protocol.ledger.Entry) as the state keeps it."""

    id: str
    round: int
    raised_by: list[str]
    file: str
    line: int
    reason: str
    criterion: str
    #: [round, role, status, evidence] each
    answers: list[list[int | str]]


class Feedback(TypedDict, total=False):
    """What the implementer's brief of `round` carries besides the plan: the ledger's open
    findings, and titled notes ([title, text]: a failed gate, a rejected report, an answer)."""

    round: int
    #: EntryFields; a ticket from before the ledger: bare {file, line, reason}
    findings: list[Mapping[str, object]]
    notes: list[list[str]]


@dataclass
class State:
    """Everything the orchestrator must remember; every counter lives here, on disk."""

    ticket: str
    repo: str
    repo_key: str
    phase: Phase = Phase.AWAITING_APPROVAL
    round: int = 0
    gate_bounces: int = 0
    rejections: int = 0
    #: role → relaunches of its dying peer this round (each peer has its own budget: the
    #: reviewers work side by side)
    relaunched: dict[str, int] = field(default_factory=dict)
    base: str = "HEAD"
    base_commit: str = ""
    branch: str = ""
    socket: str = "handoff"
    session: str = ""
    #: reviews before escalating
    max_rounds: int = MAX_ROUNDS
    #: failed gates before escalating
    max_gate_bounces: int = MAX_GATE_BOUNCES
    #: relaunches of a dying peer within a round before a person is asked
    max_relaunches: int = MAX_RELAUNCHES
    #: the ticket's roles, [{name, kind}] in working order (handoff.role.Team); frozen when
    #: it is created
    team: list[dict[str, str]] = field(default_factory=DEFAULT.records)
    #: round → the commit under test and review: the implementer's, then each tester's
    commits: dict[str, str] = field(default_factory=dict)
    #: the files the ticket's branch changed since its base, as of its newest commit: what
    #: another ticket of the repository may overlap (handoff.record.overlaps)
    touched: list[str] = field(default_factory=list)
    #: round → the round's verdict, once every reviewer's report is in
    verdicts: dict[str, str] = field(default_factory=dict)
    #: round → each reviewer's verdict as its report was accepted
    reviewed: dict[str, dict[str, str]] = field(default_factory=dict)
    #: round → each tester's accepted commit
    tested: dict[str, dict[str, str]] = field(default_factory=dict)
    #: round → the must-fix keys raised (Finding.key), for "the same must-fix came back"
    findings: dict[str, list[str]] = field(default_factory=dict)
    #: every must-fix of the ticket with its answers (handoff.loop.ledger)
    ledger: list[EntryFields] = field(default_factory=list)
    #: round → each scanner's state (passed, failed, skipped, missing)
    scans: dict[str, dict[str, str]] = field(default_factory=dict)
    #: "base" or round → how many tests the plan's test command ran there (passed, failed,
    #: skipped, errors; handoff.loop.testcount), {} where its output did not say
    tests_ran: dict[str, dict[str, object]] = field(default_factory=dict)
    #: round → the tests its commit weakened since the base (handoff.loop.weakened), as its
    #: reviewers were shown them
    weakened: dict[str, list[dict[str, object]]] = field(default_factory=dict)
    #: the roles of the phase a person was asked about: the answer goes to them
    held: list[str] = field(default_factory=list)
    #: the tickets it waits for before it starts, and whose passed work it starts from
    #: (handoff.loop.after)
    after: list[str] = field(default_factory=list)
    #: the phase a queued ticket goes back to when it gets a slot (handoff.record.slots)
    queued_for: str = ""
    #: started with --now: it takes a slot over max_parallel rather than wait
    jumps_queue: bool = False
    #: started from its text with --yes: the planner's plan is approved once it validated
    #: (handoff.loop.planning); never one that did not
    approve_drafted: bool = False
    #: round → the changes of its commit since the last review that no finding asked for and
    #: the plan does not name, as its reviewers were shown them (handoff.loop.unrequested):
    #: `id`, `file`, `line`, `end`, `first`
    unrequested: dict[str, list[dict[str, object]]] = field(default_factory=dict)
    #: round → what the tests its commit added or changed did at the base (handoff.loop.proof):
    #: `key` (what was run: the same key in a later round is not run again) and `tests`, each
    #: `file`, `cls`, `name`, `line`, `outcome`, `why`, and `id` (P1, …) for one that passed
    #: there, as the round's reviewers were shown them
    proofs: dict[str, dict[str, object]] = field(default_factory=dict)
    #: role → how many times its CLI was taken over by the next of its fallbacks (a spent
    #: quota: handoff.loop.failover)
    failovers: dict[str, int] = field(default_factory=dict)
    #: the tracker's issue the ticket was started from (its address; '' : none): the final
    #: report and the pull request name it
    source: str = ""
    #: worktree (a role's, `gate`) → the TCP ports it was given (handoff.machinery.ports)
    ports: dict[str, list[int]] = field(default_factory=dict)
    worktrees: dict[str, str] = field(default_factory=dict)
    gates: dict[str, str] = field(default_factory=dict)
    #: what the implementer's brief of the round carries besides the plan (handoff.loop.handing)
    feedback: Feedback = field(default_factory=Feedback)
    answers_used: int = 0
    #: where an answer leads: "" (the implementer's next round, carrying the answer), or
    #: a phase of the same round again ("reviewing" after a reviewer kept dying, "gating")
    after_answer: str = ""
    #: a person's answer still to be passed on to the peer of the same round
    note_for_peer: str = ""
    #: sha256 of plan.md as approved: a later change is refused until a person answers
    plan_digest: str = ""
    #: sha256 of each file handoff handed a peer (briefs, diffs), by its name in the folder:
    #: a file of that name it did not write is never taken for its own
    handed: dict[str, str] = field(default_factory=dict)
    #: control files a person's answer let this ticket change (handoff.protocol.protected)
    allowed_changes: list[str] = field(default_factory=list)
    #: control files a person is asked about now: their answer allows them, or sends them back
    asked_changes: list[str] = field(default_factory=list)
    reason: str = ""
    created: str = field(default_factory=now)
    updated: str = field(default_factory=now)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> State:
        """The state in data; TypeError or ValueError when a field is missing or of the wrong
        type, so a damaged file is caught when it is read, not deep in the loop."""
        known = {f.name: f for f in fields(cls)}
        if isinstance(data.get("phase"), str) and data["phase"] in PHASES:
            data = {**data, "phase": Phase(data["phase"])}
        for name, value in data.items():
            spec = known.get(name)
            if spec is None:
                continue
            default = spec.default_factory() if spec.default_factory is not MISSING \
                else spec.default if spec.default is not MISSING else ""
            if not isinstance(value, type(default)):
                raise TypeError(f"{name!r} is {type(value).__name__}, not "
                                f"{type(default).__name__}")
        if data.get("phase", PHASES[0]) not in PHASES:
            raise ValueError(f"unknown phase {data['phase']!r}")
        try:
            Team.from_records(data.get("team", []))
        except (UsageError, ValueError, AttributeError) as exc:
            raise ValueError(f"'team' is not a team: {getattr(exc, 'message', exc)}") from None
        return cls(**{k: v for k, v in data.items() if k in known})

    @property
    def roles(self) -> Team:
        return Team.from_records(self.team)

    @property
    def relaunches(self) -> int:
        """Relaunches this round, every peer's (state.json carries it for its readers)."""
        return sum(self.relaunched.values())

    @property
    def reviews(self) -> int:
        """Reviews done: one verdict each (state.json carries the count for its readers)."""
        return len(self.verdicts)

    def commit_of(self, round_: int) -> str:
        return self.commits.get(str(round_), "")

    def last_commit(self) -> str:
        """The newest accepted commit of the ticket branch (the base before any round)."""
        accepted = [int(r) for r in self.commits]
        return self.commits[str(max(accepted))] if accepted else self.base_commit


@dataclass(frozen=True)
class TicketDir:
    path: Path

    @property
    def ticket(self) -> str:
        return self.path.name

    @property
    def state_file(self) -> Path:
        return self.path / "state.json"

    @property
    def backup_file(self) -> Path:
        """The last state written, kept apart from state.json."""
        return self.path / "state.json.bak"

    @property
    def events(self) -> EventLog:
        return EventLog(self.path / "events.jsonl")

    @property
    def debug_log(self) -> Path:
        """Where a run with HANDOFF_DEBUG=1 (`--verbose`) logs its subprocesses and events."""
        return self.path / "handoff.log"

    @property
    def lock_file(self) -> Path:
        return self.path / "lock"

    @property
    def ticket_md(self) -> Path:
        return self.path / "ticket.md"

    @property
    def plan_md(self) -> Path:
        return self.path / "plan.md"

    @property
    def final_report(self) -> Path:
        return self.path / "final-report.md"

    def brief(self, role: str, round_: int) -> Path:
        return self.path / "inbox" / role / f"brief-{round_}.md"

    def briefs(self, role: str) -> list[Path]:
        """The role's briefs, oldest round first."""
        found = (self.path / "inbox" / role).glob("brief-*.md")
        return sorted((p for p in found if brief_round(p) is not None),
                      key=lambda p: brief_round(p) or 0)

    def report(self, role: str, round_: int) -> Path:
        """impl-report-N.md and review-report-N.md, as every ticket had them; another role's
        is <role>-report-N.md (role.RESERVED keeps the names apart)."""
        prefix = {IMPLEMENTER: "impl", "reviewer": "review"}.get(role, role)
        return self.path / f"{prefix}-report-{round_}.md"

    def scan_log(self, round_: int, scanner: str) -> Path:
        return self.path / f"scan-{round_}-{scanner}.log"

    def diff(self, round_: int) -> Path:
        return self.path / f"diff-{round_}.patch"

    def diff_since(self, round_: int, since: int) -> Path:
        """What round_'s commit changed since round since's, the last reviewed one."""
        return self.path / f"diff-{round_}-since-{since}.patch"

    def gate_log(self, round_: int) -> Path:
        return self.path / f"gate-{round_}.log"

    def proof_log(self, round_: int, run: int) -> Path:
        """The log of a run of round_'s new tests at the base (handoff.loop.proof)."""
        return self.path / f"proof-{round_}-{run}.log"

    def merge_log(self, merged: int, command: int = 0) -> Path:
        """The log of finish's gate run (its command-th test command, from 0) on the base with
        the first `merged` tickets of its train merged."""
        return self.path / f"merge-{merged}{f'.{command + 1}' if command else ''}.log"

    @property
    def gate_running(self) -> Path:
        """A running gate's command, process group and identity, while it runs: what ends it
        after its orchestrator died."""
        return self.path / "gate-running.json"

    def escalated_report(self, round_: int) -> Path:
        """The final report of an escalation that `resume --more-rounds` carried on."""
        return self.path / f"final-report.escalated-{round_}.md"

    def scratch_patch(self, role: str, round_: int | str) -> Path:
        """What was left in a detached checkout (a tester's, a reviewer's, the gate's) when it
        was pointed at round_'s commit (round_ "close": when it was removed at close)."""
        return self.path / "transcripts" / f"{role}-scratch-{round_}.patch"

    def discarded(self, role: str, by: str = "close") -> Path:
        """A free name for the uncommitted work a `close --force` (by "close") or a `gc
        --force` (by "gc") removed with the role's worktree, kept as a patch."""
        stem = self.path / "transcripts" / f"{role}-discarded-at-{by}"
        return free(lambda n: stem.with_name(stem.name + (f".{n}" if n > 1 else "") + ".patch"))

    def rejected(self, report: Path, number: int) -> Path:
        """Where a report that did not stand is kept: the ticket's rejection number."""
        return report.with_name(f"{report.stem}.rejected-{number}.md")

    def forged(self, report: Path) -> Path:
        """A free name to keep a report that does not count (not filed by handoff, or changed
        since) beside the record."""
        return free(lambda n: report.with_name(f"{report.stem}.forged-{n}.md"))

    def voided(self, report: Path) -> Path:
        """A free name to keep a report that was filed but is not taken: its session ended
        before its turn did (handoff.loop.orchestrator)."""
        return free(lambda n: report.with_name(f"{report.stem}.void-{n}.md"))

    def recycling(self, role: str) -> Path:
        """Held (with its pid) by a `handoff recycle` while it restarts the role's peer: the
        orchestrator sees the old process end and must not take it for a death."""
        return self.path / f"recycling-{role}"

    def drafts(self, role: str) -> Path:
        """Where the role's peer writes its reports before filing them: its own folder, the
        one place of the ticket folder it may write inside the sandbox."""
        return self.path / "drafts" / role

    def signals(self, role: str) -> Path:
        """Where the role's CLI hooks drop their signal files."""
        return self.path / "signals" / role

    def cli(self, role: str) -> Path:
        """The role's own CLI state folders (one per CLI: `cli/<role>/claude/`), seeded from
        the person's at each of its launches (handoff.providers.clistate)."""
        return self.path / "cli" / role

    def receipt(self, report: Path) -> Path:
        """What `handoff submit` checked when it filed report."""
        return self.path / "receipts" / f"{report.stem}.json"

    def answer(self, number: int) -> Path:
        return self.path / "answers" / f"answer-{number}.md"

    def transcript(self, role: str, round_: int, why: str = "") -> Path:
        """A fresh transcript path: a second capture in one round never overwrites the first.
        why: a capture made for a reason of its own (`unrecognised`), named apart."""
        folder = self.path / "transcripts"
        stem = f"{role}-{round_}" + (f".{why}" if why else "")
        return free(lambda n: folder / (f"{stem}.{n}.log" if n > 1 else f"{stem}.log"))

    def load(self) -> State:
        return self._read(self.state_file)

    def load_backup(self) -> State:
        return self._read(self.backup_file)

    def _read(self, path: Path) -> State:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise NotFound(f"ticket {self.ticket} has no {path.name} in {self.path}") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise UsageError(f"{path} is not valid JSON: {exc}",
                             f"'handoff stop {self.ticket}' and 'handoff log {self.ticket}' "
                             "still work; 'resume' and 'close' fall back on state.json.bak"
                             ) from None
        try:
            if not isinstance(data, dict):
                raise TypeError("not a JSON object")
            return State.from_dict(data)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"{path} is not a handoff state file: {exc}",
                             "restore it from a backup, or start the ticket anew") from None

    def save(self, state: State) -> None:
        """state.json, then the same text as state.json.bak: a crash between the two leaves a
        good state.json and a backup one save older, never two bad files. While an
        orchestrator runs, the wait for the disk is its worker's (handoff.record.durable)."""
        state.updated = now()
        text = json.dumps({**asdict(state), "reviews": state.reviews,
                           "relaunches": state.relaunches}, indent=2, sort_keys=True) + "\n"
        flusher = durable.flusher_of(self.path)
        if flusher is None:
            atomic_write(self.state_file, text)
            atomic_write(self.backup_file, text, durable=False)
            return
        atomic_write(self.state_file, text, durable=False)
        flusher.submit(lambda: self._make_durable(text))

    def _make_durable(self, text: str) -> None:
        with contextlib.suppress(FileNotFoundError):  # the record was removed meanwhile
            durable.sync(self.state_file)
            atomic_write(self.backup_file, text)

    def move(self, state: State, phase: Phase, reason: str | None = None,
             **fields: Any) -> dict[str, object]:
        """The one way a ticket changes phase: state saved, then its `phase` event (returned).
        reason None keeps the state's reason as it was; fields go into the event."""
        before, state.phase = state.phase, phase
        if reason is not None:
            state.reason = clip(reason, REASON_LIMIT)
        self.save(state)
        extra = {"reason": reason} if reason is not None else {}
        return self.events.append("phase", round=state.round, **{"from": before, "to": phase},
                                  **extra, **fields)

    def set_aside(self) -> Path:
        """Move an unreadable state.json out of the way, never deleting it: the evidence of
        what went wrong stays in the record."""
        kept = free(lambda n: self.path / f"state.json.corrupt-{n}")
        os.rename(self.state_file, kept)
        return kept


def free(name: Callable[[int], Path]) -> Path:
    """name(n) for the first n from 1 that names no file yet: the one way the record numbers
    what it keeps beside another (a second transcript, a forged report, a corrupt state)."""
    n = 1
    while (candidate := name(n)).exists():
        n += 1
    return candidate


def ticket_dir(home: Path, repo_key: str, ticket: str) -> TicketDir:
    return TicketDir(home / repo_key / validate_ticket_id(ticket))


def all_tickets(home: Path, repo_key: str | None = None) -> list[TicketDir]:
    """Every ticket directory under home (of one repo, given its key), oldest repo key first,
    by ticket name."""
    if not home.is_dir():
        return []
    # a hidden folder is no ticket: ids never start with a dot, and a record being made
    # (handoff.operations.create.STAGING) is one until it takes its name
    return [TicketDir(p.parent) for p in sorted(home.glob(f"{repo_key or '*'}/*/state.json"))
            if not p.parent.name.startswith(".")]


def find(home: Path, ticket: str, repo_key: str | None = None) -> TicketDir:
    """The one ticket directory with this id, optionally narrowed to one repo."""
    validate_ticket_id(ticket)
    matches = [t for t in all_tickets(home) if t.ticket == ticket
               and (repo_key is None or t.path.parent.name == repo_key)]
    if not matches:
        raise NotFound(f"no ticket {ticket!r} under {home}", "list tickets with 'handoff status'")
    if len(matches) > 1:
        repos = ", ".join(sorted(m.path.parent.name for m in matches))
        raise UsageError(
            f"ticket {ticket!r} exists in several repos ({repos})",
            "run the command inside the repo you mean, or pass --repo PATH",
        )
    return matches[0]


def brief_round(brief: str | Path) -> int | None:
    """N of a path .../brief-N.md."""
    match = re.search(r"brief-(\d+)\.md$", str(brief))
    return int(match.group(1)) if match else None
