"""handoff.providers.codex: how Codex CLI is launched, what it may see, what it is told."""

from __future__ import annotations

from pathlib import Path

from handoff.providers import RoleSpec, get
from tests.unit.providers.test_base import launch


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
