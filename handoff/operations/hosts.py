"""Tickets on other machines (hosts), reached over SSH (docs/hosts.md).

A host runs handoff itself: the same version and code as this machine (remote.about_here, asked
by `handoff hosts` and doctor). A ticket placed there runs there whole: its worktrees, its tmux
on the host's private socket, its peers, its gate and its ticket directory. What crosses:

* the code, by git over ssh: the base commit is pushed into a repository handoff owns on the
  host (`mirror`: `$HANDOFF_HOME/mirrors/<repo>-<key>` there), as `handoff-base/<ticket>`;
  the ticket's branch comes back by a fetch from it. Never the person's own remotes, never
  a push anywhere but that mirror, no hook of theirs run (`--no-verify`);
* the plan, on the stdin of the host's `handoff start`;
* every command about the ticket (`status`, `stop`, `close` …): the host's handoff with the
  same words, its answer shown here (remote.forward; the command line hands a ticket's
  command there as it was typed: handoff.cli.elsewhere.OnItsHost);
* its final report, copied here when it is closed (`keep_report`): its record stays on the
  host, and the placement here goes.

Here are the verbs of a ticket placed on a host, as this machine does them: where it goes, its
start, what the hosts say of their tickets, its close and finish, and gc on every host. How
this machine talks to a host, and answers as one, is handoff.operations.remote's: every call
one bounded ssh command; a host that does not answer is `unreachable`, with ssh's words, and
its tickets go on there meanwhile.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, cast

from handoff.config import Config, Host
from handoff.errors import ExternalFailure, UsageError
from handoff.inputs import REPORT_LIMIT
from handoff.machinery.repo import Repo
from handoff.operations.remote import (
    ASK_DEADLINE,
    BASE_PREFIX,
    WORK_DEADLINE,
    Remote,
    forward,
    host_states,
    install_hint,
    last_words,
    load_here,
    printable,
)
from handoff.operations.results import ClosedOnHost, FinishedOnHost, StartedOnHost
from handoff.operations.standing import StatusRow
from handoff.phases import Phase
from handoff.record import placed
from handoff.record.placed import Placement
from handoff.record.store import atomic_write

if TYPE_CHECKING:
    from handoff.operations.gc.found import GcItem

#: where the final reports of tickets closed on hosts are kept here: <host>/<ticket>/
FROM_HOSTS = "from-hosts"


# ---- placement ------------------------------------------------------------------------------

def place(home: Path, cfg: Config, requested: str) -> Host | None:
    """Where a new ticket goes: the host named, None for this machine, or (`auto`) the first
    with a free slot, this machine first; with none free, the one whose queue is shortest
    (it starts there by itself, as queued tickets do)."""
    if requested in ("", "local"):
        return None
    if requested != "auto":
        return cfg.host(requested)
    at_work, waiting = load_here(home)
    if at_work < cfg.parallel or not cfg.hosts:
        return None
    states = [s for s in host_states(cfg) if s.reachable and s.same]
    open_ = [s for s in states if s.at_work < s.max_parallel]
    if open_:
        return cfg.host(open_[0].name)
    shortest = min(states, key=lambda s: s.waiting, default=None)
    if shortest is None or shortest.waiting >= waiting:
        return None
    return cfg.host(shortest.name)


def refuse_taken(home: Path, ticket: str) -> None:
    """Ticket ids are unique across this machine and its hosts."""
    found = placed.load(home, ticket)
    if found is not None:
        raise UsageError(f"ticket {ticket} already runs on host {found.host}",
                         f"pick another id, or close it: handoff close {ticket}")


def start_on(home: Path, host: Host, repo: Repo, ticket: str, plan_text: str,
             base: str, options: Sequence[str]) -> StartedOnHost:
    """Start ticket on host: its base pushed into the mirror, the plan on the host's stdin,
    approved (--yes: it was approved here). The placement is written first."""
    remote = Remote(host)
    # the key names the repository already (<name>-<hash>). Asked again even when `place`
    # (auto) has just asked every host: only this ask makes the mirror, on the host chosen
    state = remote.state(repo.key)
    if not state.reachable or not state.same:
        raise ExternalFailure(f"host {host.name}: {state.problem()}", install_hint(host))
    mirror = str(state.said.get("mirror", ""))
    if not mirror.startswith("/") or not mirror.isprintable() or "/../" in f"{mirror}/":
        raise ExternalFailure(f"host {host.name} named no usable mirror for {repo.top}: "
                              f"{mirror!r:.80}")
    commit = repo.resolve(base)
    base_branch = repo.base_of(base)
    placement = Placement(ticket=ticket, host=host.name, repo=str(repo.top), mirror=mirror,
                          base=base, base_commit=commit, base_branch=base_branch)
    placed.save(home, placement)  # first: a start cut short here leaves a ticket close forgets
    try:
        remote.push(repo, commit, f"{BASE_PREFIX}{ticket}", mirror)
    except ExternalFailure:
        placed.forget(home, ticket)  # it never started there: nothing to close
        raise
    status, out, err = remote.run(["start", ticket, "--plan", "-", "--yes", "--base",
                                   f"{BASE_PREFIX}{ticket}", "--repo", mirror, *options],
                                  WORK_DEADLINE, input_text=plan_text)
    if status != 0:
        placed.forget(home, ticket)
        raise ExternalFailure(f"host {host.name}: handoff start failed: "
                              f"{printable(last_words(err or out, status))}")
    return StartedOnHost(placement, printable((out + err).strip()))


# ---- what the hosts say about their tickets ---------------------------------------------------

def rows(home: Path, cfg: Config, ticket: str | None = None) -> list[StatusRow]:
    """`status --json` rows of the tickets placed on hosts (or the one), each with its host;
    a host that does not answer gives each of its tickets a row that says so."""
    placements = [p for p in placed.every(home) if ticket is None or p.ticket == ticket]
    by_host: dict[str, list[Placement]] = {}
    for placement in placements:
        by_host.setdefault(placement.host, []).append(placement)
    if not by_host:
        return []

    def ask(host_name: str) -> list[StatusRow]:
        mine = by_host[host_name]
        started = time.monotonic()
        try:
            host = cfg.host(host_name)
            said = Remote(host).ask(["status", "--json", "--all"])  # closed there too
            if not isinstance(said, list):
                raise ExternalFailure("status answered no list")
        except (ExternalFailure, UsageError) as exc:
            return [_unreachable(p, exc.message, time.monotonic() - started) for p in mine]
        found = {(str(r.get("ticket")), str(r.get("repo"))): r for r in said
                 if isinstance(r, dict)}
        out: list[StatusRow] = []
        for placement in mine:
            row = found.get((placement.ticket, placement.mirror))
            if row is None:
                out.append(_unreachable(placement, "the host has no such ticket (closed there "
                                        "by hand?)", 0.0, reachable=True))
                continue
            # a host runs handoff's own version and code (start_on refused one that did not):
            # its row has a StatusRow's keys
            out.append(cast(StatusRow, {**row, "host": host_name, "local_repo": placement.repo}))
        return out

    with ThreadPoolExecutor(max_workers=min(8, len(by_host))) as pool:
        return [row for found in pool.map(ask, list(by_host)) for row in found]


#: what git says when the ticket never got as far as the host: its branch never made there
#: (its start failed after the placement was saved), or the mirror itself never made
NEVER_MADE = ("couldn't find remote ref", "does not appear to be a git repository")


def _unreachable(placement: Placement, why: str, took: float,
                 reachable: bool = False) -> StatusRow:
    return {"ticket": placement.ticket, "repo": placement.mirror, "host": placement.host,
            "local_repo": placement.repo, "phase": "unreachable" if not reachable else "gone",
            "round": 0, "reviews": 0, "gate_bounces": 0, "dir": "", "branch": "", "commit": "",
            "reason": why, "orchestrator": None, "session": "", "socket": "", "updated": "",
            "team": {}, "verdicts": {}, "overlaps": {}, "queue": None, "run": "unknown",
            "error": "", "events_skipped": 0, "usage": None,
            "hint": f"it goes on there if it was running; `handoff hosts` asks {placement.host} "
                    f"again (asked for {took:.1f}s)" if not reachable else
                    f"handoff close {placement.ticket} forgets it here"}


def kept_report(home: Path, host: str, ticket: str) -> Path:
    """Where the final report of ticket, closed on host, is kept here."""
    return home / FROM_HOSTS / host / ticket / "final-report.md"


def keep_report(home: Path, remote: Remote, placement: Placement) -> tuple[Path | None, str]:
    """The host's final report of the ticket, copied here (its record stays on the host, and
    the placement goes at close: without this copy, what its reviewers concluded would be
    only there): where it is, and its text; (None, "") when it has none yet. An earlier copy
    that says something else (the same id, closed there before) is kept beside it."""
    status, out, err = remote.run(["host-report", placement.ticket, "--repo",
                                   placement.mirror], ASK_DEADLINE)
    if status != 0 and "no ticket" in err:  # closed there by hand: it has nothing to give
        return None, ""
    if status != 0:
        raise ExternalFailure(f"host {placement.host}: handoff host-report failed: "
                              f"{printable(last_words(err or out, status))}",
                              install_hint(remote.host))
    text = printable(out)
    if not text.strip():
        return None, ""
    if len(text) > REPORT_LIMIT:
        text = text[:REPORT_LIMIT] + f"\n\n(cut here: host {placement.host} sent more)\n"
    target = kept_report(home, placement.host, placement.ticket)
    if target.exists() and target.read_text(encoding="utf-8", errors="replace") != text:
        n = 2
        while (earlier := target.with_name(f"final-report.{n}.md")).exists():
            n += 1
        target.replace(earlier)
    atomic_write(target, text)  # its folders made as every folder of the home: 0700
    return target, text


def close_on(home: Path, cfg: Config, placement: Placement, keep_worktrees: bool = False,
             force: bool = False, report: Path | None = None) -> ClosedOnHost:
    """Close a ticket on its host: its branch and final report fetched here first (nothing
    of its work is left only there; report: kept already), then the host's `close`, then its
    refs in the mirror, then the placement."""
    from handoff.machinery.ticket_branch import branch_name

    remote = Remote(cfg.host(placement.host))
    repo = Repo.at(Path(placement.repo))
    branch = branch_name(placement.ticket)
    fetched = True
    try:
        remote.fetch(repo, placement.mirror, branch, branch)
    except ExternalFailure as exc:
        if not any(said in exc.message for said in NEVER_MADE):  # nothing there to keep
            raise
        fetched = False
    report_left = ""
    if report is None:
        try:
            report, _ = keep_report(home, remote, placement)
        except ExternalFailure as exc:  # its record stays there: the report is not lost
            report_left = exc.message
    status, said = forward(cfg, placement, ["close", placement.ticket,
                                            *(["--keep-worktrees"] if keep_worktrees else []),
                                            *(["--force"] if force else [])])
    if status != 0 and "no ticket" not in said:
        raise ExternalFailure(f"host {placement.host}: handoff close failed: {said}")
    if not keep_worktrees:
        remote.run(["host-forget", placement.mirror, placement.ticket], ASK_DEADLINE)
    placed.forget(home, placement.ticket)
    return ClosedOnHost(placement.ticket, placement.host, said.strip(),
                        branch if fetched else "", report, report_left)


def _passed_at(home: Path, cfg: Config, placement: Placement) -> str:
    """The commit that passed review on the host, as the host says it (a claim: its shape is
    checked here, and finish_on checks the branch it fetches holds it)."""
    (row,) = rows(home, cfg, placement.ticket)
    ticket, host = placement.ticket, placement.host
    if row["phase"] != Phase.PASSED:
        raise UsageError(f"{ticket} is {row['phase']} on host {host}, not passed: only a "
                         "ticket that passed review is merged",
                         str(row.get("reason") or f"wait until it passes: handoff status {ticket}"))
    commit = str(row.get("commit") or "")
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise ExternalFailure(f"host {host} names no commit for {ticket} ({commit!r:.50})")
    return commit


def finish_on(home: Path, cfg: Config, placement: Placement, mode: str) -> FinishedOnHost:
    """`finish` of a ticket on a host: the commit that passed review there fetched here with
    its branch, merged into the local base branch as a local finish merges (nothing runs that
    the host sent: git objects only), then the ticket closed there."""
    from handoff.machinery.repo import short_sha
    from handoff.machinery.ticket_branch import branch_name
    from handoff.operations.merging import (
        MODES,
        base_branch,
        ensure_clean_checkout,
        merge,
        outcome,
    )

    if mode not in MODES:
        raise UsageError(f"unknown finish mode {mode!r}", "use --merge or --squash")
    commit = _passed_at(home, cfg, placement)
    ticket, host = placement.ticket, placement.host
    repo = Repo.at(Path(placement.repo))
    branch = branch_name(ticket)
    remote = Remote(cfg.host(host))
    remote.fetch(repo, placement.mirror, branch, branch)
    if not repo.is_ancestor(commit, branch):
        raise ExternalFailure(f"host {host} says {ticket} passed at {short_sha(commit)}, which "
                              f"its branch {branch} does not hold", "nothing was merged")
    base = base_branch(repo, ticket, placement.base, placement.base_commit, branch)
    if base.checkout is not None:
        ensure_clean_checkout(base)
    title = (f"{ticket}, on host {host}" if mode == "squash"
             else f"Merge {branch} into {base.branch} ({ticket}, on host {host})")
    try:  # its outcome goes into the message
        kept, report = keep_report(home, remote, placement)
    except ExternalFailure:  # close_on asks again, and says so if it fails again
        kept, report = None, ""
    said_of_it = outcome(report)
    new, notes = merge(repo, base, commit, branch, mode, lambda: (
        f"{title}\n\nTicket {ticket}, reviewed at {short_sha(commit)} on {branch} on host "
        f"{host}.\n" + (f"{said_of_it}\n" if said_of_it else "")))
    untested = bool(new) and not repo.is_ancestor(base.head, commit)
    return FinishedOnHost(close_on(home, cfg, placement, report=kept), mode, base.branch,
                          base.head, new, commit, branch, untested, tuple(notes))


def gc_on(home: Path, cfg: Config, dry_run: bool, force: bool,
          prune_records: bool) -> list[GcItem]:
    """`handoff gc` on every host, side by side (each item as the host's `gc --json` says it,
    with its `host`; a host that does not answer is one item that says so), and the
    placements here whose host no longer has their ticket, forgotten (unless dry_run)."""
    flags = [*(["--dry-run"] if dry_run else []), *(["--force"] if force else []),
             *(["--prune-records"] if prune_records else [])]

    def on(host: Host) -> list[GcItem]:
        try:
            said = Remote(host).ask(["gc", "--json", *flags], WORK_DEADLINE)
        except ExternalFailure as exc:
            return [{"kind": "host", "path": host.name, "why": exc.message, "removable": False,
                     "removed": False, "saved": "", "host": host.name}]
        # the host's gc is this one's (as its status rows are): its items are GcItems
        return [cast("GcItem", {**item, "host": host.name}) for item in said
                if isinstance(item, dict)] if isinstance(said, list) else []

    hosts = list(cfg.hosts.values())
    found: list[GcItem] = []
    if hosts:
        with ThreadPoolExecutor(max_workers=min(8, len(hosts))) as pool:
            found = [item for items in pool.map(on, hosts) for item in items]
    for row in rows(home, cfg):
        if row["phase"] != "gone":
            continue
        found.append({"kind": "placement", "path": str(placed.path(home, row["ticket"])),
                      "why": f"{row['ticket']} is no longer on host {row['host']}",
                      "removable": True, "removed": not dry_run, "saved": "",
                      "host": row["host"]})
        if not dry_run:
            placed.forget(home, str(row["ticket"]))
    return found
