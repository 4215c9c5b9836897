"""handoff between machines, both ends (docs/hosts.md): asking a host what it is and running
handoff there (`Remote`, `HostState`, every call one bounded ssh command by
handoff.machinery.ssh; a host that does not answer is `unreachable`, with ssh's words), and
answering as a host (`about_here`, the mirror it keeps of a repository, `forget_refs`).

What the tickets placed on hosts do over this, start, status, close, finish and gc, is
handoff.operations.hosts'.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from handoff.build import code_digest, version
from handoff.config import Config, Host
from handoff.errors import ExternalFailure, HandoffError, UsageError
from handoff.machinery import proc
from handoff.machinery.repo import Repo
from handoff.machinery.ssh import FENCED, Ssh, environment
from handoff.record.placed import Placement
from handoff.record.store import private_dir

MIRRORS = "mirrors"
#: seconds for the questions every listing asks (status, hosts): a person is waiting
ASK_DEADLINE = 15.0
#: seconds for a command that does work there (start, close), or moves code (push, fetch)
WORK_DEADLINE = 300.0
#: the ref a ticket's base is pushed to in the host's mirror (its branch: branch_name)
BASE_PREFIX = "handoff-base/"


class HostInfo(TypedDict):
    """What `handoff host-info --json` says of a machine as a host (`about_here`)."""

    handoff: str
    #: handoff's code digest (handoff.build): the same version may be other code
    code: str
    home: str
    python: str
    max_parallel: int
    #: its tickets at work, and waiting in its queue (`load_here`)
    at_work: int
    waiting: int
    #: the repository's mirror it keeps, when one was asked for ('' when not)
    mirror: str


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
    #: its `host-info --json` as it said it (a HostInfo from a host that runs this handoff)
    said: dict[str, object] = field(default_factory=dict)

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
                                  f"{printable(last_words(err or out, status))}",
                                  install_hint(self.host))
        try:
            return printable(json.loads(out))
        except ValueError:
            raise ExternalFailure(f"host {self.host.name}: `{shlex.join(self.host.handoff)} "
                                  f"{args[0]}` did not answer as handoff does: "
                                  f"{printable(last_words(out or err, status))}",
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


def last_words(text: str, status: int) -> str:
    """The last lines a failed command printed, short: what an error quotes of it."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " / ".join(lines[-3:])[-400:] if lines else f"exit {status}"


def host_states(cfg: Config, names: Sequence[str] = ()) -> list[HostState]:
    """Every host's state (or those named), asked side by side: the slowest bounds the wait."""
    hosts = [h for h in cfg.hosts.values() if not names or h.name in names]
    if not hosts:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(hosts))) as pool:
        return list(pool.map(lambda h: Remote(h).state(), hosts))


# ---- one ticket's commands, run where it is ---------------------------------------------------

def forward(cfg: Config, placement: Placement, args: Sequence[str],
            deadline: float = WORK_DEADLINE) -> tuple[int, str]:
    """The host's `handoff ARGS` for the ticket, on its mirror (--repo MIRROR): its exit status
    and all it printed."""
    status, out, err = Remote(cfg.host(placement.host)).run(mirrored(args, placement), deadline)
    return status, printable((out + err).rstrip())


def terminal_argv(cfg: Config, placement: Placement, args: Sequence[str]) -> list[str]:
    """The ssh command line that runs `handoff ARGS` (on its mirror) on the host in this
    terminal (attach, log --follow)."""
    host = cfg.host(placement.host)
    return Ssh(host.name, host.ssh).command([*host.handoff, *mirrored(args, placement)],
                                            terminal=True)


def mirrored(args: Sequence[str], placement: Placement) -> list[str]:
    """`handoff ARGS` for the host: --repo MIRROR right after the command's name, where it
    stays an option even when the words after it end in `-- WORDS...`."""
    return [*args[:1], "--repo", placement.mirror, *args[1:]]


# ---- this machine as a host: what the placing machine asks of it over ssh -------------------

def about_here(home: Path, mirror: str = "") -> HostInfo:
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
