"""Layered YAML configuration → typed objects.

Layers, later winning: built-in defaults, `$HANDOFF_HOME/config.yaml` (the user's), and
`<repo>/.handoff.yaml` (the project's). Every error names the file and the key.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from handoff.errors import UsageError
from handoff.inputs import CONFIG_LIMIT, read_text
from handoff.protocol.frontmatter import load_yaml
from handoff.providers import REGISTRY, Launch, Provider, RoleSpec, known, markers
from handoff.providers.command import MARKERS
from handoff.record.ticket import MAX_GATE_BOUNCES, MAX_RELAUNCHES, MAX_ROUNDS
from handoff.role import DEFAULT, IMPLEMENTER, Kind, Team, check_name, kind_named

REPO_CONFIG = ".handoff.yaml"
SHARE_MODES = ("symlink", "copy")
#: `sandbox:` modes (handoff.machinery.sandbox); the first is the default
SANDBOX_MODES = ("auto", "on", "off")
MAX_SECONDS = 30 * 24 * 3600
#: peers, gates and scanners run this much nicer than handoff itself (docs/performance.md:
#: with twenty tickets on two cores, the person's `start` and each hand-over wait for the CPU
#: behind the peers' work otherwise; on a machine with cores to spare it changes nothing)
PEER_NICE = 19
SECONDS = ("start_timeout", "stall_timeout", "turn_grace", "api_patience", "setup_timeout",
           "unrecognised_timeout")


#: the flags of ssh that forward, background or multiplex something: never in a host's argv
SSH_REFUSED = {"-A": "agent forwarding", "-X": "X11 forwarding", "-Y": "X11 forwarding",
           "-L": "port forwarding", "-R": "port forwarding", "-D": "port forwarding",
           "-W": "stdio forwarding", "-f": "going to the background", "-N": "no command",
           "-M": "a master connection", "-O": "a control command", "-s": "a subsystem",
           "-t": "a terminal (handoff asks for one itself where it attaches)",
           "-T": "no terminal (handoff says it itself)", "-G": "printing the config"}

#: ssh's option letters that take a value
SSH_VALUED = frozenset("BbcDEeFIiJLlmOopQRSWw")


def ssh_refused(argv: Sequence[str]) -> list[str]:
    """What in a host's argv would forward or multiplex something (each with why), read as
    ssh reads its options: a letter that takes a value takes the rest of its word, or the
    next word when it ends one (`-i -A` is a key file named -A)."""
    found = []
    words = iter(argv[1:])
    for word in words:
        if not word.startswith("-") or word.startswith("--") or len(word) < 2:
            continue
        for at, letter in enumerate(word[1:], start=1):
            flag = f"-{letter}"
            if flag in SSH_REFUSED:
                found.append(f"{flag} ({SSH_REFUSED[flag]})")
            if letter in SSH_VALUED:
                if at == len(word) - 1:
                    next(words, None)
                break
    return found


#: `placement:` where `handoff start` puts a ticket given no --host: here, or the host (this
#: machine included) with a free slot
PLACEMENTS = ("local", "auto")
#: names a host may not have: what --host means by itself
HOST_WORDS = ("local", "auto")
HOST_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,39}$")
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
#: the smallest limits a peer's CLI and its bubblewrap can start under (a CLI alone is a dozen
#: threads, each of which the process limit counts)
LIMIT_MINIMUM = {"processes": 32, "memory": 64 << 20, "tmp": 1 << 20}


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
    #: run the plan's test command once at the base commit, beside round 1, to count the tests
    #: it runs: a round whose gate runs fewer is shown to the reviewers (handoff.loop.baseline)
    base_tests: bool = True
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
        """The roles a new ticket gets, in working order (load checked it can be made)."""
        return Team.of((name, kind_of(name, spec)) for name, spec in self.roles.items())


def _int(source: str, key: str, value: Any, minimum: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise UsageError(f"{source}: '{key}' must be a whole number ≥ {minimum}, not {value!r}")
    return value


def _niceness(source: str, value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 19:
        return value
    raise UsageError(f"{source}: 'peer_nice' must be a niceness from 0 (peers compete with "
                     f"handoff and you) to 19 (they take only what is left), not {value!r:.40}",
                     f"e.g. peer_nice: {PEER_NICE}")


def _seconds(source: str, key: str, value: Any) -> float:
    """A finite, positive number of seconds: .nan compares false to everything and .inf never
    ends, and every wait must have a bound."""
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value <= MAX_SECONDS:
        return float(value)
    raise UsageError(f"{source}: '{key}' must be a positive number of seconds up to "
                     f"{MAX_SECONDS} (30 days), not {value!r:.40}", "e.g. 900")


def _strings(source: str, key: str, value: Any, allow_empty: bool = True) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise UsageError(f"{source}: '{key}' must be a list of non-empty strings")
    if not value and not allow_empty:
        raise UsageError(f"{source}: '{key}' is an empty command")
    return tuple(value)


def _apply(base: dict[str, Any], data: Any, source: str, personal: bool = True) -> None:
    if data is None:
        return
    if not isinstance(data, dict):
        raise UsageError(f"{source}: the top level must be a mapping of keys to values")
    known = {f.name for f in fields(Config)}  # every key is a field, and the reverse
    for key, value in data.items():
        if key not in known:
            raise UsageError(
                f"{source}: unknown key '{key}'", f"known keys: {', '.join(sorted(known))}"
            )
        if key in ("max_rounds", "max_gate_bounces"):
            base[key] = _int(source, key, value)
        elif key in ("max_parallel", "peer_nice", "hosts", "placement"):
            if not personal:
                raise UsageError(f"{source}: '{key}' is this machine's, not a repository's: "
                                 "it is about every ticket this machine runs",
                                 "put it in $HANDOFF_HOME/config.yaml (handoff doctor names "
                                 "that file)")
            if key == "hosts":
                base[key] = _hosts(source, value)
            elif key == "placement":
                if value not in PLACEMENTS:
                    raise UsageError(f"{source}: 'placement' is one of {', '.join(PLACEMENTS)}, "
                                     f"not {value!r:.40}")
                base[key] = value
            else:
                base[key] = _int(source, key, value) if key == "max_parallel" else \
                    _niceness(source, value)
        elif key == "max_relaunches":
            base[key] = _int(source, key, value, minimum=0)
        elif key == "base_tests":
            if not isinstance(value, bool):
                raise UsageError(f"{source}: 'base_tests' is true or false, not {value!r:.40}")
            base[key] = value
        elif key == "gate_timeout" or key in SECONDS:
            base[key] = _seconds(source, key, value)
        elif key == "roles":
            base["roles"] = _roles(source, value, base["roles"])
        elif key == "share":
            base["share"] = _shares(source, value)
        elif key == "notify":
            base["notify"] = _notify(source, value)
        elif key == "budget":
            base["budget"] = _budget(source, value)
        elif key == "post_create":
            if not isinstance(value, list):
                raise UsageError(f"{source}: 'post_create' must be a list of argv lists")
            base["post_create"] = tuple(
                _strings(source, f"post_create[{i}]", v, allow_empty=False)
                for i, v in enumerate(value)
            )
        elif key == "sandbox":
            base[key] = _sandbox(source, value, base[key], personal)
        elif key == "protected":
            base[key] = _strings(source, key, value)
        elif key == "scanners":
            base[key] = _scanners(source, value)
        elif key == "ports":
            base[key] = _int(source, key, value, minimum=0)
            if base[key] > MAX_PORTS:
                raise UsageError(f"{source}: 'ports' is at most {MAX_PORTS} a worktree, not "
                                 f"{value}")
        elif key == "port_range":
            base[key] = _port_range(source, value)
        elif key == "env_allow":
            base["env_allow"] = _strings(source, key, value)
            for name in base["env_allow"]:
                _passable(f"{source}: env_allow", name)
        else:  # a field added to Config without its reader here
            raise AssertionError(f"config key {key!r} has no reader in config._apply")


def _hosts(source: str, value: Any) -> dict[str, Host]:
    if not isinstance(value, dict):
        raise UsageError(f"{source}: 'hosts' must be a mapping of host names to their settings",
                         HOSTS_HINT)
    hosts = {}
    for name, spec in value.items():
        where = f"{source}: hosts: {name}"
        if not isinstance(name, str) or not HOST_NAME.match(name) or name in HOST_WORDS:
            raise UsageError(f"{source}: hosts: {name!r:.40} is not a host name: lower-case "
                             "letters, digits, '.', '_' and '-', at most 40, and not "
                             f"{' or '.join(HOST_WORDS)}", HOSTS_HINT)
        if not isinstance(spec, dict) or "ssh" not in spec:
            raise UsageError(f"{where}: needs 'ssh', the argv that reaches it", HOSTS_HINT)
        unknown = set(spec) - {"ssh", "max_parallel", "handoff"}
        if unknown:
            raise UsageError(f"{where}: unknown key(s) {sorted(map(str, unknown))}",
                             "known: ssh, max_parallel, handoff")
        ssh = _strings(where, "ssh", spec["ssh"], allow_empty=False)
        if len(ssh) < 2 or ssh[-1].startswith("-"):
            raise UsageError(f"{where}: 'ssh' must end with the destination (user@host or an "
                             "ssh_config alias), as `ssh` is typed", HOSTS_HINT)
        refused = ssh_refused(ssh)
        if refused:
            raise UsageError(f"{where}: 'ssh' asks for {', '.join(refused)}: handoff never "
                             "forwards anything to a host, nor waits on a prompt",
                             "remove it; ProxyJump (-J), ports (-p), keys (-i) and "
                             "ssh_config aliases are all fine")
        limit = spec.get("max_parallel")
        hosts[name] = Host(
            name=name, ssh=ssh,
            max_parallel=None if limit is None else _int(where, "max_parallel", limit),
            handoff=_strings(where, "handoff", spec["handoff"], allow_empty=False)
            if "handoff" in spec else ("handoff",))
    return hosts


SANDBOX_HINT = ("e.g. sandbox: auto, or sandbox: {mode: on, write: [~/.cache/pip], "
                "hide: [~/work/secrets]}")


def _sandbox(source: str, value: Any, before: Sandbox, personal: bool) -> Sandbox:
    """sandbox: MODE, or {mode, write, hide}. A repository's own file may tighten the sandbox,
    never open it: `off` and `write` come from the person's config alone, so a repository that
    is cloned, or a commit that reached main, cannot unfence the peers that work on it."""
    spec = {"mode": value} if isinstance(value, str | bool) else value
    if not isinstance(spec, dict):
        raise UsageError(f"{source}: 'sandbox' must be a mode or a mapping", SANDBOX_HINT)
    unknown = set(spec) - {"mode", "write", "hide", "limits"}
    if unknown:
        raise UsageError(f"{source}: sandbox: unknown key(s) {sorted(map(str, unknown))}",
                         SANDBOX_HINT)
    mode = spec.get("mode", before.mode)
    if mode is False:  # YAML reads a bare `off` as false, `on` as true
        mode = "off"
    elif mode is True:
        mode = "on"
    if mode not in SANDBOX_MODES:
        raise UsageError(f"{source}: sandbox.mode must be one of {', '.join(SANDBOX_MODES)}, "
                         f"not {mode!r:.40}", SANDBOX_HINT)
    write, hide = before.write, before.hide
    for key in ("write", "hide"):
        if key not in spec:
            continue
        paths = _strings(source, f"sandbox.{key}", spec[key])
        for path in paths:
            if not Path(path).expanduser().is_absolute():
                raise UsageError(f"{source}: sandbox.{key}: {path!r} is not an absolute path",
                                 "write it from / or ~, e.g. ~/.cache/pip")
        write, hide = (paths, hide) if key == "write" else (write, paths)
    if not personal and (mode == "off" or spec.get("write")):
        opened = "sandbox: off" if mode == "off" else "sandbox.write"
        raise UsageError(f"{source}: {opened} is only taken from your own config: a "
                         "repository may tighten its peers' sandbox, never open it",
                         "put it in $HANDOFF_HOME/config.yaml (handoff doctor names that file)")
    limits = _limits(source, spec["limits"], before.limits, personal) if "limits" in spec \
        else before.limits
    return Sandbox(mode=str(mode), write=write, hide=hide, limits=limits)


LIMITS_HINT = "e.g. sandbox: {limits: {processes: 1024, memory: 8GiB, tmp: 1GiB}}"
SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?", re.I)


def _limits(source: str, value: Any, before: Limits, personal: bool) -> Limits:
    """sandbox.limits: {processes, memory, tmp}, each a number (sizes in bytes or with a binary
    unit: 8GiB, 512M) or `none`. A repository may lower them, never raise them: a limit that
    a commit could lift would hold no hostile peer."""
    if not isinstance(value, dict):
        raise UsageError(f"{source}: 'sandbox.limits' must be a mapping", LIMITS_HINT)
    unknown = set(value) - set(LIMIT_MINIMUM)
    if unknown:
        raise UsageError(f"{source}: sandbox.limits: unknown key(s) {sorted(map(str, unknown))}",
                         f"known: {', '.join(LIMIT_MINIMUM)}; {LIMITS_HINT}")
    found: dict[str, int | None] = {}
    for key, given in value.items():
        where = f"{source}: sandbox.limits.{key}"
        limit = _limit(where, key, given)
        was = getattr(before, key)
        if not personal and (limit is None or (was is not None and limit > was)):
            raise UsageError(f"{where}: {_shown(key, limit)} is looser than the "
                             f"{_shown(key, was)} in force: "
                             "a repository may tighten its peers' limits, never loosen them",
                             "put it in $HANDOFF_HOME/config.yaml (handoff doctor names that "
                             "file)")
        found[key] = limit
    return Limits(**{**{k: getattr(before, k) for k in LIMIT_MINIMUM}, **found})


def _limit(where: str, key: str, value: Any) -> int | None:
    """One limit: a whole number of processes, a size, or none."""
    if value is None or (isinstance(value, str) and value.strip().lower() == "none"):
        return None
    if key == "processes":
        if not isinstance(value, int) or isinstance(value, bool):
            raise UsageError(f"{where} must be a whole number of processes or none, not "
                             f"{value!r:.40}", LIMITS_HINT)
        size = value
    elif isinstance(value, int) and not isinstance(value, bool):
        size = value
    elif isinstance(value, str) and (match := SIZE.fullmatch(value.strip())):
        size = int(float(match[1]) * SIZE_UNITS[match[2].upper()])
    else:
        raise UsageError(f"{where} must be a size (bytes, or with a binary unit: 8GiB, "
                         f"512M) or none, not {value!r:.40}", LIMITS_HINT)
    if size < LIMIT_MINIMUM[key]:
        raise UsageError(f"{where} must be at least {_shown(key, LIMIT_MINIMUM[key])} (a CLI "
                         f"and its sandbox start under no less), not {value!r:.40}", LIMITS_HINT)
    return size


def _shown(key: str, limit: int | None) -> str:
    if key != "processes" or limit is None:
        return show_size(limit)
    return f"{limit} processes"


SCANNER_HINT = ("e.g. scanners: [{name: gitleaks, command: [gitleaks, detect, --no-git, "
                "--source, ., --log-opts, '{diff_range}']}, {name: bandit, command: [bandit, "
                "-q, '{changed_py_files}'], required: false}]")
SCANNER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}")


def _scanners(source: str, value: Any) -> tuple[Scanner, ...]:
    """scanners: a list of {name, command, required}; names unique, placeholders known, a list
    placeholder a whole argument of its own (it becomes one argument per path)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise UsageError(f"{source}: 'scanners' must be a list of {{name, command, required}}",
                         SCANNER_HINT)
    found: list[Scanner] = []
    for i, item in enumerate(value):
        where = f"{source}: scanners[{i}]"
        if not isinstance(item, dict):
            raise UsageError(f"{where} must be a mapping with name and command", SCANNER_HINT)
        unknown = set(item) - {"name", "command", "required"}
        if unknown:
            raise UsageError(f"{where}: unknown key(s) {sorted(map(str, unknown))}",
                             "a scanner knows name, command and required")
        name = item.get("name")
        if not isinstance(name, str) or not SCANNER_NAME.fullmatch(name):
            raise UsageError(f"{where}.name must be a short name (letters, digits, '_', '-'), "
                             f"not {name!r:.40}", SCANNER_HINT)
        if any(s.name == name for s in found):
            raise UsageError(f"{where}.name: two scanners are named {name!r}",
                             "give each scanner its own name: it names its log and events")
        command = _strings(source, f"scanners[{i}].command", item.get("command"),
                           allow_empty=False) if "command" in item else ()
        if not command:
            raise UsageError(f"{where} needs a command (an argv list)", SCANNER_HINT)
        for arg in command:
            for placeholder in re.findall(r"\{[a-z_]+\}", arg):
                if placeholder not in (*LIST_PLACEHOLDERS, *TEXT_PLACEHOLDERS):
                    raise UsageError(
                        f"{where}.command: unknown placeholder {placeholder}",
                        f"known: {', '.join((*LIST_PLACEHOLDERS, *TEXT_PLACEHOLDERS))}")
                if placeholder in LIST_PLACEHOLDERS and arg != placeholder:
                    raise UsageError(
                        f"{where}.command: {placeholder} must be an argument of its own, not "
                        f"part of {arg!r:.60}", "it becomes one argument per changed file")
        if "{" in command[0]:  # it is looked up before the gate runs: it must be a name
            raise UsageError(f"{where}.command must start with the program to run, not a "
                             f"placeholder: {command[0]!r:.60}")
        required = item.get("required", True)
        if not isinstance(required, bool):
            raise UsageError(f"{where}.required must be true or false, not {required!r:.40}")
        found.append(Scanner(name=name, command=command, required=required))
    return tuple(found)


