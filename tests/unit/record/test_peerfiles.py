"""handoff.record.peerfiles: paths beneath a folder a peer can write are read, copied, listed and
removed without following a link out of it, without blocking, and within a bound. Real files,
links, FIFOs and sockets in the test's own folder; `outside` stands for the person's secrets."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from handoff.errors import HandoffError
from handoff.record import peerfiles
from handoff.record.peerfiles import Gone, Refused

SECRET = b"-----BEGIN OPENSSH PRIVATE KEY-----\nthe person's key\n"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A peer's folder with a plain file and a folder in it."""
    folder = tmp_path / "peer"
    (folder / "projects" / "w").mkdir(parents=True)
    (folder / "projects" / "w" / "session.jsonl").write_bytes(b'{"ok": 1}\n')
    return folder


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """What the peer must not reach through handoff: a key in a folder beside its own."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "id_ed25519").write_bytes(SECRET)
    (folder / "session.jsonl").write_bytes(SECRET)
    return folder


@pytest.fixture
def listening(root: Path) -> Iterator[Path]:
    path = root / "projects" / "w" / "sock.jsonl"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        yield path


def refused(call: Callable[[], object], *words: str) -> Refused:
    """call's Refused (a HandoffError with a hint), whose message holds every word."""
    with pytest.raises(Refused) as raised:
        call()
    assert isinstance(raised.value, HandoffError)
    for word in words:
        assert word in raised.value.message, raised.value.message
    return raised.value


def bounded(call: Callable[[], object], fifo: Path) -> object:
    """call's result or error, run where a blocking open of fifo cannot hang the test: after
    5 s the FIFO is opened for writing, which frees a reader stuck in open(), and the test
    fails."""
    result: list[object] = []

    def run() -> None:
        try:
            result.append(call())
        except Exception as exc:
            result.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(5)
    if worker.is_alive():
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        worker.join(5)
        pytest.fail(f"blocked on the FIFO {fifo}")
    return result[0]


# ---- reading -------------------------------------------------------------------------------

def test_a_plain_file_beneath_the_root_is_read_whole(root: Path) -> None:
    path = root / "projects" / "w" / "session.jsonl"
    assert peerfiles.read_bytes(root, path, 100) == b'{"ok": 1}\n'
    assert peerfiles.read_bytes(root, Path("projects/w/session.jsonl"), 100) == b'{"ok": 1}\n', \
        "a relative path is taken beneath the root"


def test_the_root_itself_may_be_a_link(root: Path, tmp_path: Path) -> None:
    """The caller's folder is trusted as named (a person's ~/.claude may be a link into their
    dotfiles); only what lies below it is not followed."""
    alias = tmp_path / "alias"
    alias.symlink_to(root)
    assert peerfiles.read_bytes(alias, alias / "projects" / "w" / "session.jsonl", 100)


def test_a_link_as_the_last_component_is_not_followed(root: Path, outside: Path) -> None:
    log = root / "projects" / "w" / "session.jsonl"
    log.unlink()
    log.symlink_to(outside / "id_ed25519")
    error = refused(lambda: peerfiles.read_bytes(root, log, 1000), str(log), "symbolic link")
    assert error.hint and error.path == log
    refused(lambda: peerfiles.open_file(root, log), "symbolic link")


def test_a_link_as_a_middle_component_is_not_followed(root: Path, outside: Path) -> None:
    """The O_NOFOLLOW of the last component alone (what sessions.py had) still follows this."""
    projects = root / "projects"
    for child in (projects / "w" / "session.jsonl", projects / "w"):
        child.unlink() if child.is_file() else child.rmdir()
    projects.rmdir()
    projects.symlink_to(outside)
    assert (projects / "session.jsonl").read_bytes() == SECRET, "the path does lead to it"
    refused(lambda: peerfiles.read_bytes(root, projects / "session.jsonl", 1000),
            str(projects), "symbolic link")
    nested = root / "deep"
    nested.mkdir()
    (nested / "w").symlink_to(outside)
    refused(lambda: peerfiles.read_bytes(root, nested / "w" / "id_ed25519", 1000),
            str(nested / "w"), "symbolic link")


