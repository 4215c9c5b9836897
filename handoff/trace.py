"""Diagnostics a person turns on when something puzzles them: with HANDOFF_DEBUG=1 (what
`handoff --verbose` sets, for itself and the orchestrator it starts), every subprocess handoff
runs (its argv, exit status and milliseconds) and every event it records (each judgement of a
peer, each phase change, with its evidence) is written down: to the ticket's `handoff.log` while
an orchestrator runs, else to stderr.

Off (the default), each call costs one dictionary lookup, and `logging` is never imported: the
peers' `handoff submit` and `handoff status` must start fast.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

ENV = "HANDOFF_DEBUG"
_sinks: list[IO[str]] = []


def enabled() -> bool:
    return os.environ.get(ENV, "") not in ("", "0")


def enable() -> None:
    """Turn diagnostics on for this process and every handoff it starts."""
    os.environ[ENV] = "1"


def to_stderr() -> None:
    if enabled() and not _sinks:
        _sinks.append(sys.stderr)


def to_file(path: Path) -> None:
    """Write to path (appended, the user's alone) instead of stderr; nothing when off."""
    if not enabled():
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    _sinks[:] = [os.fdopen(fd, "a", encoding="utf-8", buffering=1)]


def command(argv: Sequence[Any], status: int | None, started: float) -> None:
    """One subprocess has ended (status None: it was stopped at its bound)."""
    if _sinks:
        ms = (time.monotonic() - started) * 1000
        _write(f"run {shlex.join(str(a) for a in argv)} -> "
               f"{'killed at its bound' if status is None else f'exit {status}'} ({ms:.1f} ms)")


def event(recorded: Mapping[str, object]) -> None:
    if _sinks:
        _write("event " + json.dumps(recorded, default=str))


#: variable names whose values never reach a log line (keys, tokens, passwords, seals)
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|SEAL|AUTH", re.I)


def redacted(line: str) -> str:
    """line without the value of any secret variable of this process's environment, and
    without the value of any NAME=value whose name says it is secret."""
    for name, value in os.environ.items():
        if len(value) >= 6 and SECRET_NAME.search(name) and value in line:
            line = line.replace(value, f"<{name}>")
    return re.sub(r"\b(\w*(?:KEY|TOKEN|SECRET|PASSWORD|SEAL)\w*)=(\S+)", r"\1=<redacted>", line,
                  flags=re.I)


def _write(line: str) -> None:
    line = redacted(line)
    stamp = time.strftime("%H:%M:%S", time.localtime())
    for sink in _sinks:
        # a full disk or a closed stderr: diagnostics give way
        with contextlib.suppress(OSError, ValueError):
            sink.write(f"{stamp} [{os.getpid()}] {line}\n")
