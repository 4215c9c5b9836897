"""Codex (`codex`, npm @openai/codex), measured on 0.169 and 0.171.

Its hooks (UserPromptSubmit, Stop, PermissionRequest) drop signal files into the ticket
directory as Claude Code's do: the orchestrator hears a turn start and end from them first.

Always `--no-daemon`: without it Codex starts a shared background server that is reparented
to pid 1 and outlives the pane and `handoff close`. `--no-alt-screen` keeps the pane's
history for transcripts. Commands run through a non-login shell (`allow_login_shell=false`):
a login shell resets PATH on Debian, and the peer would not find what the gate finds.
"""

from __future__ import annotations

import json
import os
import time
import tomllib
from collections.abc import Mapping
from datetime import date, timedelta
from pathlib import Path

from handoff.providers import sessions as session_files
from handoff.providers.base import Check, Launch, Level, Provider
from handoff.providers.clistate import LOGIN, TREE, Seed
from handoff.providers.screen import Blocker, Dialog, ScreenRules
from handoff.providers.signals import signal_command
from handoff.record.usage import Usage, count_of
from handoff.signs import PERMISSION, PROMPT, STOP

TRUST = Dialog(
    "trust", ("Trust this folder", "Trust and continue"), ("Enter",),
    "trust the repository in $CODEX_HOME/config.toml ([projects.\"<repo>\"] "
    "trust_level = \"trusted\"), or allow handoff to answer: roles.<role>.answer: [trust]",
    "trusted the repository (Codex saves it in its config.toml)")
SIGN_IN = Dialog(
    "sign-in", ("Sign in with ChatGPT",), (),
    "log Codex in before handoff starts it: `codex login`, or with a key: "
    "`printenv OPENAI_API_KEY | codex login --with-api-key`")
HOOKS_REVIEW = Dialog(
    "hooks-review", ("Hooks need review",), (),
    "review the hooks once in Codex (/hooks) so their hashes are trusted; handoff's own hooks "
    "need no review (it passes --dangerously-bypass-hook-trust), so a newer Codex may have "
    "renamed that flag: handoff doctor checks it")
APPROVAL = Dialog(
    "approval", ("Would you like to run the following command?",), (),
    "run the role in bypass mode (roles.<role>.permission_mode: bypass), or attach and answer")

RULES = ScreenRules(
    composer="›",
    busy=(r"esc to interrupt", r"^\s*[•◦] Working"),
    turn_ended=(r"Worked for \d+", r"^\s*─+ Worked for"),
    dialogs=(TRUST, SIGN_IN, HOOKS_REVIEW, APPROVAL),
    blockers=(
        Blocker("not-logged-in", r"Not logged in|401 Unauthorized|Missing environment variable"
                r"|invalid_api_key|Incorrect API key",
                "log Codex in (`codex login`), or export the key its model provider names "
                "(env_key in config.toml) before handoff starts"),
        Blocker("quota", r"insufficient_quota|Quota exceeded|usage limit|rate limit",
                "the account is out of quota or rate-limited: wait for it to reset or switch "
                "the role to another model or provider", patience=20.0),
        Blocker("unreachable", r"stream disconnected|error sending request|Connection refused"
                r"|Reconnecting\.\.\.|connection error",
                "the model API cannot be reached: check the network, a proxy or the "
                "provider's base_url in config.toml", patience=60.0),
    ),
    placeholders=("Ask Codex to do anything", "Find and fix a bug in @filename",
                  "Explain this codebase", "Write tests for @filename",
                  "Summarize recent commits", "Improve documentation in @filename",
                  "Implement {feature}", "Run /review on my current changes"),
)


