"""Tests proven to catch the bug: after a round's gate passed, every test the ticket added or
changed (handoff.loop.newtests) runs at the base commit, in the gate's own checkout and fence,
with only the change's test files laid over the base. A test that fails there and passes at
the commit is the proof a reviewer cannot give by reading; one that passes there too proves
nothing about the change and is listed to every reviewer (P1, …), who answers it justified
or not, as a weakened test. One whose file does not load at the base (it imports what the
change adds) is said as such.

What ran is kept in the record with a key (the base, the plan's command, and the test files
at the commit): a later round whose test files did not change takes the earlier answer
instead of running them again.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from handoff.loop import mutants, newtests, proving, weakened
from handoff.loop.context import TicketContext
from handoff.loop.gate import run_gate
from handoff.loop.newtests import NewTest
from handoff.loop.proving import Outcome
from handoff.loop.testconfig import NEW
from handoff.machinery.repo import run
from handoff.machinery.worktrees import GATE
from handoff.protocol import diffs
from handoff.protocol.diffs import DELETED
from handoff.protocol.plan import PROVE_MUTANTS

#: runs of the new tests at the base, at most: a file that does not load there stops pytest's
#: run, which is then made again without it
RUNS = 3


def prove(ctx: TicketContext, n: int, commit: str) -> None:
    """Round n's new tests at the base, their outcomes in the record and an event; nothing
    when the plan names no test command or the config turns base runs off (`base_tests`)."""
    ws, state = ctx.ws, ctx.state
    plan = ws.plan()
    if plan.test is None or not ws.config.base_tests or str(n) in state.proofs:
        return
    named = weakened.named_paths([plan.test, *plan.review])
    files = diffs.parse(ws.repo.line_diff(state.base_commit, commit))
    # a test file's text at commit as git stores it (no filter runs), as the weakened-tests
    # check reads its files; None when it is not there or is too big to read
    at = weakened.reader(ws.repo, state.base_commit, commit)
    tests = newtests.changed_tests(files, lambda path: at(NEW, path), named)
    overlay = sorted({f.new_path for f in files if f.status != DELETED and not f.binary
                      and weakened.is_test_path(f.new_path, named)})
    mutate = PROVE_MUTANTS in plan.prove
    # mutants rest on the source too: a run of them is never taken from another commit
    key = _key(ctx, commit, [*plan.test, *((commit,) if mutate else ())], overlay)
    earlier = next((record for record in state.proofs.values() if record.get("key") == key),
                   None)
    if earlier is not None:
        state.proofs[str(n)] = dict(earlier)
    else:
        said = _run(ctx, n, commit, plan.test, tests, overlay) if tests else {}
        state.proofs[str(n)] = {"key": key, "tests": _numbered(tests, said)}
        if mutate and tests:
            state.proofs[str(n)]["mutants"] = _mutate(ctx, n, commit, plan.test, tests,
                                                      mutants.mutants(files, named))
    ctx.save()
    kept = proving.listed(state.proofs[str(n)])
    if kept:
        ctx.event("proof", commit=commit, reused=earlier is not None,
                  tests=[f"{t['node']}: {t['outcome']}" for t in kept],
                  **({"mutants": proving.mutants_said(state.proofs[str(n)])} if mutate else {}))


def _numbered(tests: Sequence[NewTest], said: dict[str, tuple[Outcome, str]]
              ) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    passes = 0
    for test in tests:
        outcome, why = said.get(test.node, (Outcome.UNKNOWN, "not run"))
        fields = {**test.fields(), "outcome": outcome.value, "why": why}
        if outcome == Outcome.PASSES:
            passes += 1
            fields["id"] = f"P{passes}"
        out.append(fields)
    return out


def _run(ctx: TicketContext, n: int, commit: str, test: Sequence[str],
         tests: Sequence[NewTest], overlay: list[str]) -> dict[str, tuple[Outcome, str]]:
    """The base checkout with the overlay laid over it, the tests run there (again without a
    file that stopped the run, at most RUNS times), the gate's checkout set back to commit."""
    ws, tdir = ctx.ws, ctx.tdir
    worktrees = ws.worktrees
    worktrees.point(GATE, ctx.state.base_commit, tdir.scratch_patch(GATE, n))
    said: dict[str, tuple[Outcome, str]] = {}
    ended = False
    try:
        worktrees.lay_over(GATE, commit, overlay)
        left = list(tests)
        for attempt in range(1, RUNS + 1):
            result = run_gate(proving.selected(test, left), worktrees.path(GATE), ws.gate_env(),
                              ws.config.gate_timeout, tdir.proof_log(n, attempt),
                              record=tdir.gate_running, fence=ws.gate_fence(),
                              nice=ws.config.peer_nice)
            ended = result.timed_out or bool(result.limit)
            said.update(proving.outcomes(test, left, result.output, result.exit_code, ended))
            broken = proving.uncollected(result.output)
            again = [t for t in left if t.node not in said
                     and not any(proving.same_file(f, t.file) for f in broken)]
            if ended or not broken or not again or len(again) == len(left):
                break
            left = again
    finally:
        # what is there is the overlay and what the tests did at the base: nothing of a peer
        worktrees.point(GATE, commit, None)
    return {t.node: said.get(t.node, proving.unsaid(ended)) for t in tests}


def _mutate(ctx: TicketContext, n: int, commit: str, test: Sequence[str],
            tests: Sequence[NewTest], found: Sequence[mutants.Mutant]) -> dict[str, object]:
    """Each mutant laid into the gate's checkout at commit in turn and the new tests run
    against it: `tried`, `caught`, and the `survived` ones (those the tests passed); the
    checkout set back to commit afterwards."""
    ws, tdir = ctx.ws, ctx.tdir
    root = ws.worktrees.path(GATE)
    survived: list[dict[str, object]] = []
    tried = 0
    try:
        for k, mutant in enumerate(found, start=1):
            original = _read(root, mutant.file)
            mutated = mutants.apply(original, mutant) if original is not None else None
            if mutated is None:
                continue
            _write(root, mutant.file, mutated)
            result = run_gate(proving.selected(test, tests), root, ws.gate_env(),
                              ws.config.gate_timeout, tdir.proof_log(n, 100 + k),
                              record=tdir.gate_running, fence=ws.gate_fence(),
                              nice=ws.config.peer_nice)
            _write(root, mutant.file, original or "")
            tried += 1
            if result.passed:
                survived.append(mutant.fields())
    finally:
        ws.worktrees.point(GATE, commit, None)
    return {"tried": tried, "caught": tried - len(survived), "survived": survived}


def _read(root: Path, path: str) -> str | None:
    """A tracked file of handoff's own checkout, never through a link (the checkout is the
    commit's, which a peer wrote): None when it is not a regular file there."""
    try:
        fd = os.open(root / path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode) or \
                not (root / path).resolve().is_relative_to(root.resolve()):
            return None
        return handle.read().decode("utf-8", "surrogateescape")


def _write(root: Path, path: str, text: str) -> None:
    fd = os.open(root / path, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW)
    with os.fdopen(fd, "wb") as handle:
        handle.write(text.encode("utf-8", "surrogateescape"))


def _key(ctx: TicketContext, commit: str, test: Sequence[str], overlay: list[str]) -> str:
    """What a run's outcome rests on: the base, the command, the laid files' blobs."""
    listing = run(ctx.ws.repo.top, "ls-tree", "-r", commit, "--", *overlay,
                  check=False)[1] if overlay else ""
    text = "\0".join([ctx.state.base_commit, *test, listing])
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()
