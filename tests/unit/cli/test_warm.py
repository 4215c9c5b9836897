"""handoff.cli.warm: the warm process itself (its lock, its socket, its pid file, how it
ends, when it stops serving), run as `python -m handoff.cli.warm` and as its serve loop. What a
command relayed to it sees is tests/unit/machinery/test_relay.py's."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from handoff.cli import warm
from handoff.machinery import relay


def test_a_command_of_another_user_is_never_served(tmp_path: Path) -> None:
    """SO_PEERCRED says who connected: this user, served; the check itself, over a real pair."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with ours, theirs:
        assert warm._same_user(ours)
    ours.close()
    assert not warm._same_user(ours), "a closed connection proves nobody"


def test_a_request_that_is_not_handoffs_is_refused() -> None:
    assert warm._length(b"12\nrest") == 12
    for head in (b"GET / HTTP/1.1\n", b"-1\n", str(relay.REQUEST_LIMIT + 1).encode() + b"\n"):
        with pytest.raises(ValueError, match="not a handoff relay request"):
            warm._length(head)


def test_stamp_names_every_file_and_sees_one_vanish(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("a\n", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text("b\n", encoding="utf-8")
    files = warm.code_files(tmp_path)
    assert [f.name for f in files] == ["a.py", "b.py"]
    before = warm.stamp(files)
    (tmp_path / "sub" / "b.py").unlink()
    assert warm.stamp(files) != before
