"""What handoff needs to know about a coding CLI to run it as a peer.

A provider is a description, not a driver: how to start the CLI (argv, environment), how to
read its screen, which start-up screens it can show and how each is answered, how to leave
it. `peers.py` does the tmux work for every provider alike.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from handoff.providers.clistate import Seed
from handoff.providers.screen import Dialog, Reading, ScreenRules, holds
from handoff.record.usage import Usage


@dataclass(frozen=True)
class RoleSpec:
    """What a person chose for one role in `.handoff.yaml` (`roles.<role>`)."""

    provider: str = "scripted"
    model: str = ""
    args: tuple[str, ...] = ()
    permission_mode: str = ""
    #: extra environment variables passed through to this role's CLI
    env: tuple[str, ...] = ()
    #: names of start-up screens handoff may answer by itself (e.g. "trust")
    answer: tuple[str, ...] = ()
    #: the CLI's executable, when it is not the provider's usual name on PATH
    binary: str = ""
    #: the `command` provider's argv template
    command: tuple[str, ...] = ()
    #: the `command` provider's screen markers (ready, busy, turn_ended, composer, …)
    markers: dict[str, str] = field(default_factory=dict)
    #: where the CLI sends its requests (Claude Code: anthropic, vertex, bedrock, foundry);
    #: '' lets the person's environment choose, as the CLI itself would
    backend: str = ""
    #: implementer, tester or reviewer ('' : the role's name says it, handoff.role.kind_named)
    kind: str = ""
    #: a reviewer's shipped speciality (roles/reviewer-<focus>.md), e.g. security
    focus: str = ""
    #: the project's own contract for this role, a file in the repository (replaces the shipped
    #: one; the engineering rules and .handoff/local-<role>.md still apply)
    contract: str = ""
    #: who takes the role over, in order, when its CLI says its quota or rate limit is spent
    #: (another CLI, or the same one with another account's config): handoff.loop.failover
    fallback: tuple[RoleSpec, ...] = ()


#: in the environment `checks` are given (never a peer's): the peer would run in the sandbox
SANDBOXED = "HANDOFF_CHECK_SANDBOXED"


@dataclass(frozen=True)
class Launch:
    """One start of a peer: who it is, where it works, and the brief it starts on (None: a
    warm start, with no prompt: the brief is pasted once it exists, handoff.loop.crew)."""

    ticket: str
    role: str
    worktree: Path
    brief: Path | None
    ticket_dir: Path = Path()
    #: the role contract as one file (the CLI reads it through its own mechanism)
    contract: Path | None = None
    #: a fresh id for CLIs that can name their session (its transcript file follows it)
    session_id: str = ""
    #: the folder the CLI's hooks drop their signal files into
    signals: Path | None = None
    #: it runs in handoff's sandbox (handoff.machinery.sandbox)
    sandboxed: bool = False

    @property
    def message(self) -> str:
        return first_message(self.brief) if self.brief is not None else ""

    @property
    def prompt(self) -> list[str]:
        """The first message as the CLI's last argument ([] for a warm start)."""
        return [self.message] if self.brief is not None else []


def shown(path: Path) -> str:
    """A path as a peer reads it in a message: shell-quoted when it holds a space or a quote,
    so "Read and follow …" names exactly one file however HANDOFF_HOME is spelled."""
    return shlex.quote(str(path))


def first_message(brief: Path) -> str:
    """The one-line nudge; the brief file holds the substance."""
    return f"Read and follow {shown(brief)}"


class Level(StrEnum):
    """How a line of `handoff doctor` stands."""

    OK = "OK"
    WARN = "WARN"
    FAIL = "FAIL"


@dataclass(frozen=True)
class Check:
    """One line of `handoff doctor`: OK, WARN or FAIL, and how to mend it."""

    level: Level
    what: str
    detail: str
    fix: str = ""


