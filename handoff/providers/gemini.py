"""Gemini CLI (`gemini`, npm @google/gemini-cli), measured on 0.61 (whole tickets run against
a stand-in Gemini API).

The first brief is the positional prompt (interactive since 0.61). `--skip-trust` avoids the
folder-trust screen, `--approval-mode yolo` lets it act without asking. Its authentication
screen must never show: a prompt given before it is answered is lost ("Content generator not
initialized"), so doctor and start refuse until the method is chosen in its settings. It has
no system-prompt flag for the role contract: the brief carries it. Its node processes ignore
the pane's SIGHUP: handoff's reaper ends them.

Its hooks (BeforeAgent, AfterAgent, Notification) drop signal files as Claude Code's do. Gemini
takes hooks only from settings files and has no flag for them, so handoff adds a settings layer
of its own: the lowest one, "system defaults", which the person's settings never replace
(hooks of every layer are concatenated). `GEMINI_CLI_SYSTEM_DEFAULTS_PATH` points the peer at a
file handoff writes in the ticket directory, holding the machine's own system defaults (when
there are any) plus handoff's hooks; ~/.gemini/settings.json and the worktree's .gemini/ are
never written. Gemini reads such a file only when root owns it and every folder above it and no
group or other may write to any of them: elsewhere (a non-root user, HANDOFF_HOME under /tmp)
handoff leaves the variable alone and the peer is read by its screen, as doctor warns.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict

from handoff.providers.base import Check, Launch, Level, Provider
from handoff.providers.clistate import LOGIN, TREE, Seed
from handoff.providers.screen import Blocker, Dialog, ScreenRules
from handoff.providers.signals import signal_command
from handoff.record.store import atomic_write, state_home
from handoff.signs import PERMISSION, PROMPT, STOP

AUTH_FIX = ("choose the authentication once: write ~/.gemini/settings.json "
            "{\"security\": {\"auth\": {\"selectedType\": \"gemini-api-key\"}}} and export "
            "GEMINI_API_KEY, or run `gemini` once in a terminal and pick a method")
DIALOGS = (
    Dialog("trust", ("Do you trust the files in this folder?",), (),
           "handoff passes --skip-trust; trust the folder once by hand in gemini"),
    Dialog("auth", ("How would you like to authenticate",), (), AUTH_FIX),
    Dialog("api-key-entry", ("Enter Gemini API Key",), (), AUTH_FIX),
    # outside yolo mode, each tool call asks (its Notification hook says so at the same moment)
    Dialog("approval", ("Allow execution of",), (),
           "run the role in bypass mode (roles.<role>.permission_mode: bypass), or attach "
           "(handoff attach TICKET --role ROLE) and answer each prompt by hand"),
)
BLOCKERS = (
    Blocker("quota", r"Quota exceeded|RESOURCE_EXHAUSTED|status 429",
            "out of quota or rate-limited: wait, or switch the role's model", patience=20.0),
    Blocker("unreachable", r"API Error: .*(fetch failed|ECONNREFUSED|ENOTFOUND|connect)",
            "the Gemini API cannot be reached: check the network or GOOGLE_GEMINI_BASE_URL"),
    Blocker("api-error", r"✕ \[API Error", "read the error on the peer's screen "
            "(handoff attach TICKET --role ROLE)"),
)

#: the variables naming Gemini's system layers (read by gemini itself, measured in 0.61)
DEFAULTS_VARIABLE = "GEMINI_CLI_SYSTEM_DEFAULTS_PATH"
SETTINGS_VARIABLE = "GEMINI_CLI_SYSTEM_SETTINGS_PATH"
#: gemini's stand-in for HOME: its .gemini folder (settings, logins, chats) is under it
HOME_VARIABLE = "GEMINI_CLI_HOME"


def gemini_dir(env: Mapping[str, str]) -> Path:
    """The person's .gemini folder: under $GEMINI_CLI_HOME, else under HOME."""
    return Path(env.get(HOME_VARIABLE) or env.get("HOME") or os.path.expanduser("~")) / ".gemini"


def rules_for(composer: str) -> ScreenRules:
    # the input line is " * …" in yolo mode, " > …" otherwise; sent messages show as " > …"
    return ScreenRules(composer=composer, busy=(r"esc to cancel",), dialogs=DIALOGS,
                       blockers=BLOCKERS, placeholders=("Type your message",))


