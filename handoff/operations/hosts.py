"""Tickets on other machines (hosts), reached over SSH (docs/hosts.md).

A host runs handoff itself: the same version and code as this machine (`about_here`, asked by
`handoff hosts` and doctor). A ticket placed there runs there whole: its worktrees, its tmux
on the host's private socket, its peers, its gate and its ticket directory. What crosses:

* the code, by git over ssh: the base commit is pushed into a repository handoff owns on the
  host (`mirror`: `$HANDOFF_HOME/mirrors/<repo>-<key>` there), as `handoff-base/<ticket>`;
  the ticket's branch comes back by a fetch from it. Never the person's own remotes, never
  a push anywhere but that mirror, no hook of theirs run (`--no-verify`);
* the plan, on the stdin of the host's `handoff start`;
* every command about the ticket (`status`, `stop`, `close` …): the host's handoff with the
  same words, its answer shown here (`forward`);
* its final report, copied here when it is closed (`keep_report`): its record stays on the
  host, and the placement here goes.

Every call is one bounded ssh command (handoff.machinery.ssh); a host that does not answer is
`unreachable`, with ssh's words, and its tickets go on there meanwhile.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from handoff.build import code_digest, version
from handoff.config import Config, Host
from handoff.errors import ExternalFailure, HandoffError, UsageError
from handoff.inputs import REPORT_LIMIT
from handoff.machinery import proc
from handoff.machinery.repo import Repo
from handoff.machinery.ssh import FENCED, Ssh, environment
from handoff.record import placed
from handoff.record.placed import Placement
from handoff.record.store import atomic_write, private_dir

MIRRORS = "mirrors"
#: where the final reports of tickets closed on hosts are kept here: <host>/<ticket>/
FROM_HOSTS = "from-hosts"
#: seconds for the questions every listing asks (status, hosts): a person is waiting
ASK_DEADLINE = 15.0
#: seconds for a command that does work there (start, close), or moves code (push, fetch)
WORK_DEADLINE = 300.0
BASE_PREFIX = "handoff-base/"


def about_here(home: Path, mirror: str = "") -> dict[str, Any]:
    """What `handoff host-info --json` says of this machine as a host; mirror: a repository's
    name (`<repo>-<key>`) whose mirror is made here if it is not yet."""
    from handoff.config import load

    cfg = load(home, None)
    at_work, waiting = load_here(home)
    return {"handoff": version(), "code": code_digest(), "home": str(home),
            "python": sys.version.split()[0], "max_parallel": cfg.parallel,
            "at_work": at_work, "waiting": waiting,
            "mirror": str(make_mirror(home, mirror)) if mirror else ""}


def load_here(home: Path) -> tuple[int, int]:
    """How many tickets of this home are at work, and how many wait in its queue: by phase,
    not by slot, since a ticket just started is at work before its orchestrator has taken its
    slot, and the next placement must not count that slot free."""
    from handoff.phases import AT_WORK, Phase
    from handoff.record.ticket import all_tickets

    phases = []
    for tdir in all_tickets(home):
        try:
            phases.append(tdir.load().phase)
        except HandoffError:
            continue
    return sum(p in AT_WORK for p in phases), sum(p == Phase.QUEUED for p in phases)


def make_mirror(home: Path, name: str) -> Path:
    """The repository the host keeps for one of the person's: made once, with an empty
    checkout whose HEAD never moves (pushes go to other refs), so git accepts every push."""
    if not name or "/" in name or name.startswith(".") or len(name) > 120:
        raise UsageError(f"{name!r:.60} is not a mirror's name")
    private_dir(home)
    folder = private_dir(home / MIRRORS) / name
    if not (folder / ".git").is_dir():
        folder.mkdir(mode=0o700, exist_ok=True)
        proc.run(["git", "init", "-q", "-b", "handoff-mirror", str(folder)])
    return folder


@dataclass
class HostState:
    """A host as `handoff hosts` shows it: what it said of itself, or why it said nothing."""

    name: str
    reachable: bool
    error: str = ""
    handoff: str = ""
    code: str = ""
    at_work: int = 0
    waiting: int = 0
    max_parallel: int = 0
    said: dict[str, Any] = field(default_factory=dict)

    @property
    def same(self) -> bool:
        return self.handoff == version() and self.code == code_digest()

    def problem(self) -> str:
        """What keeps tickets off it ('' when nothing)."""
        if not self.reachable:
            return self.error
        if not self.same:
            return (f"it runs handoff {self.handoff} (code {self.code}), this machine "
                    f"{version()} (code {code_digest()})")
        return ""


class Remote:
    """handoff on one host."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.ssh = Ssh(host.name, host.ssh)

    def run(self, args: Sequence[str], deadline: float = ASK_DEADLINE,
            input_text: str | None = None) -> tuple[int, str, str]:
        return self.ssh.run([*self.host.handoff, *args], deadline, input_text)

    def ask(self, args: Sequence[str], deadline: float = ASK_DEADLINE) -> Any:
        """The JSON a --json command printed there; ExternalFailure with what it said when it
        failed or printed something else (another program on its PATH, an old handoff)."""
        status, out, err = self.run(args, deadline)
        if status != 0:
            raise ExternalFailure(f"host {self.host.name}: handoff {args[0]} failed: "
                                  f"{printable(_said(err or out, status))}",
                                  install_hint(self.host))
        try:
            return printable(json.loads(out))
        except ValueError:
            raise ExternalFailure(f"host {self.host.name}: `{shlex.join(self.host.handoff)} "
                                  f"{args[0]}` did not answer as handoff does: "
                                  f"{printable(_said(out or err, status))}",
                                  install_hint(self.host)) from None

    def state(self, mirror: str = "") -> HostState:
        try:
            said = self.ask(["host-info", "--json", *(["--mirror", mirror] if mirror else [])])
        except ExternalFailure as exc:
            return HostState(self.host.name, False, exc.message)
        if not isinstance(said, dict):
            return HostState(self.host.name, False, "host-info answered no object")
        limit = int(said.get("max_parallel") or 1)
        if self.host.max_parallel:
            limit = min(limit, self.host.max_parallel)
        return HostState(self.host.name, True, "", str(said.get("handoff", "")),
                         str(said.get("code", "")), int(said.get("at_work") or 0),
                         int(said.get("waiting") or 0), limit, said)

    # ---- code, by git over this host's ssh ---------------------------------------------------
    def _git_env(self) -> dict[str, str]:
        """git's ssh is ours: the host's argv without its destination (git adds that from the
        URL, then the command), fenced as every other call."""
        ssh = [self.host.ssh[0], *FENCED, *self.host.ssh[1:-1]]
        return {**os.environ, **environment(), "GIT_SSH_COMMAND": shlex.join(ssh),
                "GIT_SSH_VARIANT": "ssh", "GIT_TERMINAL_PROMPT": "0"}

    def url(self, mirror: str) -> str:
        destination = self.host.ssh[-1]
        user, at, machine = destination.rpartition("@")
        if ":" in machine:  # an IPv6 address
            machine = f"[{machine}]"
        return f"ssh://{user}{at}{machine}{mirror}"

    def push(self, repo: Repo, commit: str, ref: str, mirror: str) -> None:
        """commit to ref in the host's mirror (forced: the ref is handoff's own)."""
        proc.run(["git", "-C", str(repo.top), "push", "--quiet", "--no-verify",
                  self.url(mirror), f"+{commit}:refs/heads/{ref}"],
                 timeout=WORK_DEADLINE, env=self._git_env())

    def fetch(self, repo: Repo, mirror: str, ref: str, local: str) -> None:
        """The mirror's ref into local refs/heads/local, only as a fast-forward (a branch of
        that name here that went elsewhere is never overwritten: git refuses, and says so)."""
        proc.run(["git", "-C", str(repo.top), "fetch", "--quiet", "--no-tags",
                  "--no-write-fetch-head", self.url(mirror),
                  f"refs/heads/{ref}:refs/heads/{local}"],
                 timeout=WORK_DEADLINE, env=self._git_env())


