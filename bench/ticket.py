"""On-demand benchmark of a ticket's life through the real CLI: `start`, the orchestrator's idle
CPU while a peer works, `recycle` and `close`, each beside the raw git/tmux work it wraps.

    .venv/bin/python bench/ticket.py [--reps N] [--idle SECONDS]

Only the command line is used (`python -m handoff`), so the same file measures another checkout
of handoff too: `PYTHONPATH=/path/to/other/checkout .venv/bin/python bench/ticket.py`.

Each repetition starts a scripted ticket whose implementer commits and then pauses (so the
orchestrator waits on it), samples the orchestrator's CPU from /proc (its own time and that of
the children it reaped: the tmux clients of its checks), recycles the implementer and closes the
ticket. The raw rows do the same git and tmux work by hand: two worktrees and a session with
three windows; a respawn; a kill and two worktree removals. Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

PLAN = """# Bench ticket

Fix add.

```handoff-script
round: 1
edits:
- file: calc.py
  replace: return a - b
  with: return a + b
pause_before_report: {go}
```
"""
CALC = "def add(a: int, b: int) -> int:\n    return a - b\n"
TICKS = os.sysconf("SC_CLK_TCK")


def run(argv: Sequence[str], cwd: Path | None = None, check: bool = True) -> str:
    done = subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, timeout=120,
                          check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} failed ({done.returncode}): "
                           f"{(done.stderr or done.stdout).strip()[-400:]}")
    return done.stdout


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


def wait_until(check: Callable[[], bool], what: str, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            print(f"bench: timed out after {timeout:g}s waiting for {what}", file=sys.stderr)
            return False
        time.sleep(0.02)
    return True


def cpu_ticks(pid: int) -> int:
    """utime + stime + cutime + cstime of pid: its own CPU and its reaped children's."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(value) for value in fields[11:15])