def test_a_path_that_leaves_the_root_is_refused_by_its_name(root: Path, outside: Path) -> None:
    refused(lambda: peerfiles.read_bytes(root, root / ".." / "outside" / "id_ed25519", 1000),
            "'..'")
    refused(lambda: peerfiles.read_bytes(root, outside / "id_ed25519", 1000), "not beneath")
    refused(lambda: peerfiles.read_bytes(root, root, 1000), "itself")


def test_a_fifo_is_refused_at_once(root: Path) -> None:
    fifo = root / "projects" / "w" / "stop.json"
    os.mkfifo(fifo)
    found = bounded(lambda: peerfiles.read_bytes(root, fifo, 1000), fifo)
    assert isinstance(found, Refused) and "a FIFO" in found.message, found
    assert fifo.exists(), "left where it was"


def test_a_socket_a_folder_and_a_device_are_refused(root: Path, listening: Path) -> None:
    refused(lambda: peerfiles.read_bytes(root, listening, 1000), "a socket")
    refused(lambda: peerfiles.read_bytes(root, root / "projects" / "w", 1000), "a folder")
    refused(lambda: peerfiles.read_bytes(Path("/"), Path("/dev/null"), 1000), "a device")


def test_a_hard_link_is_refused(root: Path) -> None:
    """Another name of a file: it may be a file outside the peer's reach (unfenced peers)."""
    original = root / "projects" / "w" / "session.jsonl"
    os.link(original, root / "projects" / "w" / "other.jsonl")
    refused(lambda: peerfiles.read_bytes(root, original, 1000), "2 names")


def test_a_file_over_the_limit_is_refused_and_one_at_it_read(root: Path) -> None:
    path = root / "projects" / "w" / "session.jsonl"
    size = path.stat().st_size
    assert len(peerfiles.read_bytes(root, path, size)) == size
    refused(lambda: peerfiles.read_bytes(root, path, size - 1), f"more than {size - 1} bytes")
    sparse = root / "sparse.jsonl"
    with sparse.open("wb") as handle:
        handle.truncate(1 << 40)  # a terabyte, on no disk
    refused(lambda: peerfiles.read_bytes(root, sparse, 1 << 20), "more than")


def test_what_is_not_there_is_gone(root: Path) -> None:
    with pytest.raises(Gone):
        peerfiles.read_bytes(root, root / "projects" / "w" / "missing.jsonl", 10)
    with pytest.raises(Gone):
        peerfiles.read_bytes(root, root / "nowhere" / "x.jsonl", 10)
    with pytest.raises(Gone):
        peerfiles.read_bytes(root / "none", root / "none" / "x.jsonl", 10)


# ---- copying -------------------------------------------------------------------------------

def test_a_copy_is_whole_private_and_leaves_no_staging_file(root: Path, tmp_path: Path) -> None:
    dest = tmp_path / "ticket" / "transcripts" / "reviewer-1.session.jsonl"
    copied = peerfiles.copy_out(root, root / "projects" / "w" / "session.jsonl", dest, 100)
    assert copied == 10 and dest.read_bytes() == b'{"ok": 1}\n'
    assert dest.stat().st_mode & 0o777 == 0o600
    assert dest.parent.stat().st_mode & 0o777 == 0o700, "a folder it makes is the user's alone"
    assert [p.name for p in dest.parent.iterdir()] == [dest.name]


def test_a_link_is_not_copied_and_nothing_is_written(root: Path, outside: Path,
                                                     tmp_path: Path) -> None:
    log = root / "projects" / "w" / "session.jsonl"
    log.unlink()
    log.symlink_to(outside / "id_ed25519")
    dest = tmp_path / "transcripts" / "reviewer-1.session.jsonl"
    refused(lambda: peerfiles.copy_out(root, log, dest, 1 << 20), "symbolic link")
    assert not dest.exists() and (outside / "id_ed25519").read_bytes() == SECRET


