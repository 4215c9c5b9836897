"""A ticket's life through the real command line: `start`, the waiting orchestrator's CPU and
subprocesses, `recycle` and `close`, each beside the raw git/tmux work it wraps.

Only the command line is used (`python -m handoff`), so the same scenario measures another
checkout of handoff too: `PYTHONPATH=/path/to/other/checkout .venv/bin/python -m bench ticket`
(or --python with another installation's interpreter).

Each repetition starts a scripted ticket whose implementer commits and then pauses (so the
orchestrator waits on it), measures the orchestrator over a window of --idle seconds once the
turn's first 30 s (monitor.HOOKED_LOOK, when its screen is looked at often) are over, recycles
the implementer and closes the ticket. In the window:

* CPU, as % of one core: its own, from the process's CPU clock (clock_gettime on the clock id
  clock_getcpuclockid(3) gives for pid: nanoseconds, all threads), plus that of the children it
  reaped (the tmux clients of a look at the peer: cutime + cstime from /proc/<pid>/stat, in
  clock ticks). /proc's utime/stime alone could not tell 0.05 % from 0: a 100 Hz tick is 0.1 %
  of a 10 s window;
* subprocesses: /proc/<pid>/task/*/children (every thread's live children) read every
  SAMPLE seconds; each child pid not there when the window opened counts once. A child that
  lives less than SAMPLE can be missed (tried on a process running `tmux -V`, the shortest
  tmux call, every 0.25 s: about 70 % were seen), so the note also says whether cutime/cstime
  grew (a reaped child's CPU) while no child was seen. Enough to tell no subprocess per tick
  from one per tick; an exact count would need ptrace, which would slow what is measured.

The raw rows do the same git and tmux work by hand: two worktrees and a session with three
windows (start); a respawn (recycle); a kill and two worktree removals (close).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any

from bench.figures import Figure, Target
from bench.sandbox import BenchError, Sandbox, timed, wait_until
from bench.scenarios import Options
from bench.stats import in_turn
from handoff.loop.monitor import HOOKED_LOOK

DEFAULT_REPS = 5
SAMPLE = 0.002
TICKS = os.sysconf("SC_CLK_TCK")
#: a waiting orchestrator (for hours, on a person or a model) costs at most 0.05 % of a core
IDLE_CPU = 0.05
#: no subprocess per tick (a 0.5 s tick was 120 a minute). A peer with hooks is
#: still looked at when HOOKED_LOOK (30 s) runs out, a look being up to two tmux calls: 4.
SPAWNS_PER_MINUTE = 4.0

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


def cpu_clock(pid: int) -> int:
    """clock_getcpuclockid(pid) (Python has no binding): the process-wide CPU-time clock of
    another process, MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED) in the kernel's terms."""
    return ((~pid) << 3) | 2


def reaped_ticks(pid: int) -> int:
    """cutime + cstime of pid: the CPU of the children it waited for, in clock ticks."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[13]) + int(fields[14])


def children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found.update(int(c) for c in (task / "children").read_text().split())
        except OSError:
            continue  # the thread ended between the listing and the read
    return found


def rss_mib(pid: int) -> float:
    """The resident memory of pid (VmRSS), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise BenchError(f"no VmRSS for {pid}")


