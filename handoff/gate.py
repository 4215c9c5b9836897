"""The verification gate: the orchestrator runs the test command itself.

A report saying "tests pass" is a claim; this is the evidence. argv without a shell, an
allowlisted environment, a timeout that kills the whole process group, output capped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from handoff.store import atomic_write

CAP = 64 * 1024


@dataclass(frozen=True)
class GateResult:
    argv: tuple[str, ...]
    exit_code: int | None
    seconds: float
    timed_out: bool
    output: str

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def summary(self) -> str:
        command = " ".join(self.argv)
        if self.timed_out:
            return f"`{command}` timed out after {self.seconds:.0f}s"
        state = "passed" if self.passed else f"failed (exit {self.exit_code})"
        return f"`{command}` {state} in {self.seconds:.1f}s"


def cap(text: str, limit: int = CAP) -> str:
    """Keep the head and the tail: the first error and the final summary both matter."""
    if len(text) <= limit:
        return text
    half = limit // 2
    dropped = len(text) - 2 * half
    return f"{text[:half]}\n… [{dropped} characters cut by handoff] …\n{text[-half:]}"


def run_gate(argv: Sequence[str], cwd: Path, env: dict[str, str], timeout: float,
             log: Path) -> GateResult:
    started = time.monotonic()
    timed_out = False
    try:
        child = subprocess.Popen(
            list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True,
        )
    except (FileNotFoundError, PermissionError) as exc:
        result = GateResult(tuple(argv), 127, 0.0, False, f"cannot run {argv[0]}: {exc}\n")
    else:
        try:
            output, _ = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(child.pid, signal.SIGKILL)
            output, _ = child.communicate()
        result = GateResult(tuple(argv), None if timed_out else child.returncode,
                            time.monotonic() - started, timed_out, output)
    atomic_write(log, f"$ {' '.join(result.argv)}\n# cwd: {cwd}\n{cap(result.output)}\n"
                      f"# {result.summary()}\n")
    return result
