"""OpenSSH as the one way to another machine (a host: issue 22, docs/hosts.md).

A host is the argv a person would type to reach it (`[ssh, -p, "2222", me@build1]`, or an
ssh_config alias), run as argv, never through a local shell. Every call:

* is bounded twice: ConnectTimeout for a host that does not answer at all, and a total
  deadline (proc.run's, the whole process group ended on it) for one that answers and then
  hangs (a stopped sshd, a dead link, a sleeping laptop: ServerAlive ends those too);
* asks ssh for nothing but the command: no agent forwarding, no X11, no port forwarding, no
  local command, no password prompt (BatchMode) a person would never see. These come first
  on the command line, where ssh takes the first value it is given, so no ssh_config and no
  later option can turn them back on; the flags that would (-A, -X, -L …) are refused in the
  host's argv at load (config.SSH_REFUSED), with the reason;
* sees only an allowlisted environment: what ssh itself uses to reach the host (its agent's
  socket, Kerberos' cache), nothing of handoff's or the person's beyond that.

The remote end runs its argument through the login shell of the host, as ssh always does:
`remote_command` quotes every word, so the host's shell sees exactly the argv meant.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from handoff.errors import ExternalFailure
from handoff.machinery import proc

#: seconds ssh may take to open the connection (DNS, TCP, key exchange)
CONNECT_TIMEOUT = 10
#: a connection that carries nothing for ALIVE_INTERVAL × ALIVE_COUNT seconds is given up
ALIVE_INTERVAL, ALIVE_COUNT = 5, 3
#: total seconds of one call unless its caller says otherwise
DEADLINE = 60.0
#: what every call says first (ssh keeps the first value of each option it is given)
FENCED = ("-o", "BatchMode=yes", "-o", "ForwardAgent=no", "-o", "ForwardX11=no",
          "-o", "ForwardX11Trusted=no", "-o", "ClearAllForwardings=yes",
          "-o", "PermitLocalCommand=no", "-o", "GatewayPorts=no", "-o", "Tunnel=no",
          "-o", f"ConnectTimeout={CONNECT_TIMEOUT}",
          "-o", f"ServerAliveInterval={ALIVE_INTERVAL}",
          "-o", f"ServerAliveCountMax={ALIVE_COUNT}")
#: ssh's own environment: how it finds its agent, its Kerberos tickets, its config and keys
PASSED_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ",
              "SSH_AUTH_SOCK", "KRB5CCNAME", "KRB5_CONFIG")
#: ssh's exit status for its own failure (connection, authentication, host key)
SSH_FAILED = 255


class Unreachable(ExternalFailure):
    """The host did not answer, or ssh could not log in: nothing is known of its tickets."""


def remote_command(argv: Sequence[str]) -> str:
    """argv as one line for the host's login shell to run as exactly those words; a leading
    `~/` stays unquoted, so `handoff: [~/.local/bin/handoff]` finds the host's own home."""
    words = [shlex.quote(word) for word in argv]
    if argv and argv[0].startswith("~/"):
        words[0] = "~/" + shlex.quote(argv[0][2:])
    return " ".join(words)


@dataclass(frozen=True)
class Ssh:
    """One host: its name (for messages) and the argv that reaches it."""

    name: str
    argv: tuple[str, ...]

    def command(self, remote: Sequence[str], terminal: bool = False) -> list[str]:
        """The local argv that runs remote (an argv) on the host."""
        return [self.argv[0], *FENCED, "-t" if terminal else "-T", *self.argv[1:], "--",
                remote_command(remote)]

    def run(self, remote: Sequence[str], deadline: float = DEADLINE,
            input_text: str | None = None) -> tuple[int, str, str]:
        """remote's exit status, stdout and stderr on the host; Unreachable when ssh itself
        failed or the deadline passed (the ssh process and all it started are ended)."""
        try:
            done = proc.run(self.command(remote), timeout=deadline, check=False,
                            env=environment(), input_text=input_text)
        except ExternalFailure as exc:
            raise Unreachable(f"host {self.name} did not answer within {deadline:g}s",
                              "is it up and reachable? `handoff hosts` asks every host; "
                              f"({exc.message})") from None
        if done.returncode == SSH_FAILED:
            said = "".join(c for c in " ".join((done.stderr or "").split())[-300:]
                           if c.isprintable()) or "exit 255"
            raise Unreachable(f"host {self.name} is unreachable: {said}",
                              f"try `{shlex.join(self.argv)}` by hand; handoff uses the "
                              "same argv, without a password prompt (BatchMode)")
        return done.returncode, done.stdout, done.stderr


def environment() -> dict[str, str]:
    return {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