def install_hint(host: Host) -> str:
    return (f"install the same handoff there ({version()}): from this checkout or release, "
            f"`pip install tmux-handoff=={version()}` on {host.name}, with its CLIs logged in; "
            "if it is installed off the PATH of a non-interactive login, set hosts: "
            f"{host.name}: handoff: [~/.local/bin/handoff] (or its path)")


#: C0 and C1 control characters but tab and newline: what a terminal takes as a command
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(value: Any) -> Any:
    """A host's words, fit for this terminal: every string (in lists and mappings too) without
    control characters, so a host can say anything but can never move the cursor, set the
    title or send the terminal a command."""
    if isinstance(value, str):
        return _CONTROL.sub("", value)
    if isinstance(value, list):
        return [printable(v) for v in value]
    if isinstance(value, dict):
        return {printable(k): printable(v) for k, v in value.items()}
    return value


def _said(text: str, status: int) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " / ".join(lines[-3:])[-400:] if lines else f"exit {status}"


def host_states(cfg: Config, names: Sequence[str] = ()) -> list[HostState]:
    """Every host's state (or those named), asked side by side: the slowest bounds the wait."""
    hosts = [h for h in cfg.hosts.values() if not names or h.name in names]
    if not hosts:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(hosts))) as pool:
        return list(pool.map(lambda h: Remote(h).state(), hosts))


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