MAX_PORTS = 32


def _port_range(source: str, value: Any) -> tuple[int, int]:
    """port_range: LOW-HIGH (a string) or [LOW, HIGH], unprivileged ports, LOW ≤ HIGH."""
    hint = "e.g. port_range: 20000-29999"
    parts = value.split("-") if isinstance(value, str) else value
    if not isinstance(parts, list) or len(parts) != 2:
        raise UsageError(f"{source}: 'port_range' must be LOW-HIGH, not {value!r:.40}", hint)
    try:
        low, high = (int(str(p).strip()) for p in parts)
    except ValueError:
        raise UsageError(f"{source}: 'port_range' must be two port numbers, not "
                         f"{value!r:.40}", hint) from None
    if not 1024 <= low <= high <= 65535:
        raise UsageError(f"{source}: 'port_range' {low}-{high} is not a range of unprivileged "
                         "ports (1024-65535, low first)", hint)
    return low, high


def _passable(where: str, name: str) -> None:
    """A listed variable may reach a peer: it is no coding CLI's session marker."""
    why = markers.marker(name)
    if why is not None:
        raise UsageError(f"{where}: {name} never passes to a peer: {why}", markers.WHY)


def _budget(source: str, value: Any) -> Budget | None:
    """budget: {tokens: N, cost_usd: X}, either or both; null (or {}) for none."""
    hint = "e.g. budget: {tokens: 2000000} or budget: {cost_usd: 5} (or both)"
    if value is None:
        return None
    if not isinstance(value, dict):
        raise UsageError(f"{source}: 'budget' must be a mapping with tokens and/or cost_usd, "
                         f"not {value!r:.60}", hint)
    unknown = set(value) - {"tokens", "cost_usd"}
    if unknown:
        raise UsageError(f"{source}: budget: unknown key(s) {sorted(map(str, unknown))}", hint)
    tokens, cost = value.get("tokens"), value.get("cost_usd")
    if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int)
                               or tokens < 1):
        raise UsageError(f"{source}: budget.tokens must be a whole number ≥ 1, not "
                         f"{tokens!r:.40}", hint)
    if cost is not None and (isinstance(cost, bool) or not isinstance(cost, int | float)
                             or not 0 < cost < float("inf")):
        raise UsageError(f"{source}: budget.cost_usd must be a positive number of dollars, not "
                         f"{cost!r:.40}", hint)
    if tokens is None and cost is None:
        return None
    return Budget(tokens=tokens, cost_usd=None if cost is None else float(cost))


