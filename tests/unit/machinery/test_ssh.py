"""handoff.machinery.ssh against a real OpenSSH server on 127.0.0.1 (tests/sshd.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from handoff.config import ssh_refused
from handoff.machinery.ssh import remote_command
from tests.sshd import SshServer


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    found = SshServer(tmp_path_factory.mktemp("sshd-unit"))
    home = tmp_path_factory.mktemp("ssh-host-home")
    found.serve({"plain": {"HOME": str(home), "PATH": os.environ["PATH"]}})
    yield found
    found.close()


def test_a_leading_tilde_is_the_hosts_home_and_the_rest_stays_quoted() -> None:
    assert remote_command(["~/bin/handoff x", "a b"]) == "~/'bin/handoff x' 'a b'"
    assert remote_command(["handoff", "~/x"]) == "handoff '~/x'"


def test_the_hosts_argv_may_not_forward_or_background_anything() -> None:
    assert ssh_refused(["ssh", "-A", "me@h"]) == ["-A (agent forwarding)"]
    assert ssh_refused(["ssh", "-p", "2222", "-L8080:x:80", "me@h"]) == ["-L (port forwarding)"]
    assert ssh_refused(["ssh", "-CY", "me@h"]) == ["-Y (X11 forwarding)"]
    # a value that looks like a flag is a value: -i -A is a key file named -A
    assert ssh_refused(["ssh", "-i", "-A", "-J", "jump", "-o", "Port=22", "me@h"]) == []
    assert ssh_refused(["ssh", "-oProxyJump=x", "me@h"]) == []
