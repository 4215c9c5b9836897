"""Fixtures and helpers of the handoff.config tests (tests/test_config_*.py): the person's
config folder, a project folder, each one's configuration file written, and a refusal read."""

from __future__ import annotations

from pathlib import Path

import pytest

from handoff.config import REPO_CONFIG, load
from handoff.errors import UsageError


@pytest.fixture
def home(handoff_home: Path) -> Path:
    handoff_home.mkdir(parents=True, exist_ok=True)
    return handoff_home


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


def user_file(home: Path, text: str) -> Path:
    path = home / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def repo_file(project: Path, text: str) -> Path:
    path = project / REPO_CONFIG
    path.write_text(text, encoding="utf-8")
    return path


def refused(home: Path, project: Path, which: str, text: str) -> str:
    """The message load gives for text in the user's file or the repository's: a usage error
    (exit 2) that names the file."""
    path = user_file(home, text) if which == "user" else repo_file(project, text)
    with pytest.raises(UsageError) as caught:
        load(home, project)
    assert caught.value.exit_code == 2
    assert str(path) in caught.value.message
    return caught.value.message
