"""handoff.inputs: files read with a size limit and only as text, output clipped in bytes,
folders handoff must be able to create."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from handoff.errors import UsageError
from handoff.inputs import clip, need_folder, read_text


def test_a_text_file_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "plan.md"
    path.write_text("# Plan\n\ncafé ☕\n", encoding="utf-8")
    assert read_text(path, 100, "the plan") == "# Plan\n\ncafé ☕\n"


def test_exactly_the_limit_is_read_one_byte_more_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "plan.md"
    path.write_bytes(b"a" * 1024)
    assert len(read_text(path, 1024, "the plan")) == 1024
    path.write_bytes(b"a" * 1025)
    with pytest.raises(UsageError) as caught:
        read_text(path, 1024, "the plan")
    assert caught.value.exit_code == 2
    assert caught.value.message == f"the plan {path} is larger than 1 KiB"
    assert "at most 1 KiB" in caught.value.hint


def test_a_file_that_never_ends_or_never_opens_is_refused_at_once(tmp_path: Path) -> None:
    """A device never ends; a FIFO nobody writes to blocks its reader's open for ever."""
    fifo = tmp_path / "report.md"
    os.mkfifo(fifo)
    for path in (Path("/dev/zero"), fifo):
        started = time.monotonic()
        with pytest.raises(UsageError) as caught:
            read_text(path, 1024 * 1024, "the plan")
        assert caught.value.message == f"the plan {path} is not a regular file"
        assert "plain file" in (caught.value.hint or "")
        assert time.monotonic() - started < 5


def test_text_that_is_not_utf8_names_the_byte(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes("max_rounds: 2 # é\n".encode("latin-1"))
    with pytest.raises(UsageError) as caught:
        read_text(path, 1000, "the configuration file")
    assert caught.value.message == (f"the configuration file {path} is not UTF-8 text "
                                    "(byte 16: b'\\xe9')")
    assert "UTF-8" in caught.value.hint


def test_nul_bytes_mean_a_binary_file(tmp_path: Path) -> None:
    path = tmp_path / "plan.md"
    path.write_bytes(b"# plan\n\x00\x01\x02")
    with pytest.raises(UsageError, match="is a binary file"):
        read_text(path, 1000, "the plan")


@pytest.mark.parametrize("kind", ["missing", "folder"])
def test_a_path_that_cannot_be_read_is_a_usage_error(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "plan.md"
    if kind == "folder":
        path.mkdir()
    with pytest.raises(UsageError) as caught:
        read_text(path, 1000, "the plan")
    assert caught.value.message.startswith(f"cannot read the plan {path}: ") if kind == "missing" \
        else caught.value.message == f"the plan {path} is not a regular file"


def test_clip_keeps_short_text_whole() -> None:
    assert clip("short", 10) == "short"
    assert clip("é" * 5, 10) == "é" * 5  # 10 bytes: fits


def test_clip_counts_bytes_and_keeps_head_and_tail() -> None:
    text = "HEAD" + "é" * 1000 + "TAIL"
    clipped = clip(text, 100)
    assert clipped.startswith("HEAD") and clipped.endswith("TAIL")
    assert "[1908 bytes cut by handoff]" in clipped
    body = clipped.replace("[1908 bytes cut by handoff]", "")
    assert "\ufffd" not in body, "a character split by the cut is left out, not garbled"
    assert len(body.encode()) <= 100 + 20


@pytest.mark.parametrize("blocker", [".worktrees", ".worktrees/T-1"])
def test_need_folder_refuses_a_file_in_the_way(blocker: str, tmp_path: Path) -> None:
    if blocker != ".worktrees":
        (tmp_path / ".worktrees").mkdir()
    (tmp_path / blocker).write_text("notes\n", encoding="utf-8")
    with pytest.raises(UsageError) as caught:
        need_folder(tmp_path / ".worktrees" / "T-1", tmp_path, "for the ticket's worktrees")
    assert caught.value.message.startswith(f"{tmp_path / blocker} is a file")
    assert "move or rename" in caught.value.hint
    assert (tmp_path / blocker).read_text(encoding="utf-8") == "notes\n"


def test_need_folder_accepts_folders_and_paths_yet_to_be_made(tmp_path: Path) -> None:
    need_folder(tmp_path / ".worktrees" / "T-1", tmp_path, "for worktrees")
    (tmp_path / ".worktrees" / "T-1").mkdir(parents=True)
    need_folder(tmp_path / ".worktrees" / "T-1", tmp_path, "for worktrees")
