"""Fixtures for tickets run by the real coding CLIs against the stand-in model servers.

Each test gets the pinned CLI (installed into the user cache on first use), a stand-in server
on 127.0.0.1, and the CLI's own state pre-written in the test's private HOME (or CODEX_HOME):
nothing reaches the user's ~/.claude.json or ~/.codex.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.standins import install
from tests.standins.anthropic import AnthropicStandIn
from tests.standins.homes import CLAUDE_TOKEN, CODEX_KEY, codex_home
from tests.standins.openai import OpenAIStandIn


@pytest.fixture
def anthropic() -> Iterator[AnthropicStandIn]:
    with AnthropicStandIn() as api:
        yield api


@pytest.fixture
def openai() -> Iterator[OpenAIStandIn]:
    with OpenAIStandIn() as api:
        yield api


@pytest.fixture
def claude(isolated: dict[str, str], anthropic: AnthropicStandIn,
           monkeypatch: pytest.MonkeyPatch) -> Path:
    """The pinned claude, pointed at the stand-in; its HOME is the test's private one."""
    path = install.binary("claude")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", anthropic.base_url)
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", CLAUDE_TOKEN)
    monkeypatch.setenv("IS_SANDBOX", "1")  # CI runs as root: bypass mode needs it there
    return path


@pytest.fixture
def codex(isolated: dict[str, str], openai: OpenAIStandIn, monkeypatch: pytest.MonkeyPatch,
          tmp_path: Path) -> Path:
    """The pinned codex with a private CODEX_HOME whose model provider is the stand-in."""
    path = install.binary("codex")
    home = tmp_path / "codex-home"
    codex_home(home, openai.base_url, [])
    monkeypatch.setenv("CODEX_HOME", str(home))
    monkeypatch.setenv("OPENAI_API_KEY", CODEX_KEY)
    return path


def trust_codex(openai: OpenAIStandIn, repo: Path) -> None:
    """Rewrite the private config.toml with repo trusted (Codex reads trust only from there)."""
    import os

    codex_home(Path(os.environ["CODEX_HOME"]), openai.base_url, [repo])


def configure(home: Path, roles: dict[str, dict[str, object]], **more: object) -> None:
    """The user-level config.yaml of the test's HANDOFF_HOME."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump({"roles": roles, **more}),
                                      encoding="utf-8")


def role(provider: str, binary: Path, **more: object) -> dict[str, object]:
    return {"provider": provider, "binary": str(binary), **more}


def stand_in_errors(*apis: AnthropicStandIn | OpenAIStandIn) -> str:
    errors = [e for api in apis if isinstance(api, AnthropicStandIn) for e in api.errors]
    return "\nstand-in errors: " + "; ".join(errors) if errors else ""