class Provider:
    """A coding CLI, as one role is set up to run it (its `RoleSpec`).

    Subclasses set the class attributes and override what differs.
    """

    name = ""
    #: the executable's usual name on PATH ('' for providers that run no installed CLI)
    binary = ""
    #: the npm package that installs it, for messages and doctor
    package = ""
    #: environment variables the CLI may need beyond the base allowlist (keys, base URLs)
    env_allow: tuple[str, ...] = ()
    #: the oldest and newest release of the CLI that whole tickets or its start-up screens were
    #: run against (README's provider table says which); others may work, doctor warns
    proven: tuple[str, str] = ("", "")
    #: the back-ends a role may name (RoleSpec.backend)
    backends: tuple[str, ...] = ()
    #: permission modes accepted in config; the first is the default
    modes: tuple[str, ...] = ("bypass",)
    #: the CLI reads the role contract itself (system prompt); otherwise the brief carries it
    takes_contract = False
    #: started with no prompt, it waits at its input line and takes a pasted brief: a
    #: reviewer of it is started while the gate runs, and briefed the moment the gate passed
    warms = False
    #: pause between a paste and its Enter (a TUI that detects paste bursts needs one)
    enter_delay = 0.1
    #: keys that make the CLI exit cleanly, sent one call at a time
    exit_keys: tuple[str, ...] = ()
    #: seconds between those keys (`/exit`, then Enter): a TUI that sees both at once takes
    #: them for a paste
    exit_pause = 0.2
    #: the CLI's hooks write signal files (prompt arrived, turn ended) for the orchestrator
    signals = False
    #: the program name of the CLI's own process, where a launcher of its runs it as its one
    #: child (handoff.loop.filer: its commands, `handoff submit` among them, are its children)
    core: tuple[str, ...] = ()
    #: the CLI starts itself again as its one child, which then runs its commands (Gemini CLI)
    relaunches = False
    rules = ScreenRules(composer="\0")
    #: the CLI's state, as a role's own folder holds it (handoff.providers.clistate): what is
    #: seeded from the person's folder at every launch (its login, settings, instructions:
    #: configuration and code it obeys, never carried over from the role's last launch) ...
    seeds: tuple[Seed, ...] = ()
    #: ... and what the CLI writes there that is data, kept across the role's launches (the
    #: session logs handoff reads): glob patterns, one `*` per path component. Everything else
    #: in the folder is removed before each launch
    keeps: tuple[str, ...] = ()

    def __init__(self, spec: RoleSpec | None = None, state: Path | None = None) -> None:
        """state: the role's own folder for CLI state in its ticket (`<ticket dir>/cli/<role>`);
        None for a provider that describes the person's own CLI (doctor, `handoff providers`)."""
        self.spec = spec or RoleSpec(provider=self.name)
        rules = self.own_rules()
        self.rules = with_markers(rules, self.spec.markers) if self.spec.markers else rules
        #: the folder this role's CLI keeps its state in, or None: the person's own
        self.own = state / self.name if state is not None else None

    def own_rules(self) -> ScreenRules:
        """How this CLI's screen reads, as set up for this role (before its own markers)."""
        return type(self).rules

    @property
    def mode(self) -> str:
        return self.spec.permission_mode or self.modes[0]

    def executable(self) -> str | None:
        name = self.spec.binary or self.binary
        return shutil.which(name) if name else None

    def missing(self) -> str | None:
        """Why this CLI cannot run here (not installed, …), or None when it can."""
        if self.executable() is None:
            where = f" (npm install -g {self.package})" if self.package else ""
            return f"{self.spec.binary or self.binary} is not installed or not on PATH{where}"
        return None

    def version(self) -> str | None:
        path = self.executable()
        if path is None:
            return None
        try:
            done = subprocess.run([path, "--version"], capture_output=True, text=True,
                                  timeout=20, stdin=subprocess.DEVNULL, errors="replace")
        except (OSError, subprocess.TimeoutExpired):
            return None
        match = re.search(r"\d+\.\d+(\.\d+)?", done.stdout + done.stderr)
        return match.group(0) if match else None

    def unproven(self, version: str | None) -> str | None:
        """Why version is outside the proven range, or None (inside, or nothing to compare)."""
        low, high = self.proven
        if not version or not low:
            return None
        if release(low) <= release(version) <= release(high):
            return None
        return (f"version {version} is outside the range handoff is proven against "
                f"({proven_range(self.proven)})")

    def argv(self, launch: Launch) -> list[str]:
        """The command line that starts the CLI with the first brief as its own prompt."""
        raise NotImplementedError

    def env(self, launch: Launch) -> dict[str, str]:
        """Variables handoff sets for this CLI (beyond the allowlisted ones passed through)."""
        return {}

    def passthrough(self, env: dict[str, str]) -> tuple[str, ...]:
        """Names of variables this CLI may see: its own list and the role's config. (A coding
        CLI's session markers never pass, whatever this says: machinery.peers.allowlisted_env.)"""
        return (*self.env_allow, *self.spec.env)

    def state_dirs(self, env: Mapping[str, str]) -> list[Path]:
        """The folders the CLI itself writes outside the worktree (its settings, logins,
        session logs): writable inside the sandbox, made first when missing, as the CLI would
        make them (env: where its configuration variables point; a provider bound to a role's
        own folder locates them there, whatever env says)."""
        return []

    def state_env(self) -> dict[str, str]:
        """The variables that point the CLI at the role's own folder ({} for the person's CLI,
        or a CLI whose state handoff does not keep apart)."""
        return {}

    def located(self, env: Mapping[str, str]) -> Mapping[str, str]:
        """env as the CLI of this role sees it: its state variables at its own folder."""
        own = self.state_env()
        return {**env, **own} if own else env

    def seed_source(self, person: Mapping[str, str], path: str) -> Path:
        """Where the person's copy of path (a seed, beneath the role's folder) is, as the
        person's environment locates the CLI's folders."""
        raise NotImplementedError

    def made(self, person: Mapping[str, str], worktree: Path) -> dict[str, str]:
        """Files of the role's folder the provider derives from the person's (beneath the
        role's folder → text), written at every launch."""
        return {}

    def links(self, person: Mapping[str, str]) -> dict[str, Path]:
        """Links in the role's folder (beneath it → a folder of the person's) to what the
        fence shows read-only: what the CLI reads there and never needs to write."""
        return {}

    def reaches(self, env: Mapping[str, str]) -> str:
        """How this role's CLI reaches its model and what passes for it, for doctor and
        `handoff providers` ('' when there is nothing to choose)."""
        return ""

    def read(self, screen: str) -> Reading:
        return self.rules.read(screen)

    def taken(self, screen: str, message: str) -> bool:
        """The pasted message was submitted: it left the input line and shows above it, as a
        prompt or a message queued into the running turn. (A busy screen alone proves
        nothing: the CLI may have been busy before the paste, e.g. running a Stop hook.)"""
        if holds(self.read(screen).draft, message):
            return False
        return self.rules.submitted(screen, message)

    #: `doctor` runs the launch flags with --help to see the CLI accepts them
    probe_flags = False

    def flags_problem(self) -> str | None:
        """Why this CLI would refuse the flags handoff launches it with, or None."""
        from handoff.providers.probe import exit_status

        path = self.executable()
        if path is None or not self.probe_flags:
            return None
        launch = Launch(ticket="T", role="implementer", worktree=Path("/"), brief=Path("/b.md"),
                        session_id="00000000-0000-4000-8000-000000000000",
                        signals=Path("/signals") if self.signals else None)
        flags = self.argv(launch)[1:-1]
        code, output = exit_status([path, *flags, "--help"])
        if code != 0:
            last = output.strip().splitlines()[-3:]
            return f"`{self.binary} {' '.join(flags)} --help` exited {code}: {' / '.join(last)}"
        return None

    def checks(self, repo: Path, env: dict[str, str]) -> list[Check]:
        """What would make this CLI hang or fail at start here (for doctor and start)."""
        return []

    def session_log(self, worktree: Path, session_id: str,
                    env: Mapping[str, str]) -> Path | None:
        """Where the CLI keeps the whole conversation of a session it was started with (env:
        where its configuration variables say)."""
        return None

    #: the CLI records what its sessions spend where handoff can read it (`sessions`, `usage`)
    keeps_usage = False

    def sessions(self, worktree: Path, since: float, env: Mapping[str, str]) -> list[Path]:
        """The CLI's session files of work in worktree, written since then (epoch seconds)."""
        return []

    def usage(self, session: Path) -> Usage | None:
        """What one of its session files says the session spent (None: nothing readable)."""
        return None

    def screen_check(self, dialog: Dialog, what: str, detail: str) -> Check:
        """A start-up screen that will show: fine when the role lets handoff answer it."""
        if dialog.keys and dialog.name in self.spec.answer:
            return Check(Level.OK, what, f"{detail}; handoff answers its screen (answer: "
                         f"[{dialog.name}])")
        return Check(Level.WARN, what, f"{detail}: its screen would stop the peer (the ticket goes "
                     "to needs-human)", dialog.fix)


def with_markers(rules: ScreenRules, markers: Mapping[str, str]) -> ScreenRules:
    """A role's own screen markers (`roles.<role>.markers`) in place of its provider's: how a
    `command` peer is read at all, and how a person mends a CLI whose release changed its screen
    before handoff knows the new one (the dialogs and blockers stay the provider's)."""
    changed: dict[str, Any] = {}
    if "composer" in markers:
        changed.update(composer=markers["composer"], rule="", placeholders=())
    for key in ("busy", "turn_ended"):
        if key in markers:
            changed[key] = (markers[key],) if markers[key] else ()
    return replace(rules, **changed)


def release(version: str) -> tuple[int, ...]:
    """2.1.328 → (2, 1, 328), for comparing releases (a suffix such as -beta is ignored)."""
    return tuple(int(part) for part in re.findall(r"\d+", version.split("-")[0])[:3])


def proven_range(proven: tuple[str, str]) -> str:
    low, high = proven
    return "" if not low else low if low == high else f"{low} to {high}"


def is_root() -> bool:
    return hasattr(os, "getuid") and os.getuid() == 0
