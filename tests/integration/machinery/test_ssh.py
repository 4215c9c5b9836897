"""handoff.machinery.ssh against a real OpenSSH server on 127.0.0.1 (tests/sshd.py)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from handoff.machinery.ssh import Ssh, Unreachable
from tests.conftest import PYTHON
from tests.sshd import SshServer, free_port
from tests.unit.machinery import test_ssh as unit_tests

#: the fixtures this module's unit tests define, shared
server = unit_tests.server

SHOW = "import json, os, sys; print(json.dumps({'argv': sys.argv[1:], 'env': dict(os.environ)}))"


def test_argv_reaches_the_host_word_for_word(server: SshServer) -> None:
    words = ["two words", "$HOME", "a; touch /tmp/injected-by-ssh-test", "`id`", "*", "'q'",
             '"dq"', "", "back\\slash", "line\nbreak", "~/not-home"]
    status, out, _ = Ssh("plain", tuple(server.argv("plain"))).run([PYTHON, "-c", SHOW, *words])
    assert status == 0
    assert json.loads(out)["argv"] == words
    assert not Path("/tmp/injected-by-ssh-test").exists()


def test_no_agent_x11_or_forwarding_whatever_the_hosts_argv_says(server: SshServer,
                                                                 tmp_path: Path) -> None:
    agent_socket = tmp_path / "agent.sock"
    agent = subprocess.run(["ssh-agent", "-a", str(agent_socket)], capture_output=True,
                           text=True, timeout=15, check=True)
    pid = int(agent.stdout.split("SSH_AGENT_PID=")[1].split(";")[0])
    try:
        os.environ["SSH_AUTH_SOCK"] = str(agent_socket)
        argv = server.argv("plain")
        asking = (*argv[:-1], "-o", "ForwardAgent=yes", "-o", "ForwardX11=yes", argv[-1])
        status, out, _ = Ssh("plain", asking).run([PYTHON, "-c", SHOW])
    finally:
        del os.environ["SSH_AUTH_SOCK"]
        os.kill(pid, 15)
    assert status == 0
    seen = json.loads(out)["env"]
    assert "SSH_AUTH_SOCK" not in seen and "DISPLAY" not in seen, seen


def test_a_host_nobody_answers_on_is_unreachable_with_sshs_words(server: SshServer) -> None:
    argv = server.argv("plain")
    at = argv.index("-p") + 1
    closed = [*argv[:at], str(free_port()), *argv[at + 1:]]  # nothing listens there
    began = time.monotonic()
    with pytest.raises(Unreachable, match=r"unreachable: .*[Cc]onnection refused"):
        Ssh("gone", tuple(closed)).run(["true"])
    assert time.monotonic() - began < 10


def test_a_frozen_server_is_unreachable_at_the_deadline(server: SshServer) -> None:
    server.freeze()
    try:
        began = time.monotonic()
        with pytest.raises(Unreachable, match="did not answer within 2s"):
            Ssh("plain", tuple(server.argv("plain"))).run(["true"], deadline=2)
        took = time.monotonic() - began
    finally:
        server.thaw()
    assert took < 8, f"the deadline was 2 s; it took {took:.1f}"
