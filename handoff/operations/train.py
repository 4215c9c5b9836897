"""The merge train of `handoff finish`: passed tickets merged one after another onto their
base in the object store, the result tested before the base moves, and the ticket that
breaks it found.

A merge that git calls clean says only that no two changes touched the same lines (and with a
`merge=union` attribute, not even that): two passed tickets can still make a base that does
not import. So the result is tested as a round's commit is, by the plans' test commands and
the configured scanners, in the gate's checkout and fence of the train's first ticket. Nothing
here moves a branch: the commits made are objects only, until `finish` moves the base to the
last one that passed.

When the whole train fails, the first ticket that makes it fail is found by bisection over its
prefixes, each one tested (log2 of the train's length runs): the prefix before it is what
finish may merge.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from handoff.inputs import clip
from handoff.loop import scanners, testcount
from handoff.loop.gate import GateResult, run_gate
from handoff.loop.workspace import Workspace
from handoff.machinery.repo import Repo, git, short_sha
from handoff.machinery.worktrees import GATE
from handoff.operations.merging import Base
from handoff.record.ticket import State
from handoff.verdicts import GateOutcome

#: what `finish` writes in each message it makes, so a later finish can say which tickets a
#: base holds (handoff.operations.finish.message)
TICKET_LINE = re.compile(r"^Ticket (\S+), reviewed at [0-9a-f]+ on \S+(?: on host \S+)?\.$",
                         re.M)


@dataclass(frozen=True)
class Passed:
    """One passed ticket of a finish, as read before anything moves."""

    ws: Workspace
    state: State
    #: the commit that passed review (not the branch's head, which may be past it)
    commit: str
    branch: str

    @property
    def ticket(self) -> str:
        return self.state.ticket


@dataclass(frozen=True)
class Link:
    """One ticket merged onto the train: the base before it and after it (the same commit
    when the base held all it changes already)."""

    passed: Passed
    before: str
    after: str

    @property
    def merged(self) -> bool:
        return self.after != self.before


@dataclass(frozen=True)
class Conflict:
    """The ticket whose merge onto the train conflicts, and where."""

    passed: Passed
    onto: str
    files: tuple[str, ...]


class CheckFields(TypedDict):
    """A Check as its `merge-check` event records it (handoff.operations.onto reads it back)."""

    result: str
    commit: str
    summary: str
    failing: list[str]
    last: str
    #: the logs' names in the ticket folder
    logs: list[str]


@dataclass(frozen=True)
class Check:
    """The gate run on one of the train's results."""

    #: the result tested: the base after the first `count` links
    commit: str
    count: int
    #: passed, failed, skipped (the tree is one the gate passed at already), untested (no
    #: plan names a test command and no scanner is configured)
    result: str
    summary: str
    failing: tuple[str, ...] = ()
    logs: tuple[Path, ...] = field(default_factory=tuple)
    #: the last line a failed command printed: what a person reads when it names no test
    #: (an import that fails before any test runs)
    last: str = ""

    @property
    def ok(self) -> bool:
        return self.result != "failed"

    def fields(self) -> CheckFields:
        return {"result": self.result, "commit": self.commit, "summary": self.summary,
                "failing": list(self.failing), "last": self.last,
                "logs": [p.name for p in self.logs]}


def build(repo: Repo, base: Base, tickets: Sequence[Passed], squash: bool,
          message: Callable[[Passed], str]) -> tuple[list[Link], Conflict | None]:
    """Each ticket's reviewed commit merged onto the base and the ones before it (a merge
    commit, or one squashed commit), as objects only: the links made, and the conflict that
    stopped the train (None: every ticket merged)."""
    head = base.head
    links: list[Link] = []
    for passed in tickets:
        if repo.is_ancestor(passed.commit, head):
            links.append(Link(passed, head, head))
            continue
        tree, conflicts = repo.merge(head, passed.commit)
        if conflicts is not None:
            return links, Conflict(passed, head, tuple(conflicts))
        if tree == git(repo.top, "rev-parse", f"{head}^{{tree}}"):
            # taken over by hand before (or a finish whose close failed, run again): never an
            # empty commit
            links.append(Link(passed, head, head))
            continue
        parents = [head] if squash else [head, passed.commit]
        new = git(repo.top, "commit-tree", tree, *(a for p in parents for a in ("-p", p)),
                  "-m", message(passed))
        links.append(Link(passed, head, new))
        head = new
    return links, None


