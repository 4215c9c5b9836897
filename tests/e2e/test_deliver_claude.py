"""Peers.deliver against the real Claude Code: a message is taken exactly once, a person's
draft is never submitted or pasted over, and nothing is ever typed into a dialog."""

from __future__ import annotations

from pathlib import Path

from handoff.machinery.peers import Peers, allowlisted_env
from handoff.providers import RoleSpec, get
from handoff.providers.base import Launch, Provider
from handoff.providers.screen import DIALOG, READY
from tests.conftest import wait_until
from tests.standins.anthropic import AnthropicStandIn
from tests.standins.homes import claude_home


def start(peers: Peers, claude: Path, repo: Path) -> Provider:
    provider = get(RoleSpec(provider="claude", binary=str(claude)))
    brief = peers.ticket_dir / "inbox" / "implementer" / "brief-1.md"  # never written
    env = allowlisted_env({}, provider.passthrough({}))
    peers.launch(provider, Launch("T-1", "implementer", repo, brief, peers.ticket_dir), env)
    return provider


def reading_state(peers: Peers, provider: Provider) -> str:
    return provider.read(peers.screen("implementer") or "").state


def test_a_message_is_taken_once_and_a_persons_draft_is_left_alone(
        peers: Peers, repo: Path, isolated: dict[str, str], claude: Path,
        anthropic: AnthropicStandIn) -> None:
    claude_home(Path(isolated["HOME"]), [repo])
    provider = start(peers, claude, repo)
    wait_until(lambda: provider.read(peers.screen("implementer") or "").turn_ended,
               timeout=60, what="claude to finish its first turn")
    pane = peers.pane("implementer")
    assert pane is not None
    peers.tmux.run("send-keys", "-t", pane.id, "-l", "my own half-typed thought")
    wait_until(lambda: provider.read(peers.screen("implementer") or "").draft,
               what="the draft on screen")

    message = "Read and follow /nowhere/brief-2.md"
    refused = peers.deliver(provider, "implementer", message, tries=1, wait=1.0)
    assert not refused and "draft sits in the peer's input line" in refused.why
    assert provider.read(peers.screen("implementer") or "").draft == \
        "my own half-typed thought", "the draft is untouched"
    assert message not in anthropic.turn_prompts()

    peers.tmux.run("send-keys", "-t", pane.id, "C-u")
    wait_until(lambda: provider.read(peers.screen("implementer") or "").draft == "",
               what="the draft cleared by its person")
    assert peers.deliver(provider, "implementer", message)
    assert peers.deliver(provider, "implementer", message), "already taken: not sent again"
    wait_until(lambda: reading_state(peers, provider) == READY and provider.read(
        peers.screen("implementer") or "").turn_ended, timeout=60, what="the turn to end")
    assert anthropic.turn_prompts().count(message) == 1


def test_nothing_is_typed_into_a_dialog(peers: Peers, repo: Path, isolated: dict[str, str],
                                        claude: Path, anthropic: AnthropicStandIn) -> None:
    claude_home(Path(isolated["HOME"]), [])  # the repo is not trusted: the trust screen
    provider = start(peers, claude, repo)
    wait_until(lambda: reading_state(peers, provider) == DIALOG, timeout=60,
               what="the trust screen")
    before = peers.screen("implementer")
    refused = peers.deliver(provider, "implementer", "Read and follow /x/brief-2.md", tries=1)
    assert not refused and "shows a dialog" in refused.why
    assert peers.screen("implementer") == before
    assert anthropic.turn_prompts() == []