def _notify(source: str, value: Any) -> tuple[str, ...]:
    """The notify command: an argv run without a shell (a string would need one)."""
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise UsageError(f"{source}: 'notify' must be a command as a list of non-empty strings, "
                         f"not {value!r:.60}",
                         'e.g. notify: ["notify-me", "--json"] (it reads the event as JSON on '
                         "its stdin)")
    return tuple(value)


ROLES_HINT = ("e.g. roles: {implementer: {provider: codex}, reviewer: {provider: claude}, "
              "security: {provider: codex, kind: reviewer, focus: security}}")
#: the shipped reviewer specialities (roles/reviewer-<focus>.md)
FOCUSES = ("security",)


def _roles(source: str, value: Any, before: dict[str, RoleSpec]) -> dict[str, RoleSpec]:
    """roles: name → spec, over the roles of the files before; `name: null` takes a role off
    the team. A name that is not a kind says its kind (`kind:`, or `focus:` for a reviewer)."""
    if not isinstance(value, dict):
        raise UsageError(f"{source}: 'roles' must map a role to {{provider: NAME, …}}",
                         ROLES_HINT)
    # this file's roles in its own order (testers work in it), after those only earlier
    # files name
    out = {name: spec for name, spec in before.items() if name not in value}
    for name, spec in value.items():
        try:
            check_name(name)
        except UsageError as exc:
            raise UsageError(f"{source}: roles.{name!s:.40}: {exc.message}", exc.hint) from None
        if spec is None:
            if name == IMPLEMENTER:
                raise UsageError(f"{source}: roles.{name}: the implementer cannot be taken off "
                                 "the team")
            out.pop(name, None)
            continue
        if not isinstance(spec, dict):
            raise UsageError(f"{source}: roles.{name} must be a mapping, e.g. {{provider: claude}}"
                             " (or null to take it off the team)")
        out[name] = _role(source, name, spec, before.get(name, RoleSpec()))
    return out