def check(repo: Repo, base: Base, links: Sequence[Link], count: int) -> Check:
    """The gate on the base with the first count links merged, in the first ticket's gate
    checkout and fence, logged in its folder; every ticket of the prefix records it."""
    prefix = links[:count]
    commit = prefix[-1].after if prefix else base.head
    found = _already_passed(repo, base, prefix, commit) or _run(prefix[0].passed.ws, base,
                                                                 prefix, commit)
    for link in prefix:
        link.passed.ws.tdir.events.append(
            "merge-check", round=link.passed.state.round, base=base.branch,
            tickets=[x.passed.ticket for x in prefix], **found.fields())
    return found


def _already_passed(repo: Repo, base: Base, prefix: Sequence[Link], commit: str) -> Check | None:
    """A train of one whose base has not moved since its review: the merge is the reviewed
    tree itself, which its gate passed at already (a fast-forward, or its merge commit)."""
    if len(prefix) != 1 or not prefix[0].merged:
        return None
    passed = prefix[0].passed
    gate = passed.state.gates.get(str(passed.state.round), "")
    if gate != GateOutcome.PASS or not repo.is_ancestor(base.head, passed.commit):
        return None
    if git(repo.top, "rev-parse", f"{commit}^{{tree}}") != git(
            repo.top, "rev-parse", f"{passed.commit}^{{tree}}"):
        return None
    return Check(commit, 1, "skipped",
                 f"not run again: {base.branch} has not moved since {passed.ticket} was reviewed,"
                 f" so the merge is the tree its gate passed at {short_sha(passed.commit)}")


def _run(ws: Workspace, base: Base, prefix: Sequence[Link], commit: str) -> Check:
    count = len(prefix)
    commands = list(dict.fromkeys(tuple(plan.test) for link in prefix
                                  if (plan := link.passed.ws.plan()).test))
    if not commands and not ws.config.scanners:
        return Check(commit, count, "untested",
                     "not tested: no plan of the train names a test command, and no scanner is "
                     "configured")
    tdir = ws.tdir
    ws.worktrees.point(GATE, commit, tdir.scratch_patch(GATE, f"merge-{count}"))
    cwd, env, fence = ws.worktrees.path(GATE), ws.gate_env(), ws.gate_fence()
    results: list[GateResult] = []
    logs: list[Path] = []
    for i, argv in enumerate(commands):
        logs.append(tdir.merge_log(count, i))
        results.append(run_gate(argv, cwd, env, ws.config.gate_timeout, logs[-1],
                                record=tdir.gate_running, fence=fence,
                                nice=ws.config.peer_nice))
    scans = scanners.run_scanners(
        ws.config.scanners,
        scanners.Scope(base=base.head, commit=commit,
                       changed=tuple(ws.repo.present_changes(base.head, commit))),
        cwd, env, ws.config.gate_timeout,
        lambda name: tdir.path / f"merge-{count}-scan-{name}.log",
        record=tdir.gate_running, fence=fence, nice=ws.config.peer_nice)
    logs += [Path(scan.log) for scan in scans if scan.log]
    failed = [r for r in results if not r.passed]
    blocking = [scan for scan in scans if scan.blocks]
    said = [r.summary() for r in results] + [f"{scan.name}: {scan.summary}" for scan in scans]
    failing = tuple(name for r in failed for name in testcount.failing(r.output))
    last = next((line.strip() for r in failed for line in reversed(r.output.splitlines())
                 if line.strip()), "")
    return Check(commit, count, "failed" if failed or blocking else "passed",
                 "; ".join(clip(s, 300) for s in said), failing, tuple(logs), clip(last, 300))


def first_breaking(links: Sequence[Link], whole: Check,
                   run: Callable[[int], Check]) -> tuple[int, Check | None, Check]:
    """The whole train failed (whole): the number of links before the first one whose merge
    fails, the check that passed there (None when it is 0: the base itself) and the check
    that failed after it. Each prefix tried is tested (run)."""
    good_count, good, bad_count, bad = 0, None, len(links), whole
    while bad_count - good_count > 1:
        middle = (good_count + bad_count) // 2
        found = run(middle)
        if found.ok:
            good_count, good = middle, found
        else:
            bad_count, bad = middle, found
    return good_count, good, bad


def met(repo: Repo, base: Base, passed: Passed, before: Sequence[Link]) -> list[str]:
    """The tickets whose changes passed's meets on the result that failed: those merged
    before it in the train, then those `finish` merged into the base since passed was
    started (read from the messages it wrote)."""
    names = [link.passed.ticket for link in before if link.merged]
    log = git(repo.top, "log", "--format=%B", f"{passed.state.base_commit}..{base.head}")
    for name in TICKET_LINE.findall(log):
        if name != passed.ticket and name not in names:
            names.append(name)
    return names