class Window:
    """One measuring window over a waiting orchestrator: CPU and the children it started."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.seen: set[int] = set()
        self._stop = threading.Event()

    def _sample(self, before: set[int]) -> None:
        while not self._stop.is_set():
            self.seen |= children(self.pid) - before
            self._stop.wait(SAMPLE)

    def measure(self, seconds: float) -> tuple[float, float, int]:
        """(% of a core, children per minute, reaped children's ticks) over seconds."""
        sampler = threading.Thread(target=self._sample, args=(children(self.pid),), daemon=True)
        clock = cpu_clock(self.pid)
        before, reaped_before = time.clock_gettime(clock), reaped_ticks(self.pid)
        if before <= 0:  # a Python process that started a ticket has spent CPU: a wrong clock
            raise BenchError(f"the CPU clock of {self.pid} reads {before}")
        started = time.monotonic()
        sampler.start()
        self._stop.wait(seconds)  # the measuring window itself, not a synchronisation
        after, reaped_after = time.clock_gettime(clock), reaped_ticks(self.pid)
        elapsed = time.monotonic() - started
        self._stop.set()
        sampler.join()
        reaped = reaped_after - reaped_before
        spent = after - before + reaped / TICKS
        return 100 * spent / elapsed, len(self.seen) * 60 / elapsed, reaped


class TicketRun:
    def __init__(self, box: Sandbox, idle: float) -> None:
        self.box, self.idle = box, idle
        self.repo = box.root / "repo"
        self.repo.mkdir()
        (self.repo / "calc.py").write_text(CALC, encoding="utf-8")
        for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "calc"]):
            self.git(*argv)
        self.rows: dict[str, list[float]] = {"start": [], "recycle": [], "close": [],
                                             "cpu": [], "spawns": [], "rss": []}
        self.raw_rows: dict[str, list[float]] = {"start": [], "recycle": [], "close": []}
        self.unseen_reaped = 0

    def git(self, *args: str) -> str:
        return self.box.run(["git", "-C", str(self.repo), *args]).stdout

    def status(self, ticket: str) -> dict[str, Any]:
        rows = json.loads(self.box.handoff("status", ticket, "--json", cwd=self.repo).stdout)
        row = rows[0] if isinstance(rows, list) else rows
        return row if isinstance(row, dict) else {}

    def paused(self, session: str) -> bool:
        screen = self.box.tmux("capture-pane", "-p", "-t", f"={session}:implementer",
                               check=False)
        return "paused until" in screen

    def one_ticket(self, n: int) -> None:
        box, ticket = self.box, f"B-{n}"
        plan = box.root / f"plan-{n}.md"
        plan.write_text(PLAN.format(go=box.root / "never"), encoding="utf-8")
        started = time.monotonic()
        self.rows["start"].append(timed(lambda: box.handoff("start", ticket, "--plan", str(plan),
                                                            "--yes", cwd=self.repo)))
        session = str(self.status(ticket)["session"])
        wait_until(lambda: self.paused(session), f"{ticket}'s implementer to pause", timeout=60,
                   interval=0.02)
        pid = self.status(ticket)["orchestrator"]
        if not isinstance(pid, int):
            raise BenchError(f"{ticket}: no orchestrator runs ({pid!r})")
        # a turn's first HOOKED_LOOK seconds are looked at every WORKING_LOOK (a blocker shows
        # at the turn's first request); the window is of the long wait after them
        time.sleep(max(0.0, started + HOOKED_LOOK + 1.0 - time.monotonic()))
        cpu, spawns, reaped = Window(pid).measure(self.idle)
        self.rows["rss"].append(rss_mib(pid))
        self.rows["cpu"].append(cpu)
        self.rows["spawns"].append(spawns)
        if reaped and not spawns:
            self.unseen_reaped += 1
        self.rows["recycle"].append(timed(lambda: box.handoff("recycle", ticket, "implementer",
                                                              cwd=self.repo)))
        wait_until(lambda: self.paused(session), f"{ticket}'s recycled implementer to pause",
                   timeout=60, interval=0.02)
        self.rows["close"].append(timed(lambda: box.handoff("close", ticket, "--force",
                                                            cwd=self.repo)))

    def one_raw(self, n: int) -> None:
        name, root = f"raw-{n}", self.box.root / "wt"
        impl, rev = root / name / "implementer", root / name / "reviewer"
        sleeper = ["sleep", "600"]

        def start() -> None:
            self.git("worktree", "add", "-q", "-b", name, str(impl), "HEAD")
            self.git("worktree", "add", "-q", "--detach", str(rev), "HEAD")
            self.box.tmux("new-session", "-d", "-s", name, "-n", "orchestrator", "--", *sleeper)
            for role, path in (("implementer", impl), ("reviewer", rev)):
                self.box.tmux("new-window", "-d", "-t", f"={name}:", "-n", role, "-c", str(path),
                              "--", *sleeper)

        def close() -> None:
            self.box.tmux("kill-session", "-t", f"={name}")
            self.git("worktree", "remove", "--force", str(impl))
            self.git("worktree", "remove", "--force", str(rev))

        self.raw_rows["start"].append(timed(start))
        self.raw_rows["recycle"].append(timed(lambda: self.box.tmux(
            "respawn-pane", "-k", "-t", f"={name}:implementer", "--", *sleeper)))
        self.raw_rows["close"].append(timed(close))

    def figures(self) -> list[Figure]:
        raw = {"start": "2 git worktree add, tmux new-session + 2 new-window",
               "recycle": "tmux respawn-pane -k", "close": "tmux kill-session, 2 git worktree remove"}
        out = [Figure(label, "ms", self.rows[key], self.raw_rows[key], raw[key])
               for key, label in (("start", "ticket: start (background)"),
                                  ("recycle", "ticket: recycle implementer"),
                                  ("close", "ticket: close --force"))]
        unseen = (f"; in {self.unseen_reaped} window(s) a reaped child's CPU grew while no child "
                  "was seen" if self.unseen_reaped else "")
        out += [Figure("waiting orchestrator: CPU", "% core", self.rows["cpu"],
                       targets=(Target("median", at_most=IDLE_CPU),),
                       note=f"its CPU clock plus its reaped children's cutime+cstime, over "
                            f"{self.idle:g} s windows while the implementer is paused"),
                Figure("waiting orchestrator: subprocesses", "per min", self.rows["spawns"],
                       targets=(Target("median", at_most=SPAWNS_PER_MINUTE),),
                       note=f"new pids in /proc/PID/task/*/children sampled every "
                            f"{SAMPLE * 1000:g} ms; no subprocess per tick (a 0.5 s tick was "
                            f"120/min; one look per 30 s is two tmux calls){unseen}"),
                Figure("waiting orchestrator: memory", "MiB", self.rows["rss"],
                       note="VmRSS from /proc/PID/status at the end of the window")]
        return out


def run(options: Options) -> list[Figure]:
    reps = options.reps_or(DEFAULT_REPS)
    with Sandbox("ticket", options.python) as box:
        bench = TicketRun(box, options.idle)
        for n in range(reps):
            print(f"bench: ticket: {n + 1}/{reps} …", file=sys.stderr, flush=True)
            in_turn(n, partial(bench.one_ticket, n), partial(bench.one_raw, n))
        return bench.figures()
