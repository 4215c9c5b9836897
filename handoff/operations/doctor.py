"""`handoff doctor` and the checks `start` runs first: what would make a peer hang or fail.

One `Check` per line: OK, WARN or FAIL, with the fix. Nothing here writes into the user's
files (Claude Code's ~/.claude.json, Codex's config.toml are only read).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path

from handoff import config as config_mod
from handoff import platforms
from handoff.config import Config
from handoff.errors import HandoffError, MissingTool
from handoff.machinery import limit_mechanism, limits, sandbox, tools
from handoff.machinery.peers import allowlisted_env
from handoff.providers import Check, Provider, get
from handoff.providers.base import SANDBOXED, Level, proven_range
from handoff.record import slots


def peer_env(provider: Provider, cfg: Config) -> dict[str, str]:
    """The environment a peer of this provider would get (what its checks must look at), and
    whether it would run in the sandbox (`SANDBOXED`, for checks only: never a peer's)."""
    fenced = {SANDBOXED: "1"} if sandboxed(cfg) else {}
    return allowlisted_env(fenced, (*provider.passthrough(dict(os.environ)), *cfg.env_allow))


def shown_value(value: object) -> str:
    """A setting as one short line, in the words of the file it came from (a role by its
    provider, a scanner by its name, a section by its keys; never a Python repr), anything
    long cut."""
    text = _plain(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _plain(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    if isinstance(value, str | int | float | Path):
        return str(value)
    if isinstance(value, dict):
        return ", ".join(f"{key}: {_plain(getattr(item, 'provider', item))}"
                         for key, item in value.items()) or "none"
    if isinstance(value, list | tuple | set | frozenset):
        return ", ".join(_plain(item) for item in value) or "none"
    shown = getattr(value, "shown", None)
    if callable(shown):
        return str(shown())
    if is_dataclass(value):
        named = getattr(value, "name", None)
        return named if isinstance(named, str) else ", ".join(
            f"{f.name}: {_plain(getattr(value, f.name))}" for f in fields(value))
    return str(value)


def tool_checks() -> list[Check]:
    found = []
    for tool in tools.MINIMUM:
        have = tools.version(tool)
        problem = [p for p in tools.problems() if p.startswith(tool)]
        if problem:
            found.append(Check(Level.FAIL, tool, problem[0], f"install or upgrade {tool}"))
        else:
            found.append(Check(Level.OK, tool, f"{tool} {have[0]}.{have[1]}" if have else tool))
    return found


def state_check(home: Path) -> Check:
    try:
        home.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=home, prefix=".doctor-"):
            pass
    except OSError as exc:
        return Check(Level.FAIL, "state dir", f"{home} is not writable: {exc.strerror}",
                     "set HANDOFF_HOME to a writable folder")
    return Check(Level.OK, "state dir", str(home))


def watch_check() -> Check:
    """Can an orchestrator wait on file events (inotify; watchdog off Linux)? Tried on the
    folders it watches, in a scratch ticket directory; without them it polls (and says so in
    its log), which works, at a look every POLL_INTERVAL."""
    from handoff.loop.watching import watched_folders
    from handoff.machinery.watch import POLL_INTERVAL, Watcher
    from handoff.record.ticket import TicketDir

    with tempfile.TemporaryDirectory(prefix="handoff-doctor-") as scratch, \
            Watcher(watched_folders(TicketDir(Path(scratch) / "T-1"))) as watcher:
        polling = watcher.polling
        by = watcher.by
    if not polling:
        return Check(Level.OK, "file watching", by)
    return Check(Level.WARN, "file watching", f"an orchestrator would poll every {POLL_INTERVAL} s: "
                 f"{polling}", ("raise the limit, e.g. sudo sysctl fs.inotify.max_user_watches"
                               "=524288" if by == "inotify" else "pip install watchdog")
                 + " (reports are taken meanwhile, only by polling)")


def provider_checks(role: str, provider: Provider, cfg: Config, repo: Path | None,
                    probe: bool) -> list[Check]:
    what = f"{role}: {provider.name}"
    missing = provider.missing()
    if missing:
        return [Check(Level.FAIL, what, missing, _install_hint(provider))]
    command = cfg.roles[role].command if provider.name == "command" else ()
    away = fenced_away(cfg, command, provider) if command else ""
    if away:  # a program of the person's own, or a script it runs
        return [Check(Level.FAIL, what, f"{away}: the peer, run in the sandbox, would not find "
                      "its program", "install it outside it (e.g. ~/.local/bin), or add its "
                      "folder to sandbox.write")]
    version = provider.version() if probe else None
    found = [Check(Level.OK, what, f"{provider.executable()}"
                   + (f" (version {version})" if version else "")
                   + f"; watched by {watched_by(provider)}")]
    unproven = provider.unproven(version)
    if unproven:
        found.append(Check(Level.WARN, f"{what} version", unproven,
                           f"it may work; to be on the proven side: npm install -g "
                           f"{provider.package}@{provider.proven[1]} (the README says how to "
                           "test a newer one)"))
    if probe:
        problem = provider.flags_problem()
        if problem:
            found.append(Check(Level.FAIL, f"{what} flags", problem,
                               f"install a version of {provider.package or provider.name} "
                               "that handoff knows (handoff providers lists them)"))
    if repo is not None:
        found += [Check(c.level, f"{role}: {c.what}", c.detail, c.fix)
                  for c in provider.checks(repo, peer_env(provider, cfg))]
    return found


def watched_by(provider: Provider) -> str:
    """How handoff knows what a peer of this provider does."""
    return "hooks, the screen as fallback" if provider.signals else "the screen alone"


def _install_hint(provider: Provider) -> str:
    if provider.package:
        return f"npm install -g {provider.package}, or set roles.<role>.binary to its path"
    return "check roles.<role> in .handoff.yaml"


def run(home: Path, repo: Path | None) -> list[Check]:
    """Every check, for `handoff doctor`."""
    found = [platform_check(platforms.here())]
    found += tool_checks()
    found.append(state_check(home))
    found.append(watch_check())
    try:
        cfg = config_mod.load(home, repo)
    except HandoffError as exc:
        found.append(Check(Level.FAIL, "config", exc.message, exc.hint))
        return found
    used = config_mod.files(home, repo)
    found.append(Check(Level.OK, "config", "valid: " + (", ".join(map(str, used)) if used
                                                     else "the defaults (no config file)")))
    for key, value, path in config_mod.settings(home, repo):
        found.append(Check(Level.OK, f"config {key}", f"{shown_value(value)} (from {path})"))
    found.append(sandbox_check(cfg))
    found.append(limits_check(cfg))
    found.append(queue_check(home, cfg))
    found.append(team_check(cfg))
    for role in cfg.team.names:
        found += provider_checks(role, get(cfg.roles[role]), cfg, repo, probe=True)
    found += scanner_checks(cfg, repo)
    found += host_checks(cfg)
    return found


def host_checks(cfg: Config) -> list[Check]:
    """Each host: reachable over its ssh argv, running the same handoff (version and code),
    and how loaded it is; all asked side by side (handoff.operations.remote)."""
    if not cfg.hosts:
        return []
    from handoff.operations import remote

    found = []
    for state in remote.host_states(cfg):
        what = f"host {state.name}"
        if not state.reachable:
            found.append(Check(Level.FAIL, what, state.error,
                               f"reach it by hand with its argv: {' '.join(cfg.host(state.name).ssh)}"))
        elif not state.same:
            found.append(Check(Level.FAIL, what, state.problem(),
                               remote.install_hint(cfg.host(state.name))))
        else:
            found.append(Check(Level.OK, what, f"handoff {state.handoff}, the same code; "
                               f"{state.at_work} of {state.max_parallel} tickets at work, "
                               f"{state.waiting} waiting"))
    return found


def platform_check(where: platforms.Platform) -> Check:
    """Where handoff runs, and what is weaker here than where it is tested."""
    if where.tested or where.name == "WSL2":
        return Check(Level.OK, "platform", where.said)
    return Check(Level.WARN, "platform", where.said,
                 "handoff is tested on Linux; what is weaker here is listed above")


def queue_check(home: Path, cfg: Config) -> Check:
    """How many tickets may be at work at once, where that comes from, and how many are."""
    why = "max_parallel in your config" if cfg.max_parallel else \
        f"the default for {os.cpu_count() or 1} core(s) and this memory"
    now = slots.standing(home, cfg.parallel)
    tickets = "ticket" if cfg.parallel == 1 else "tickets"
    return Check(Level.OK, "queue", f"{cfg.parallel} {tickets} at work at once ({why}); now "
                 f"{len(now.at_work)} at work, {len(now.waiting)} waiting")


def team_check(cfg: Config) -> Check:
    """The team a new ticket gets, and whether its review is independent of the implementer."""
    team = cfg.team
    said = ", ".join(f"{r.name} ({r.kind}, {cfg.roles[r.name].provider})" for r in team.roles)
    implementer = cfg.roles[team.names[0]].provider
    if implementer not in ("scripted", "command") and all(
            cfg.roles[r].provider == implementer for r in team.reviewers):
        return Check(Level.WARN, "team", f"{said}: every reviewer runs on {implementer}, the "
                     "implementer's CLI, so the review is not independent",
                     "give a reviewer another installed CLI: roles.<reviewer>.provider")
    return Check(Level.OK, "team", said)


def scanner_checks(cfg: Config, repo: Path | None) -> list[Check]:
    """Each scanner of the config, and whether the gate will run it."""
    from handoff.loop import scanners  # the gate's module: only when scanners are configured

    found = []
    env = dict(os.environ)
    for scanner in cfg.scanners:
        where = scanners.installed(scanner.command[0], env, repo or Path.cwd())
        what = f"scanner {scanner.name}"
        away = fenced_away(cfg, [where, *scanner.command[1:]]) if where is not None else ""
        if away:  # there, but the gate runs in the fence, where it is not
            found.append(Check(Level.FAIL if scanner.required else Level.WARN, what,
                               f"{away}: the gate, run in the sandbox, would not find it",
                               f"install {scanner.command[0]} outside it (e.g. ~/.local/bin), "
                               f"or add its folder to sandbox.write"))
        elif where is not None:
            found.append(Check(Level.OK, what, f"{' '.join(scanner.command)} ({where}); "
                               + ("required" if scanner.required else "optional")))
        elif scanner.required:
            found.append(Check(Level.FAIL, what, f"{scanner.command[0]} is not installed: the gate "
                               "stops for a person until it is", f"install {scanner.command[0]}"
                               f", or set required: false for scanner {scanner.name}"))
        else:
            found.append(Check(Level.WARN, what, f"{scanner.command[0]} is not installed: the gate "
                               "skips it (optional)", f"install {scanner.command[0]}"))
    return found


def fenced_away(cfg: Config, argv: Sequence[str], provider: Provider | None = None) -> str:
    """Why a command run in the sandbox (a scanner, a `command` peer) would not find its
    program, or a file it names by its absolute path, there ('' when it would, or nothing runs
    sandboxed)."""
    if not sandboxed(cfg):
        return ""
    from handoff.loop.fences import programs_seen
    from handoff.record.store import state_home

    fence = programs_seen(os.environ, state_home(), cfg, provider)
    found = shutil.which(argv[0]) if argv and "/" not in argv[0] else (argv[0] if argv else "")
    named = [a for a in argv[1:] if os.path.isabs(a) and os.path.isfile(a)]
    return next((why for path in (*([found] if found else []), *named)
                 if (why := fence.hides(path))), "")


def sandboxed(cfg: Config) -> bool:
    """The peers would run in the sandbox (as Workspace.sandbox decides)."""
    return sandbox.in_force(cfg.sandbox.mode) is not None


def sandbox_check(cfg: Config) -> Check:
    """Whether the peers and the gate run fenced in, and why not where they do not."""
    mode = cfg.sandbox.mode
    if mode == "off":
        return Check(Level.WARN, "sandbox", "off (sandbox: off): the peers run as you, with all "
                     "your user can read and write", "sandbox: auto fences them in where "
                     "bubblewrap works")
    found = sandbox.support()
    if found.available:
        return Check(Level.OK, "sandbox", f"on, {found.why}: each peer writes only its worktree, "
                     "its CLI's state and its drafts; credentials, other tickets and the tmux "
                     "socket are hidden; the network stays open")
    level = Level.FAIL if mode == "on" else Level.WARN
    return Check(level, "sandbox", f"{'sandbox: on, but ' if mode == 'on' else 'off: '}"
                 f"{found.why}", found.fix)


def limits_check(cfg: Config) -> Check:
    """How each peer and gate run is bounded here (handoff.machinery.limits), and what is
    weaker than cgroups where it is not."""
    line = limits.said(cfg.sandbox.limits, sandboxed(cfg))
    caps = cfg.sandbox.limits
    if caps.processes is None and caps.memory is None:
        return Check(Level.WARN, "limits", f"{line}: a fork bomb or a memory hog in a peer or the "
                     "gate can take this machine", "set sandbox.limits (docs/configuration.md)")
    weaker = limit_mechanism.mechanism().weaker()
    if weaker:
        return Check(Level.WARN, "limits", f"{line}; weaker: {weaker}",
                     "run handoff where it may divide a cgroup with the pids and memory "
                     "controllers (cgroup v2: a delegated one, e.g. under systemd's user "
                     "manager; cgroup v1: as root)")
    return Check(Level.OK, "limits", line)


def ready_to_start(cfg: Config, repo: Path) -> None:
    """Refuse to start what would hang, die at once or stop at its first gate: the failing
    checks, with fixes."""
    failing = [c for role in cfg.team.names
               for c in provider_checks(role, get(cfg.roles[role]), cfg, repo, probe=False)
               if c.level == Level.FAIL]
    fenced = sandbox_check(cfg)
    failing += [fenced] if fenced.level == Level.FAIL else []
    # a required scanner that is not there would stop the first gate, a round later
    failing += [c for c in scanner_checks(cfg, repo) if c.level == Level.FAIL]
    if failing:
        raise MissingTool("; ".join(f"{c.what}: {c.detail}" for c in failing),
                          "; ".join(c.fix for c in failing if c.fix)
                          + " (handoff doctor shows every check)")


def exit_code(found: list[Check]) -> int:
    return 1 if any(c.level == Level.FAIL for c in found) else 0


#: what each provider is proven to do, for `handoff providers` and the README
SUPPORT = {
    "claude": "full: tickets run end to end in CI against the real binary",
    "codex": "full: tickets run end to end in CI against the real binary",
    "gemini": "full: tickets run end to end in CI against the real binary",
    "opencode": "full: tickets run end to end in CI against the real binary",
    "command": "any argv template; needs roles.<role>.command",
    "scripted": "built in: acts from the plan's handoff-script blocks (demo, tests)",
}


def provider_rows(cfg: Config) -> list[dict[str, object]]:
    """Every provider: installed where, which version, which roles of this config use it."""
    from handoff.providers import REGISTRY

    rows: list[dict[str, object]] = []
    for name, cls in REGISTRY.items():
        roles = [r for r in cfg.team.names if cfg.roles[r].provider == name]
        provider = get(cfg.roles[roles[0]]) if roles else cls()
        path = provider.executable() if name != "command" or roles else None
        version = provider.version() if path else None
        rows.append({"provider": name, "path": path, "installed": path is not None,
                     "version": version, "roles": roles, "support": SUPPORT.get(name, ""),
                     "proven": proven_range(provider.proven) or None,
                     "unproven": provider.unproven(version),
                     "reaches": provider.reaches(peer_env(provider, cfg)) or None,
                     "signals": watched_by(provider)})
    return rows


@dataclass(frozen=True)
class Picked:
    """The team `handoff init` writes: CLIs found on PATH, in handoff's order of preference."""

    implementer: str
    reviewer: str
    #: the security reviewer's CLI: another one than the implementer's, when one is installed
    security: str | None
    installed: list[str]


def pick() -> Picked:
    """Providers for `handoff init`: the implementer from the first installed CLI; the
    reviewer and a security reviewer from another one when there is one (a second model
    family reviews better)."""
    from handoff.providers import PREFERENCE, known

    installed = [name for name in PREFERENCE if known(name)().executable() is not None]
    if not installed:
        return Picked("scripted", "scripted", None, installed)
    second = installed[1] if len(installed) > 1 else None
    return Picked(installed[0], second or installed[0], second, installed)
