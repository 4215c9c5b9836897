"""handoff.record.home: where handoff keeps its state, as every relayed command asks it."""

from __future__ import annotations

from pathlib import Path

import pytest

from handoff.record.home import state_home_path
from handoff.record.store import state_home


def test_handoff_home_wins_resolved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = tmp_path / "real-home"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    monkeypatch.setenv("HANDOFF_HOME", str(tmp_path / "link"))
    assert state_home_path() == str(real.resolve())
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("HANDOFF_HOME", "~/link")
    assert state_home_path() == str(real.resolve()), "~ is the user's home"


def test_else_the_xdg_state_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HANDOFF_HOME")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert state_home_path() == str((tmp_path / "xdg" / "handoff").resolve())


@pytest.mark.parametrize("xdg", ["", "relative/state"])
def test_an_empty_or_relative_xdg_folder_is_ignored(xdg: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The XDG spec: a relative value is invalid; never a folder inside the repo one runs in."""
    monkeypatch.delenv("HANDOFF_HOME")
    monkeypatch.setenv("XDG_STATE_HOME", xdg)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert state_home_path() == str((tmp_path / ".local" / "state" / "handoff").resolve())


def test_it_is_the_stores_state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert state_home_path() == str(state_home())
    monkeypatch.delenv("HANDOFF_HOME")
    assert state_home_path() == str(state_home())