class Gemini(Provider):
    name = "gemini"
    binary = "gemini"
    package = "@google/gemini-cli"
    proven = ("0.61.0", "0.61.0")
    #: the system layers' paths, as a person (an administrator) may set them: a peer reads the
    #: machine's layers as the person's gemini does, and the orchestrator finds the defaults
    #: to carry into handoff's own layer (which then takes the variable's place for the peer);
    #: GEMINI_CLI_HOME: where the person's ~/.gemini is (a second account's, say)
    env_allow = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL",
                 "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_GENAI_USE_VERTEXAI",
                 "GOOGLE_APPLICATION_CREDENTIALS", SETTINGS_VARIABLE, DEFAULTS_VARIABLE,
                 HOME_VARIABLE)
    modes = ("bypass", "auto_edit", "default")
    #: an Enter within 40 ms of a bracketed paste is a newline, not a submit (0.61, measured:
    #: 0 of 6 taken at 0-30 ms); a busy machine makes gemini read the paste late, so the
    #: Enter waits well past that
    enter_delay = 0.3
    exit_keys = ("/quit", "Enter")
    probe_flags = True
    signals = True
    #: `gemini` runs node again as its child, with more memory: that child runs the commands
    relaunches = True
    #: what a role's .gemini (under its own GEMINI_CLI_HOME) gets of the person's at every
    #: launch: settings.json (the chosen authentication; their hooks and MCP servers, as their
    #: gemini runs), the Google login (600) and which account it is, the .env gemini falls back
    #: on for keys, their instructions (GEMINI.md) and commands. Not their extensions:
    #: installed code, as Claude Code's plugins are
    seeds = (Seed(".gemini/settings.json"), Seed(".gemini/oauth_creds.json", LOGIN),
             Seed(".gemini/google_accounts.json"), Seed(".gemini/.env"),
             Seed(".gemini/GEMINI.md"), Seed(".gemini/commands", TREE))
    #: its chats, per project (handoff reads none; kept as the person's would be). Not the
    #: rest of tmp/ (checkpoints, shell history) nor what it writes at each start
    keeps = (".gemini/tmp/*/chats/*.json",)

    def state_env(self) -> dict[str, str]:
        return {HOME_VARIABLE: str(self.own)} if self.own is not None else {}

    def seed_source(self, person: Mapping[str, str], path: str) -> Path:
        return gemini_dir(person).parent / path

    def own_rules(self) -> ScreenRules:
        return rules_for("*" if self.mode == "bypass" else ">")

    def argv(self, launch: Launch) -> list[str]:
        spec = self.spec
        argv = [self.executable() or self.binary, "--approval-mode",
                "yolo" if self.mode == "bypass" else self.mode, "--skip-trust"]
        if spec.model:
            argv += ["-m", spec.model]
        return [*argv, *spec.args, *launch.prompt]

    def env(self, launch: Launch) -> dict[str, str]:
        return {**git_identity(launch.worktree), **hooks_layer(launch, os.environ)}

    def state_dirs(self, env: Mapping[str, str]) -> list[Path]:
        """It writes into .gemini at every start (installation_id, projects.json) and keeps its
        chats under .gemini/tmp (measured on 0.61: a read-only .gemini ends it at once). A
        role's own folder is its GEMINI_CLI_HOME, which gemini takes for its home: all of it."""
        return [self.own] if self.own is not None else [gemini_dir(env)]

    def checks(self, repo: Path, env: dict[str, str]) -> list[Check]:
        path = gemini_dir(env) / "settings.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        if not isinstance(data, dict):
            data = {}
        chosen = ((data.get("security") or {}).get("auth") or {}).get("selectedType")
        if not chosen:
            return [Check(Level.FAIL, "gemini auth", f"{path} names no authentication method: "
                          "gemini would ask, and lose the brief", AUTH_FIX)]
        if chosen == "gemini-api-key" and not env.get("GEMINI_API_KEY"):
            return [Check(Level.FAIL, "gemini key", "gemini authenticates with an API key and "
                          "GEMINI_API_KEY is not set", "export GEMINI_API_KEY before handoff")]
        return hook_checks(data, path)


#: gemini's shell tool runs every command with GIT_CONFIG_GLOBAL=/dev/null and
#: GIT_CONFIG_SYSTEM=/dev/null (0.61, measured): git in it has no user.name or user.email from
#: ~/.gitconfig, and the implementer's commit fails ("Please tell me who you are"). The
#: identities git would use in the worktree go in as the variables git reads before any file.
IDENTITIES = ("AUTHOR", "COMMITTER")
IDENT = re.compile(r"(?P<name>.*) <(?P<email>[^<>]*)> \d+ [+-]\d{4}")


