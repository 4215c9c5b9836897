"""The `handoff` command's first step. Peers run `handoff submit` for every report, and scripts
`handoff status`, so a plain submit or status goes straight to its own lean path
(handoff.cli.filing, handoff.cli.status_view: no typer); everything else, and either asking for
help or mistyped, goes to the full command line (handoff.cli.app). A failure nobody
expected ends here: one line and a crash log (handoff.cli.crash), never a bare traceback."""

from __future__ import annotations

import errno
import sys
from collections.abc import Sequence


def main() -> None:
    sys.exit(run(sys.argv[1:], warm=True))


def _lane(argv: list[str]) -> int | None:
    """The commands run most often, without the full command line: a peer's `submit` for
    every report, `status` from scripts and prompts. None: not theirs to run."""
    if argv[:1] == ["submit"]:
        from handoff.cli import filing

        return filing.main(argv[1:])
    if argv[:1] == ["status"]:
        from handoff.cli import status_view

        return status_view.main(argv[1:])
    return None


def _reader_gone() -> int:
    """The reader of our output went away (`handoff status | head -1`, or the terminal itself
    with its tmux server): an expected end, as for click's own commands: nothing more is
    printed, exit 1. Later writes, and the flush at exit, go nowhere instead of raising
    again."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 1


def _warm(argv: list[str]) -> int | None:
    """`start`, `resume` and `close` run in a child of the warm process, which has handoff
    loaded already (handoff.machinery.relay); None: not relayed, run here."""
    from handoff.machinery import relay

    if not relay.relayable(argv):
        return None
    return relay.relay(argv)


def run(argv: Sequence[str], warm: bool = False) -> int:
    """`handoff ARGV...`, its exit status: in this process, or (warm) in a child of the warm
    process when the command is one it takes."""
    from handoff import platforms

    where = platforms.here()
    if where.refused:  # before anything that needs what it lacks is imported
        sys.stderr.write(f"handoff: error: {where.refused}\n  hint: {platforms.REFUSED_HINT}\n")
        return 1
    try:
        code = _lane(list(argv))
        if code is None and warm:
            code = _warm(list(argv))
        if code is not None:
            return code
        from handoff.cli.app import main as cli_main

        return cli_main(argv)
    except BrokenPipeError:
        return _reader_gone()
    except OSError as exc:
        if exc.errno != errno.EIO:
            from handoff.cli import crash

            return crash.report(exc, argv)
        # our terminal is gone (its tmux server or window ended under us): an expected end,
        # nobody left to tell; the ticket's record says where it stood (handoff resume)
        return _reader_gone()
    except Exception as exc:  # a bug: expected failures are HandoffErrors, handled below us
        from handoff.cli import crash

        return crash.report(exc, argv)
