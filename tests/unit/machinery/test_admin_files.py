"""handoff.machinery.admin_files: the small files a peer may have written (a `.git` file, an
admin folder's `gitdir`, `HEAD`, `config.worktree`) read as data: no link followed, no FIFO
waited on, no more than a pointer's worth read; a path they name compared, never followed."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from handoff.machinery.admin_files import (
    POINTER_LIMIT,
    digest_of,
    read_pointer,
    real_dir,
    same_path,
)


def test_a_pointer_is_read_only_from_a_small_regular_file(tmp_path: Path) -> None:
    pointer = tmp_path / "gitdir"
    pointer.write_text("gitdir: /repo/.git/worktrees/qa\n")
    assert read_pointer(pointer) == "gitdir: /repo/.git/worktrees/qa"
    assert read_pointer(tmp_path / "missing") is None
    link = tmp_path / "link"
    link.symlink_to(pointer)
    assert read_pointer(link) is None, "a link is never followed"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert read_pointer(fifo) is None, "a FIFO is neither waited on nor read"
    assert read_pointer(tmp_path) is None, "a folder"
    pointer.write_bytes(b"x" * POINTER_LIMIT)
    assert read_pointer(pointer) == "x" * POINTER_LIMIT
    pointer.write_bytes(b"x" * (POINTER_LIMIT + 1))
    assert read_pointer(pointer) is None, "longer than any pointer git writes"
    pointer.write_bytes(b"gitdir: \xff\xfe")
    assert read_pointer(pointer) is None, "not UTF-8"


def test_a_digest_is_of_a_regular_file_alone(tmp_path: Path) -> None:
    config = tmp_path / "config.worktree"
    assert digest_of(config) == "", "none"
    config.write_bytes(b"")
    assert digest_of(config) == "", "an empty one is the same to git as none"
    config.write_bytes(b"[core]\n\thooksPath = /tmp/x\n")
    assert digest_of(config) == hashlib.sha256(b"[core]\n\thooksPath = /tmp/x\n").hexdigest()
    link = tmp_path / "link"
    link.symlink_to(config)
    assert digest_of(link) == "unreadable"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert digest_of(fifo) == "unreadable"


def test_a_real_folder_is_no_link_to_one(tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    (tmp_path / "link").symlink_to(folder, target_is_directory=True)
    (tmp_path / "file").write_text("")
    assert real_dir(folder)
    assert not real_dir(tmp_path / "link")
    assert not real_dir(tmp_path / "file")
    assert not real_dir(tmp_path / "missing")


def test_a_named_path_is_the_same_as_written_or_resolved(tmp_path: Path) -> None:
    real = tmp_path / "real" / ".git"
    real.mkdir(parents=True)
    (tmp_path / "through").symlink_to(tmp_path / "real", target_is_directory=True)
    assert same_path(str(real), real)
    assert same_path(f"{tmp_path}/real/sub/../.git/", real), "normalised as written"
    assert same_path(str(tmp_path / "through" / ".git"), real), "git's real path of a link"
    assert same_path(str(real), tmp_path / "through" / ".git")
    assert not same_path("", real)
    assert not same_path(str(tmp_path / "other" / ".git"), real)
