"""What happens when handoff itself fails in a way nobody expected (a bug, not a HandoffError):
the person sees one line saying so and where the full story is; the story (the traceback, the
command, the versions of handoff, Python, git and tmux, the platform) goes to a crash log they
can attach to a report. The exit status is its own (`EXIT_CRASH`), never mistaken for a
refused report or a failed check.

Crash logs live in the user's cache (`$XDG_CACHE_HOME/handoff/crash/`, else
`~/.cache/handoff/crash/`), not under HANDOFF_HOME: a full state disk must not also lose the
account of what went wrong there.
"""

from __future__ import annotations

import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

from handoff import __version__, trace
from handoff.errors import EXIT_CRASH

VERSION_TIMEOUT = 5.0


def folder() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "handoff" / "crash"


def report(exc: BaseException, argv: Sequence[str]) -> int:
    """Write the crash log, tell the person in one line (plus its path), return EXIT_CRASH."""
    story = "".join(traceback.format_exception(exc))
    what = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
    try:
        path = _write(story, argv)
    except OSError as failure:  # nowhere to keep it: the traceback is shown instead
        print(f"handoff: internal error: {what}\n{story}"
              f"(no crash log: {failure.strerror or failure})", file=sys.stderr)
        return EXIT_CRASH
    print(f"handoff: internal error: {what}\n  the traceback and versions are in {path}; "
          "please attach it to a bug report", file=sys.stderr)
    if trace.enabled():
        print(story, file=sys.stderr, end="")
    return EXIT_CRASH


def _write(story: str, argv: Sequence[str]) -> Path:
    where = folder()
    where.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = where / f"crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    lines = [f"command: handoff {shlex.join(argv)}",
             f"handoff: {__version__}",
             f"python: {sys.version.split()[0]} ({sys.executable})",
             f"platform: {platform.platform()}",
             f"git: {_version('git', '--version')}",
             f"tmux: {_version('tmux', '-V')}",
             f"time: {time.strftime('%Y-%m-%dT%H:%M:%S%z')}",
             "", story]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write("\n".join(lines))
    return path


def _version(program: str, flag: str) -> str:
    """What program says of its version; a crash report must not hang, so it is bounded, and
    run plainly (handoff's own runner may be what failed)."""
    found = shutil.which(program)
    if found is None:
        return "not on PATH"
    try:
        done = subprocess.run([found, flag], capture_output=True, text=True,
                              timeout=VERSION_TIMEOUT, stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({exc})"
    return done.stdout.strip() or f"unknown (exit {done.returncode})"