class Codex(Provider):
    name = "codex"
    binary = "codex"
    package = "@openai/codex"
    proven = ("0.169.0", "0.171.0")
    #: CODEX_HOME points at the person's own configuration (a second account's, say): what
    #: each peer's own folder is seeded from
    env_allow = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID",
                 "CODEX_HOME")
    modes = ("bypass", "full-auto", "default")
    takes_contract = True
    warms = True
    enter_delay = 0.1
    exit_keys = ("/quit", "Enter")
    rules = RULES
    probe_flags = True
    signals = True
    #: npm's `codex` is a node launcher that runs the native binary, which runs the commands
    core = ("codex",)
    keeps_usage = True
    #: what a role's $CODEX_HOME gets of the person's at every launch: config.toml whole (the
    #: model provider and its key's name, the trust of the repository, their MCP servers and
    #: notify: the person's own, as their codex runs), the login (auth.json, 600), their hooks,
    #: exec-policy rules, instructions (AGENTS.md), prompts and skills
    seeds = (Seed("config.toml"), Seed("auth.json", LOGIN), Seed("hooks.json"),
             Seed("AGENTS.md"), Seed("AGENTS.override.md"), Seed("rules", TREE),
             Seed("prompts", TREE), Seed("skills", TREE))
    #: its session logs (usage, transcripts), in dated folders; nothing else it writes (its
    #: logs, history, caches and state database) is kept
    keeps = ("sessions/*/*/*/rollout-*.jsonl",)

    def state_env(self) -> dict[str, str]:
        return {"CODEX_HOME": str(self.own)} if self.own is not None else {}

    def seed_source(self, person: Mapping[str, str], path: str) -> Path:
        return codex_home(person) / path

    def sessions(self, worktree: Path, since: float, env: Mapping[str, str]) -> list[Path]:
        return sessions_in(worktree, since, self.located(env))

    def usage(self, session: Path) -> Usage | None:
        return read_usage(session)

    def argv(self, launch: Launch) -> list[str]:
        spec = self.spec
        argv = [self.executable() or self.binary, "--no-daemon", "--no-alt-screen"]
        if self.mode == "bypass":
            argv.append("--dangerously-bypass-approvals-and-sandbox")
        elif self.mode == "full-auto":
            argv.append("--full-auto")
        argv += ["-C", str(launch.worktree), "-c", "allow_login_shell=false"]
        if launch.signals is not None:
            argv += hook_flags(launch.signals)
        if launch.contract is not None:
            # added to Codex's own instructions as a developer message (model_instructions_file
            # would replace them); a JSON string is a valid TOML string
            text = launch.contract.read_text(encoding="utf-8")
            argv += ["-c", f"developer_instructions={json.dumps(text)}"]
        if spec.model:
            argv += ["-m", spec.model]
        return [*argv, *spec.args, *launch.prompt]

    def state_dirs(self, env: Mapping[str, str]) -> list[Path]:
        return [codex_home(self.located(env))]

    def passthrough(self, env: dict[str, str]) -> tuple[str, ...]:
        """The key variable a custom model provider names (env_key) passes too."""
        config = read_config(codex_home(env))
        names = [p.get("env_key") for p in model_providers(config).values()
                 if isinstance(p, dict)]
        return (*super().passthrough(env),
                *(n for n in names if isinstance(n, str)))

    def checks(self, repo: Path, env: dict[str, str]) -> list[Check]:
        home = codex_home(env)
        config = read_config(home)
        found: list[Check] = []
        provider = str(config.get("model_provider") or "openai")
        if provider == "openai" and not (home / "auth.json").exists():
            found.append(Check(Level.FAIL, "codex login", f"Codex uses OpenAI's own login and "
                               f"{home / 'auth.json'} does not exist: it would stop on its "
                               "sign-in screen", SIGN_IN.fix))
        elif provider != "openai":
            spec_p = model_providers(config).get(provider) or {}
            key = spec_p.get("env_key") if isinstance(spec_p, dict) else None
            if isinstance(key, str) and key and not env.get(key):
                found.append(Check(Level.FAIL, "codex key", f"model provider {provider!r} reads "
                                   f"its key from {key}, which is not set",
                                   f"export {key} before handoff starts"))
        if not trusted(config, repo):
            found.append(self.screen_check(TRUST, "codex trust", f"{repo} is not trusted in "
                                           f"{home / 'config.toml'}"))
        return found


#: Codex's hook events (0.171: UserPromptSubmit, Stop, PermissionRequest, …) → signal names
HOOKS = (("UserPromptSubmit", PROMPT), ("Stop", STOP), ("PermissionRequest", PERMISSION))