class Sandbox:
    """A temp dir with HANDOFF_HOME, HOME, TMPDIR, a private tmux socket and a small repo."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="handoff-bench-ticket-")).resolve()
        self.socket = f"hb-{uuid.uuid4().hex[:10]}"
        home = self.root / "home"
        home.mkdir()
        (home / ".gitconfig").write_text("[user]\n\tname = bench\n\temail = bench@handoff.invalid\n",
                                         encoding="utf-8")
        (self.root / "tmp").mkdir()
        self.env = {**os.environ, "HOME": str(home), "HANDOFF_HOME": str(self.root / "state"),
                    "HANDOFF_TMUX_SOCKET": self.socket, "GIT_CONFIG_NOSYSTEM": "1",
                    "XDG_STATE_HOME": str(self.root / "xdg"), "TMPDIR": str(self.root / "tmp")}
        for name in ("TMUX", "TMUX_PANE", "HANDOFF_TICKET_DIR", "HANDOFF_ROLE", "HANDOFF_TICKET"):
            self.env.pop(name, None)
        self.repo = self.root / "repo"
        self.repo.mkdir()
        (self.repo / "calc.py").write_text(CALC, encoding="utf-8")
        for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "calc"]):
            self.git(*argv)

    def git(self, *args: str) -> str:
        return self.run(["git", "-C", str(self.repo), *args])

    def tmux(self, *args: str, check: bool = True) -> str:
        return self.run(["tmux", "-L", self.socket, *args], check=check)

    def handoff(self, *args: str) -> str:
        return self.run([sys.executable, "-m", "handoff", *args])

    def run(self, argv: Sequence[str], check: bool = True) -> str:
        done = subprocess.run(list(argv), cwd=self.repo, env=self.env, capture_output=True,
                              text=True, timeout=120, check=False)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:4])} failed ({done.returncode}): "
                               f"{(done.stderr or done.stdout).strip()[-400:]}")
        return done.stdout

    def status(self, ticket: str) -> dict[str, Any]:
        rows = json.loads(self.handoff("status", ticket, "--json"))
        row = rows[0] if isinstance(rows, list) else rows
        return row if isinstance(row, dict) else {}

    def paused(self, session: str) -> bool:
        screen = self.tmux("capture-pane", "-p", "-t", f"={session}:implementer", check=False)
        return "paused until" in screen

    def close(self) -> None:
        for ticket_socket in (self.socket,):
            subprocess.run(["tmux", "-L", ticket_socket, "kill-server"], capture_output=True,
                           timeout=15, check=False)
        shutil.rmtree(self.root, ignore_errors=True)


def one_ticket(box: Sandbox, n: int, idle: float, rows: dict[str, list[float]]) -> None:
    ticket = f"B-{n}"
    plan = box.root / f"plan-{n}.md"
    plan.write_text(PLAN.format(go=box.root / "never"), encoding="utf-8")
    rows["start"].append(timed(lambda: box.handoff("start", ticket, "--plan", str(plan), "--yes")))
    session = box.status(ticket)
    if not wait_until(lambda: box.paused(str(session["session"])), "the implementer to pause"):
        raise RuntimeError(f"{ticket}: the implementer never paused")
    pid = int(box.status(ticket)["orchestrator"])
    before, started = cpu_ticks(pid), time.monotonic()
    time.sleep(idle)  # the measurement window itself, not a synchronisation
    spent = (cpu_ticks(pid) - before) / TICKS
    rows["idle"].append(100 * spent / (time.monotonic() - started))
    rows["recycle"].append(timed(lambda: box.handoff("recycle", ticket, "implementer")))
    wait_until(lambda: box.paused(str(session["session"])), "the recycled implementer to pause")
    rows["close"].append(timed(lambda: box.handoff("close", ticket, "--force")))


def one_raw(box: Sandbox, n: int, rows: dict[str, list[float]]) -> None:
    name = f"raw-{n}"
    impl, rev = box.root / "wt" / name / "implementer", box.root / "wt" / name / "reviewer"
    sleeper = ["sleep", "600"]

    def start() -> None:
        box.git("worktree", "add", "-q", "-b", name, str(impl), "HEAD")
        box.git("worktree", "add", "-q", "--detach", str(rev), "HEAD")
        box.tmux("new-session", "-d", "-s", name, "-n", "orchestrator", "--", *sleeper)
        for role, path in (("implementer", impl), ("reviewer", rev)):
            box.tmux("new-window", "-d", "-t", f"={name}:", "-n", role, "-c", str(path), "--",
                     *sleeper)

    def close() -> None:
        box.tmux("kill-session", "-t", f"={name}")
        box.git("worktree", "remove", "--force", str(impl))
        box.git("worktree", "remove", "--force", str(rev))

    rows["start"].append(timed(start))
    rows["recycle"].append(timed(lambda: box.tmux("respawn-pane", "-k", "-t",
                                                  f"={name}:implementer", "--", *sleeper)))
    rows["close"].append(timed(close))


def spread(values: Sequence[float], unit: str) -> str:
    if not values:
        return "—"
    return (f"{min(values):.{1 if unit == 'ms' else 3}f} / "
            f"{statistics.median(values):.{1 if unit == 'ms' else 3}f} / "
            f"{max(values):.{1 if unit == 'ms' else 3}f}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--reps", type=int, default=5, help="tickets to run (default 5)")
    parser.add_argument("--idle", type=float, default=5.0,
                        help="seconds of the idle CPU window (default 5)")
    args = parser.parse_args(argv)
    box = Sandbox()
    handoff_rows: dict[str, list[float]] = {"start": [], "idle": [], "recycle": [], "close": []}
    raw_rows: dict[str, list[float]] = {"start": [], "recycle": [], "close": []}
    try:
        for n in range(max(args.reps, 1)):
            if n % 2:
                one_raw(box, n, raw_rows)
                one_ticket(box, n, args.idle, handoff_rows)
            else:
                one_ticket(box, n, args.idle, handoff_rows)
                one_raw(box, n, raw_rows)
    finally:
        box.close()
    print(f"handoff ticket bench: min / median / max over {args.reps} tickets "
          f"({run(['git', '--version']).strip()}, {run(['tmux', '-V']).strip()})\n")
    print(f"{'operation':<34} {'handoff':>24} {'raw':>24} {'ratio':>7}")
    for key, label in (("start", "start (background, ms)"), ("recycle", "recycle implementer (ms)"),
                       ("close", "close --force (ms)")):
        ratio = statistics.median(handoff_rows[key]) / statistics.median(raw_rows[key])
        print(f"{label:<34} {spread(handoff_rows[key], 'ms'):>24} "
              f"{spread(raw_rows[key], 'ms'):>24} {ratio:>6.2f}x")
    print(f"{'orchestrator idle CPU (% core)':<34} {spread(handoff_rows['idle'], '%'):>24} "
          f"{'—':>24} {'—':>7}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