@dataclass(frozen=True)
class Started:
    placement: Placement
    #: what the host's `handoff start` printed (its notes, its session)
    said: str


def start_on(home: Path, host: Host, repo: Repo, ticket: str, plan_text: str,
             base: str, options: Sequence[str]) -> Started:
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
    placed.save(home, placement)
    remote.push(repo, commit, f"{BASE_PREFIX}{ticket}", mirror)
    status, out, err = remote.run(["start", ticket, "--plan", "-", "--yes", "--base",
                                   f"{BASE_PREFIX}{ticket}", "--repo", mirror, *options],
                                  WORK_DEADLINE, input_text=plan_text)
    if status != 0:
        placed.forget(home, ticket)
        raise ExternalFailure(f"host {host.name}: handoff start failed: "
                              f"{printable(_said(err or out, status))}")
    return Started(placement, printable((out + err).strip()))


# ---- what the hosts say about their tickets ---------------------------------------------------

def rows(home: Path, cfg: Config, ticket: str | None = None) -> list[dict[str, Any]]:
    """`status --json` rows of the tickets placed on hosts (or the one), each with its host;
    a host that does not answer gives each of its tickets a row that says so."""
    placements = [p for p in placed.every(home) if ticket is None or p.ticket == ticket]
    by_host: dict[str, list[Placement]] = {}
    for placement in placements:
        by_host.setdefault(placement.host, []).append(placement)
    if not by_host:
        return []

    def ask(host_name: str) -> list[dict[str, Any]]:
        mine = by_host[host_name]
        started = time.monotonic()
        try:
            host = cfg.host(host_name)
            said = Remote(host).ask(["status", "--json"])
            if not isinstance(said, list):
                raise ExternalFailure("status answered no list")
        except (ExternalFailure, UsageError) as exc:
            return [_unreachable(p, exc.message, time.monotonic() - started) for p in mine]
        found = {(str(r.get("ticket")), str(r.get("repo"))): r for r in said
                 if isinstance(r, dict)}
        out = []
        for placement in mine:
            row = found.get((placement.ticket, placement.mirror))
            if row is None:
                out.append(_unreachable(placement, "the host has no such ticket (closed there "
                                        "by hand?)", 0.0, reachable=True))
                continue
            out.append({**row, "host": host_name, "local_repo": placement.repo})
        return out

    with ThreadPoolExecutor(max_workers=min(8, len(by_host))) as pool:
        return [row for found in pool.map(ask, list(by_host)) for row in found]


def _unreachable(placement: Placement, why: str, took: float,
                 reachable: bool = False) -> dict[str, Any]:
    return {"ticket": placement.ticket, "repo": placement.mirror, "host": placement.host,
            "local_repo": placement.repo, "phase": "unreachable" if not reachable else "gone",
            "round": 0, "reviews": 0, "gate_bounces": 0, "dir": "", "branch": "", "commit": "",
            "reason": why, "orchestrator": None, "session": "", "socket": "", "updated": "",
            "team": {}, "verdicts": {}, "overlaps": {}, "queue": None, "run": "unknown",
            "error": "", "events_skipped": 0, "usage": None,
            "hint": f"it goes on there if it was running; `handoff hosts` asks {placement.host} "
                    f"again (asked for {took:.1f}s)" if not reachable else
                    f"handoff close {placement.ticket} forgets it here"}


# ---- one ticket's commands, run where it is ---------------------------------------------------

def forward(cfg: Config, placement: Placement, args: Sequence[str],
            deadline: float = WORK_DEADLINE) -> tuple[int, str]:
    """The host's `handoff ARGS --repo MIRROR` for the ticket: its exit status and all it
    printed."""
    status, out, err = Remote(cfg.host(placement.host)).run(
        [*args, "--repo", placement.mirror], deadline)
    return status, printable((out + err).rstrip())


