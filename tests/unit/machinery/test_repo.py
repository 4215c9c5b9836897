"""handoff.machinery.repo: finding the repository, resolving revisions, diffs and info/exclude."""

from __future__ import annotations

from pathlib import Path

import pytest

from handoff.errors import NotFound, UsageError
from handoff.machinery.proc import GIT_TIMEOUT, TIMEOUT_VARIABLE, git_timeout
from handoff.machinery.repo import Repo


def test_non_repo_folder_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    with pytest.raises(UsageError) as info:
        Repo.at(plain)
    assert str(plain) in info.value.message
    assert "--repo" in info.value.hint


def test_missing_folder_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        Repo.at(tmp_path / "nowhere")


def test_git_timeout_defaults_and_follows_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TIMEOUT_VARIABLE, raising=False)
    assert git_timeout() == GIT_TIMEOUT
    monkeypatch.setenv(TIMEOUT_VARIABLE, "7.5")
    assert git_timeout() == 7.5