def git_identity(worktree: Path) -> dict[str, str]:
    """GIT_AUTHOR_NAME/EMAIL and GIT_COMMITTER_NAME/EMAIL as git resolves them in worktree
    (`git var`: the person's own GIT_* variables, then the repository's config, then
    ~/.gitconfig); none for what git cannot tell either."""
    found: dict[str, str] = {}
    for who in IDENTITIES:
        try:
            done = subprocess.run(["git", "-C", str(worktree), "var", f"GIT_{who}_IDENT"],
                                  capture_output=True, text=True, timeout=30,
                                  stdin=subprocess.DEVNULL, errors="replace")
        except (OSError, subprocess.TimeoutExpired):
            continue
        ident = IDENT.fullmatch(done.stdout.strip()) if done.returncode == 0 else None
        if ident is not None:
            found[f"GIT_{who}_NAME"], found[f"GIT_{who}_EMAIL"] = ident["name"], ident["email"]
    return found


# -- hooks: a settings layer of handoff's own ------------------------------------------------

#: Gemini's hook events → signal names. Notification fires (in 0.61) only for a tool waiting
#: for permission (notification_type "ToolPermission"), and a hook's matcher cannot narrow it:
#: every Notification is a permission question
HOOKS = (("BeforeAgent", PROMPT), ("AfterAgent", STOP), ("Notification", PERMISSION))
#: milliseconds Gemini lets a hook run (its default is a minute): hooks run inside the turn,
#: and a signal file that cannot be written in this long is not worth holding the turn for
HOOK_TIMEOUT_MS = 10000
#: strings in a settings file that Gemini replaces by environment variables ($NAME, ${NAME})
#: before it runs a hook: a path holding one would not reach the hook as written
EXPANDED = re.compile(r"\$(\w|\{)")
SCREEN_ONLY = "its peers are watched by their screen alone (the ticket still runs)"


def layer_path(launch: Launch) -> Path:
    """Where the role's settings layer goes: in the ticket directory, which handoff keeps 700
    and the person's alone (the file names commands gemini runs), once per role (each role's
    hooks drop their signals into its own folder) and outside the signal folders (every file
    in one is read as a signal)."""
    folder = launch.ticket_dir if launch.ticket_dir != Path() else \
        (launch.signals or Path()).parent.parent
    return folder / "gemini" / f"{launch.role}-system-defaults.json"


class CommandHook(TypedDict):
    """A command hook of Gemini's settings schema."""

    type: str
    #: shown in gemini's /hooks panel: handoff-<signal>
    name: str
    command: str
    #: milliseconds
    timeout: int


class HookDefinition(TypedDict):
    hooks: list[CommandHook]


def hooks(folder: Path) -> dict[str, list[HookDefinition]]:
    """handoff's hooks in Gemini's settings schema: each event a list of definitions, each
    holding command hooks (a name shows in gemini's /hooks panel)."""
    return {event: [{"hooks": [{"type": "command", "name": f"handoff-{name}",
                                "command": signal_command(folder, name),
                                "timeout": HOOK_TIMEOUT_MS}]}]
            for event, name in HOOKS}


def machine_defaults(environ: Mapping[str, str]) -> Path:
    """The system-defaults file gemini reads without handoff: $GEMINI_CLI_SYSTEM_DEFAULTS_PATH,
    else system-defaults.json beside the system settings file ($GEMINI_CLI_SYSTEM_SETTINGS_PATH,
    else /etc/gemini-cli/settings.json; on macOS /Library/Application Support/GeminiCli/)."""
    if environ.get(DEFAULTS_VARIABLE):
        return Path(environ[DEFAULTS_VARIABLE])
    settings = environ.get(SETTINGS_VARIABLE) or (
        "/Library/Application Support/GeminiCli/settings.json" if sys.platform == "darwin"
        else "/etc/gemini-cli/settings.json")
    return Path(settings).parent / "system-defaults.json"


def skipped_because(path: Path) -> str | None:
    """Why gemini would skip a system settings file at path (None: it reads it).

    Its rule (0.61, measured): the file and every folder above it, and the same again with
    symlinks resolved, must each be owned by root (uid 0) and writable by no group or other
    (the sticky /tmp too: "Parent directory '/tmp' is insecure"); a symlink among them must be
    root's own. A part that does not exist yet is one handoff is about to create, owned by
    whoever runs handoff, with no group or other write."""
    path = Path(os.path.abspath(path))
    uid = os.geteuid()
    chain = [path, *path.parents]
    real = path.resolve()
    if real != path:
        chain += [real, *real.parents]
    for part in dict.fromkeys(chain):
        try:
            link = part.lstat()
        except FileNotFoundError:
            if uid != 0:
                return (f"handoff runs as uid {uid}, and gemini reads a settings layer only "
                        "from a file root owns")
            continue
        except OSError as exc:
            return f"'{part}' cannot be read ({exc.strerror})"
        if stat.S_ISLNK(link.st_mode) and link.st_uid != 0:
            return f"the symlink '{part}' is not owned by root"
        try:
            info = part.stat()
        except OSError as exc:
            return f"'{part}' cannot be read ({exc.strerror})"
        if info.st_uid != 0:
            return f"'{part}' is owned by uid {info.st_uid}, not by root"
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return (f"'{part}' is writable by group or others (mode "
                    f"{stat.S_IMODE(info.st_mode):o})")
    return None