def terminal_argv(cfg: Config, placement: Placement, args: Sequence[str]) -> list[str]:
    """The ssh command line that runs `handoff ARGS --repo MIRROR` on the host in this
    terminal (attach, log --follow)."""
    host = cfg.host(placement.host)
    return Ssh(host.name, host.ssh).command([*host.handoff, *args, "--repo", placement.mirror],
                                            terminal=True)


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
                              f"{printable(_said(err or out, status))}", install_hint(remote.host))
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
             force: bool = False, report: Path | None = None) -> str:
    """Close a ticket on its host: its branch and final report fetched here first (nothing
    of its work is left only there; report: kept already), then the host's `close`, then its
    refs in the mirror, then the placement. What the host said."""
    from handoff.machinery.ticket_branch import branch_name

    remote = Remote(cfg.host(placement.host))
    repo = Repo.at(Path(placement.repo))
    branch = branch_name(placement.ticket)
    fetched = True
    try:
        remote.fetch(repo, placement.mirror, branch, branch)
    except ExternalFailure as exc:
        if "couldn't find remote ref" not in exc.message:  # never made: nothing to keep
            raise
        fetched = False
    kept_note = ""
    if report is None:
        try:
            report, _ = keep_report(home, remote, placement)
        except ExternalFailure as exc:  # its record stays there: the report is not lost
            kept_note = f", its final report stays on the host only ({exc.message})"
    status, said = forward(cfg, placement, ["close", placement.ticket,
                                            *(["--keep-worktrees"] if keep_worktrees else []),
                                            *(["--force"] if force else [])])
    if status != 0 and "no ticket" not in said:
        raise ExternalFailure(f"host {placement.host}: handoff close failed: {said}")
    if not keep_worktrees:
        remote.run(["host-forget", placement.mirror, placement.ticket], ASK_DEADLINE)
    placed.forget(home, placement.ticket)
    note = f"its branch {branch} is here now" if fetched else "it had made no branch"
    if report is not None:
        note += f", its final report is {report}"
    note += kept_note
    return f"{said}\n{placement.ticket}: closed on host {placement.host}; {note}".strip()


def forget_refs(mirror: Path, ticket: str) -> None:
    """`host-forget`: the ticket's refs in the mirror (its base, its branch) deleted on the
    host, so a closed ticket leaves nothing there."""
    from handoff.machinery.ticket_branch import branch_name

    if not (mirror / ".git").is_dir() or mirror.parent.name != MIRRORS:
        raise UsageError(f"{mirror} is not a mirror handoff made")
    for ref in (f"refs/heads/{BASE_PREFIX}{ticket}", f"refs/heads/{branch_name(ticket)}"):
        proc.run(["git", "-C", str(mirror), "update-ref", "-d", ref], check=False)


def rest_if_idle(home: Path) -> bool:
    """End this home's warm process when no ticket's orchestrator runs here any more: a host
    whose last ticket closed keeps no process of handoff's. True when it was ended."""
    from handoff.machinery import relay
    from handoff.record.lock import holder
    from handoff.record.ticket import all_tickets

    if any(holder(t.lock_file) is not None for t in all_tickets(home)):
        return False
    relay.end(home)
    return True


def finish_on(home: Path, cfg: Config, placement: Placement, mode: str) -> list[str]:
    """`finish` of a ticket on a host: the commit that passed review there fetched here with
    its branch, merged into the local base branch as a local finish merges (nothing runs that
    the host sent: git objects only), then the ticket closed there. What to print."""
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
    (row,) = rows(home, cfg, placement.ticket)
    ticket, host = placement.ticket, placement.host
    if row["phase"] != "passed":
        raise UsageError(f"{ticket} is {row['phase']} on host {host}, not passed: only a "
                         "ticket that passed review is merged",
                         str(row.get("reason") or f"wait until it passes: handoff status {ticket}"))
    commit = str(row.get("commit") or "")
    if not re.fullmatch(r"[0-9a-f]{40}", commit):  # what the host says is a claim
        raise ExternalFailure(f"host {host} names no commit for {ticket} ({commit!r:.50})")
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
    said = [*notes]
    if new:
        said.append(f"{ticket}: {branch} ({short_sha(commit)}) merged into {base.branch}: "
                    f"{short_sha(base.head)} → {short_sha(new)} ({mode}; nothing pushed)")
        if not repo.is_ancestor(base.head, commit):
            # its plan, gate checkout and fence are on the host: nothing here can test it
            said.append(f"note: {base.branch} had moved since {ticket} was reviewed on {host}: "
                        "the merged result was not tested here; run your tests before you push")
    said.append(close_on(home, cfg, placement, report=kept))
    return said


def gc_on(home: Path, cfg: Config, dry_run: bool, force: bool,
          prune_records: bool) -> list[dict[str, Any]]:
    """`handoff gc` on every host, side by side (each item as the host's `gc --json` says it,
    with its `host`; a host that does not answer is one item that says so), and the
    placements here whose host no longer has their ticket, forgotten (unless dry_run)."""
    flags = [*(["--dry-run"] if dry_run else []), *(["--force"] if force else []),
             *(["--prune-records"] if prune_records else [])]

    def on(host: Host) -> list[dict[str, Any]]:
        try:
            said = Remote(host).ask(["gc", "--json", *flags], WORK_DEADLINE)
        except ExternalFailure as exc:
            return [{"kind": "host", "path": host.name, "why": exc.message, "removable": False,
                     "removed": False, "saved": "", "host": host.name}]
        return [{**item, "host": host.name} for item in said if isinstance(item, dict)] \
            if isinstance(said, list) else []

    hosts = list(cfg.hosts.values())
    found: list[dict[str, Any]] = []
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
