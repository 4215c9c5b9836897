"""The machine a benchmark ran on, as docs/performance.md states it beside the figures."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent


def _output(argv: list[str], cwd: Path | None = None) -> str:
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=30,
                              check=False)
    except OSError:
        return "missing"
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def _proc_field(path: str, key: str) -> str:
    try:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            name, _, value = line.partition(":")
            if name.strip() == key:
                return value.strip()
    except OSError:
        pass
    return ""


def cpu() -> str:
    model = _proc_field("/proc/cpuinfo", "model name") or platform.processor() or "unknown CPU"
    return f"{model}, {os.cpu_count()} logical CPUs"


def memory() -> str:
    total = _proc_field("/proc/meminfo", "MemTotal")  # "16318080 kB"
    if not total.endswith("kB"):
        return "unknown"
    return f"{int(total.split()[0]) / 1024 / 1024:.1f} GiB"


def commit() -> str:
    """The checkout's commit, marked when the work tree differs from it (read-only git)."""
    head = _output(["git", "-C", str(CHECKOUT), "rev-parse", "--short=10", "HEAD"])
    dirty = _output(["git", "-C", str(CHECKOUT), "status", "--porcelain", "--untracked-files=no"])
    return head + (" with uncommitted changes" if dirty not in ("", "unknown") else "")


def describe() -> list[str]:
    """One line per fact: CPU, memory, kernel, git, tmux, Python, handoff's commit."""
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    return [f"CPU: {cpu()}", f"memory: {memory()}",
            f"kernel: {platform.system()} {platform.release()} (load average {load} at the end)",
            f"git: {_output(['git', '--version']).removeprefix('git version ')}",
            f"tmux: {_output(['tmux', '-V']).removeprefix('tmux ')}",
            f"Python (the runner's): {platform.python_version()} at {sys.executable}",
            f"handoff: commit {commit()}"]
