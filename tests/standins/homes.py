"""Private HOMEs and environments for running the real coding CLIs against the stand-in servers.

Facts behind every value: /work/shared/CLI-FACTS.md. Each CLI's part is self-contained.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from tests.standins import install

# -- Claude Code ---------------------------------------------------------------------------

#: the token the stand-in expects nothing of; ANTHROPIC_AUTH_TOKEN needs no approval dialog
CLAUDE_TOKEN = "standin-token"
#: a PATH without the venv or the caller's tool dirs: what a peer pane would get
CLAUDE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def claude_binary() -> Path:
    """HANDOFF_TEST_CLAUDE if set, else the pinned install in the user cache (installed on
    first use; raises, failing the test, when it cannot be)."""
    return install.binary("claude")


def claude_home(home: Path, trusted: Iterable[Path], api_key: str | None = None) -> None:
    """Write ~/.claude.json so Claude Code starts straight into its composer.

    hasCompletedOnboarding skips the onboarding preflight (which needs api.anthropic.com) and
    the theme/login screens; trusted folders (and their subfolders) skip the trust dialog;
    api_key pre-approves that ANTHROPIC_API_KEY (the dialog matches its last 20 characters).
    Keys already in the file are kept.
    """
    path = home / ".claude.json"
    state: dict[str, object] = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    state["hasCompletedOnboarding"] = True
    projects = state.get("projects")
    if not isinstance(projects, dict):
        projects = {}
    for folder in trusted:
        entry = projects.get(str(folder.resolve()))
        entry = entry if isinstance(entry, dict) else {}
        entry["hasTrustDialogAccepted"] = True
        projects[str(folder.resolve())] = entry
    state["projects"] = projects
    if api_key is not None:
        state["customApiKeyResponses"] = {"approved": [api_key[-20:]], "rejected": []}
    home.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")


def claude_env(home: Path, base_url: str, *, token: str | None = CLAUDE_TOKEN,
               api_key: str | None = None, alternate_screen: bool = False, sandbox: bool = True,
               extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment for `env -i … claude …` against a stand-in at base_url.

    Nothing is inherited: a shell started from Claude Code carries CLAUDECODE=1 and friends,
    which would make the child believe it is nested. alternate_screen=False keeps the
    inline screen (CLAUDE_CODE_DISABLE_ALTERNATE_SCREEN=1), so capture-pane sees history.
    sandbox=True sets IS_SANDBOX=1, without which uid 0 may not use bypass mode.
    """
    env = {
        "HOME": str(home),
        "PATH": CLAUDE_PATH,
        "TERM": "screen-256color",
        "LANG": "C.UTF-8",
        "ANTHROPIC_BASE_URL": base_url,
        # no update checks, telemetry or feedback calls: they would wait on the network
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    if token is not None:
        env["ANTHROPIC_AUTH_TOKEN"] = token
    if api_key is not None:
        env["ANTHROPIC_API_KEY"] = api_key
    if sandbox:
        env["IS_SANDBOX"] = "1"
    if not alternate_screen:
        env["CLAUDE_CODE_DISABLE_ALTERNATE_SCREEN"] = "1"
    if extra:
        env.update(extra)
    return env


def claude_argv(prompt: str | None = None, *, settings: Mapping[str, object] | None = None,
                binary: Path | None = None, args: Iterable[str] = ()) -> list[str]:
    """claude in bypass mode with the bypass warning pre-accepted (settings are merged in)."""
    merged: dict[str, object] = {"skipDangerousModePermissionPrompt": True, **(settings or {})}
    argv = [str(binary or claude_binary()), "--dangerously-skip-permissions", "--settings",
            json.dumps(merged), *args]
    return [*argv, prompt] if prompt is not None else argv


def claude_command(env: Mapping[str, str], argv: Iterable[str]) -> list[str]:
    """argv run under exactly env (tmux would otherwise add its server's environment)."""
    return ["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in sorted(env.items())), *argv]


# -- Codex -----------------------------------------------------------------------------------

#: the key Codex sends as `Authorization: Bearer …`; the stand-in accepts anything
CODEX_KEY = "sk-standin"
#: a PATH without the venv or the caller's tool dirs: what a peer pane would get
CODEX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def codex_binary() -> Path:
    """HANDOFF_TEST_CODEX if set, else the pinned install in the user cache (installed on
    first use; raises, failing the test, when it cannot be)."""
    return install.binary("codex")


def _toml(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def codex_home(codex_home: Path, base_url: str, trusted: Iterable[Path], *,
               provider: bool = True, extra: str = "") -> None:
    """Write $CODEX_HOME/config.toml so Codex starts straight into its composer.

    provider: a custom provider "mock" at base_url that takes its key from OPENAI_API_KEY
    (the built-in openai provider shows the sign-in screen without an auth.json, key or not).
    allow_login_shell=false: a login shell's /etc/profile would reset PATH in every tool call.
    Trust can only be given here (not by -c), and is resolved to the git repository root, so
    trusting a repo covers its worktrees. extra: more TOML appended verbatim (top-level keys
    must come before the tables, so extra goes in front of them).
    """
    lines = [
        "check_for_update_on_startup = false",
        "allow_login_shell = false",
    ]
    if provider:
        lines.append('model_provider = "mock"')
    if extra:
        lines.append(extra.rstrip("\n"))
    if provider:
        lines += [
            "",
            "[model_providers.mock]",
            'name = "mock"',
            f"base_url = {_toml(base_url)}",
            'wire_api = "responses"',
            'env_key = "OPENAI_API_KEY"',
        ]
    for folder in trusted:
        lines += ["", f"[projects.{_toml(str(folder.resolve()))}]", 'trust_level = "trusted"']
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")


def codex_env(home: Path, codex_home: Path, *, api_key: str | None = CODEX_KEY,
              extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment for `env -i … codex …`.

    Nothing is inherited: a shell started from a Codex tool call carries CODEX_* variables
    (CODEX_THREAD_ID, CODEX_CI…) and a codex-path dir on PATH.
    """
    env = {
        "HOME": str(home),
        "CODEX_HOME": str(codex_home),
        "PATH": CODEX_PATH,
        "TERM": "screen-256color",
        "LANG": "C.UTF-8",
    }
    if api_key is not None:
        env["OPENAI_API_KEY"] = api_key
    if extra:
        env.update(extra)
    return env


def codex_argv(prompt: str | None = None, *, cwd: Path | None = None, alt_screen: bool = False,
               binary: Path | None = None, args: Iterable[str] = ()) -> list[str]:
    """codex in YOLO mode without the shared background server (it would outlive the pane)."""
    argv = [str(binary or codex_binary()), "--no-daemon", "--dangerously-bypass-approvals-and-sandbox"]
    if not alt_screen:
        argv.append("--no-alt-screen")
    if cwd is not None:
        argv += ["-C", str(cwd)]
    argv += list(args)
    return [*argv, prompt] if prompt is not None else argv


def codex_command(env: Mapping[str, str], argv: Iterable[str]) -> list[str]:
    """argv run under exactly env (tmux would otherwise add its server's environment)."""
    return ["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in sorted(env.items())), *argv]
