"""Claude Code (`claude`, npm @anthropic-ai/claude-code), measured on 2.1.197 and 2.1.328.

The first brief is the positional prompt. The role contract goes in through
`--append-system-prompt-file`, and a SessionStart hook (matcher `compact`) gives it again
after a compaction. Hooks for UserPromptSubmit, Stop and Notification drop signal files into
the ticket directory: the orchestrator hears "prompt arrived" and "turn ended" from them
first, and reads the screen only as a fallback.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from handoff.providers import sessions as session_files
from handoff.providers.base import SANDBOXED, Check, Launch, Level, Provider, is_root
from handoff.providers.clistate import LOGIN, TREE, Seed
from handoff.providers.screen import Blocker, Dialog, ScreenRules
from handoff.providers.signals import signal_command
from handoff.record.usage import Usage, cost_of, count_of

#: handoff's own Claude Code plugin, as `claude plugin install handoff --marketplace ./` names it
PLUGIN = "handoff@handoff"
CONFIRM = "Enter to confirm · Esc to cancel"

TRUST = Dialog(
    "trust", ("trust this folder",), ("Down", "Enter"),
    "open `claude` once in the repository and accept the folder, or allow handoff to answer "
    "it: roles.<role>.answer: [trust] in .handoff.yaml",
    "trusted the repository (Claude Code saves the trust for the main checkout, so every "
    "worktree of it is trusted from then on)")
API_KEY = Dialog(
    "api-key", ("Detected a custom API key", "Do you want to use this API key?"), ("Up", "Enter"),
    "pass ANTHROPIC_AUTH_TOKEN instead of ANTHROPIC_API_KEY, or approve the key once by "
    "starting `claude` in a terminal, or allow handoff: roles.<role>.answer: [api-key]",
    "approved the API key from the environment (Claude Code saves it for every folder)")
BYPASS = Dialog(
    "bypass", ("Bypass Permissions mode", "Yes, I accept"), ("Down", "Enter"),
    "set \"skipDangerousModePermissionPrompt\": true in ~/.claude/settings.json (handoff "
    "passes it in --settings, so a newer Claude Code may have renamed it)",
    "accepted bypass-permissions mode")
MCP = Dialog(
    "mcp", ("New MCP server found",), ("Enter",),
    "add --strict-mcp-config to roles.<role>.args, or enable or disable the server in "
    "Claude Code's settings (enableAllProjectMcpServers / disabledMcpjsonServers)",
    "went on without the new MCP server")
SETTINGS_ERROR = Dialog(
    "settings-error", ("Settings Error", "Continue without these settings"), (),
    "mend the settings file named on the screen (handoff never answers this: going on "
    "without settings would drop its own hooks)")
PERMISSION = Dialog(
    "permission", ("Do you want to proceed?", "Esc to cancel"), (),
    "run the role in bypass mode (roles.<role>.permission_mode: bypass), or attach "
    "(handoff attach TICKET --role ROLE) and answer each prompt by hand")
ANY_DIALOG = Dialog(
    "unknown-dialog", (CONFIRM,), (),
    "attach (handoff attach TICKET --role ROLE), answer it by hand, then 'handoff answer'")

RULES = ScreenRules(
    composer="❯",
    busy=(r"esc to interrupt", r"^\s*[·✢*✶✻✽] \S+…"),
    turn_ended=(r"^\s*[·✢*✶✻✽] \S+ed for \d+(\.\d+)?[smh]",),
    dialogs=(TRUST, API_KEY, BYPASS, MCP, SETTINGS_ERROR, PERMISSION, ANY_DIALOG),
    blockers=(
        Blocker("not-logged-in", r"Not logged in|Please run /login|Invalid API key",
                "log in (run `claude` once and /login), or pass a key: export "
                "ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN before handoff starts"),
        Blocker("unreachable",
                r"Unable to connect to Anthropic|ECONNREFUSED|ENOTFOUND|Connection refused|"
                r"API Error: Connection error",
                "the model API cannot be reached: check the network, a proxy "
                "(HTTPS_PROXY) or ANTHROPIC_BASE_URL", patience=45.0),
        Blocker("quota", r"usage limit|Credit balance is too low|rate_limit_error|"
                r"reached your .*limit|Overloaded",
                "the account is out of quota or rate-limited: wait for the limit to reset "
                "or switch the role to another model or provider", patience=20.0),
    ),
    placeholders=("Once fixed, resend your message", "Press up to edit queued messages"),
    rule="─",
    settling=(r"running Stop hook",),
)

#: flags handoff passes that `claude --help` does not list although they work
UNLISTED = ("--append-system-prompt-file",)


#: a subscription's long-lived login, made by `claude setup-token`
OAUTH_TOKEN = "CLAUDE_CODE_OAUTH_TOKEN"


@dataclass(frozen=True)
class Backend:
    """Where Claude Code sends its requests, chosen by a switch in the person's environment
    (`CLAUDE_CODE_USE_VERTEX=1`, …) or by `roles.<role>.backend`: the variables it reads pass
    to the peer by themselves, no env_allow needed."""

    name: str
    #: the variable that selects it ('' for Anthropic's own API, the default)
    switch: str
    names: tuple[str, ...]
    #: families of names (Vertex's per-model regions: VERTEX_REGION_CLAUDE_4_5_SONNET, …)
    prefixes: tuple[str, ...] = ()
    #: what must be set for a request to go anywhere, each as alternatives
    needs: tuple[tuple[str, ...], ...] = ()

    def passes(self, env: Mapping[str, str]) -> tuple[str, ...]:
        return (*self.names, *(n for n in env if self.prefixes and n.startswith(self.prefixes)))


BACKENDS = (
    # a gateway in front of Anthropic's API is this one with ANTHROPIC_BASE_URL; a
    # subscription's long-lived token (`claude setup-token`) is never refreshed, so no peer
    # rotates the person's stored login (handoff.providers.clistate)
    Backend("anthropic", "", ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL",
                              OAUTH_TOKEN)),
    Backend("vertex", "CLAUDE_CODE_USE_VERTEX", (
        "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_SKIP_VERTEX_AUTH", "ANTHROPIC_VERTEX_PROJECT_ID",
        "ANTHROPIC_VERTEX_BASE_URL", "CLOUD_ML_REGION", "GOOGLE_APPLICATION_CREDENTIALS",
        "GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT", "CLOUDSDK_CONFIG"),
        prefixes=("VERTEX_REGION_",),
        needs=(("ANTHROPIC_VERTEX_PROJECT_ID",), ("CLOUD_ML_REGION",))),
    Backend("bedrock", "CLAUDE_CODE_USE_BEDROCK", (
        "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_SKIP_BEDROCK_AUTH", "ANTHROPIC_BEDROCK_BASE_URL",
        "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK",
        "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"),
        needs=(("AWS_REGION", "AWS_DEFAULT_REGION"),)),
    Backend("foundry", "CLAUDE_CODE_USE_FOUNDRY", (
        "CLAUDE_CODE_USE_FOUNDRY", "CLAUDE_CODE_SKIP_FOUNDRY_AUTH", "ANTHROPIC_FOUNDRY_RESOURCE",
        "ANTHROPIC_FOUNDRY_BASE_URL", "ANTHROPIC_FOUNDRY_API_KEY", "ANTHROPIC_FOUNDRY_AUTH_TOKEN"),
        needs=(("ANTHROPIC_FOUNDRY_RESOURCE", "ANTHROPIC_FOUNDRY_BASE_URL"),)),
)
BACKEND_NAMES = tuple(b.name for b in BACKENDS)


def switched_on(value: str | None) -> bool:
    """Claude Code reads a switch as on for 1/true/yes (any case)."""
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def backend_of(chosen: str, env: Mapping[str, str]) -> tuple[Backend, str]:
    """The role's back-end and why: the role's `backend:`, else the first switch set in the
    person's environment, else Anthropic's API."""
    if chosen:
        return next(b for b in BACKENDS if b.name == chosen), f"roles.<role>.backend: {chosen}"
    for backend in BACKENDS[1:]:
        if switched_on(env.get(backend.switch)):
            return backend, f"{backend.switch}={env[backend.switch]} in the environment"
    return BACKENDS[0], "the default"


def config_dir(env: Mapping[str, str]) -> Path:
    """Where Claude Code keeps its settings, logins and session logs: $CLAUDE_CONFIG_DIR (a
    second account), else ~/.claude."""
    chosen = (env.get("CLAUDE_CONFIG_DIR") or "").strip()
    return Path(chosen) if chosen else _home(env) / ".claude"


def state_file(env: Mapping[str, str]) -> Path:
    """Its global state (onboarding, approved keys, trusted folders): .claude.json inside
    $CLAUDE_CONFIG_DIR when that is set (measured on 2.1.328), else ~/.claude.json."""
    chosen = (env.get("CLAUDE_CONFIG_DIR") or "").strip()
    return (Path(chosen) if chosen else _home(env)) / ".claude.json"


def session_folder(env: Mapping[str, str], worktree: Path) -> Path:
    """<config dir>/projects/<the folder, every other character a dash>: a session's log."""
    return config_dir(env) / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(worktree))


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or os.path.expanduser("~"))