ROLE_KEYS = ("provider", "model", "args", "permission_mode", "env", "answer", "binary",
             "command", "markers", "backend", "kind", "focus", "contract")
#: what a role is, not how its CLI runs: kept when a later file changes its provider
TEAM_KEYS = ("kind", "focus", "contract")


def _role(source: str, role_name: str, spec: dict[str, Any], before: RoleSpec) -> RoleSpec:
    where = f"{source}: roles.{role_name}"
    unknown = set(spec) - set(ROLE_KEYS)
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {sorted(map(str, unknown))}",
                         f"a role knows: {', '.join(ROLE_KEYS)}")
    name = spec.get("provider", before.provider)
    if not isinstance(name, str) or name not in REGISTRY:
        raise UsageError(f"{where}.provider: unknown provider {name!r}",
                         f"known providers: {', '.join(REGISTRY)}")
    cls = known(name)
    # another provider in a later file starts the role afresh: flags for one CLI never
    # reach another (what the role is stays)
    fields_: dict[str, Any] = {k: getattr(before, k) for k in TEAM_KEYS}
    if name == before.provider:
        fields_.update({k: getattr(before, k) for k in ROLE_KEYS if k != "provider"})
    fields_["provider"] = name
    for key in ("model", "permission_mode", "binary", "backend", "kind", "focus", "contract"):
        if key in spec:
            if not isinstance(spec[key], str):
                raise UsageError(f"{where}.{key} must be a string")
            fields_[key] = spec[key]
    for key in ("args", "env", "answer", "command"):
        if key in spec:
            fields_[key] = _strings(source, f"roles.{role_name}.{key}", spec[key])
    if "markers" in spec:
        fields_["markers"] = _markers(where, spec["markers"])
    role = RoleSpec(**fields_)
    _check_kind(where, role_name, role)
    _check_role(where, cls(role), role)
    return role


