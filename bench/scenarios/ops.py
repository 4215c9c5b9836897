"""handoff's own operations against the raw git, tmux and file operations they wrap.

Everything runs in this process, in one sandbox (HANDOFF_HOME, HOME, TMPDIR, TMUX_TMPDIR and the
git repo in its temp dir, a private tmux socket). Each figure holds one value per repetition,
handoff and raw interleaved (alternating which goes first); its note counts the subprocesses
one repetition runs (handoff's through `handoff.machinery.proc.run` and, for git,
`handoff.machinery.gitcmd.BoundedGit`, against the raw commands typed). What each raw baseline does:

* worktrees: `git worktree add` twice (a branch for the implementer, a detached reviewer) and
  `git worktree remove` twice, in a 500-file repo;
* tmux: `tmux new-session -d`, `kill-session`, `new-window -d`, `respawn-pane -k`, with a
  holder session keeping the server up so that no row pays the server's start;
* paste: `tmux send-keys -l TEXT` then `send-keys Enter` (handoff's paste waits before Enter);
* deliver: send-keys to the real scripted agent, then polling `capture-pane` every 10 ms
  until it printed that it took the message;
* watch: a poll loop every POLL_INTERVAL for the file against the inotify wake-up;
* files: json.dumps lines into one open file; json.dump of the same state;
* status: json.loads of each ticket's state.json and events.jsonl;
* the demo: one whole `handoff demo` (no baseline: the floor scenario holds the same loop
  against its raw floor).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

from bench.figures import Figure
from bench.sandbox import BenchError, Sandbox, wait_until
from bench.scenarios import Options
from bench.stats import in_turn, median
from handoff.machinery import proc
from handoff.machinery.gitcmd import BoundedGit
from handoff.machinery.peers import Peers, allowlisted_env
from handoff.machinery.repo import Repo
from handoff.machinery.tmux import HEIGHT, WIDTH, Tmux
from handoff.machinery.watch import POLL_INTERVAL, Watcher
from handoff.machinery.worktrees import TicketWorktrees
from handoff.phases import Phase
from handoff.providers import Launch, Provider
from handoff.providers.scripted import Scripted
from handoff.record.events import EventKind, EventLog
from handoff.record.ticket import State, TicketDir, ticket_dir
from handoff.signs import TOOK

DEFAULT_REPS = 9
SLEEP_ARGV = ("sleep", "600")
REPO_FILES = 500
EVENTS = 1000
TICKETS = 200
WAITING = "scripted: waiting for the next message"


class CallCounter:
    """Counts handoff's subprocesses by wrapping `handoff.machinery.proc.run` (looked up at call time)
    and GitPython's `BoundedGit.execute`."""

    def __init__(self) -> None:
        self.calls = 0
        self._original = proc.run
        self._git_original = BoundedGit.execute

    def install(self) -> None:
        original = self._original

        def counted(argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
            self.calls += 1
            return original(argv, **kwargs)

        setattr(proc, "run", counted)  # noqa: B010 - a plain assignment upsets mypy
        execute = self._git_original

        def counted_git(git: BoundedGit, command: Any, *args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return execute(git, command, *args, **kwargs)

        setattr(BoundedGit, "execute", counted_git)  # noqa: B010 - git's calls go through GitPython

    def restore(self) -> None:
        setattr(proc, "run", self._original)  # noqa: B010
        setattr(BoundedGit, "execute", self._git_original)  # noqa: B010


class Pair:
    """One figure's paired measurements: milliseconds and subprocess counts, both sides."""

    def __init__(self, ops: Ops, name: str, baseline: str, unit: str = "ms") -> None:
        self.ops, self.name, self.baseline, self.unit = ops, name, baseline, unit
        self.handoff_ms: list[float] = []
        self.raw_ms: list[float] = []
        self.handoff_calls: list[int] = []
        self.raw_calls: list[int] = []
        ops.pairs.append(self)

    def handoff(self, fn: Callable[[], object]) -> None:
        before = self.ops.counter.calls
        started = time.perf_counter()
        fn()
        self.handoff_ms.append((time.perf_counter() - started) * 1000)
        self.handoff_calls.append(self.ops.counter.calls - before)

    def raw(self, fn: Callable[[], object]) -> None:
        before = self.ops.raw_calls
        started = time.perf_counter()
        fn()
        self.raw_ms.append((time.perf_counter() - started) * 1000)
        self.raw_calls.append(self.ops.raw_calls - before)

    def both(self, i: int, handoff_fn: Callable[[], object], raw_fn: Callable[[], object]) -> None:
        """One repetition of each, alternating which goes first."""
        in_turn(i, lambda: self.handoff(handoff_fn), lambda: self.raw(raw_fn))

    def figure(self) -> Figure:
        calls = "/".join(str(int(median(c))) if c else "—"
                         for c in (self.handoff_calls, self.raw_calls))
        return Figure(self.name, self.unit, self.handoff_ms, self.raw_ms, self.baseline,
                      note=f"subprocesses handoff/raw: {calls}")


class SleepProvider(Provider):
    """A provider whose peer is a trivial long-running program (for launch timings)."""

    name = "sleep"

    def missing(self) -> str | None:
        return None

    def argv(self, launch: Launch) -> list[str]:
        return list(SLEEP_ARGV)


class Ops:
    """The sandbox, the counters and the pairs of one run of this scenario."""

    def __init__(self, box: Sandbox) -> None:
        self.box = box
        self.counter = CallCounter()
        self.raw_calls = 0
        self.pairs: list[Pair] = []
        self.tmux = Tmux(box.socket, box.root / "tmux-config")
        self.cwd = box.root / "work"

    def raw(self, *argv: str, check: bool = True) -> str:
        """One raw subprocess (git, tmux), the baseline handoff is compared with."""
        self.raw_calls += 1
        result = subprocess.run(list(argv), capture_output=True, text=True, timeout=60,
                                check=False)
        if check and result.returncode != 0:
            raise BenchError(f"{' '.join(argv[:4])} failed: {result.stderr.strip()}")
        return result.stdout.rstrip("\n")

    def tmux_raw(self, *args: str, check: bool = True) -> str:
        return self.raw("tmux", "-L", self.box.socket, *args, check=check)

    def make_repo(self, parent: Path) -> Repo:
        """A git repo of REPO_FILES small files in 25 folders, one commit."""
        top = parent / "repo"
        for n in range(REPO_FILES):
            path = top / f"pkg{n % 25:02d}" / f"mod{n:03d}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f'"""Module {n}."""\n\nVALUE = {n}\n\n\ndef f{n}() -> int:\n'
                            f"    return VALUE * 2\n", encoding="utf-8")
        self.raw("git", "-C", str(top), "init", "-q", "-b", "main")
        self.raw("git", "-C", str(top), "add", "-A")
        self.raw("git", "-C", str(top), "commit", "-q", "-m", "bench repo")
        return Repo.at(top)


def bench_worktrees(ops: Ops, reps: int) -> None:
    repo = ops.make_repo(ops.box.root)
    base = repo.resolve("HEAD")
    top = str(repo.top)
    create = Pair(ops, "TicketWorktrees.create_implementer+create_detached", "git worktree add x2")
    remove = Pair(ops, "TicketWorktrees.remove_all", "git worktree remove x2")

    def handoff_create(wt: TicketWorktrees) -> None:
        wt.create_implementer(base)
        wt.create_detached("reviewer", base)

    def raw_create(i: int, impl: str, rev: str) -> None:
        ops.raw("git", "-C", top, "worktree", "add", "-q", "-b", f"raw/R{i}", impl, base)
        ops.raw("git", "-C", top, "worktree", "add", "-q", "--detach", rev, base)

    def raw_remove(impl: str, rev: str) -> None:
        ops.raw("git", "-C", top, "worktree", "remove", impl)
        ops.raw("git", "-C", top, "worktree", "remove", rev)

    for i in range(reps):
        wt = TicketWorktrees(repo, f"B{i}")
        raw_root = repo.top / ".worktrees" / f"R{i}"  # excluded from git like handoff's own
        impl, rev = str(raw_root / "implementer"), str(raw_root / "reviewer")
        create.both(i, partial(handoff_create, wt), partial(raw_create, i, impl, rev))
        remove.both(i, wt.remove_all, partial(raw_remove, impl, rev))


def bench_tmux(ops: Ops, reps: int) -> None:
    tmux, cwd = ops.tmux, ops.cwd
    # One holder session keeps the server up (exit-empty on), so no row pays the server start.
    tmux.new_session("holder", "holder", SLEEP_ARGV, cwd)
    new = Pair(ops, "Tmux.new_session", "tmux new-session -d")
    stop = Pair(ops, "Peers.stop (kill the session)", "tmux kill-session")

    def raw_new_session(name: str) -> None:
        ops.tmux_raw("new-session", "-d", "-P", "-F", "#{pane_id}", "-s", name,
                     "-n", "orchestrator", "-x", str(WIDTH), "-y", str(HEIGHT),
                     "-c", str(cwd), "--", *SLEEP_ARGV)

    for i in range(reps):
        new.both(i, partial(tmux.new_session, f"h{i}", "orchestrator", SLEEP_ARGV, cwd),
                 partial(raw_new_session, f"r{i}"))
        stop.both(i, Peers(tmux, f"h{i}", ops.box.root / "tdir").stop,
                  partial(ops.tmux_raw, "kill-session", "-t", f"=r{i}"))

    launch = Pair(ops, "Peers.launch (new window)", "tmux new-window -d")
    relaunch = Pair(ops, "Peers.launch (relaunch: respawn)", "tmux respawn-pane -k")
    tmux.new_session("peers", "orchestrator", SLEEP_ARGV, cwd)
    ops.tmux_raw("new-session", "-d", "-s", "rawpeers", "-n", "orchestrator", "--", *SLEEP_ARGV)
    peers = Peers(tmux, "peers", ops.box.root / "tdir")
    provider = SleepProvider()
    env = allowlisted_env({"HANDOFF_ROLE": "implementer"})
    raw_panes: list[str] = []

    def raw_new_window() -> None:
        raw_panes.append(ops.tmux_raw("new-window", "-d", "-P", "-F", "#{pane_id}", "-t",
                                      "=rawpeers:", "-n", "implementer", "-c", str(cwd),
                                      "--", *SLEEP_ARGV))

    def raw_respawn() -> None:
        ops.tmux_raw("respawn-pane", "-k", "-t", raw_panes[-1], "-c", str(cwd), "--", *SLEEP_ARGV)

    for i in range(reps):
        brief = ops.box.root / "tdir" / "inbox" / "implementer" / f"brief-{i}.md"
        spec = Launch(ticket="BENCH-1", role="implementer", worktree=cwd, brief=brief)
        launch.both(i, partial(peers.launch, provider, spec, env), raw_new_window)
        relaunch.both(i, partial(peers.launch, provider, spec, env), raw_respawn)
        pane = peers.pane("implementer")  # untimed clean-up for the next repetition
        if pane is not None:
            tmux.kill_pane(pane.id)
        ops.tmux_raw("kill-pane", "-t", raw_panes[-1])


def bench_paste(ops: Ops, reps: int) -> None:
    tmux = ops.tmux
    tmux.new_session("paste", "cat", ("cat",), ops.cwd)
    pane = tmux.panes("paste")["cat"].id
    row = Pair(ops, "Tmux.paste (a one-line message)", "tmux send-keys -l + Enter")

    def raw_send(text: str) -> None:
        ops.tmux_raw("send-keys", "-t", pane, "-l", text)
        ops.tmux_raw("send-keys", "-t", pane, "Enter")

    for i in range(reps):
        text = f"Read and follow {ops.box.root}/inbox/brief-{i}.md"
        row.both(i, partial(tmux.paste, pane, text), partial(raw_send, text))
    tmux.kill_session("paste")


def write_brief(path: Path, fields: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # JSON is YAML: the scripted agent reads this frontmatter with yaml.safe_load.
    body = "\n".join(f"{key}: {json.dumps(value)}" for key, value in fields.items())
    path.write_text(f"---\n{body}\n---\n# Review round 1\n", encoding="utf-8")


def bench_deliver(ops: Ops, reps: int) -> None:
    """Peers.deliver to the real scripted agent (as reviewer) vs raw send-keys + polling."""
    tmux, tdir = ops.tmux, ops.box.root / "deliver"
    repo = ops.make_repo(ops.box.root / "deliver-repo")
    plan = tdir / "plan.md"
    plan.parent.mkdir(parents=True, exist_ok=True)
    plan.write_text("# bench plan\n\nNothing to do.\n", encoding="utf-8")
    head = repo.resolve("HEAD")

    def brief(name: str) -> Path:
        path = tdir / "inbox" / "reviewer" / f"brief-{name}.md"
        write_brief(path, {"role": "reviewer", "ticket": "BENCH-1", "round": 1,
                           "worktree": str(repo.top), "commit": head, "plan": str(plan),
                           "report": str(tdir / "reports" / f"review-{name}.md"),
                           "submit": ["true"], "tests": []})
        return path

    tmux.new_session("deliver", "orchestrator", SLEEP_ARGV, ops.cwd)
    peers = Peers(tmux, "deliver", tdir)
    provider = Scripted()
    env = allowlisted_env({"HANDOFF_ROLE": "reviewer"})
    pane = peers.launch(provider, Launch("BENCH-1", "reviewer", repo.top, brief("0")), env)
    done = [1]

    def settled() -> bool:
        screen = tmux.capture(pane)
        return sum(line.startswith(WAITING) for line in screen.splitlines()) >= done[0]

    wait_until(settled, "the scripted agent to finish its first brief", timeout=15)
    row = Pair(ops, "Peers.deliver -> scripted agent took it", "send-keys + poll capture 10ms")

    def via_handoff(path: Path) -> None:
        if not peers.deliver_brief(provider, "reviewer", path):
            raise BenchError(f"Peers.deliver did not get {path} taken")

    def via_raw(path: Path) -> None:
        message = f"Read and follow {path}"
        ops.tmux_raw("send-keys", "-t", pane, "-l", message)
        ops.tmux_raw("send-keys", "-t", pane, "Enter")
        wait_until(lambda: any(line.startswith(TOOK) and message in line for line in
                               ops.tmux_raw("capture-pane", "-p", "-J", "-S", "-", "-t",
                                            pane).splitlines()),
                   f"the scripted agent to take {path.name}", timeout=15)

    for i in range(reps):
        h_brief, r_brief = brief(f"h{i}"), brief(f"r{i}")
        order = ("raw", "handoff") if i % 2 else ("handoff", "raw")
        for kind in order:
            if kind == "handoff":
                row.handoff(partial(via_handoff, h_brief))
            else:
                row.raw(partial(via_raw, r_brief))
            done[0] += 1
            wait_until(settled, "the scripted agent to finish a brief", timeout=15)  # untimed
    tmux.kill_session("deliver")


def bench_watch(ops: Ops, reps: int) -> None:
    """Latency from a rename into a folder until the waiter notices it."""
    folder, staging = ops.box.root / "watch" / "inbox", ops.box.root / "watch" / "staging"
    folder.mkdir(parents=True)
    staging.mkdir(parents=True)
    rng = random.Random(1234)
    row = Pair(ops, "Watcher.wait wake-up after a rename",
               f"poll loop every {POLL_INTERVAL * 1000:.0f}ms")

    def renamer(name: str, delay: float, stamp: list[float]) -> threading.Thread:
        def go() -> None:
            time.sleep(delay)  # a random moment to rename at, not a synchronisation
            source = staging / name
            source.write_text("report\n", encoding="utf-8")
            stamp.append(time.perf_counter())
            os.rename(source, folder / name)

        thread = threading.Thread(target=go, daemon=True)
        thread.start()
        return thread

    with Watcher([folder]) as watcher:
        for i in range(reps):
            delay = rng.uniform(0.02, 0.15)
            for kind in (("h", "r") if i % 2 == 0 else ("r", "h")):
                while watcher.wait(0.0):  # drain the previous rename's events (untimed)
                    pass
                stamp: list[float] = []
                name = f"{kind}-{i}.md"
                thread = renamer(name, delay, stamp)
                deadline = time.monotonic() + 5
                if kind == "h":
                    while not watcher.wait(max(deadline - time.monotonic(), 0.0)):
                        if time.monotonic() > deadline:
                            raise BenchError("the watcher never woke up")
                else:
                    while not (folder / name).exists():
                        if time.monotonic() > deadline:
                            raise BenchError("the poll loop never saw the file")
                        time.sleep(POLL_INTERVAL)  # the baseline is this poll loop
                woke = time.perf_counter()
                thread.join()
                latency = (woke - stamp[0]) * 1000
                (row.handoff_ms if kind == "h" else row.raw_ms).append(latency)
                (row.handoff_calls if kind == "h" else row.raw_calls).append(0)


def sample_state(box: Sandbox, ticket: str) -> State:
    return State(ticket=ticket, repo=str(box.root / "repo"), repo_key="repo-0123456789",
                 phase=Phase.REVIEWING, round=2, commits={"1": "a" * 40, "2": "b" * 40},
                 verdicts={"1": "fail"}, findings={"1": ["wordcount.py:3 miscounts"]},
                 worktrees={"implementer": "/x/implementer", "reviewer": "/x/reviewer"})


def bench_files(ops: Ops, reps: int) -> None:
    folder = ops.box.root / "files"
    folder.mkdir()
    events = Pair(ops, f"EventLog.append x{EVENTS}", "json.dumps lines, one open file")
    stamp = "2025-01-01T00:00:00.000+00:00"
    for i in range(reps):
        log = EventLog(folder / f"h{i}" / "events.jsonl")
        raw_path = folder / f"r{i}.jsonl"

        def append_all(log: EventLog = log) -> None:
            for k in range(EVENTS):
                log.append("brief", round=k % 3, role="implementer", brief=f"brief-{k}.md")

        def dump_all(path: Path = raw_path) -> None:
            with path.open("a", encoding="utf-8") as handle:
                for k in range(EVENTS):
                    handle.write(json.dumps({"time": stamp, "kind": "handoff", "round": k % 3,
                                             "role": "implementer", "brief": f"brief-{k}.md"})
                                 + "\n")

        events.both(i, append_all, dump_all)

    save = Pair(ops, "TicketDir.save (state.json)", "json.dump to a file")
    tdir = TicketDir(folder / "ticket" / "BENCH-1")
    tdir.path.mkdir(parents=True)
    state = sample_state(ops.box, "BENCH-1")
    raw_state = folder / "raw-state.json"

    def dump_state() -> None:
        with raw_state.open("w", encoding="utf-8") as handle:
            json.dump(asdict(state), handle, indent=2, sort_keys=True)

    for i in range(reps * 6):
        save.both(i, lambda: tdir.save(state), dump_state)


def bench_status(ops: Ops, reps: int) -> None:
    """`handoff status`'s work per ticket (standing.status over TICKETS tickets, in process)
    against reading each ticket's state.json and events.jsonl with json.loads."""
    from handoff.operations import standing

    home = ops.box.root / "status-home"
    for n in range(TICKETS):
        tdir = ticket_dir(home, "repo-0123456789", f"S-{n}")
        tdir.path.mkdir(parents=True)
        tdir.save(sample_state(ops.box, f"S-{n}"))
        kinds: tuple[EventKind, ...] = ("orchestrator", "phase", "brief", "submission", "phase")
        for kind in kinds:
            tdir.events.append(kind, round=1, role="implementer")
    row = Pair(ops, f"status per ticket ({TICKETS} tickets)",
               "json.loads of each state.json and events.jsonl", unit="µs")

    def raw_read() -> None:
        for path in sorted(home.glob("*/*/state.json")):
            json.loads(path.read_text(encoding="utf-8"))
            [json.loads(line) for line in
             (path.parent / "events.jsonl").read_text(encoding="utf-8").splitlines() if line]

    def read_all() -> None:
        if len(standing.status(home)) != TICKETS:
            raise BenchError("handoff status did not list every ticket")

    for i in range(reps):
        row.both(i, read_all, raw_read)
    # milliseconds for all tickets -> microseconds per ticket
    row.handoff_ms = [v * 1000 / TICKETS for v in row.handoff_ms]
    row.raw_ms = [v * 1000 / TICKETS for v in row.raw_ms]


def bench_demo(ops: Ops) -> Figure:
    """One whole `handoff demo` (a subprocess with its own HANDOFF_HOME and socket)."""
    argv = [sys.executable, "-m", "handoff", "demo"]
    demo_tmp = ops.box.root / "demo-tmp"
    demo_tmp.mkdir()
    env = dict(os.environ, HANDOFF_HOME=str(ops.box.root / "demo-home"),
               HANDOFF_TMUX_SOCKET=ops.box.new_socket(), TMPDIR=str(demo_tmp))
    started = time.perf_counter()
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180,
                            check=False)
    took = (time.perf_counter() - started) * 1000
    finished = [line for line in result.stdout.splitlines()
                if line.startswith("demo ") and not line.startswith("demo repo:")]
    summary = (finished[-1] if finished and result.returncode == 0 else
               f"exit {result.returncode}: {(result.stderr or result.stdout).strip()[-300:]}")
    return Figure("handoff demo (whole loop, 2 rounds)", "ms",
                  [took] if result.returncode == 0 else [],
                  note=f"once; the floor scenario holds it against its raw floor; {summary}")


def run(options: Options) -> list[Figure]:
    reps = options.reps_or(DEFAULT_REPS)
    with Sandbox("ops") as box:
        box.apply()
        ops = Ops(box)
        ops.counter.install()
        try:
            sections: list[tuple[str, Callable[[], None]]] = [
                ("worktrees", lambda: bench_worktrees(ops, reps)),
                ("tmux", lambda: bench_tmux(ops, reps * 2)),
                ("paste", lambda: bench_paste(ops, reps)),
                ("deliver", lambda: bench_deliver(ops, max(reps - 1, 1))),
                ("watch", lambda: bench_watch(ops, reps * 2)),
                ("files", lambda: bench_files(ops, reps)),
                ("status", lambda: bench_status(ops, reps)),
            ]
            for name, section in sections:
                print(f"bench: ops: {name} …", file=sys.stderr, flush=True)
                section()
            print("bench: ops: handoff demo …", file=sys.stderr, flush=True)
            demo = bench_demo(ops)
        finally:
            ops.counter.restore()
    return [*(pair.figure() for pair in ops.pairs), demo]
