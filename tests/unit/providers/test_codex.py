"""handoff.providers.codex: how Codex CLI is launched, what it may see, what it is told."""

from __future__ import annotations

import json
from pathlib import Path

from handoff.providers import RoleSpec, get
from tests.unit.providers.test_base import flag_value, launch


def test_codex_always_runs_without_its_daemon_and_keeps_its_scrollback(tmp_path: Path) -> None:
    start = launch(tmp_path)
    for mode in ("bypass", "full-auto", "default"):
        argv = get(RoleSpec(provider="codex", permission_mode=mode)).argv(start)
        assert "--no-daemon" in argv and "--no-alt-screen" in argv
        assert flag_value(argv, "-C") == str(start.worktree)
        assert ("--dangerously-bypass-approvals-and-sandbox" in argv) is (mode == "bypass")
        assert argv[-1] == f"Read and follow {start.brief}"
    argv = get(RoleSpec(provider="codex")).argv(start)
    overrides = [argv[i + 1] for i, a in enumerate(argv) if a == "-c"]
    assert "allow_login_shell=false" in overrides
    instructions = [o for o in overrides if o.startswith("developer_instructions=")]
    assert start.contract is not None
    assert json.loads(instructions[0].split("=", 1)[1]) == start.contract.read_text()


def test_codex_hooks_are_its_sessions_own_and_signal_the_orchestrator(tmp_path: Path) -> None:
    """As `-c` settings (the person's config.toml and hooks.json are never written), trusted
    for this invocation only; each runs the signal script for its event."""
    import subprocess
    import tomllib

    from handoff.providers.signals import read_signals

    start = launch(tmp_path)
    argv = get(RoleSpec(provider="codex")).argv(start)
    assert "--dangerously-bypass-hook-trust" in argv
    overrides = [argv[i + 1] for i, a in enumerate(argv) if a == "-c"]
    assert "features.codex_hooks=true" in overrides
    hooks = tomllib.loads("\n".join(o for o in overrides if o.startswith("hooks.")))["hooks"]
    assert set(hooks) == {"UserPromptSubmit", "Stop", "PermissionRequest"}
    for event, name in (("UserPromptSubmit", "prompt"), ("Stop", "stop"),
                        ("PermissionRequest", "permission")):
        [handler] = hooks[event][0]["hooks"]
        assert handler["type"] == "command"
        subprocess.run(handler["command"], shell=True, input=f'{{"hook_event_name": "{event}"}}',
                       text=True, check=True, timeout=10)
        [got] = [s for s in read_signals(start.signals or tmp_path, 0) if s.event == name]
        assert got.data == {"hook_event_name": event}
    quiet = get(RoleSpec(provider="codex")).argv(launch(tmp_path, signals=False))
    assert "--dangerously-bypass-hook-trust" not in quiet, "no hooks of ours, no trust bypass"


def test_codex_home_and_claude_config_dir_pass_to_their_own_cli() -> None:
    env = {"CODEX_HOME": "/h/codex", "CLAUDE_CONFIG_DIR": "/h/claude"}
    assert "CODEX_HOME" in get(RoleSpec(provider="codex")).passthrough(env)
    assert "CLAUDE_CONFIG_DIR" in get(RoleSpec(provider="claude")).passthrough(env)
    assert "CODEX_HOME" not in get(RoleSpec(provider="claude")).passthrough(env)


def test_codex_passes_the_key_its_own_model_provider_names(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        'model_provider = "corp"\n[model_providers.corp]\nenv_key = "CORP_LLM_KEY"\n')
    names = get(RoleSpec(provider="codex")).passthrough({"CODEX_HOME": str(tmp_path)})
    assert "CORP_LLM_KEY" in names and "OPENAI_API_KEY" in names