def kind_of(role_name: str, spec: RoleSpec) -> Kind:
    """The role's kind: as written, else what its name says, else a reviewer when it has a
    focus (a checked spec always has one of these)."""
    if spec.kind:
        return Kind(spec.kind)
    return kind_named(role_name) or Kind.REVIEWER


def _check_kind(where: str, role_name: str, role: RoleSpec) -> None:
    if role.kind and role.kind not in tuple(Kind):
        raise UsageError(f"{where}.kind must be one of {', '.join(Kind)}, not {role.kind!r:.40}")
    if not role.kind and kind_named(role_name) is None and not role.focus:
        raise UsageError(f"{where}: say what the role is: kind: reviewer (or tester)",
                         f"e.g. roles: {{{role_name}: {{provider: claude, kind: reviewer, "
                         "focus: security}}")
    kind = kind_of(role_name, role)
    if (role_name == IMPLEMENTER) != (kind is Kind.IMPLEMENTER):
        raise UsageError(f"{where}: the implementer is the role named {IMPLEMENTER!r}, and only "
                         "it", "give this role kind reviewer or tester")
    if role.focus and (kind is not Kind.REVIEWER or role.focus not in FOCUSES):
        raise UsageError(f"{where}.focus {role.focus!r:.40} is not a reviewer's shipped focus",
                         f"focus is for reviewers: {', '.join(FOCUSES)}; or contract: a file "
                         "of your own")
    if role.contract and (Path(role.contract).is_absolute() or ".." in Path(role.contract).parts):
        raise UsageError(f"{where}.contract must be a path inside the repository, not "
                         f"{role.contract!r:.60}", "e.g. contract: .handoff/api-reviewer.md")


