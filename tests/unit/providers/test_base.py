"""handoff.providers.base: what a role's launch is, and what every provider shares."""

from __future__ import annotations

import shlex
from pathlib import Path

from handoff.providers import REGISTRY, Launch, RoleSpec, get
from handoff.providers.base import Level, Provider, first_message, proven_range, release


def launch(tmp_path: Path, contract: bool = True, signals: bool = True) -> Launch:
    path = tmp_path / "contracts" / "implementer.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# Your role: implementer\nCONTRACT-SENTINEL \"quoted\"\n")
    return Launch(ticket="T-1", role="implementer", worktree=tmp_path / "wt",
                  brief=tmp_path / "inbox" / "brief-1.md", ticket_dir=tmp_path,
                  contract=path if contract else None,
                  session_id="11111111-2222-4333-8444-555555555555",
                  signals=tmp_path / "signals" / "implementer" if signals else None)


def flag_value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_every_provider_reads_the_roles_own_markers_instead_of_its_screen_rules() -> None:
    screen = "Claude Code\n>>> \nWORKING hard\n"
    assert get(RoleSpec(provider="claude")).read(screen).state == "starting"
    mended = get(RoleSpec(provider="claude", markers={"composer": ">>>", "busy": "^WORKING"}))
    reading = mended.read(screen)
    assert reading.state == "busy" and reading.draft == ""
    assert [d.name for d in mended.rules.dialogs] == \
        [d.name for d in get(RoleSpec(provider="claude")).rules.dialogs], "its dialogs stay"
    for name in REGISTRY:  # each provider, whatever its own rules depend on
        own = get(RoleSpec(provider=name, markers={"composer": ">>>", "busy": "^WORKING"}))
        assert own.read(screen).state == "busy", name


def test_every_provider_module_reads_a_screen_and_knows_its_dialogs() -> None:
    for name, cls in REGISTRY.items():
        provider: Provider = cls(RoleSpec(provider=name, command=("x",)))
        assert provider.read("").state == "starting", name
        for dialog in provider.rules.dialogs:
            assert dialog.fix, f"{name}: {dialog.name} needs a fix for a person"
        for blocker in provider.rules.blockers:
            assert blocker.fix, f"{name}: {blocker.name} needs a fix for a person"


def test_the_pinned_test_clis_are_inside_their_providers_proven_range() -> None:
    from tests.standins.install import EXTRA, PINNED

    for command, (_, version) in {**PINNED, **EXTRA}.items():
        assert REGISTRY[command]().unproven(version) is None, (command, version)
    assert REGISTRY["claude"]().unproven("2.2.0") is not None
    assert REGISTRY["codex"]().unproven("0.168.9") is not None


def test_the_first_message_names_one_brief_however_its_path_is_spelled(tmp_path: Path) -> None:
    spaced = tmp_path / "my home" / "it's" / "brief-1.md"
    start = Launch(ticket="T-1", role="implementer", worktree=tmp_path, brief=spaced)
    said, _, path = start.message.partition("Read and follow ")
    assert said == "" and shlex.split(path) == [str(spaced)]
    plain = tmp_path / "brief-1.md"
    assert first_message(plain) == f"Read and follow {plain}", "a plain path stays bare"


def test_a_version_is_compared_by_its_release_numbers() -> None:
    assert release("2.1.328") == (2, 1, 328) and release("2.1-beta.3") == (2, 1)
    assert release("2.1.9") < release("2.1.10"), "numbers, not text"
    assert proven_range(("1.0.0", "1.0.0")) == "1.0.0"
    assert proven_range(("1.0.0", "1.2.0")) == "1.0.0 to 1.2.0" and proven_range(("", "")) == ""
    claude = REGISTRY["claude"]()
    low, high = claude.proven
    assert claude.unproven(low) is None and claude.unproven(high) is None
    assert claude.unproven(None) is None and REGISTRY["command"]().unproven("9.9.9") is None
    assert f"({low} to {high})" in (claude.unproven("1.0.0") or "")


def fake_cli(folder: Path, script: str) -> Path:
    """An executable standing in for a coding CLI: script is its sh body."""
    path = folder / "fake-cli"
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)
    return path


def test_a_cli_not_on_path_is_missing_with_how_to_install_it(tmp_path: Path) -> None:
    gone = get(RoleSpec(provider="codex", binary=str(tmp_path / "no-codex")))
    assert gone.executable() is None and gone.version() is None
    assert gone.missing() == f"{tmp_path / 'no-codex'} is not installed or not on PATH " \
        "(npm install -g @openai/codex)"
    there = get(RoleSpec(provider="codex", binary=str(fake_cli(tmp_path, "echo codex-cli"))))
    assert there.missing() is None


def test_a_start_up_screen_is_fine_only_when_the_role_lets_handoff_answer_it() -> None:
    claude = REGISTRY["claude"]
    [dialog] = [d for d in claude.rules.dialogs if d.keys][:1]
    warned = claude(RoleSpec(provider="claude")).screen_check(dialog, "trust", "it asks")
    assert (warned.level, warned.detail, warned.fix) == (
        Level.WARN, "it asks: its screen would stop the peer (the ticket goes to needs-human)",
        dialog.fix)
    answered = claude(RoleSpec(provider="claude", answer=(dialog.name,)))
    assert answered.screen_check(dialog, "trust", "it asks").level == Level.OK


def test_a_role_in_a_ticket_keeps_its_cli_state_in_its_own_folder(tmp_path: Path) -> None:
    assert get(RoleSpec(provider="codex"), tmp_path / "cli" / "implementer").own == \
        tmp_path / "cli" / "implementer" / "codex"
    assert get(RoleSpec(provider="codex")).own is None, "the person's own CLI state"
