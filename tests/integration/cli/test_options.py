"""handoff.cli.options: what a TAB completes TICKET, ROLE and a window to, read from the ticket
folders and the configuration here, and never failing. (The whole chain through bash is
tests/project/test_cli_conventions.py's.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from handoff.cli.options import roles, windows
from tests.conftest import git


def test_roles_are_the_teams_of_the_configuration_here(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (repo / ".handoff.yaml").write_text(
        "roles:\n  security:\n    provider: scripted\n    kind: reviewer\n", encoding="utf-8")
    git(repo, "add", ".handoff.yaml")
    git(repo, "commit", "-q", "-m", "team")
    monkeypatch.chdir(repo / "tests")
    assert roles("") == ["implementer", "reviewer", "security"]
    assert roles("s") == ["security"]
    assert windows("") == ["orchestrator", "implementer", "reviewer", "security"]
    assert windows("o") == ["orchestrator"]


def test_roles_fall_back_on_the_two_of_every_ticket(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (repo / ".handoff.yaml").write_text("roles: [not, a, mapping\n", encoding="utf-8")
    monkeypatch.chdir(repo)
    assert roles("") == ["implementer", "reviewer"], "a broken configuration"
    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.chdir(plain)
    assert roles("rev") == ["reviewer"], "no repository here"
