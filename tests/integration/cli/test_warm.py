"""handoff.cli.warm: the warm process itself (its lock, its socket, its pid file, how it
ends, when it stops serving), run as `python -m handoff.cli.warm` and as its serve loop. What a
command relayed to it sees is tests/unit/machinery/test_relay.py's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from handoff.cli import warm
from handoff.machinery import relay
from tests.conftest import wait_until


@pytest.fixture
def servers() -> Iterator[list[subprocess.Popen[bytes]]]:
    """The warm processes a test starts, ended after it whatever it did."""
    found: list[subprocess.Popen[bytes]] = []
    yield found
    for server in found:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=10)


def start(handoff_home: Path, servers: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    Path(relay.folder(str(handoff_home))).mkdir(parents=True, exist_ok=True)
    server = subprocess.Popen([sys.executable, "-m", "handoff.cli.warm"],
                              env={**os.environ, "HANDOFF_HOME": str(handoff_home)},
                              start_new_session=True)
    servers.append(server)
    return server


def test_one_warm_process_per_home_its_files_its_users_alone_and_gone_when_it_ends(
        handoff_home: Path, servers: list[subprocess.Popen[bytes]]) -> None:
    where = Path(relay.folder(str(handoff_home)))
    first = start(handoff_home, servers)
    pid_file = where / f"{relay.key()}.pid"
    wait_until(pid_file.exists, 60, "the warm process to be up")
    assert pid_file.read_text() == f"{first.pid}\n"
    sock = where / f"{relay.key()}.sock"
    assert sock.is_socket() and sock.stat().st_mode & 0o777 == 0o600
    assert pid_file.stat().st_mode & 0o777 == 0o600
    second = start(handoff_home, servers)
    assert second.wait(timeout=60) == 0, "the lock is held: it leaves at once"
    assert first.poll() is None and pid_file.read_text() == f"{first.pid}\n"
    first.send_signal(signal.SIGTERM)  # what relay.end sends
    assert first.wait(timeout=30) == 0
    assert not sock.exists() and not pid_file.exists()


def test_a_warm_process_whose_socket_was_replaced_ends(
        handoff_home: Path, servers: list[subprocess.Popen[bytes]]) -> None:
    """Its socket file removed (a new home, a person's clean-up): it is no longer the one
    commands reach, and ends at its next look (CHECK seconds)."""
    where = Path(relay.folder(str(handoff_home)))
    server = start(handoff_home, servers)
    pid_file = where / f"{relay.key()}.pid"
    wait_until(pid_file.exists, 60, "the warm process to be up")
    (where / f"{relay.key()}.sock").unlink()
    assert server.wait(timeout=warm.CHECK * 5) == 0
    assert not pid_file.exists()


def test_a_warm_process_whose_code_changed_serves_no_more(tmp_path: Path,
                                                          handoff_home: Path) -> None:
    """The real serve loop over a file standing for handoff's code: once it changes, the next
    command is told `stale` (and runs in its own process), and the warm process ends."""
    code = tmp_path / "module.py"
    code.write_text("x = 1\n", encoding="utf-8")
    where = handoff_home / relay.FOLDER
    where.mkdir(parents=True)
    script = textwrap.dedent(f"""
        import fcntl, os, socket
        from pathlib import Path
        from handoff.cli import warm
        from handoff.machinery import relay
        where = {str(where)!r}
        lock = os.open(os.path.join(where, "test.lock"), os.O_RDWR | os.O_CREAT)
        from handoff.record.address import Address
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with Address(where, relay.key() + ".sock") as address:  # a long tmp path too
            listener.bind(address.path)
        listener.listen(8)
        files = [Path({str(code)!r})]
        warm.serve(listener, lock, files, warm.stamp(files), lambda: True)
    """)
    server = subprocess.Popen([sys.executable, "-c", script])
    try:
        wait_until(lambda: relay.connect(str(where)) is not None, 20, "the loop to listen")
        assert relay.relay(["resume", "NOPE"], str(handoff_home)) == 3
        assert warm.stamp([code]) == warm.stamp([code])
        before = warm.stamp([code])
        code.write_text("x = 22\n", encoding="utf-8")
        assert warm.stamp([code]) != before
        assert relay.relay(["resume", "NOPE"], str(handoff_home)) is None
        assert server.wait(timeout=20) == 0, "it ends after saying stale"
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=10)
