"""The `handoff` command's first step. Peers run `handoff submit` for every report, so a plain
submit goes straight to its stdlib-only path (handoff.cli.filing); everything else, and a submit
asking for help or mistyped, goes to the full command line (handoff.cli.app). A failure nobody
expected ends here: one line and a crash log (handoff.cli.crash), never a bare traceback."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main() -> None:
    sys.exit(run(sys.argv[1:]))


def run(argv: Sequence[str]) -> int:
    """`handoff ARGV...` in this process; its exit status."""
    try:
        if list(argv[:1]) == ["submit"]:
            from handoff.cli import filing

            code = filing.main(list(argv[1:]))
            if code is not None:
                return code
        from handoff.cli.app import main as cli_main

        return cli_main(argv)
    except Exception as exc:  # a bug: expected failures are HandoffErrors, handled below us
        from handoff.cli import crash

        return crash.report(exc, argv)
