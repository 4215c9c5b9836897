"""Many tickets at once (--tickets N, 20 by default): each `handoff start --yes` of the demo's
two-round ticket in its own repo, all launched together in the background, with handoff
installed as a person installs it (bench.runtime_venv, unless --python) and no warm process
running yet (the first start starts it). It reports how long each `start` took to return
(counted from the moment all were launched), whether every ticket passed, how long until the
last one ended, the hand-over latency under that load, and each orchestrator's memory. Each
repetition is one such crowd. It takes minutes: it runs only when named (`python -m bench
crowd`).

`max_parallel` is the ticket count unless `--max-parallel N` says less: then the tickets
beyond N queue, and the most tickets seen with a live peer at once (tmux asked every 100 ms
while the crowd runs) is a figure whose target is N.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

from bench import handover
from bench.figures import Figure, Target
from bench.runtime_venv import runtime_python
from bench.sandbox import BenchError, Sandbox, wait_until
from bench.scenarios import Options
from handoff.machinery import relay
from handoff.operations import demo
from handoff.record.lock import holder

DEFAULT_REPS = 1
#: `start` returns within a second, with every ticket running: starting ten tickets is one
#: command per plan, not a wait per ticket
START_LIMIT = 1000.0
ENDED = ("passed", "escalated", "needs-human")


def orchestrator_memory(folders: list[Path]) -> list[tuple[float, float]]:
    """(PSS, RSS) in MiB of each ticket's orchestrator (its lock's holder) running now."""
    found = []
    for folder in folders:
        pid = holder(folder / "lock")
        if pid is None:
            continue
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text(encoding="utf-8")
        except OSError:
            continue
        kib = {line.split(":")[0]: int(line.split()[1]) for line in rollup.splitlines()
               if line.split(":")[0] in ("Pss", "Rss")}
        if len(kib) == 2:
            found.append((kib["Pss"] / 1024, kib["Rss"] / 1024))
    return found


def phase(folder: Path) -> str:
    try:
        return str(json.loads((folder / "state.json").read_text(encoding="utf-8"))["phase"])
    except (OSError, ValueError, KeyError):
        return ""


class LivePeers:
    """The most tickets with a live peer pane (any window but the orchestrator's) at once,
    asked of a tmux server every `every` seconds on a thread of its own while in a `with`
    (the crowd's; tests/e2e/test_queue.py's too)."""

    def __init__(self, socket: str, env: dict[str, str] | None = None,
                 every: float = 0.1) -> None:
        self.socket, self.env, self.every = socket, env, every
        #: the sessions of the most seen at once
        self.most: set[str] = set()
        self.looks = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> LivePeers:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            listed = subprocess.run(["tmux", "-L", self.socket, "list-panes", "-a", "-F",
                                     "#{session_name}\t#{window_name}\t#{pane_dead}"],
                                    capture_output=True, text=True, env=self.env,
                                    timeout=15).stdout
            live = {fields[0] for fields in (line.split("\t") for line in listed.splitlines())
                    if len(fields) == 3 and fields[1] != "orchestrator" and fields[2] == "0"}
            self.looks += 1
            if len(live) > len(self.most):
                self.most = live
            self._stop.wait(self.every)


class Crowd:
    def __init__(self, box: Sandbox, count: int, limit: int, warm: bool = False) -> None:
        self.box, self.count, self.limit, self.warm = box, count, limit, warm
        box.home.mkdir(parents=True, exist_ok=True)
        (box.home / "config.yaml").write_text(yaml.safe_dump({"max_parallel": limit}),
                                              encoding="utf-8")
        self.most: list[float] = []
        self.plan = box.root / "plan.md"
        self.plan.write_text(demo.plan_text(box.python), encoding="utf-8")
        self.returned: list[float] = []
        self.passed: list[float] = []
        self.ended: list[float] = []
        self.taken: list[float] = []
        self.onward: list[float] = []
        self.others: set[str] = set()
        #: (PSS, RSS) in MiB of each orchestrator running when every start had returned
        self.memory: list[tuple[float, float]] = []

    def once(self, k: int) -> None:
        box, count = self.box, self.count
        repos = []
        for n in range(count):
            folder = box.root / f"c{k}-{n}"
            folder.mkdir()
            repos.append(demo.make_repo(folder))
        names = [f"C{k}-{n}" for n in range(count)]
        if self.warm:  # a warm process running already, as after any command of the last minutes
            box.handoff("resume", "NO-SUCH-TICKET", cwd=repos[0], check=False)
        peers = LivePeers(self.box.socket, self.box.env)
        peers.__enter__()
        started = time.perf_counter()
        starts = [subprocess.Popen([box.python, "-m", "handoff", "start", name, "--plan",
                                    str(self.plan), "--yes"], cwd=repo, env=box.env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                  for name, repo in zip(names, repos, strict=True)]
        # each start's own return, seen by a thread of its own (reading them one after another
        # would charge a quick one with the wait for a slow one launched before it)
        returns: list[tuple[float, int, bytes]] = []

        def wait_for(child: subprocess.Popen[bytes]) -> None:
            _, err = child.communicate(timeout=300)
            returns.append(((time.perf_counter() - started) * 1000, child.returncode, err))

        waiters = [threading.Thread(target=wait_for, args=(child,)) for child in starts]
        for waiter in waiters:
            waiter.start()
        for waiter in waiters:
            waiter.join(timeout=310)
        for took, code, err in returns:
            if code != 0:
                raise BenchError(f"a start failed: {err.decode(errors='replace')[-400:]}")
            self.returned.append(took)
        if len(returns) != len(starts):
            raise BenchError("a start did not return within 300 s")
        folders = [next(box.home.glob(f"*/{name}")) for name in names]
        # each orchestrator's memory once all run (queued ones hold their lock too)
        wait_until(lambda: all(holder(f / "lock") is not None or phase(f) in ENDED
                               for f in folders),
                   "every orchestrator to run", timeout=60, interval=0.05)
        self.memory += orchestrator_memory(folders)
        # the bench's own polling, outside what it measures per ticket
        try:
            wait_until(lambda: all(phase(f) in ENDED for f in folders),
                       f"the crowd of {count} tickets to end", timeout=1200, interval=0.2)
        finally:
            peers.__exit__()
        self.ended.append(time.perf_counter() - started)
        self.most.append(len(peers.most))
        phases = [phase(f) for f in folders]
        self.passed.append(phases.count("passed"))
        self.others |= {p for p in phases if p != "passed"}
        for folder in folders:
            more_taken, more_onward = handover.hand_overs(folder / "events.jsonl")
            self.taken += more_taken
            self.onward += more_onward
        for name, repo in zip(names, repos, strict=True):
            box.handoff("close", name, cwd=repo, check=False)
        # the next crowd starts as this one did: without a warm process
        for pid in relay.end(box.home):
            wait_until(lambda pid=pid: not Path(f"/proc/{pid}").exists(),  # type: ignore[misc]
                       "the warm process to end", timeout=30, interval=0.05)

    def figures(self) -> list[Figure]:
        others = f"; others: {', '.join(sorted(self.others))}" if self.others else ""
        n = self.count
        return [
            Figure(f"{n} at once: start returned", "ms", self.returned,
                   targets=(Target("each", at_most=START_LIMIT),),
                   note="from the launch of all the starts to each one's return; "
                   + ("a warm process was running" if self.warm else
                      "no warm process was running: the first start started it")),
            Figure(f"{n} at once: tickets passed", "tickets", self.passed,
                   targets=(Target("each", at_least=n),), note=f"of {n}{others}"),
            Figure(f"{n} at once: the last ticket ended", "s", self.ended,
                   note="from the launch of all the starts"
                   + (f", max_parallel {self.limit}" if self.limit < n else "")),
            *([Figure(f"{n} at once, max_parallel {self.limit}: most with live peers",
                      "tickets", self.most, targets=(Target("each", at_most=self.limit),),
                      note="tickets with a live peer pane at once, tmux asked every 100 ms")]
              if self.limit < n else []),
            *handover.figures(f"{n} at once", self.taken, self.onward, 2.0),
            *([Figure(f"{n} at once: an orchestrator's memory, its own share (PSS)", "MiB",
                      [pss for pss, _ in self.memory],
                      note="/proc/PID/smaps_rollup of each ticket's lock holder once every "
                           "start returned: pages shared with the warm process and the other "
                           "orchestrators count a share each"),
               Figure(f"{n} at once: an orchestrator's memory, resident (RSS)", "MiB",
                      [rss for _, rss in self.memory],
                      note="the same processes, every page they map counted whole")]
              if self.memory else []),
        ]


def run(options: Options) -> list[Figure]:
    reps = options.reps_or(DEFAULT_REPS)
    # handoff as a person installs it (bench.runtime_venv), as the start-up figures are
    python = options.python or str(runtime_python())
    with Sandbox("crowd", python) as box:
        count = max(options.tickets, 1)
        crowd = Crowd(box, count, min(options.max_parallel or count, count), options.warm)
        for k in range(reps):
            print(f"bench: crowd: {crowd.count} tickets at once, {k + 1}/{reps} …",
                  file=sys.stderr, flush=True)
            crowd.once(k)
        return crowd.figures()
