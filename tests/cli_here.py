"""The `handoff` command line run in this process, as the console script runs it
(handoff.cli.entry.run) but without a child Python: for the command-line tests that need no
git, tmux nor CLI, which then belong to the unit layer. It answers what
`tests.harness.handoff` answers for a subprocess (exit status, stdout, stderr), so the same
checks (`assert_clean_error`) read both. The warm process is never used (it is a process)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from handoff.cli import entry


def handoff_here(*args: str, cwd: Path | None = None,
                 input_text: str = "") -> subprocess.CompletedProcess[str]:
    """`handoff ARGS...` in cwd, input_text on its stdin."""
    out, err = io.StringIO(), io.StringIO()
    before, stdin = os.getcwd(), sys.stdin
    try:
        if cwd is not None:
            os.chdir(cwd)
        sys.stdin = io.StringIO(input_text)
        with redirect_stdout(out), redirect_stderr(err):
            code = entry.run(list(args), warm=False)
    finally:
        os.chdir(before)
        sys.stdin = stdin
    return subprocess.CompletedProcess(["handoff", *args], code, out.getvalue(), err.getvalue())
