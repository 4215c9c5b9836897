"""A real OpenSSH server on 127.0.0.1 standing for another machine (issue 22's hosts).

One server per test session (its start costs a host key and a listening port), with a host
key, a client key and a known_hosts file of its own: nothing of the person's ~/.ssh is read
or written (`ssh -F /dev/null`, UserKnownHostsFile). Each test points the server at a host of
its own by rewriting authorized_keys, whose `environment=` options give every login a HOME,
HANDOFF_HOME, tmux socket and PATH of that test's host: the same Unix user with a separate
home, as issue 22 allows; a host is told apart by its client key, so one server stands for
several hosts. `stop()`/`cont()` freeze and thaw the server (SIGSTOP) for the
unreachable cases.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "handoff-tests",
                    "-f", str(path)], check=True, capture_output=True, timeout=30)
    return path.with_suffix(".pub").read_text(encoding="utf-8").strip()


class SshServer:
    def __init__(self, root: Path) -> None:
        if not os.access(SSHD, os.X_OK):
            raise AssertionError(f"the hosts tests need an OpenSSH server ({SSHD}): "
                                 "apt-get install openssh-server (.ci/run does)")
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        root.chmod(0o700)
        self.port = free_port()
        self.user = getpass.getuser()
        host_pub = _keygen(root / "host_key")
        self.keys: dict[str, str] = {}
        self.known_hosts = root / "known_hosts"
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {host_pub}\n", encoding="utf-8")
        self.authorized = root / "authorized_keys"
        self.authorized.write_text("", encoding="utf-8")
        self.log = root / "sshd.log"
        self.config = config = root / "sshd_config"
        config.write_text("\n".join([
            f"Port {self.port}", "ListenAddress 127.0.0.1", f"HostKey {root / 'host_key'}",
            f"PidFile {root / 'sshd.pid'}", f"AuthorizedKeysFile {self.authorized}",
            "PubkeyAuthentication yes", "PasswordAuthentication no",
            "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
            "PermitUserEnvironment yes", "X11Forwarding no", "PrintMotd no", "PrintLastLog no",
            "LogLevel VERBOSE", "MaxStartups 50:30:100", "MaxSessions 50",
        ]) + "\n", encoding="utf-8")
        if os.geteuid() == 0:  # sshd run by root wants its privilege separation folder
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        self._start()

    def _start(self) -> None:
        self.process = subprocess.Popen([SSHD, "-D", "-e", "-f", str(self.config)],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=self.log.open("ab"), start_new_session=True)
        deadline = time.monotonic() + 20
        while not self._listening():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"sshd did not listen on 127.0.0.1:{self.port}: "
                                     f"{self.log.read_text(encoding='utf-8', errors='replace')}")
            time.sleep(0.02)

    def restart(self) -> None:
        """As a service manager restarts sshd: the listener ends (its sessions live on) and a
        new one listens on the same port."""
        self.process.terminate()
        self.process.wait(timeout=10)
        self._start()

    def _listening(self) -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port),
                                                                    timeout=1):
            return True
        return False

    def key(self, name: str) -> Path:
        """The client key of one host this server stands for (made on first use)."""
        path = self.root / f"client_key_{name}"
        if name not in self.keys:
            self.keys[name] = _keygen(path)
        return path

    def argv(self, name: str = "build1") -> list[str]:
        """What a person's `hosts: {NAME: {ssh: [...]}}` holds for that host of this server."""
        return ["ssh", "-F", "/dev/null", "-p", str(self.port),
                "-i", str(self.key(name)), "-o", "IdentitiesOnly=yes",
                "-o", f"UserKnownHostsFile={self.known_hosts}",
                "-o", "StrictHostKeyChecking=yes", "-o", "LogLevel=ERROR",
                f"{self.user}@127.0.0.1"]

    def serve(self, hosts: dict[str, dict[str, str]]) -> None:
        """Every login from now on with a host's key gets that host's environment (each a
        host of the test's own); no other key logs in."""
        lines = []
        for name, env in hosts.items():
            self.key(name)
            options = ",".join(f'environment="{key}={value}"' for key, value in env.items())
            lines.append(f"{options} {self.keys[name]}\n")
        self.authorized.write_text("".join(lines), encoding="utf-8")

    def freeze(self) -> None:
        os.kill(self.process.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.thaw()
            os.killpg(self.process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
