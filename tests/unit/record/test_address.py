"""handoff.record.address: a socket's path short enough to bind and connect to, whatever the
length of the ticket's folder."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from handoff.record.address import Address


def test_a_short_path_is_used_as_it_is(tmp_path: Path) -> None:
    with Address(str(tmp_path), "intake.sock") as address:
        assert address.path == os.path.join(tmp_path, "intake.sock")


def test_a_long_path_is_reached_through_a_descriptor_of_its_folder(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 70) / ("e" * 70)
    deep.mkdir(parents=True)
    assert len(str(deep / "intake.sock")) > 108, "longer than any sun_path"
    cwd = Path.cwd()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        with Address(str(deep), "intake.sock") as address:
            assert address.path.startswith("/proc/self/fd/") and len(address.path) < 100
            server.bind(address.path)
            server.listen(1)
            fd = int(address.path.split("/")[4])
        with pytest.raises(OSError):
            os.fstat(fd)  # closed with the Address: no descriptor leaks per submit
        assert (deep / "intake.sock").is_socket(), "bound at its real place"
        with Address(str(deep), "intake.sock") as address, \
                socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(address.path)
            peer, _ = server.accept()
            client.sendall(b"hello")
            assert peer.recv(5) == b"hello"
            peer.close()
    assert Path.cwd() == cwd, "never by changing the working directory"


def test_closing_twice_is_harmless(tmp_path: Path) -> None:
    deep = tmp_path / ("f" * 120)
    deep.mkdir()
    address = Address(str(deep), "s.sock")
    address.close()
    address.close()