def strip_comments(text: str) -> str:
    """JSON with // and /* */ comments (which gemini allows in settings) as plain JSON."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == '"':  # a string, escapes and all
            end = i + 1
            while end < n and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            out.append(text[i:end + 1])
            i = end + 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            out.append(" ")
            i = n if end < 0 else end + 2
        else:
            out.append(char)
            i += 1
    return "".join(out)


def read_layer(path: Path) -> dict[str, object] | None:
    """The settings a system file gives: {} when it is absent or gemini would skip it (as
    insecure), None when it cannot be read as a JSON object (gemini itself would stop on it)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError:
        return None
    if skipped_because(path) is not None:
        return {}
    try:
        data = json.loads(strip_comments(text))
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def layered(base: Mapping[str, object], folder: Path) -> dict[str, object]:
    """The machine's system defaults with handoff's hooks after any of its own per event.

    Hooks named handoff-* in base are dropped: base is another handoff's layer when handoff
    runs inside a gemini peer (the variable is inherited), and that ticket's signals are not
    this one's."""
    merged = dict(base)
    existing = merged.get("hooks")
    ours: dict[str, object] = {}
    for event, definitions in (existing.items() if isinstance(existing, dict) else ()):
        ours[event] = [kept for kept in (_without_ours(d) for d in definitions) if kept] \
            if isinstance(definitions, list) else definitions
    for event, definitions in hooks(folder).items():
        before = ours.get(event)
        ours[event] = [*(before if isinstance(before, list) else []), *definitions]
    merged["hooks"] = ours
    return merged


def _without_ours(definition: object) -> object:
    """A hook definition without handoff's own hooks (None when nothing else is left)."""
    if not isinstance(definition, dict) or not isinstance(definition.get("hooks"), list):
        return definition
    kept = [h for h in definition["hooks"]
            if not (isinstance(h, dict) and str(h.get("name", "")).startswith("handoff-"))]
    return {**definition, "hooks": kept} if kept else None


def hooks_layer(launch: Launch, environ: Mapping[str, str]) -> dict[str, str]:
    """Write the role's settings layer and name it for gemini; where gemini would not read it,
    write nothing and leave the machine's own system defaults as they are (a person's own
    GEMINI_CLI_SYSTEM_DEFAULTS_PATH passes to the peer through env_allow)."""
    if launch.signals is None or EXPANDED.search(signal_command(launch.signals, PROMPT)):
        return {}
    target = layer_path(launch)
    if skipped_because(target) is not None:
        return {}
    base = read_layer(machine_defaults(environ))
    if base is None:
        return {}  # a broken machine file: gemini says so itself, on the peer's screen
    atomic_write(target, json.dumps(layered(base, launch.signals), indent=2) + "\n")
    return {DEFAULTS_VARIABLE: str(target)}


def hook_checks(settings: Mapping[str, Any], path: Path) -> list[Check]:
    """Whether gemini will run handoff's hooks: the layer handoff writes under HANDOFF_HOME must
    be one gemini reads, and the person's settings must not switch hooks off."""
    home = state_home()
    why = skipped_because(home / "gemini-system-defaults.json")
    if why is not None and os.geteuid() != 0:
        return [Check(Level.WARN, "gemini hooks", f"gemini would skip the settings file that holds "
                      f"handoff's hooks: {why}; {SCREEN_ONLY}",
                      "nothing to mend for the ticket to run; hooks need handoff to run as "
                      "root (in a container, say): gemini takes no other layer handoff could "
                      "add without writing your own settings")]
    if why is not None:
        return [Check(Level.WARN, "gemini hooks", f"gemini would skip the settings file that holds "
                      f"handoff's hooks under {home}: {why}; {SCREEN_ONLY}",
                      "set HANDOFF_HOME to a folder no group or other may write to, nor any "
                      "folder above it (the default ~/.local/state/handoff is one)")]
    command = signal_command(home / "signals", PROMPT)
    if EXPANDED.search(command):
        return [Check(Level.WARN, "gemini hooks", f"the hook's command ({command}) holds a '$': "
                      f"gemini would read it as a variable; {SCREEN_ONLY}",
                      "set HANDOFF_HOME to a path without '$' (or install handoff in one)")]
    config = settings.get("hooksConfig")
    if isinstance(config, dict) and config.get("enabled") is False:
        return [Check(Level.WARN, "gemini hooks", f"{path} switches gemini's hooks off "
                      f"(hooksConfig.enabled: false); {SCREEN_ONLY}",
                      "remove hooksConfig.enabled: false from it to let handoff hear each "
                      "turn begin and end")]
    return []