def _check_role(where: str, provider: Provider, role: RoleSpec) -> None:
    if role.permission_mode and role.permission_mode not in provider.modes:
        raise UsageError(f"{where}.permission_mode {role.permission_mode!r} is not one of "
                         f"{', '.join(provider.modes)} for {role.provider}")
    for name in role.env:
        _passable(f"{where}.env", name)
    if role.backend and role.backend not in provider.backends:
        raise UsageError(f"{where}.backend {role.backend!r} is not one of {role.provider}'s",
                         f"{role.provider}'s back-ends: {', '.join(provider.backends) or 'none'}"
                         " (without the key, the person's environment chooses)")
    dialogs = {d.name for d in provider.rules.dialogs if d.keys}
    for name in role.answer:
        if name not in dialogs:
            raise UsageError(f"{where}.answer: handoff cannot answer {name!r} for "
                             f"{role.provider}",
                             f"answerable screens: {', '.join(sorted(dialogs)) or 'none'}")
    if role.provider == "command" and not role.command:
        raise UsageError(f"{where}: provider 'command' needs command: [argv, …, \"{{message}}\"]")
    if role.command and role.provider != "command":
        raise UsageError(f"{where}.command is only for provider 'command'")
    if role.command:  # a bad placeholder is found now, not by an orchestrator in the background
        try:
            provider.argv(Launch(ticket="T", role="role", worktree=Path("/w"), brief=Path("/b")))
        except UsageError as exc:
            raise UsageError(f"{where}.command: {exc.message.split(': ', 1)[-1]}",
                             exc.hint) from None