def test_a_copy_over_the_limit_keeps_the_old_file(root: Path, tmp_path: Path) -> None:
    dest = tmp_path / "kept.jsonl"
    dest.write_bytes(b"before")
    refused(lambda: peerfiles.copy_out(root, root / "projects" / "w" / "session.jsonl", dest, 5),
            "more than 5 bytes")
    assert dest.read_bytes() == b"before"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_link_at_the_destination_is_replaced_not_written_through(root: Path, outside: Path,
                                                                    tmp_path: Path) -> None:
    dest = tmp_path / "kept.jsonl"
    dest.symlink_to(outside / "id_ed25519")
    peerfiles.copy_out(root, root / "projects" / "w" / "session.jsonl", dest, 100)
    assert not dest.is_symlink() and dest.read_bytes() == b'{"ok": 1}\n'
    assert (outside / "id_ed25519").read_bytes() == SECRET


# ---- listing -------------------------------------------------------------------------------

def test_a_listing_holds_regular_files_only_and_opens_none(root: Path, outside: Path,
                                                          listening: Path) -> None:
    folder = root / "projects" / "w"
    os.mkfifo(folder / "fifo.json")
    (folder / "link.json").symlink_to(outside / "id_ed25519")
    (folder / "sub").mkdir()
    found = bounded(lambda: peerfiles.files(root, folder), folder / "fifo.json")
    assert isinstance(found, list)
    assert [(e.name, e.path, e.stat.st_size) for e in found] == [
        ("session.jsonl", folder / "session.jsonl", 10)]
    assert [e.name for e in peerfiles.files(folder, folder)] == ["session.jsonl"], \
        "the root itself may be listed"


def test_a_listing_through_a_link_is_refused_and_bounded(root: Path, outside: Path) -> None:
    (root / "elsewhere").symlink_to(outside)
    refused(lambda: peerfiles.files(root, root / "elsewhere"), "symbolic link")
    flood = root / "flood"
    flood.mkdir()
    for i in range(50):
        (flood / f"{i}.json").write_bytes(b"{}")
    assert len(peerfiles.files(root, flood, limit=20)) == 20
    with pytest.raises(Gone):
        peerfiles.files(root, root / "none")


# ---- removing ------------------------------------------------------------------------------

def test_a_tree_with_links_inside_is_removed_and_their_targets_survive(
        root: Path, outside: Path, listening: Path) -> None:
    tree = root / "projects"
    (tree / "w" / "to-file").symlink_to(outside / "id_ed25519")
    (tree / "w" / "to-folder").symlink_to(outside)
    (tree / "w" / "deep" / "er").mkdir(parents=True)
    (tree / "w" / "deep" / "er" / "link").symlink_to(outside)
    os.mkfifo(tree / "w" / "deep" / "fifo")
    assert peerfiles.remove_tree(root, tree) is True
    assert not tree.exists() and not tree.is_symlink()
    assert sorted(p.name for p in outside.iterdir()) == ["id_ed25519", "session.jsonl"]
    assert (outside / "id_ed25519").read_bytes() == SECRET
    assert peerfiles.remove_tree(root, tree) is False, "nothing left to remove"


def test_a_link_as_the_path_to_remove_goes_as_a_link(root: Path, outside: Path) -> None:
    link = root / "projects" / "w" / "session.jsonl"
    link.unlink()
    link.symlink_to(outside)
    assert peerfiles.remove_tree(root, link) is True
    assert not link.is_symlink() and (outside / "id_ed25519").read_bytes() == SECRET


def test_a_link_on_the_way_to_the_path_to_remove_is_refused(root: Path, outside: Path) -> None:
    (root / "via").symlink_to(outside)
    refused(lambda: peerfiles.remove_tree(root, root / "via" / "id_ed25519"), "symbolic link")
    assert (root / "via").is_symlink() and (outside / "id_ed25519").read_bytes() == SECRET
    refused(lambda: peerfiles.remove_tree(root, root), "itself")
    assert root.is_dir()


def test_a_tree_deeper_than_the_bound_is_refused(root: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peerfiles, "MAX_DEPTH", 3)
    (root / "a" / "b" / "c" / "d" / "e").mkdir(parents=True)
    refused(lambda: peerfiles.remove_tree(root, root / "a"), "more than 3 folders deep")
    (root / "a" / "b" / "c" / "d" / "e").rmdir()
    (root / "a" / "b" / "c" / "d").rmdir()
    assert peerfiles.remove_tree(root, root / "a") is True
