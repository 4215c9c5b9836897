"""Start a program under exactly the environment kept in a private file, then remove the file.

tmux keeps a window's command line (`#{pane_start_command}`) for any client on the socket to
read, and the server forked from the client that created it keeps that client's argv for its
whole life, readable by every local user in /proc. So nothing travels on a command line: the
environment (keys, seals) and the program's argv go into a 0600 file that this script reads
and deletes before it replaces itself with the program (same pid: the pane's pidfd and the
reaper follow it). The argv is there too because tmux refuses a long command line ("command
too long"), which a sandboxed CLI's bubblewrap arguments and a role contract passed as a flag
can reach.

Run as a plain script (`python -I -S launcher.py FILE`): the standard library only, nothing of
handoff imported, so it costs a bare interpreter start.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys


def main(args: list[str]) -> None:
    if len(args) != 1:
        sys.stderr.write("usage: launcher.py LAUNCH_FILE\n")
        raise SystemExit(2)
    path = args[0]
    try:
        with open(path, encoding="utf-8") as handle:
            launch = json.load(handle)
        env, argv = launch["env"], [str(part) for part in launch["argv"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        sys.stderr.write(f"handoff: the environment file {path} cannot be read ({exc}): "
                         "this launch was used already or its folder was cleaned\n")
        raise SystemExit(127) from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
    try:
        os.execvpe(argv[0], argv, {str(k): str(v) for k, v in env.items()})
    except OSError as exc:
        sys.stderr.write(f"handoff: cannot start {argv[0]}: {exc.strerror}\n")
        raise SystemExit(127) from None


if __name__ == "__main__":
    main(sys.argv[1:])
