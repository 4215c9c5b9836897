"""The gate stage of a round: the plan's test command and the scanners, at the round's exact
commit, in a checkout of their own (handoff.loop.gate runs them; this stage gathers what they
found and hands it to the rules). The plan's tests at the base run beside round 1
(handoff.loop.baseline), so each gate's count can be compared with the base's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from handoff.errors import HandoffError
from handoff.loop import handing, proof, rules, scanners, testcount
from handoff.loop.baseline import BASE, BASE_ROUND, Baseline
from handoff.loop.context import TicketContext
from handoff.loop.crew import Crew
from handoff.loop.gate import GateResult, end_left_gate, excerpt, run_gate
from handoff.machinery.repo import short_sha
from handoff.machinery.worktrees import GATE
from handoff.phases import Phase
from handoff.verdicts import GateOutcome


class GateStage:
    def __init__(self, ctx: TicketContext, crew: Crew) -> None:
        self.ctx = ctx
        self.crew = crew
        #: the plan's tests run at the base, beside round 1 (handoff.loop.baseline)
        self.baseline: Baseline | None = None

    def start_baseline(self) -> None:
        """The plan's tests at the base, counted once per ticket, while the implementer works:
        the gates of its rounds are compared with it."""
        ws, state = self.ctx.ws, self.ctx.state
        test = ws.plan().test
        if test and ws.config.base_tests and BASE not in state.tests_ran and \
                self.baseline is None:
            self.baseline = Baseline(ws, state.base_commit, test)
            self.baseline.start()

    def settle_baseline(self) -> None:
        """The base's count in the record before a round's gate runs: waited for (bounded by
        the gate's own timeout), or run now when no base run was started (a resume)."""
        ctx = self.ctx
        if BASE in ctx.state.tests_ran or not ctx.ws.plan().test or not ctx.ws.config.base_tests:
            return
        self.start_baseline()
        assert self.baseline is not None
        self.baseline.wait()
        count = self.baseline.count()
        ctx.state.tests_ran[BASE] = count.fields() if count is not None else {}
        ctx.save()
        result = self.baseline.result
        ctx.event("gate", result="base", commit=ctx.state.base_commit,
                  summary=result.summary() if result is not None else self.baseline.error,
                  log=ctx.tdir.gate_log(BASE_ROUND).name if result else "",
                  tests=count.fields() if count is not None else {})
        self.baseline = None

    def run(self) -> None:
        """The round's gate, then the rules' move: on to the reviewers, or back to the
        implementer with what failed."""
        ctx = self.ctx
        if not ctx.plan_unchanged() or not ctx.control_files_allowed():
            return
        self.settle_baseline()
        left = end_left_gate(ctx.tdir.gate_running)
        if left is not None:  # a killed orchestrator's gate: ended first, never two at once
            ctx.event("gate", result="ended", reason="left running by an earlier orchestrator",
                      **left)
        n, plan = ctx.state.round, ctx.ws.plan()
        commit = ctx.state.commit_of(n)
        ctx.point(GATE, n)
        cwd, env = ctx.ws.worktrees.path(GATE), ctx.ws.gate_env()
        if not self._scanners_installed(commit, cwd, env):
            self.crew.retire_finished()
            return
        if plan.test is None and not ctx.ws.config.scanners:
            self.crew.retire_finished()
            ctx.state.gates[str(n)] = GateOutcome.SKIPPED
            ctx.event("gate", result="skipped", reason="the plan names no test command")
            ctx.apply(rules.gate_skipped())
            return
        # what the reviewers' fences show of the round, written before they start
        handing.hand_diffs(ctx, n, commit)
        try:
            self._gate(n, commit, cwd, env)
        finally:
            if ctx.state.phase != Phase.REVIEWING:
                self.crew.cool()

    def turn_over(self, n: int) -> None:
        """The last round's reviewers leave and the next ones start, with no brief yet, while
        the gate's command runs (one CLI's leaving and another's start took 0.44 s of a
        two-round scripted ticket's 2.7 s before the gate began: bench floor); each is briefed
        the moment the gate passed."""
        self.crew.retire_finished()
        self.crew.warm(n)

    def _gate(self, n: int, commit: str, cwd: Path, env: dict[str, str]) -> None:
        """The test command and the scanners at commit, their judgement and the rules' move."""
        ctx, plan = self.ctx, self.ctx.ws.plan()
        if plan.test:
            result: GateResult | None = self.run_test(plan.test, commit, cwd, env,
                                                      meanwhile=partial(self.turn_over, n))
        else:
            self.turn_over(n)
            result = None
        if result is not None:
            count = testcount.read(result.output)
            ctx.state.tests_ran[str(n)] = count.fields() if count is not None else {}
        scans = self.run_scanners(n, commit, cwd, env)
        passed = rules.gate_passes(result.passed if result is not None else None,
                                   any(s.blocks for s in scans))
        changed = ctx.changed_checkout(GATE, commit, untracked=True) if passed else ""
        if changed:  # a pass counts only at the exact commit: someone wrote into the checkout
            ctx.event("gate", result="void", why=changed, log=ctx.tdir.gate_log(n).name,
                      commit=commit)
            ctx.apply(rules.gate_void(changed, ctx.state.ticket))
            return
        if passed:
            self.prove(n, commit)
        self._judged(n, commit, passed, result, scans)

    def prove(self, n: int, commit: str) -> None:
        """The round's new tests at the base (handoff.loop.proof): what they show is for the
        reviewers to weigh, so a proof that cannot be made is said and the round goes on."""
        try:
            proof.prove(self.ctx, n, commit)
        except (HandoffError, OSError) as exc:
            self.ctx.event("proof", commit=commit, error=str(exc)[:500])

    def _scanners_installed(self, commit: str, cwd: Path, env: dict[str, str]) -> bool:
        """Every required scanner can run; else the gate stops before running anything."""
        ctx = self.ctx
        missing = [s for s in ctx.ws.config.scanners
                   if s.required and not scanners.installed(s.command[0], env, cwd)]
        if not missing:
            return True
        names = [s.name for s in missing]
        ctx.event("gate", result="stopped", reason="required scanner(s) not installed",
                  scanners=names, commit=commit)
        where = str(ctx.ws.config_file("scanners"))
        ctx.apply(rules.missing_scanners(names, [scanners.fix_for_missing(
            s, env, ctx.state.ticket, where) for s in missing]))
        return False

    def _judged(self, n: int, commit: str, passed: bool, result: GateResult | None,
                scans: Sequence[scanners.ScanResult]) -> None:
        """The gate's outcome in the record and the events, and the rules' move."""
        ctx = self.ctx
        ctx.state.gates[str(n)] = GateOutcome.PASS if passed else GateOutcome.FAIL
        said = gate_summary(result, scans)
        ctx.event("gate", result=ctx.state.gates[str(n)], summary=said,
                  log=ctx.tdir.gate_log(n).name if result else "", commit=commit)
        notes = [gate_note(result.summary(), commit, ctx.tdir.gate_log(n), result.output)] \
            if result is not None and not result.passed else []
        blocking = scanners.note(scans)
        if blocking is not None:
            notes.append(blocking)
        move = rules.after_gate(passed, ctx.state.gate_bounces, ctx.state.max_gate_bounces,
                                said, notes)
        if not passed:
            ctx.state.gate_bounces += 1
        ctx.apply(move)

    def run_test(self, argv: Sequence[str], commit: str, cwd: Path, env: dict[str, str],
                 meanwhile: Callable[[], None] | None = None) -> GateResult:
        ctx = self.ctx
        n = ctx.state.round
        ctx.event("gate", result="running", command=list(argv), commit=commit)
        return run_gate(argv, cwd, env, ctx.ws.config.gate_timeout, ctx.tdir.gate_log(n),
                        record=ctx.tdir.gate_running, fence=ctx.ws.gate_fence(),
                        nice=ctx.ws.config.peer_nice, meanwhile=meanwhile)

    def run_scanners(self, n: int, commit: str, cwd: Path,
                     env: dict[str, str]) -> list[scanners.ScanResult]:
        """Every scanner of the config at the gate's commit, each said in an event."""
        ctx = self.ctx
        if not ctx.ws.config.scanners:
            return []
        scope = scanners.Scope(base=ctx.state.base_commit, commit=commit,
                               changed=tuple(ctx.ws.repo.present_changes(
                                   ctx.state.base_commit, commit)))
        found = scanners.run_scanners(ctx.ws.config.scanners, scope, cwd, env,
                                      ctx.ws.config.gate_timeout,
                                      lambda name: ctx.tdir.scan_log(n, name),
                                      record=ctx.tdir.gate_running,
                                      fence=ctx.ws.gate_fence(),
                                      nice=ctx.ws.config.peer_nice)
        for scan in found:
            ctx.event("scanner", **scan.fields())
        ctx.state.scans[str(n)] = {scan.name: scan.state for scan in found}
        return found


def gate_summary(result: GateResult | None, scans: Sequence[scanners.ScanResult]) -> str:
    """The gate's one line: its test command's summary, and each scanner's state."""
    parts = [result.summary()] if result is not None else []
    parts += [f"{s.name} {s.state}" for s in scans if s.state != scanners.ScanState.PASSED or not s.required]
    if scans and all(s.state == scanners.ScanState.PASSED for s in scans):
        parts.append(f"{len(scans)} scanner(s) passed")
    return "; ".join(parts) or "nothing to run"


def gate_note(summary: str, commit: str, log: Path, output: str) -> tuple[str, str]:
    """The feedback a failed gate sends the implementer (also when resume --more-rounds
    carries an escalated ticket on from its last failed gate)."""
    tail = excerpt(output)  # bytes, not lines: one line may be 50 MB
    return ("The verification gate failed",
            f"{summary} at {short_sha(commit)}; the full output is in `{log}`. Its end:"
            f"\n\n```\n{tail}\n```")
