"""handoff.record.store: ticket ids, where state lives, repository keys and atomic writes."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from handoff.errors import UsageError
from handoff.record.store import (
    atomic_write,
    atomic_write_json,
    keep_private,
    private_dir,
    repo_key,
    state_home,
    validate_ticket_id,
)

# ---- validate_ticket_id ------------------------------------------------------------------------


@pytest.mark.parametrize("ticket", [
    "PROJ-123", "a", "7", "A1", "x.y_z-1", "release.2024.05", "T_1", "a" * 64, "Z" + "9" * 63,
])
def test_good_ticket_ids_are_returned_unchanged(ticket: str) -> None:
    assert validate_ticket_id(ticket) == ticket


@pytest.mark.parametrize("ticket", [
    "",
    "../x",
    "..",
    ".",
    "a/b",
    "/abs",
    "x/",
    "a\\b",
    "-x",
    ".x",
    "_x",
    "a" * 65,
    "a..b",
    "x..",
    "x\n",
    "x\ny",
    "PROJ-1\n",
    "\nPROJ-1",
    "a b",
    " a",
    "a\tb",
    "nul\x00",
    "tïcket",
    "票-1",
    "PROJ\u20131",  # en dash
    "ＰＲＯＪ-1",  # fullwidth letters
    "a;rm -rf",
    "$(x)",
])
def test_hostile_ticket_ids_are_refused(ticket: str) -> None:
    with pytest.raises(UsageError) as caught:
        validate_ticket_id(ticket)
    assert caught.value.exit_code == 2
    assert repr(ticket) in caught.value.message
    assert caught.value.hint


# ---- state_home --------------------------------------------------------------------------------


def test_state_home_is_handoff_home_when_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HANDOFF_HOME", str(tmp_path / "custom"))
    assert state_home() == (tmp_path / "custom").resolve()


def test_state_home_expands_a_tilde_in_handoff_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "someone"))
    monkeypatch.setenv("HANDOFF_HOME", "~/handoff-state")
    assert state_home() == (tmp_path / "someone" / "handoff-state").resolve()


def test_handoff_home_wins_over_xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HANDOFF_HOME", str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert state_home() == (tmp_path / "explicit").resolve()


@pytest.mark.parametrize("unset", ["delete", "empty"])
def test_state_home_falls_back_to_xdg_state_home(unset: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    if unset == "delete":
        monkeypatch.delenv("HANDOFF_HOME")
    else:
        monkeypatch.setenv("HANDOFF_HOME", "")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert state_home() == (tmp_path / "xdg" / "handoff").resolve()


@pytest.mark.parametrize("xdg", [None, ""])
def test_state_home_defaults_to_local_state_under_home(xdg: str | None, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HANDOFF_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    if xdg is None:
        monkeypatch.delenv("XDG_STATE_HOME")
    else:
        monkeypatch.setenv("XDG_STATE_HOME", xdg)
    assert state_home() == (tmp_path / "me" / ".local" / "state" / "handoff").resolve()


def test_state_home_is_absolute(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HANDOFF_HOME")
    assert state_home().is_absolute()


def test_relative_xdg_state_home_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HANDOFF_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    monkeypatch.setenv("XDG_STATE_HOME", "relative/state")
    work = tmp_path / "some-repo"
    work.mkdir()
    monkeypatch.chdir(work)
    home = state_home()
    assert not home.is_relative_to(work)
    assert home == (tmp_path / "me" / ".local" / "state" / "handoff").resolve()


# ---- repo_key ----------------------------------------------------------------------------------

SAFE_KEY = re.compile(r"[A-Za-z0-9._-]+")


def test_repo_key_is_stable(tmp_path: Path) -> None:
    common, top = tmp_path / "proj" / ".git", tmp_path / "proj"
    common.mkdir(parents=True)
    first = repo_key(common, top)
    assert repo_key(common, top) == first
    # the same folder spelt differently is the same repository
    assert repo_key(tmp_path / "proj" / "sub" / ".." / ".git", top) == first


def test_repo_key_starts_with_the_readable_repo_name(tmp_path: Path) -> None:
    key = repo_key(tmp_path / "my-project" / ".git", tmp_path / "my-project")
    assert key.startswith("my-project-")
    assert key != "my-project-"


def test_repos_with_the_same_name_get_distinct_keys(tmp_path: Path) -> None:
    one = repo_key(tmp_path / "a" / "proj" / ".git", tmp_path / "a" / "proj")
    two = repo_key(tmp_path / "b" / "proj" / ".git", tmp_path / "b" / "proj")
    assert one != two
    assert one.startswith("proj-") and two.startswith("proj-")


def test_many_repos_all_get_distinct_keys(tmp_path: Path) -> None:
    keys = {repo_key(tmp_path / f"r{i}" / ".git", tmp_path / "same") for i in range(200)}
    assert len(keys) == 200


@pytest.mark.parametrize("name", ["my project", "naïve", "a/../b", "weird:name*?", ""])
def test_repo_key_is_a_safe_folder_name(name: str, tmp_path: Path) -> None:
    top = tmp_path / name if name else Path("/")
    key = repo_key(tmp_path / "x" / ".git", top)
    assert SAFE_KEY.fullmatch(key), key
    assert key not in (".", "..")
    assert "/" not in key


# ---- atomic_write ------------------------------------------------------------------------------


def test_atomic_write_creates_parents_and_writes(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "file.md"
    atomic_write(target, "hello\nwörld\n")
    assert target.read_text(encoding="utf-8") == "hello\nwörld\n"


def test_atomic_write_replaces_content_and_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "dir" / "state.json"
    for i in range(5):
        atomic_write(target, f"version {i}\n" * (i + 1))
    assert target.read_text(encoding="utf-8") == "version 4\n" * 5
    assert [p.name for p in target.parent.iterdir()] == ["state.json"]


def test_atomic_write_replaces_a_longer_file_completely(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    atomic_write(target, "x" * 10_000)
    atomic_write(target, "short")
    assert target.read_text(encoding="utf-8") == "short"


def test_a_reader_of_the_old_file_never_sees_a_torn_one(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    atomic_write(target, "old content\n")
    with target.open(encoding="utf-8") as reader:
        atomic_write(target, "new content, longer than before\n")
        # the open handle still sees the whole old file: the new one was renamed into place
        assert reader.read() == "old content\n"
    assert target.read_text(encoding="utf-8") == "new content, longer than before\n"


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "out" / "f.txt"
    atomic_write(target, "old\n")
    with pytest.raises(UnicodeEncodeError):
        atomic_write(target, "half written \ud800 never encodable")
    assert target.read_text(encoding="utf-8") == "old\n"
    assert [p.name for p in target.parent.iterdir()] == ["f.txt"]


def test_atomic_write_json_round_trips(tmp_path: Path) -> None:
    target = tmp_path / "out" / "state.json"
    data = {"ticket": "PROJ-1", "round": 2, "nested": {"b": [1, 2], "a": "ü"}}
    atomic_write_json(target, data)
    text = target.read_text(encoding="utf-8")
    assert json.loads(text) == data
    assert text.endswith("\n")
    assert [p.name for p in target.parent.iterdir()] == ["state.json"]


# ---- private files and folders, whatever the umask ----------------------------------------------


@pytest.fixture
def loose_umask() -> Iterator[None]:
    """The usual umask 022, under which files would be world-readable; restored afterwards."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def test_atomic_write_makes_private_files_and_folders(tmp_path: Path, loose_umask: None) -> None:
    target = tmp_path / "state" / "repo-1" / "T-1" / "answers" / "answer-1.md"
    (tmp_path / "state").mkdir()
    atomic_write(target, "the answer\n")
    assert target.stat().st_mode & 0o777 == 0o600
    for folder in (target.parent, target.parent.parent, tmp_path / "state" / "repo-1"):
        assert folder.stat().st_mode & 0o777 == 0o700, folder
    assert (tmp_path / "state").stat().st_mode & 0o777 == 0o755, "an existing folder is left"


def test_private_dir_creates_missing_parents_private_and_tightens_the_leaf(
        tmp_path: Path, loose_umask: None) -> None:
    leaf = tmp_path / "a" / "b" / "c"
    assert private_dir(leaf) == leaf
    assert [p.stat().st_mode & 0o777 for p in (leaf.parent.parent, leaf.parent, leaf)] == \
        [0o700] * 3
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    private_dir(loose)
    assert loose.stat().st_mode & 0o777 == 0o700


def test_keep_private_makes_the_umask_077_and_keeps_a_stricter_one(loose_umask: None) -> None:
    keep_private()
    assert os.umask(0o277) == 0o077
    keep_private()
    assert os.umask(0o022) == 0o277
