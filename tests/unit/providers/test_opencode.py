"""handoff.providers.opencode: how opencode is launched, and its signals from handoff's plugin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from handoff.providers import RoleSpec, get
from handoff.providers.signals import script
from tests.paths import TESTS
from tests.unit.providers.test_base import launch


def test_opencode_loads_handoffs_plugin_for_the_peers_session_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from handoff.providers.opencode import CONFIG_CONTENT, plugin

    monkeypatch.delenv(CONFIG_CONTENT, raising=False)
    start = launch(tmp_path)
    provider = get(RoleSpec(provider="opencode"))
    assert provider.signals is True
    config = json.loads(provider.env(start)[CONFIG_CONTENT])
    assert config == {"plugin": [[plugin().as_uri(), {"folder": str(start.signals),
                                                      "script": str(script())}]]}
    assert plugin().is_file() and plugin().name == "opencode-signal.js"
    # nothing of it is on the command line (doctor probes the launch flags with --help)
    assert not any(CONFIG_CONTENT in a or "opencode-signal" in a for a in provider.argv(start))
    assert CONFIG_CONTENT not in provider.env(launch(tmp_path, signals=False))


def test_opencode_keeps_the_persons_own_inline_config_when_the_role_passes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from handoff.providers.opencode import CONFIG_CONTENT, plugin

    theirs = {"username": "me", "plugin": ["their-plugin@1.0.0"]}
    monkeypatch.setenv(CONFIG_CONTENT, json.dumps(theirs))
    start = launch(tmp_path)
    # not passed to the peer: theirs never reaches it, so there is nothing to merge
    alone = json.loads(get(RoleSpec(provider="opencode")).env(start)[CONFIG_CONTENT])
    assert [p if isinstance(p, str) else p[0] for p in alone["plugin"]] == [plugin().as_uri()]
    passed = get(RoleSpec(provider="opencode", env=(CONFIG_CONTENT,)))
    merged = json.loads(passed.env(start)[CONFIG_CONTENT])
    assert merged["username"] == "me"
    assert merged["plugin"][0] == "their-plugin@1.0.0" and merged["plugin"][1][0] == \
        plugin().as_uri()
    monkeypatch.setenv(CONFIG_CONTENT, "{ // jsonc handoff cannot merge\n}")
    assert passed.env(start)[CONFIG_CONTENT] == "{ // jsonc handoff cannot merge\n}"


def test_opencode_state_folders_follow_its_xdg_variables(tmp_path: Path) -> None:
    provider = get(RoleSpec(provider="opencode"))
    home = tmp_path / "home"
    assert provider.state_dirs({"HOME": str(home)}) == [
        home / ".config" / "opencode", home / ".local" / "share" / "opencode",
        home / ".local" / "state" / "opencode", home / ".cache" / "opencode"]
    moved = provider.state_dirs({"HOME": str(home), "XDG_DATA_HOME": str(tmp_path / "data")})
    assert moved[1] == tmp_path / "data" / "opencode"


SCREENS = TESTS / "fixtures" / "screens" / "opencode"


def test_opencode_reads_its_input_box_beside_a_long_folder_name() -> None:
    """A worktree path too long for the box's agent line wraps onto the input rows (far
    right): it is no draft, and a draft typed beside it is read alone."""
    opencode = get(RoleSpec(provider="opencode"))
    ready = opencode.read((SCREENS / "ready-long-folder.txt").read_text(encoding="utf-8"))
    assert (ready.state, ready.draft) == ("ready", "")
    drafted = opencode.read((SCREENS / "draft-long-folder.txt").read_text(encoding="utf-8"))
    assert (drafted.state, drafted.draft) == ("ready", "a draft of my own")


def test_opencode_finds_a_sent_message_its_bubble_wrapped_inside_a_path() -> None:
    """opencode wraps a long message where the row is full, even within a path, beside its
    sidebar (seen with a queued nudge): it was taken; the same rows in the input box were not."""
    brief = "/tmp/pytest-of-root/pytest-35/test_a_ticket0/state/repo-b047ad5078/OC-2/brief-1.md"
    message = f"You ended your turn without filing your report. Read and follow {brief} now."
    side = " " * 20 + "Context"
    wrapped = [f"  ┃  You ended your turn without filing your report. Read and follow "
               f"/tmp/pytest-of-root/pytest-35/test_a_ticket0/state/repo-{side}",
               f"  ┃  b047ad5078/OC-2/brief-1.md now.{side}"]
    box = ["  ┃", "  ┃  Build auto · Claude Sonnet 4.6 Anthropic", "  ╹▀▀▀▀▀▀▀▀",
           "   ⬝■■■■■■⬝  esc interrupt"]
    sent = "\n".join(["  ┃", *wrapped, "  ┃   QUEUED", "", "  ┃", "  ┃", *box])
    from tests.e2e.test_setups import BLIND

    for spec in (RoleSpec(provider="opencode"), RoleSpec(provider="opencode", markers=BLIND)):
        assert get(spec).taken(sent, message), spec
        assert not get(spec).taken(sent, message.replace("OC-2", "OC-3")), spec
    drafted = "\n".join(["", "  ┃", *wrapped, *box])
    assert not get(RoleSpec(provider="opencode")).taken(drafted, message)


def test_a_role_whose_markers_replace_opencodes_box_is_read_by_them_alone() -> None:
    from tests.e2e.test_setups import BLIND

    blind = get(RoleSpec(provider="opencode", markers=BLIND))
    for name in ("ready", "ready-in-session", "draft", "busy"):
        reading = blind.read((SCREENS / f"{name}.txt").read_text(encoding="utf-8"))
        assert (reading.state, reading.draft) == ("starting", None), name


def test_doctor_warns_when_opencode_would_install_its_plugin_api_at_each_start(
        tmp_path: Path) -> None:
    provider = get(RoleSpec(provider="opencode"))
    env = {"HOME": str(tmp_path)}
    [warned] = provider.checks(tmp_path, env)
    assert warned.level == "WARN" and "@opencode-ai/plugin" in warned.detail
    (tmp_path / ".config" / "opencode" / "node_modules").mkdir(parents=True)
    assert provider.checks(tmp_path, env) == []


def test_opencode_launch_line(tmp_path: Path) -> None:
    start = launch(tmp_path, contract=False)
    opencode = get(RoleSpec(provider="opencode")).argv(start)
    assert opencode[1:3] == [str(start.worktree), "--auto"]
    assert opencode[-2:] == ["--prompt", f"Read and follow {start.brief}"]
    assert get(RoleSpec(provider="opencode")).env(start)["OPENCODE_DISABLE_AUTOUPDATE"] == "1"
