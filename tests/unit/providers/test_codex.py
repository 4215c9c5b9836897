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
