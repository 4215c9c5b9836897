"""The keys with a structure of their own, read into the model's types: the hosts tickets may
run on (and the ssh flags a host's argv may not carry), the sandbox and its limits, the
scanners, the budget, the shared folders. Each error names the file and the key."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from handoff.config.model import (
    HOSTS_HINT,
    LIST_PLACEHOLDERS,
    SANDBOX_MODES,
    SHARE_MODES,
    SIZE_UNITS,
    TEXT_PLACEHOLDERS,
    Budget,
    Host,
    Limits,
    Sandbox,
    Scanner,
    Share,
    show_size,
)
from handoff.config.values import strings, whole_number
from handoff.errors import UsageError

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


#: names a host may not have: what --host means by itself
HOST_WORDS = ("local", "auto")
HOST_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,39}$")


def hosts(source: str, value: Any) -> dict[str, Host]:
    """hosts: name → {ssh, max_parallel, handoff}; a name that is not a word of --host, an ssh
    argv that ends with its destination and forwards nothing."""
    if not isinstance(value, dict):
        raise UsageError(f"{source}: 'hosts' must be a mapping of host names to their settings",
                         HOSTS_HINT)
    found = {}
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
        ssh = strings(where, "ssh", spec["ssh"], allow_empty=False)
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
        found[name] = Host(
            name=name, ssh=ssh,
            max_parallel=None if limit is None else whole_number(where, "max_parallel", limit),
            handoff=strings(where, "handoff", spec["handoff"], allow_empty=False)
            if "handoff" in spec else ("handoff",))
    return found


SANDBOX_HINT = ("e.g. sandbox: auto, or sandbox: {mode: on, write: [~/.cache/pip], "
                "hide: [~/work/secrets]}")


def sandbox(source: str, value: Any, before: Sandbox, personal: bool) -> Sandbox:
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
        paths = strings(source, f"sandbox.{key}", spec[key])
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


#: the smallest limits a peer's CLI and its bubblewrap can start under (a CLI alone is a dozen
#: threads, each of which the process limit counts)
LIMIT_MINIMUM = {"processes": 32, "memory": 64 << 20, "tmp": 1 << 20}
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


def scanners(source: str, value: Any) -> tuple[Scanner, ...]:
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
        command = strings(source, f"scanners[{i}].command", item.get("command"),
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


def budget(source: str, value: Any) -> Budget | None:
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


def shares(source: str, value: Any) -> tuple[Share, ...]:
    if not isinstance(value, list):
        raise UsageError(f"{source}: 'share' must be a list of {{path, mode}}")
    found = []
    for i, item in enumerate(value):
        spec = {"path": item} if isinstance(item, str) else item
        if not isinstance(spec, dict) or not isinstance(spec.get("path"), str):
            raise UsageError(f"{source}: share[{i}] needs a 'path'")
        path, mode = spec["path"], spec.get("mode", "symlink")
        if Path(path).is_absolute() or ".." in Path(path).parts:
            raise UsageError(f"{source}: share[{i}].path must be relative inside the repo")
        if mode not in SHARE_MODES:
            raise UsageError(f"{source}: share[{i}].mode must be one of {SHARE_MODES}")
        found.append(Share(path=path, mode=mode))
    return tuple(found)
