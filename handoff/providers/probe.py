"""Asking an installed CLI about itself (its --help), bounded and without a shell."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence


def help_text(argv: Sequence[str], timeout: float = 20.0) -> str:
    """What argv prints (stdout and stderr); '' when it cannot run or does not finish."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, errors="replace")
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout + done.stderr


def exit_status(argv: Sequence[str], timeout: float = 20.0) -> tuple[int | None, str]:
    """argv's exit status (None when it cannot run or hangs) and its output."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, errors="replace")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, str(exc)
    return done.returncode, done.stdout + done.stderr
