"""`handoff finish`: merge passed tickets into their base branch, locally, once the merged
result has passed the gate, then close them.

Nothing is pushed, and nothing moves until the result is known to work. The merge is worked out
in the object store (`git merge-tree --write-tree`, `git commit-tree`: no index, no checkout of
the person's), so a conflict is named without touching anything; the result is then tested as
a round's commit is, in the gate's checkout and fence (handoff.operations.train), since a merge
that git calls clean may still not build. Several tickets are a train: merged one after another,
tested once together, and the base moved once; when the train fails, the first ticket that
breaks it is found, the ones before it merged, it and the ones after it left passed. The base
is then moved:

* base checked out in a worktree (the user's checkout, clean): `git merge --ff-only` to the new
  commit there, which moves branch and files together or refuses without changing either;
* base checked out nowhere: `git update-ref` with the old value, so a branch that moved in the
  meantime is refused, never overwritten.

Each merged ticket is then closed as `handoff close` closes it (`closing.close_ticket`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from handoff.errors import Busy, HandoffError, NotMerged, UsageError
from handoff.loop import after
from handoff.loop.workspace import Workspace
from handoff.machinery.repo import Repo, short_sha
from handoff.machinery.ticket_branch import branch_name
from handoff.next_steps import Verb, refused
from handoff.operations import closing, forge, opening, train
from handoff.operations.merging import (
    MODES,
    Base,
    base_branch,
    ensure_clean_checkout,
    move_base,
    outcome,
)
from handoff.operations.results import Finished, Train
from handoff.operations.train import Check, Conflict, Link, Passed
from handoff.phases import Phase
from handoff.record.lock import TicketLock
from handoff.record.ticket import State, all_tickets

#: seconds finish waits for a ticket's lock: a passed ticket's orchestrator asks its peers to
#: leave (each within its CLI's own grace) before it ends
HELD_WAIT = 30.0


def finish_ticket(home: Path, ticket: str, repo: Path | None,
                  mode: str = "merge") -> Finished:
    """Merge one passed ticket (a train of one); NotMerged when it does not merge, or its
    merged result fails."""
    done = finish_tickets(home, [ticket], repo, mode)
    if done.refused is not None:
        raise done.refused
    return done.finished[0]


def finish_tickets(home: Path, tickets: Sequence[str], repo: Path | None,
                   mode: str = "merge", all_passed: bool = False,
                   push: Push | None = None) -> Train:
    """Merge passed tickets into their base branch in the order given (every passed ticket of
    the repository, in the order they passed: all_passed), test the result and move the base
    once, then close the merged tickets. Raises before changing anything when it cannot be
    done safely; a train that breaks part-way merges the tickets before the one that breaks
    it, and says why in `refused`. push: instead of moving the base, push each ticket whose
    merge passed as its branch (and open its pull request); the tickets stay passed."""
    if mode not in MODES:
        raise UsageError(f"unknown finish mode {mode!r}", "use --merge or --squash")
    names = _names(home, tickets, repo, all_passed)
    train_ = _ordered([_passed(opening.open_ticket(home, name, repo)) for name in names])
    repo_ = train_[0].ws.repo
    base = _one_base(repo_, train_)
    _ensure_built_on_merged(home, repo_, base, train_)
    remote = forge.remote_for(repo_, base.branch, push.remote) if push is not None else ""
    if base.checkout is not None and push is None:
        ensure_clean_checkout(base)
    for passed in train_:
        passed.ws.worktrees.ensure_clean(("implementer",))  # what close would refuse, first
    if push is not None:
        return _pushed(repo_, base, train_, remote, push, mode)
    with _held(train_):
        merged, tested, refused = _tested(repo_, base, train_, mode)
        if merged:
            move_base(repo_, base, merged[-1].after)
    finished = [_close(home, repo, base, link, mode) for link in merged]
    return Train(tuple(finished), refused, tuple(_past_review(train_)),
                 tested.summary if tested is not None and any(m.merged for m in merged) else "")


@dataclass(frozen=True)
class Push:
    """finish --push: to which remote (None: the base branch's own, or the only one), and
    whether a pull request is opened."""

    remote: str | None = None
    pull_request: bool = False


def _pushed(repo: Repo, base: Base, tickets: Sequence[Passed], remote: str, push: Push,
            mode: str) -> Train:
    """The train's merge tested as finish tests it, then each ticket whose merge passed pushed
    as its branch, the base left where it is."""
    with _held(tickets):
        good, tested, refused = _tested(repo, base, tickets, mode)
    url = forge.url_of(repo, remote)
    done: list[forge.Pushed] = []
    for link in good:
        passed = link.passed
        forge.push(repo, remote, passed.commit, passed.branch)
        address = forge.open_pull_request(
            repo, base.branch, passed.branch, _title_line(passed),
            forge.closing_line(passed.state.source) + _read(passed.ws.tdir.final_report)) \
            if push.pull_request else ""
        done.append(forge.Pushed(passed.ticket, remote, url, passed.branch, passed.commit,
                                 address, "" if address else
                                 forge.compare(url, base.branch, passed.branch)))
        passed.ws.tdir.events.append("pushed", round=passed.state.round, remote=remote,
                                     url=url, branch=passed.branch, commit=passed.commit,
                                     pull_request=address, by="hand")
    return Train((), refused, tuple(_past_review(tickets)),
                 tested.summary if tested is not None and good else "",
                 tuple(line for p in done for line in p.said) + tuple(
                     f"{p.ticket} stays passed: 'handoff close {p.ticket}' once it is merged"
                     for p in done))


def _title_line(passed: Passed) -> str:
    title = _title(passed.ws)
    return f"{passed.ticket}: {title}" if title else passed.ticket


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def _names(home: Path, tickets: Sequence[str], repo: Path | None,
           all_passed: bool) -> list[str]:
    if all_passed:
        if tickets:
            raise UsageError("name tickets or give --all-passed, not both",
                             "'handoff finish A B C' merges those, in that order")
        found = _all_passed(home, repo)
        if not found:
            raise UsageError("no ticket of this repository has passed: nothing to finish",
                             "'handoff status' shows where each ticket stands")
        return found
    if not tickets:
        raise UsageError("name the tickets to finish", "'handoff finish T' or "
                                                        "'handoff finish --all-passed'")
    if len(set(tickets)) != len(tickets):
        raise UsageError(f"a ticket is named twice: {' '.join(tickets)}",
                         "name each ticket once, in the order to merge them")
    return list(tickets)


def _all_passed(home: Path, repo: Path | None) -> list[str]:
    """The repository's passed tickets, in the order they passed (their final reports)."""
    found = []
    for tdir in all_tickets(home, Repo.at(repo or Path.cwd()).key):
        try:
            passed = tdir.load().phase == Phase.PASSED
        except HandoffError:  # `status` names a record it cannot read
            continue
        if passed:
            report = tdir.final_report
            found.append((report.stat().st_mtime if report.exists() else 0.0, tdir.ticket))
    return [ticket for _, ticket in sorted(found)]


def _ordered(tickets: Sequence[Passed]) -> list[Passed]:
    """Dependency order (a ticket after those it starts after: handoff.loop.after), else the
    order given."""
    left = list(tickets)
    done: list[Passed] = []
    while left:
        names = {p.ticket for p in left}
        ready = next((p for p in left if not names & set(p.state.after)), left[0])
        done.append(ready)
        left.remove(ready)
    return done


def _ensure_built_on_merged(home: Path, repo: Repo, base: Base,
                            tickets: Sequence[Passed]) -> None:
    """A ticket that started from another's passed work brings that work with it: it is
    merged only with or after it, never alone before it. The hint names the whole train."""
    named = [p.ticket for p in tickets]
    missing: list[str] = []
    todo = [(p.commit, list(p.state.after)) for p in tickets]
    while todo:
        commit, deps = todo.pop()
        for dep in after.read(home, repo.key, [d for d in deps if d not in named]):
            if dep.commit and not dep.merged and repo.is_ancestor(dep.commit, commit) \
                    and not repo.is_ancestor(dep.commit, base.head) and dep.ticket not in missing:
                missing.append(dep.ticket)
                state = opening.open_ticket(home, dep.ticket, repo.top).state()
                todo.append((dep.commit, list(state.after)))
    if missing:
        whole = [name for name in _by_dependency(home, repo, [*missing, *named])]
        raise UsageError(f"{', '.join(named)} build(s) on the passed work of "
                         f"{', '.join(missing)}, not merged into {base.branch}: merged without "
                         "it, that work would come in unannounced",
                         f"'handoff finish {' '.join(whole)}' merges them all, in that order; "
                         "nothing was merged")


def _by_dependency(home: Path, repo: Repo, names: Sequence[str]) -> list[str]:
    return [p.ticket for p in _ordered([_passed(opening.open_ticket(home, name, repo.top))
                                        for name in names])]


def _passed(ws: Workspace) -> Passed:
    state = ws.state()
    _ensure_passed(ws, state)
    return Passed(ws, state, state.last_commit(), state.branch or branch_name(state.ticket))


def _one_base(repo: Repo, tickets: Sequence[Passed]) -> Base:
    """The base branch every ticket of the train merges into."""
    bases = [base_branch(p.ws.repo, p.ticket, p.state.base, _started_from(p), p.branch)
             for p in tickets]
    if any(p.ws.repo.key != repo.key for p in tickets):
        raise UsageError("the tickets are of different repositories: "
                         + ", ".join(f"{p.ticket} ({p.ws.repo.top})" for p in tickets),
                         "finish each repository's tickets on their own")
    if len({b.branch for b in bases}) > 1:
        raise UsageError("the tickets merge into different branches: "
                         + ", ".join(f"{p.ticket} into {b.branch}"
                                     for p, b in zip(tickets, bases, strict=True)),
                         "finish the tickets of each base branch in a train of their own")
    return bases[0]


def _started_from(passed: Passed) -> str:
    """The commit the ticket was started from: its base commit, but for a ticket that waited
    for others, which starts from their work (not on any branch before they are merged)."""
    if not passed.state.after:
        return passed.state.base_commit
    events, _ = passed.ws.tdir.events.read()
    created = next((e for e in events if e.get("kind") == "created"), {})
    return str(created.get("base_commit") or passed.state.base_commit)


@contextlib.contextmanager
def _held(tickets: Sequence[Passed]) -> Iterator[None]:
    """Each ticket's lock while its merge is made and tested: no orchestrator, and no other
    finish, uses its gate checkout meanwhile. The orchestrator of a ticket that just passed
    may still be seeing its peers out: it is waited for, at most HELD_WAIT seconds. Released
    before the tickets are closed (close ends whoever holds a ticket's lock)."""
    with contextlib.ExitStack() as stack:
        for passed in tickets:
            try:
                stack.enter_context(TicketLock(passed.ws.tdir.lock_file, wait=HELD_WAIT))
            except Busy:
                owner = opening.orchestrator_running(passed.ws)
                raise Busy(f"{passed.ticket} is busy: its orchestrator or another finish "
                           f"(pid {owner or '?'}) held it for {HELD_WAIT:g}s", "wait for it "
                           "to end ('handoff status' shows its run), then run finish again; "
                           "nothing was merged") from None
        yield


def _tested(repo: Repo, base: Base, tickets: Sequence[Passed],
            mode: str) -> tuple[list[Link], Check | None, NotMerged | None]:
    """The train built onto the base (objects only) and tested: _verified's answer."""
    links, conflict = train.build(repo, base, tickets, mode == "squash",
                                  lambda p: message(p.ws, p.state, base.branch, p.branch, mode))
    return _verified(repo, base, links, conflict, [p.ticket for p in tickets])


def _verified(repo: Repo, base: Base, links: list[Link], conflict: Conflict | None,
              names: Sequence[str]) -> tuple[list[Link], Check | None, NotMerged | None]:
    """The links whose result passed the gate (all, or the prefix before the one that breaks
    the train), the check it passed, and why the rest were not merged (None: all were)."""
    if not links:
        return [], None, _conflicted(conflict, base, links, names) if conflict else None
    whole = train.check(repo, base, links, len(links))
    if whole.ok:
        return links, whole, _conflicted(conflict, base, links, names) if conflict else None
    count, good, bad = train.first_breaking(links, whole,
                                            lambda n: train.check(repo, base, links, n))
    return links[:count], good, _red(repo, base, links, count, bad, names)


def _left(names: Sequence[str], named: str) -> str:
    """What stays passed after the ticket that stopped the train."""
    after = list(names[names.index(named) + 1:])
    if not after:
        return ""
    return (f"; {after[0]} was not merged and stays passed" if len(after) == 1
            else f"; {', '.join(after)} were not merged and stay passed")


def _conflicted(conflict: Conflict, base: Base, links: Sequence[Link],
                names: Sequence[str]) -> NotMerged:
    passed = conflict.passed
    files = ", ".join(conflict.files[:8]) + (" …" if len(conflict.files) > 8 else "")
    onto = (f"{base.branch} (at {short_sha(base.head)})" if conflict.onto == base.head
            else f"{base.branch} with {', '.join(link.passed.ticket for link in links)} merged")
    return NotMerged(f"{passed.branch} does not merge cleanly into {onto}: conflicts in "
                     f"{files}{_left(names, passed.ticket)}",
                     _way_on(passed, base, len(links)))


def _red(repo: Repo, base: Base, links: Sequence[Link], count: int, bad: Check,
         names: Sequence[str]) -> NotMerged:
    breaker = links[count].passed
    others = train.met(repo, base, breaker, links[:count])
    meets = (f"; its changes meet those of {', '.join(others)}" if others else
             f"; it meets what changed on {base.branch} since it was started "
             f"(at {short_sha(breaker.state.base_commit)})")
    failing = (f"; failing: {', '.join(bad.failing[:8])}" + (" …" if len(bad.failing) > 8
                                                              else "")) if bad.failing else \
        (f"; it names no failing test, and ends: {bad.last}" if bad.last else "")
    logs = f"; log: {bad.logs[0]}" if bad.logs else ""
    merged = f" with {', '.join(link.passed.ticket for link in links[:count])}"         if count else ""
    return NotMerged(f"{breaker.ticket} merged into {base.branch}{merged} fails the gate: "
                     f"{bad.summary}{failing}{meets}{logs}{_left(names, breaker.ticket)}",
                     _way_on(breaker, base, count))


def _way_on(passed: Passed, base: Base, merged: int) -> str:
    """What works after a conflict or a red merge: the base is as it was (but for the tickets
    before this one), and the ticket is still passed at its reviewed commit, to be carried
    onto the base in a round of its own (handoff.operations.onto)."""
    moved = (f"{base.branch} is still at {short_sha(base.head)}" if not merged
             else f"{base.branch} moved only by the {merged} ticket(s) before {passed.ticket}")
    return (f"{moved}; {passed.ticket} stays passed. 'handoff resume {passed.ticket} --onto "
            f"{base.branch}' carries it onto {base.branch} in a round of its own (then the gate "
            f"and fresh reviewers), after which finish merges it; or 'handoff close "
            f"{passed.ticket}'")


def _close(home: Path, repo: Path | None, base: Base, link: Link, mode: str) -> Finished:
    passed = link.passed
    if link.merged:
        passed.ws.tdir.events.append("finish", round=passed.state.round, mode=mode,
                                     base=base.branch, before=link.before, after=link.after,
                                     merged=passed.commit, by="hand")
    closed = closing.close_ticket(home, passed.ticket, repo)
    notes = [] if link.merged else [
        f"{base.branch} already holds what {short_sha(passed.commit)} changes: nothing to merge"]
    return Finished(closed, mode, base.branch, link.before, link.after if link.merged else "",
                    passed.commit, notes=(*notes, *closed.notes))


def _past_review(tickets: Sequence[Passed]) -> list[str]:
    """A branch moved past the commit that passed review: that commit is what is merged."""
    out = []
    for passed in tickets:
        tip = passed.ws.repo.branch_head(passed.branch)
        if tip and tip != passed.commit:
            out.append(f"{passed.branch} is at {short_sha(tip)}, past the commit that passed "
                       f"review ({short_sha(passed.commit)}): only the reviewed commit is merged")
    return out


def _ensure_passed(ws: Workspace, state: State) -> None:
    if state.phase == Phase.PASSED:
        return
    raise refused(Verb.FINISH, state.phase, state.ticket, ws.tdir.path,
                  opening.orchestrator_running(ws) is not None)


def message(ws: Workspace, state: State, base: str, branch: str, mode: str) -> str:
    """The commit message: the ticket, its title, and its final report's outcome line."""
    title = _title(ws)
    report = _outcome(ws)
    if mode == "squash":
        head = f"{state.ticket}: {title}" if title else state.ticket
    else:
        head = f"Merge {branch} into {base}" + (f" ({state.ticket}: {title})" if title else "")
    body = [f"Ticket {state.ticket}, reviewed at {short_sha(state.last_commit())} on {branch}."]
    if report:
        body.append(report)
    return head + "\n\n" + "\n".join(body) + "\n"


def _title(ws: Workspace) -> str:
    """ticket.md's text after its `# TICKET` heading."""
    if not ws.tdir.ticket_md.exists():
        return ""
    lines = [ln.strip() for ln in ws.tdir.ticket_md.read_text(encoding="utf-8").splitlines()]
    return next((ln for ln in lines if ln and not ln.startswith("# ")), "")


def _outcome(ws: Workspace) -> str:
    if not ws.tdir.final_report.exists():
        return ""
    return outcome(ws.tdir.final_report.read_text(encoding="utf-8"))
