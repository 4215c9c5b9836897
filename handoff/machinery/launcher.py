"""Start a program under exactly the environment kept in a private file, then remove the file.

tmux keeps a window's command line (`#{pane_start_command}`) for any client on the socket to
read, and the server forked from the client that created it keeps that client's argv for its
whole life, readable by every local user in /proc. So nothing travels on a command line: the
environment (keys, seals) and the program's argv go into a 0600 file that this script reads
and deletes before it replaces itself with the program (same pid: the pane's pidfd and the
reaper follow it). The argv is there too because tmux refuses a long command line ("command
too long"), which a sandboxed CLI's bubblewrap arguments and a role contract passed as a flag
can reach.

The file may also say `nice`: the program then runs below handoff's own processes and the
person's commands (`yield_cpu`), as every peer does (`peer_nice`, handoff.config).

Run as a plain script (`python -I -S launcher.py FILE`): the standard library only, nothing of
handoff imported, so it costs a bare interpreter start. handoff's own command (the orchestrator
in its window) it hands to the warm process itself (`relayed`: handoff.machinery.relay, standard
library only too) rather than start a second interpreter to do it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys


def yield_cpu(nice: int, pid: int = 0) -> None:
    """Let the process group of pid (0: our own) yield the CPU: its niceness raised to nice,
    and on Linux its session's scheduling group too. Linux gives each session (every tmux pane,
    every gate) a group of its own that shares the CPU evenly with every other (autogroup),
    whatever its processes' niceness, so that group's weight is what a peer's work competes
    with; where there is no such file, niceness alone does it. Only ever raised: lowering needs
    privileges, and a failure leaves the program running as it was.

    Another process (pid) only once it leads a session of its own: one just forked (a tmux
    pane's, whose setsid may not have run yet) still belongs to its parent's session, and that
    session's group (the tmux server's) is not ours to weigh down."""
    if nice <= 0:
        return
    if pid:
        try:
            if os.getsid(pid) != pid:
                return
        except OSError:
            return
    with contextlib.suppress(OSError):
        if os.getpriority(os.PRIO_PGRP, pid) < nice:
            os.setpriority(os.PRIO_PGRP, pid, nice)
    with contextlib.suppress(OSError), \
            open(f"/proc/{pid or 'self'}/autogroup", "w", encoding="ascii") as group:
        group.write(str(nice))


def relayed(argv: list[str], env: dict[str, str]) -> int | None:
    """handoff's own command (an orchestrator in its window) handed to the warm process from
    here, as `handoff` would (handoff.machinery.relay), without starting a second interpreter for
    it; its exit status, or None: not relayed, exec it."""
    if argv[1:3] != ["-m", "handoff"] or os.path.realpath(argv[0]) != \
            os.path.realpath(sys.executable):
        return None
    # -S leaves site-packages off the path: handoff's own folder is where this file is
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    os.environ.clear()
    os.environ.update(env)
    from handoff.machinery import relay

    return relay.relay(argv[3:]) if relay.relayable(argv[3:], window=True) else None


def main(args: list[str]) -> None:
    if len(args) != 1:
        sys.stderr.write("usage: launcher.py LAUNCH_FILE\n")
        raise SystemExit(2)
    path = args[0]
    try:
        with open(path, encoding="utf-8") as handle:
            launch = json.load(handle)
        env, argv = launch["env"], [str(part) for part in launch["argv"]]
        nice = int(launch.get("nice", 0))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        sys.stderr.write(f"handoff: the environment file {path} cannot be read ({exc}): "
                         "this launch was used already or its folder was cleaned\n")
        raise SystemExit(127) from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
    yield_cpu(nice)
    env = {str(k): str(v) for k, v in env.items()}
    code = relayed(argv, env)
    if code is not None:
        raise SystemExit(code)
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        sys.stderr.write(f"handoff: cannot start {argv[0]}: {exc.strerror}\n")
        raise SystemExit(127) from None


if __name__ == "__main__":
    main(sys.argv[1:])