class Claude(Provider):
    name = "claude"
    binary = "claude"
    package = "@anthropic-ai/claude-code"
    proven = ("2.1.197", "2.1.332")
    #: on every back-end; the back-end's own variables come from `backend()`. CLAUDE_CONFIG_DIR
    #: is a second account's (or config's) folder: what each peer's own folder is seeded from
    env_allow = ("ANTHROPIC_MODEL", "ANTHROPIC_SMALL_FAST_MODEL", "ANTHROPIC_DEFAULT_OPUS_MODEL",
                 "ANTHROPIC_DEFAULT_SONNET_MODEL", "ANTHROPIC_DEFAULT_HAIKU_MODEL", "IS_SANDBOX",
                 "CLAUDE_CONFIG_DIR", "ANTHROPIC_CUSTOM_HEADERS")
    backends = BACKEND_NAMES
    modes = ("bypass", "acceptEdits", "auto", "default", "plan", "dontAsk")
    warms = True
    takes_contract = True
    enter_delay = 0.05
    exit_keys = ("/exit", "Enter")
    signals = True
    keeps_usage = True
    #: what a role's folder ($CLAUDE_CONFIG_DIR) gets of the person's at every launch:
    #: the login (.credentials.json, 600) and settings.json (their hooks, permissions, model:
    #: the person's own, as their claude runs) with the hooks/ folder their scripts are kept
    #: in by custom; their instructions and definitions (CLAUDE.md, agents, commands, skills,
    #: output styles), as small as a person writes them. Not their plugins: installed code,
    #: often large (a settings.json naming one that is not there starts fine: measured on
    #: 2.1.328), and handoff's own is none of a peer's business. .claude.json is made
    #: (`made`): onboarding, approved keys, the account, the trust
    seeds = (Seed(".credentials.json", LOGIN), Seed("settings.json"), Seed("hooks", TREE),
             Seed("CLAUDE.md"), Seed("agents", TREE), Seed("commands", TREE),
             Seed("skills", TREE), Seed("output-styles", TREE))
    #: its session logs (usage, transcripts): projects/<folder>/<session>.jsonl. Not the rest
    #: of projects/: its memory/ is read into every later session of the folder
    keeps = ("projects/*/*.jsonl",)
    #: what of the person's .claude.json a peer's is made of (the rest: their other folders,
    #: their projects' MCP servers, counters and caches, is none of a peer's business)
    carried = ("hasCompletedOnboarding", "lastOnboardingVersion", "lastReleaseNotesSeen",
               "customApiKeyResponses", "oauthAccount", "userID", "primaryApiKey",
               "mcpServers", "theme")

    def state_env(self) -> dict[str, str]:
        return {"CLAUDE_CONFIG_DIR": str(self.own)} if self.own is not None else {}

    def seed_source(self, person: Mapping[str, str], path: str) -> Path:
        return config_dir(person) / path

    def made(self, person: Mapping[str, str], worktree: Path) -> dict[str, str]:
        """.claude.json ($CLAUDE_CONFIG_DIR holds it when that is set): the person's onboarding,
        approved keys, account and user-scope MCP servers, and the trust of the worktree's
        folders (the repository's, which its worktrees inherit) — trust alone of each project
        entry: the rest of an entry (its MCP servers, allowed tools) is that folder's."""
        data = read_state(state_file(person))
        made: dict[str, object] = {key: data[key] for key in self.carried if key in data}
        projects = data.get("projects")
        trust: dict[str, dict[str, bool]] = {}
        if isinstance(projects, dict):
            for folder in dict.fromkeys((worktree, *worktree.parents, *_resolved(worktree))):
                entry = projects.get(str(folder))
                if isinstance(entry, dict) and entry.get("hasTrustDialogAccepted"):
                    trust[str(folder)] = {"hasTrustDialogAccepted": True}
        if trust:
            made["projects"] = trust
        return {".claude.json": json.dumps(made, indent=2) + "\n"}

    def sessions(self, worktree: Path, since: float, env: Mapping[str, str]) -> list[Path]:
        return sessions_in(worktree, since, self.located(env))

    def usage(self, session: Path) -> Usage | None:
        return read_usage(session)
    rules = RULES

    def argv(self, launch: Launch) -> list[str]:
        spec = self.spec
        argv = [self.executable() or self.binary]
        argv += ["--dangerously-skip-permissions"] if self.mode == "bypass" \
            else ["--permission-mode", self.mode]
        argv += ["--settings", json.dumps(self.settings(launch), separators=(",", ":"))]
        if launch.contract is not None:
            argv += ["--append-system-prompt-file", str(launch.contract)]
        argv += ["-n", f"{launch.ticket} {launch.role}"]
        if launch.session_id:
            argv += ["--session-id", launch.session_id]
        if spec.model:
            argv += ["--model", spec.model]
        return [*argv, *spec.args, *launch.prompt]

    def backend(self, env: Mapping[str, str]) -> tuple[Backend, str]:
        return backend_of(self.spec.backend, env)

    def passthrough(self, env: dict[str, str]) -> tuple[str, ...]:
        """Its back-end's variables too (a Vertex user's set-up reaches the peer as it is)."""
        return (*super().passthrough(env), *self.backend(env)[0].passes(env))

    def reaches(self, env: Mapping[str, str]) -> str:
        backend, why = self.backend(env)
        passed = [n for n in backend.passes(env) if n in env]
        folder = f"; its login and settings from {config_dir(env)}" \
            if env.get("CLAUDE_CONFIG_DIR") else ""
        return (f"back-end {backend.name} ({why}); passes "
                f"{', '.join(passed) or 'none of its variables (none is set)'}{folder}")

    def session_log(self, worktree: Path, session_id: str,
                    env: Mapping[str, str]) -> Path | None:
        """The whole conversation (the pane's history holds only part of it)."""
        return session_folder(self.located(env), worktree) / f"{session_id}.jsonl" \
            if session_id else None

    def settings(self, launch: Launch) -> dict[str, object]:
        """Passed with --settings: no bypass screen, and hooks that signal the orchestrator."""
        hooks: dict[str, list[dict[str, object]]] = {}
        if launch.signals is not None:
            for event, name in (("UserPromptSubmit", "prompt"), ("Stop", "stop"),
                                ("Notification", "notification")):
                hooks[event] = [{"hooks": [{"type": "command",
                                            "command": signal_command(launch.signals, name)}]}]
        if launch.contract is not None:
            # after a compaction the appended system prompt may be summarised away
            hooks["SessionStart"] = [{"matcher": "compact", "hooks": [
                {"type": "command", "command": f"cat {shlex.quote(str(launch.contract))}"}]}]
        # handoff's own Claude Code plugin (the person's, for starting tickets) is no peer's
        # business: its skill would offer a peer to start tickets of its own
        settings: dict[str, object] = {"skipDangerousModePermissionPrompt": True,
                                       "enabledPlugins": {PLUGIN: False}}
        if hooks:
            settings["hooks"] = hooks
        return settings

    def env(self, launch: Launch) -> dict[str, str]:
        # full-screen mode keeps one screen of history: transcripts would lose the rest;
        # no auto-update or telemetry traffic from a peer nobody watches
        # its scratch folder (claude-<uid>) goes where the user's TMPDIR says, not always /tmp
        scratch = {"CLAUDE_CODE_TMPDIR": os.environ["TMPDIR"]} if os.environ.get("TMPDIR") else {}
        # as root, Claude Code takes bypass mode only in a sandbox it is told of: handoff's is one
        fenced = {"IS_SANDBOX": "1"} if launch.sandboxed and is_root() else {}
        return {"CLAUDE_CODE_DISABLE_ALTERNATE_SCREEN": "1",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", **scratch, **fenced}

    def flags_problem(self) -> str | None:
        """claude ignores unknown flags silently, even with --help: its --help text is the only
        way to tell that a flag handoff passes is gone."""
        from handoff.providers.probe import help_text

        path = self.executable()
        if path is None:
            return None
        text = help_text([path, "--help"])
        launch = Launch(ticket="T", role="implementer", worktree=Path("/"), brief=Path("/b.md"),
                        contract=Path("/c.md"), session_id="0")
        wanted = [a for a in self.argv(launch)[1:] if a.startswith("--")]
        unknown = [flag for flag in wanted if flag not in UNLISTED
                   and not re.search(re.escape(flag) + r"[\s,=]", text)]
        return f"its --help does not list {', '.join(unknown)}" if unknown else None

    def state_dirs(self, env: Mapping[str, str]) -> list[Path]:
        # a role's own folder holds .claude.json too (CLAUDE_CONFIG_DIR is set for it: measured
        # on 2.1.328); what a peer answers there (a trust screen, a key) is seeded afresh, so
        # not remembered for its next launch
        return [config_dir(self.located(env))]

    def checks(self, repo: Path, env: dict[str, str]) -> list[Check]:
        found: list[Check] = []
        if self.mode == "bypass" and is_root() and env.get("IS_SANDBOX") != "1" \
                and env.get(SANDBOXED) != "1":
            found.append(Check(Level.FAIL, "claude as root", "Claude Code refuses "
                               "--dangerously-skip-permissions as root unless IS_SANDBOX=1",
                               "run handoff as a normal user, or in a sandbox export "
                               "IS_SANDBOX=1 before handoff starts"))
        return found + self.backend_checks(env) + self.account_checks(repo, env)

    def backend_checks(self, env: dict[str, str]) -> list[Check]:
        """The back-end is named, with what it needs and what passes to the peer."""
        backend, _ = self.backend(env)
        unset = [" or ".join(names) for names in backend.needs
                 if not any(env.get(n) for n in names)]
        if unset:
            return [Check(Level.FAIL, "claude back-end", f"{self.reaches(env)}; but "
                          f"{', '.join(unset)} is not set",
                          f"export {unset[0].split(' or ')[0]}=… before handoff starts (Claude "
                          f"Code on {backend.name} needs it)")]
        return [Check(Level.OK, "claude back-end", self.reaches(env))]

    def account_checks(self, repo: Path, env: dict[str, str]) -> list[Check]:
        """Onboarding, credentials and trust, read from Claude Code's state file (~/.claude.json,
        or inside $CLAUDE_CONFIG_DIR) and never written."""
        path = state_file(env)
        data = read_state(path)
        found: list[Check] = []
        if not data.get("hasCompletedOnboarding"):
            found.append(Check(Level.FAIL, "claude set-up", f"{path} says Claude Code's first-run "
                               "set-up was never finished: a peer would stop on it",
                               "run `claude` once in a terminal and finish the set-up"))
        if self.backend(env)[0].name != "anthropic":
            found += self.trust_checks(data, repo)
            return found  # the cloud's own credentials, not an Anthropic login or key
        token = env.get("ANTHROPIC_AUTH_TOKEN") or env.get(OAUTH_TOKEN)
        key = env.get("ANTHROPIC_API_KEY")
        logged_in = (config_dir(env) / ".credentials.json").exists() or data.get("oauthAccount")
        if not token and not key and not logged_in:
            found.append(Check(Level.WARN, "claude login", "no ANTHROPIC_API_KEY or "
                               "ANTHROPIC_AUTH_TOKEN and no stored login were found",
                               "log in with `claude` /login, or export a key before handoff"))
        if key and not token:
            responses = data.get("customApiKeyResponses")
            approved = responses.get("approved") if isinstance(responses, dict) else None
            if key[-20:] not in (approved if isinstance(approved, list) else []):
                found.append(self.screen_check(API_KEY, "claude API key",
                                               "ANTHROPIC_API_KEY is not yet approved"))
        return found + self.trust_checks(data, repo)

    def trust_checks(self, data: Mapping[str, object], repo: Path) -> list[Check]:
        if trusted(data, repo):
            return []
        return [self.screen_check(TRUST, "claude trust",
                                  f"{repo} is not a trusted folder for Claude Code")]


def read_state(path: Path) -> dict[str, object]:
    """A .claude.json as an object ({} when it is missing or no JSON object)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _resolved(folder: Path) -> tuple[Path, ...]:
    """folder and its parents with links resolved (a person trusts the path they open)."""
    try:
        real = folder.resolve()
    except (OSError, RuntimeError):
        return ()
    return (real, *real.parents) if real != folder else ()


def trusted(data: Mapping[str, object], repo: Path) -> bool:
    """Trust in ~/.claude.json is per folder and inherited by every folder below it."""
    projects = data.get("projects") or {}
    if not isinstance(projects, dict):
        return False
    for folder in (repo, *repo.parents):
        entry = projects.get(str(folder))
        if isinstance(entry, dict) and entry.get("hasTrustDialogAccepted"):
            return True
    return False


# ---- its session files: where they are, what they spent ----------------------------------

def sessions_in(worktree: Path, since: float, env: Mapping[str, str]) -> list[Path]:
    """Every Claude Code session started in worktree and written since then."""
    return session_files.recent(session_folder(env, worktree), r"[^/]+\.jsonl", since,
                                root=config_dir(env))


def read_usage(path: Path) -> Usage | None:
    """A Claude Code session's usage: each assistant message counted once (the CLI writes one
    entry per content block, all with the message's usage), and the cost from its last
    `cost-state` entry unless it says a model's price is unknown."""
    # <config dir>/projects/<folder>/<session>.jsonl (sessions_in): no link below the config dir
    records = session_files.records(path, (b'"usage"', b'"cost-state"'),
                                    root=session_files.root_above(path, 2))
    if records is None:
        return None
    messages: dict[str, Usage] = {}
    cost: float | None = None
    seen_cost = False
    for number, record in enumerate(records):
        kind = record.get("type")
        if kind == "cost-state":
            seen_cost = True
            cost = None if record.get("hasUnknownModelCost") else cost_of(record.get("totalCostUSD"))
            continue
        message = record.get("message")
        if kind != "assistant" or not isinstance(message, dict):
            continue
        usage = message.get("usage")
        if not isinstance(usage, dict):
            continue
        key = message.get("id") or record.get("uuid") or number
        messages[str(key)] = Usage(
            input_tokens=count_of(usage.get("input_tokens")),
            output_tokens=count_of(usage.get("output_tokens")),
            cache_read_tokens=count_of(usage.get("cache_read_input_tokens")),
            cache_write_tokens=count_of(usage.get("cache_creation_input_tokens")))
    if not messages and not seen_cost:
        return None
    total = Usage()
    for one in messages.values():
        total = total.plus(one)
    return replace(total, cost_usd=cost)