def hook_flags(folder: Path) -> list[str]:
    """Codex's hooks for this session alone, as `-c` settings (its session-flags layer): the
    person's config.toml and hooks.json are never written. Codex runs a hook only once its hash
    is trusted in that configuration, or with --dangerously-bypass-hook-trust for the one
    invocation, which handoff uses: it wrote these hooks itself (the flag also lets hooks of the
    repository's own .codex/ run unreviewed in the peer, which in bypass mode runs whatever
    it likes already)."""
    flags = ["-c", "features.codex_hooks=true"]
    for event, name in HOOKS:
        handler = "{type=\"command\",command=" + json.dumps(signal_command(folder, name)) + "}"
        flags += ["-c", f"hooks.{event}=[{{hooks=[{handler}]}}]"]
    return [*flags, "--dangerously-bypass-hook-trust"]


def codex_home(env: Mapping[str, str]) -> Path:
    home = env.get("CODEX_HOME")
    return Path(home) if home else Path(env.get("HOME") or os.path.expanduser("~")) / ".codex"


def read_config(home: Path) -> dict[str, object]:
    try:
        with (home / "config.toml").open("rb") as handle:
            return tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def model_providers(config: Mapping[str, object]) -> dict[object, object]:
    """config.toml's [model_providers] ({} when it has none, or something else there)."""
    found = config.get("model_providers")
    return found if isinstance(found, dict) else {}


def trusted(config: Mapping[str, object], repo: Path) -> bool:
    """Codex resolves trust to the git repository's root (the main checkout)."""
    projects = config.get("projects") or {}
    if not isinstance(projects, dict):
        return False
    for folder in (repo, *repo.parents):
        entry = projects.get(str(folder))
        if isinstance(entry, dict) and entry.get("trust_level") == "trusted":
            return True
    return False


# ---- its session files: where they are, what they spent ----------------------------------

def sessions_in(worktree: Path, since: float, env: Mapping[str, str]) -> list[Path]:
    """Every Codex rollout written since then whose session ran in worktree. Its dated folders
    follow the local clock; a day either side covers a time zone's edge."""
    root = codex_home(dict(env)) / "sessions"
    try:
        first = date.fromtimestamp(since) - timedelta(days=1)
        last = date.fromtimestamp(time.time()) + timedelta(days=1)
    except (OverflowError, ValueError, OSError):  # a launch time no clock can show
        return []
    days = min((last - first).days + 1, session_files.MAX_DAYS)
    wanted = {str(worktree), session_files.resolved(str(worktree))}
    found: list[Path] = []
    for offset in range(days):
        day = first + timedelta(days=offset)
        folder = root / f"{day.year:04d}" / f"{day.month:02d}" / f"{day.day:02d}"
        for path in session_files.recent(folder, r"rollout-[^/]+\.jsonl", since,
                                         root=root.parent):
            head = session_files.head(path, root=root.parent)
            payload = head.get("payload") if head else None
            cwd = payload.get("cwd") if isinstance(payload, dict) else None
            if isinstance(cwd, str) and (cwd in wanted or session_files.resolved(cwd) in wanted):
                found.append(path)
    return found


def read_usage(path: Path) -> Usage | None:
    """A Codex session's usage: its last `token_count` event's running total. Codex counts
    cached input inside input_tokens; here input_tokens is the uncached rest. It records no
    cost."""
    # $CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl (sessions_in): no link below it
    records = session_files.records(path, (b'"token_count"',),
                                    root=session_files.root_above(path, 4))
    if records is None:
        return None
    last: dict[str, object] | None = None
    for record in records:
        payload = record.get("payload")
        if not isinstance(payload, dict) or payload.get("type") != "token_count":
            continue
        info = payload.get("info")
        total = info.get("total_token_usage") if isinstance(info, dict) else None
        if isinstance(total, dict):
            last = total
    if last is None:
        return None
    cached = count_of(last.get("cached_input_tokens"))
    written = count_of(last.get("cache_write_input_tokens"))
    return Usage(input_tokens=max(count_of(last.get("input_tokens")) - cached - written, 0),
                 output_tokens=count_of(last.get("output_tokens")),
                 cache_read_tokens=cached, cache_write_tokens=written)
