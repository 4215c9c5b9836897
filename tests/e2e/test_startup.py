"""Gemini CLI and opencode, the real packages, launched the way handoff launches them: the
brief's prompt is taken with no start-up screen in the way, the screen reads as it should, and
nothing they start outlives handoff's stop (Gemini's node processes ignore the pane's hangup).

There is no stand-in model server for these two: the API points at a closed port on
127.0.0.1, so each reaches the point where it tries to answer.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

from handoff.machinery.peers import Peers, allowlisted_env
from handoff.machinery.reaper import marked, marker
from handoff.providers import RoleSpec, get
from handoff.providers.base import Launch, Provider
from handoff.providers.screen import BLOCKED, BUSY, DIALOG
from tests.conftest import wait_until
from tests.standins import install


def closed_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def launch(peers: Peers, provider: Provider, repo: Path, extra: dict[str, str]) -> str:
    brief = peers.ticket_dir / "inbox" / "implementer" / "brief-1.md"
    brief.parent.mkdir(parents=True, exist_ok=True)
    brief.write_text("# brief\n")
    env = allowlisted_env({"HANDOFF_TICKET_DIR": str(peers.ticket_dir), **extra},
                          provider.passthrough({}))
    peers.launch(provider, Launch("T-1", "implementer", repo, brief, peers.ticket_dir), env)
    return f"Read and follow {brief}"


def stopped_cleanly(peers: Peers) -> None:
    mark = marker(peers.ticket_dir, "implementer")
    assert marked(mark), "the CLI runs, marked as this ticket's implementer"
    assert peers.stop() is True
    assert marked(mark) == [], "nothing the CLI started outlives stop"


def gemini_home(home: Path) -> None:
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(
        {"security": {"auth": {"selectedType": "gemini-api-key"}}}))


def test_gemini_takes_its_brief_as_the_prompt_and_is_ended_by_stop(
        peers: Peers, repo: Path, isolated: dict[str, str]) -> None:
    gemini_home(Path(isolated["HOME"]))
    provider = get(RoleSpec(provider="gemini", binary=str(install.binary("gemini"))))
    message = launch(peers, provider, repo, {"GEMINI_API_KEY": "standin",
                                             "GOOGLE_GEMINI_BASE_URL": closed_port()})

    def working() -> bool:
        screen = peers.screen("implementer") or ""
        reading = provider.read(screen)
        assert reading.state != DIALOG, reading.says()
        return provider.taken(screen, message) and reading.state in (BUSY, BLOCKED)
    wait_until(working, timeout=90, what="gemini to take the brief and work on it")
    assert "YOLO" in (peers.screen("implementer") or "")
    stopped_cleanly(peers)


def test_gemini_without_a_chosen_login_shows_its_auth_screen_which_handoff_never_answers(
        peers: Peers, repo: Path) -> None:
    provider = get(RoleSpec(provider="gemini", binary=str(install.binary("gemini"))))
    launch(peers, provider, repo, {"GEMINI_API_KEY": "standin"})

    def dialog() -> str | None:
        reading = provider.read(peers.screen("implementer") or "")
        return reading.dialog.name if reading.dialog else None
    assert wait_until(dialog, timeout=90, what="gemini's auth screen") == "auth"
    shown = provider.read(peers.screen("implementer") or "").dialog
    assert shown is not None and shown.keys == () and "settings.json" in shown.fix
    stopped_cleanly(peers)


def test_opencode_takes_its_brief_as_the_prompt_and_is_ended_by_stop(
        peers: Peers, repo: Path) -> None:
    provider = get(RoleSpec(provider="opencode", binary=str(install.binary("opencode")),
                            env=("OPENCODE_DISABLE_DEFAULT_PLUGINS",
                                 "OPENCODE_DISABLE_MODELS_FETCH")))
    # no plugin download from the npm registry and no models list from the network
    message = launch(peers, provider, repo, {
        "ANTHROPIC_API_KEY": "standin", "ANTHROPIC_BASE_URL": closed_port() + "/v1",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1"})

    def working() -> bool:
        screen = peers.screen("implementer") or ""
        return provider.taken(screen, message) and provider.read(screen).state in (BUSY,
                                                                                   BLOCKED)
    wait_until(working, timeout=90, what="opencode to take the brief and work on it")
    wait_until(lambda: provider.read(peers.screen("implementer") or "").state == BLOCKED,
               timeout=60, what="opencode to show it cannot reach the API")
    assert "Build auto" in (peers.screen("implementer") or ""), "--auto took effect"
    stopped_cleanly(peers)