def _markers(where: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise UsageError(f"{where}.markers must map {', '.join(MARKERS)} to text")
    unknown = set(value) - set(MARKERS)
    if unknown:
        raise UsageError(f"{where}.markers: unknown key(s) {sorted(unknown)}",
                         f"markers are {', '.join(MARKERS)}")
    for key in ("busy", "turn_ended"):
        if key in value:
            try:
                re.compile(value[key])
            except re.error as exc:
                raise UsageError(f"{where}.markers.{key} is not a valid regular expression: "
                                 f"{exc}") from None
    return dict(value)


def _shares(source: str, value: Any) -> tuple[Share, ...]:
    if not isinstance(value, list):
        raise UsageError(f"{source}: 'share' must be a list of {{path, mode}}")
    shares = []
    for i, item in enumerate(value):
        spec = {"path": item} if isinstance(item, str) else item
        if not isinstance(spec, dict) or not isinstance(spec.get("path"), str):
            raise UsageError(f"{source}: share[{i}] needs a 'path'")
        path, mode = spec["path"], spec.get("mode", "symlink")
        if Path(path).is_absolute() or ".." in Path(path).parts:
            raise UsageError(f"{source}: share[{i}].path must be relative inside the repo")
        if mode not in SHARE_MODES:
            raise UsageError(f"{source}: share[{i}].mode must be one of {SHARE_MODES}")
        shares.append(Share(path=path, mode=mode))
    return tuple(shares)


def _read(path: Path) -> Any:
    text = read_text(path, CONFIG_LIMIT, "the configuration file")
    try:
        return load_yaml(text)
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: not valid YAML: {exc}") from None


def files(home: Path, repo: Path | None) -> list[Path]:
    """The configuration files in force, the later winning."""
    found = (home / "config.yaml", repo / REPO_CONFIG if repo else None)
    return [path for path in found if path is not None and path.is_file()]


def load(home: Path, repo: Path | None) -> Config:
    """Read the user's and the repo's config files (both optional) over the defaults."""
    defaults = Config()
    merged: dict[str, Any] = {f.name: getattr(defaults, f.name) for f in fields(Config)}
    sources = files(home, repo)
    for path in sources:
        _apply(merged, _read(path), str(path), personal=path == home / "config.yaml")
    config = Config(**merged)
    try:
        config.team  # noqa: B018 - made once now, so a bad team is said at load, with its files
    except UsageError as exc:
        raise UsageError(f"{' + '.join(map(str, sources)) or 'the defaults'}: roles: "
                         f"{exc.message}", exc.hint) from None
    return config


def settings(home: Path, repo: Path | None) -> list[tuple[str, Any, Path]]:
    """Each setting that is not the default: its key, its value in force and the file it
    comes from (the last file that sets it)."""
    config, defaults = load(home, repo), Config()
    source: dict[str, Path] = {}
    for path in files(home, repo):
        data = _read(path)
        source.update(dict.fromkeys(data if isinstance(data, dict) else {}, path))
    return [(key, getattr(config, key), path) for key, path in source.items()
            if key in {f.name for f in fields(Config)}
            and getattr(config, key) != getattr(defaults, key)]


TEMPLATE = """\
# handoff configuration for this repository: commit it with the code (an untracked file here
# would make `handoff finish` refuse). Every key is optional: the commented lines show the
# defaults; uncomment one to change it here ($HANDOFF_HOME/config.yaml holds your own, and
# this file wins over it; `handoff doctor` says which file each setting comes from).
# max_rounds: 3          # review rounds before escalating
# max_gate_bounces: 3    # failed verification gates before escalating
# max_relaunches: 2      # restarts of a dying peer per round before asking a person
# gate_timeout: 900      # seconds the verification command may take
# base_tests: true       # count the tests the plan's command runs at the base, beside round 1
# start_timeout: 120     # seconds a new peer may take to show its input line or start work
# stall_timeout: 1800    # seconds a peer may show no progress before a person is asked
# turn_grace: 5          # seconds after a turn ended without a report before a nudge
# unrecognised_timeout: 60  # seconds with no hook signal and an unreadable screen before it is said
# api_patience: 60       # seconds a CLI may retry an unreachable API before a person is asked
# setup_timeout: 900     # seconds each post_create command may take
roles:
  implementer:
    provider: {implementer}
    # model: ""            # the CLI's --model / -m
    # args: []             # extra arguments for the CLI
    # permission_mode: bypass
    # env: []              # extra environment variables this CLI may see
    # answer: []           # start-up screens handoff may answer itself, e.g. [trust]
  reviewer:
    provider: {reviewer}
{security}  # tester:              # optional: adds tests for the plan's acceptance criteria
  #   provider: {implementer}
# scanners: []           # run by the gate after the test command, e.g.
#   - {{name: gitleaks, command: [gitleaks, detect, --no-git, --source, .]}}
#   - {{name: bandit, command: [bandit, -q, "{{changed_py_files}}"], required: false}}
# share: []              # e.g. [{{path: .venv, mode: symlink}}, {{path: node_modules, mode: copy}}]
# post_create: []        # argv lists run in each new worktree, e.g. [["npm", "ci"]]
# env_allow: []          # extra environment variables every peer may see
# notify: []             # argv told when a ticket needs you or ends (the event as JSON on stdin)
# budget: {{tokens: 2000000, cost_usd: 5}}  # past it the ticket waits for you (either or both)
# ports: 0               # TCP ports each worktree gets: HANDOFF_PORT_1..N, and PORT for the first
# port_range: 20000-29999
"""


SECURITY = """\
  security:              # reviews every round beside the reviewer, for security alone
    provider: {provider}
    kind: reviewer
    focus: security
"""


def config_template(repo_top: Path, implementer: str = "scripted", reviewer: str = "scripted",
                    security: str | None = None) -> Path | None:
    """Write a commented .handoff.yaml into the repo; None when one exists (never overwritten).
    security: the CLI of a security reviewer beside the reviewer (None: none)."""
    path = repo_top / REPO_CONFIG
    if path.exists():
        return None
    path.write_text(TEMPLATE.format(
        implementer=implementer, reviewer=reviewer,
        security=SECURITY.format(provider=security) if security else ""), encoding="utf-8")
    return path
