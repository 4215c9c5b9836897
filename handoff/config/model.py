"""What a configuration is once read: the Config and its small value types, each with the
defaults an empty configuration gives (handoff.config.keys reads the files into them)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path

from handoff.config.roles import kind_of
from handoff.errors import UsageError
from handoff.providers import RoleSpec
from handoff.record.ticket import MAX_GATE_BOUNCES, MAX_RELAUNCHES, MAX_ROUNDS
from handoff.role import DEFAULT, IMPLEMENTER, PLANNER, Kind, Team

SHARE_MODES = ("symlink", "copy")
#: `sandbox:` modes (handoff.machinery.sandbox); the first is the default
SANDBOX_MODES = ("auto", "on", "off")
#: peers, gates and scanners run this much nicer than handoff itself (docs/performance.md:
#: with twenty tickets on two cores, the person's `start` and each hand-over wait for the CPU
#: behind the peers' work otherwise; on a machine with cores to spare it changes nothing)
PEER_NICE = 19
#: `placement:` where `handoff start` puts a ticket given no --host: here, or the host (this
#: machine included) with a free slot
PLACEMENTS = ("local", "auto")
HOSTS_HINT = ('e.g. hosts: {build1: {ssh: [ssh, -p, "2222", me@build1], max_parallel: 6}}')


@dataclass(frozen=True)
class Host:
    """Another machine tickets can run on (issue 22, handoff.machinery.ssh): it runs handoff
    itself, reached by the argv a person would type (`ssh …`, its destination last)."""

    name: str
    ssh: tuple[str, ...]
    #: its tickets at work at once (None: what it says of itself)
    max_parallel: int | None = None
    #: how to run handoff there (a leading ~/ is the host's home)
    handoff: tuple[str, ...] = ("handoff",)


@dataclass(frozen=True)
class Share:
    """A dependency folder of the main checkout made available in each worktree."""

    path: str
    mode: str = "symlink"


@dataclass(frozen=True)
class Budget:
    """What a ticket may spend before a person is asked whether it goes on (handoff.record.usage):
    all tokens of both peers, and/or dollars as the CLIs themselves record them."""

    tokens: int | None = None
    cost_usd: float | None = None


GIB = 1 << 30
#: binary units of a size: `8GiB`, `8 GiB`, `8G` are all 8 × 2^30 bytes
SIZE_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": GIB, "T": 1 << 40}


@dataclass(frozen=True)
class Limits:
    """What each peer and each gate run may take (handoff.machinery.limits); None: no limit.

    Defaults measured on Claude Code 2.1.328 and handoff's own tests (docs/configuration.md):
    the CLI is 9 threads and 250 MiB, a test run a few dozen processes and under 1 GiB; a
    fork bomb stopped at 1024 leaves room for four peers of eight tickets in the kernel's
    default 32768 pids."""

    #: processes and threads (the kernel counts each thread as a task)
    processes: int | None = 1024
    #: bytes of memory (swap included where the machine says so)
    memory: int | None = 8 * GIB
    #: bytes the private /tmp (and TMPDIR) of the sandbox may hold
    tmp: int | None = GIB

    def shown(self) -> str:
        """As a person writes them (`doctor`): sizes in their units."""
        processes = "no limit" if self.processes is None else str(self.processes)
        return (f"processes: {processes}, memory: {show_size(self.memory)}, "
                f"tmp: {show_size(self.tmp)}")


def show_size(size: int | None) -> str:
    """A number of bytes as a person reads it: `8 GiB`, `512 MiB`, `1536 KiB`."""
    if size is None:
        return "no limit"
    for unit in ("T", "G", "M", "K"):
        if size >= SIZE_UNITS[unit] and size % SIZE_UNITS[unit] == 0:
            return f"{size // SIZE_UNITS[unit]} {unit}iB"
    return f"{size} bytes"


@dataclass(frozen=True)
class Sandbox:
    """How peers and the gate are fenced in (handoff.machinery.sandbox): `auto` where
    bubblewrap works, `on` or refuse to start, `off`; holes and extra hidden paths; the
    limits each peer and gate run is held to."""

    mode: str = "auto"
    #: more paths a peer may write (package caches a build needs: ~/.cache/pip, ~/.npm)
    write: tuple[str, ...] = ()
    #: more paths a peer never sees
    hide: tuple[str, ...] = ()
    limits: Limits = Limits()  # frozen: one default is safe to share

    def paths(self, which: str) -> list[Path]:
        return [Path(p).expanduser() for p in (self.write if which == "write" else self.hide)]


#: the placeholders a scanner's command may carry: each list one stands alone as an argument
#: and becomes one argument per path (none: the scanner is skipped); the others are text
LIST_PLACEHOLDERS = ("{changed_files}", "{changed_py_files}")
TEXT_PLACEHOLDERS = ("{diff_range}", "{base}", "{commit}")


@dataclass(frozen=True)
class Scanner:
    """A tool the gate runs after the plan's test command, at the same commit and with the
    same bounds (handoff.loop.scanners): a secret scanner, a linter, a security check."""

    name: str
    #: argv, with LIST_PLACEHOLDERS and TEXT_PLACEHOLDERS
    command: tuple[str, ...]
    #: a required scanner's failure sends the round back, and its absence stops the gate;
    #: an optional one's failure is shown to the reviewers, and its absence only said
    required: bool = True


@dataclass(frozen=True)
class Config:
    # copied into each ticket's State when it is created (frozen there: handoff.record.ticket)
    max_rounds: int = MAX_ROUNDS
    max_gate_bounces: int = MAX_GATE_BOUNCES
    max_relaunches: int = MAX_RELAUNCHES
    gate_timeout: float = 900.0
    #: the repository's test command: the gate of a plan that names none (a plan's own `test:`
    #: wins); empty: none
    test: tuple[str, ...] = ()
    #: run the plan's test command once at the base commit, beside round 1, to count the tests
    #: it runs: a round whose gate runs fewer is shown to the reviewers (handoff.loop.baseline)
    base_tests: bool = True
    #: start the reviewers' CLIs while the gate runs, and brief them the moment it passed
    #: (those whose CLI takes a pasted brief: handoff.loop.crew)
    warm_reviewers: bool = True
    #: seconds a freshly launched peer may take to show its input line or start working
    start_timeout: float = 120.0
    #: seconds a peer may show no progress at all (screen, hooks, reports) before a person
    #: is asked to look
    stall_timeout: float = 1800.0
    #: seconds after a turn ended without a report before the peer is nudged
    turn_grace: float = 5.0
    #: seconds a live peer may send no hook signal and show nothing its screen rules read
    #: before handoff says so (a `screen-unrecognised` event; the ticket goes on)
    unrecognised_timeout: float = 60.0
    #: seconds a CLI may keep retrying an unreachable API or show a quota message before a
    #: person is asked (None: the provider's own measured default)
    api_patience: float | None = None
    #: seconds each post_create command may take before it is ended with all it started
    setup_timeout: float = 900.0
    roles: dict[str, RoleSpec] = field(
        default_factory=lambda: {role: RoleSpec() for role in DEFAULT.names}
    )
    share: tuple[Share, ...] = ()
    post_create: tuple[tuple[str, ...], ...] = ()
    env_allow: tuple[str, ...] = ()
    #: control files beyond handoff's own (protected.DEFAULT) a ticket may not change unasked
    protected: tuple[str, ...] = ()
    sandbox: Sandbox = field(default_factory=Sandbox)
    #: a command told when the ticket needs its person or ends: argv, the event as JSON on stdin
    notify: tuple[str, ...] = ()
    #: the ticket goes to needs-human when its peers' usage passes this (None: no limit)
    budget: Budget | None = None
    #: what the gate runs after the plan's test command (handoff.loop.scanners)
    scanners: tuple[Scanner, ...] = ()
    #: TCP ports each worktree gets (HANDOFF_PORT_1..N, PORT): handoff.machinery.ports
    ports: int = 0
    #: where they come from, low and high included
    port_range: tuple[int, int] = (20000, 29999)
    #: tickets of this machine at work at once (None: handoff.record.slots.default_limit);
    #: from the person's own config alone
    max_parallel: int | None = None
    #: how far peers, gates and scanners yield the CPU to handoff's own processes and the
    #: person's commands (niceness 0-19; 0: not at all); from the person's own config alone
    peer_nice: int = PEER_NICE
    #: other machines tickets may run on; from the person's own config alone
    hosts: dict[str, Host] = field(default_factory=dict)
    #: where a ticket runs given no --host (PLACEMENTS); from the person's own config alone
    placement: str = "local"

    def host(self, name: str) -> Host:
        """The host of that name, or a clear error listing the ones there are."""
        if name in self.hosts:
            return self.hosts[name]
        raise UsageError(f"no host {name!r} in $HANDOFF_HOME/config.yaml",
                         f"hosts: {', '.join(self.hosts)}" if self.hosts
                         else HOSTS_HINT)

    @property
    def providers(self) -> dict[str, str]:
        return {role: spec.provider for role, spec in self.roles.items()}

    @property
    def parallel(self) -> int:
        """max_parallel in force: the person's, else what this machine holds."""
        from handoff.record.slots import default_limit

        return self.max_parallel or default_limit()

    @property
    def team(self) -> Team:
        """The roles a new ticket gets, in working order (load checked it can be made); its
        planner only when it starts from its text (`Team.with_planner`)."""
        return Team.of((name, kind_of(name, spec)) for name, spec in self.roles.items()
                       if kind_of(name, spec) is not Kind.PLANNER)

    @property
    def planner(self) -> RoleSpec:
        """Who drafts a plan from a ticket's text: `roles.planner` as configured, else Claude
        Code when it is installed (and the implementer is a real CLI: a scripted team's
        planner is scripted too), else the implementer's CLI."""
        if PLANNER in self.roles:
            return self.roles[PLANNER]
        implementer = self.roles[IMPLEMENTER]
        if implementer.provider != "scripted" and shutil.which("claude"):
            return RoleSpec(provider="claude")
        return replace(implementer, kind="", focus="", contract="")

    def spec(self, role: str) -> RoleSpec | None:
        """What the configuration says of a role (the planner's: `planner`), None if nothing."""
        return self.planner if role == PLANNER else self.roles.get(role)
