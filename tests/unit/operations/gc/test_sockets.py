"""handoff.operations.gc.sockets: the socket files of handoff's tmux servers that nothing
listens on any more go, under tmux's own start lock; a live one stays."""

from __future__ import annotations

import fcntl
import os
import socket as socketlib
from pathlib import Path

from handoff.operations.gc.found import Options, Record
from handoff.operations.gc.sockets import socket_leftovers, tmux_dir
from handoff.record.ticket import State, TicketDir


def stale_socket(name: str) -> Path:
    """A socket file tmux would have left: bound once, its listener gone."""
    folder = tmux_dir()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / name
    with socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM) as bound:
        bound.bind(str(path))
    return path


def test_a_socket_file_nothing_listens_on_is_removed_unless_dry_run(socket: str) -> None:
    path = stale_socket(socket)
    [named] = socket_leftovers([], Options(dry_run=True))
    assert (named.kind, named.path, named.removable, named.removed) == \
        ("socket", str(path), True, False)
    assert path.exists()
    [removed] = socket_leftovers([], Options())
    assert removed.removed and not path.exists()
    assert not path.with_name(f"{socket}.lock").exists(), "the lock file gc made goes too"


def test_a_socket_a_server_listens_on_or_a_plain_file_is_not_touched(socket: str) -> None:
    path = tmux_dir() / socket
    tmux_dir().mkdir(mode=0o700, parents=True, exist_ok=True)
    with socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM) as server:
        server.bind(str(path))
        server.listen()
        assert socket_leftovers([], Options()) == []
    path.unlink()
    path.write_text("not a socket\n")
    assert socket_leftovers([], Options()) == [] and path.read_text() == "not a socket\n"


def test_a_socket_a_tmux_client_is_starting_a_server_on_is_kept(socket: str) -> None:
    """A client holds <socket>.lock while it starts a server there: gc must not unlink the
    socket under it."""
    path = stale_socket(socket)
    lock = path.with_name(f"{socket}.lock")
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        [kept] = socket_leftovers([], Options())
    assert not kept.removable and not kept.removed and "starting on it" in kept.why
    assert path.exists() and lock.exists(), "a lock file the client made stays"


def test_the_sockets_records_name_are_looked_at_too(handoff_home: Path) -> None:
    other = f"handoff-gc-{os.getpid()}-records"
    path = stale_socket(other)
    try:
        assert socket_leftovers([], Options(dry_run=True)) == []
        tdir = TicketDir(handoff_home / "repo-0123456789" / "T-1")
        tdir.path.mkdir(parents=True)
        record = Record(tdir, State(ticket="T-1", repo="", repo_key="repo-0123456789", socket=other), None)
        assert [i.path for i in socket_leftovers([record], Options(dry_run=True))] == [str(path)]
    finally:
        path.unlink(missing_ok=True)
