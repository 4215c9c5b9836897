"""On-demand benchmark: handoff's own operations against the raw git/tmux/file operations they wrap.

    .venv/bin/python bench/run.py [--no-demo] [--reps N]
    .venv/bin/python -m bench.run

Everything happens in one temp dir (HANDOFF_HOME, HOME, TMPDIR, TMUX_TMPDIR, the git repo) and
on a private, uniquely named tmux socket; the tmux servers, their socket files and the temp dir
are removed at the end, also on an error or a signal. Each row is the median of several
repetitions, handoff and raw interleaved; "calls" counts the subprocesses one repetition runs
(handoff's through `handoff.proc.run` and, for git, `handoff.gitcmd.BoundedGit`). Nothing here
asserts a timing: it is a report.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any

from handoff import proc
from handoff.events import EventLog
from handoff.gitcmd import BoundedGit
from handoff.peers import Peers, allowlisted_env
from handoff.providers import Launch, Provider
from handoff.providers.scripted import TOOK, Scripted
from handoff.repo import Repo
from handoff.ticket import State, TicketDir
from handoff.tmux import HEIGHT, WIDTH, Tmux
from handoff.watch import POLL_INTERVAL, Watcher
from handoff.worktrees import TicketWorktrees

SLEEP_ARGV = ("sleep", "600")
REPO_FILES = 500
EVENTS = 1000
WAITING = "scripted: waiting for the next message"


# --------------------------------------------------------------------------------------------
# measuring


class CallCounter:
    """Counts handoff's subprocesses by wrapping `handoff.proc.run` (looked up at call time)."""

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
        execute = BoundedGit.execute

        def counted_git(git: BoundedGit, command: Any, *args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return execute(git, command, *args, **kwargs)

        setattr(BoundedGit, "execute", counted_git)  # noqa: B010 - git's calls go through GitPython

    def restore(self) -> None:
        setattr(proc, "run", self._original)  # noqa: B010
        setattr(BoundedGit, "execute", self._git_original)  # noqa: B010


HANDOFF_CALLS = CallCounter()
RAW_CALLS = [0]


def raw(*argv: str, input_text: str | None = None, check: bool = True) -> str:
    """One raw subprocess (git, tmux), the baseline handoff is compared with."""
    RAW_CALLS[0] += 1
    result = subprocess.run(list(argv), input=input_text, capture_output=True, text=True,
                            timeout=60, check=False)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} failed: {result.stderr.strip()}")
    return result.stdout.rstrip("\n")


@dataclass
class Row:
    name: str
    raw_name: str
    handoff_ms: list[float] = field(default_factory=list)
    raw_ms: list[float] = field(default_factory=list)
    handoff_calls: list[int] = field(default_factory=list)
    raw_calls: list[int] = field(default_factory=list)

    def handoff(self, fn: Callable[[], object]) -> None:
        before = HANDOFF_CALLS.calls
        started = time.perf_counter()
        fn()
        self.handoff_ms.append((time.perf_counter() - started) * 1000)
        self.handoff_calls.append(HANDOFF_CALLS.calls - before)

    def raw(self, fn: Callable[[], object]) -> None:
        before = RAW_CALLS[0]
        started = time.perf_counter()
        fn()
        self.raw_ms.append((time.perf_counter() - started) * 1000)
        self.raw_calls.append(RAW_CALLS[0] - before)

    def both(self, i: int, handoff_fn: Callable[[], object], raw_fn: Callable[[], object]) -> None:
        """One repetition of each, alternating which goes first."""
        if i % 2:
            self.raw(raw_fn)
            self.handoff(handoff_fn)
        else:
            self.handoff(handoff_fn)
            self.raw(raw_fn)


def wait_until(check: Callable[[], bool], what: str, timeout: float = 15.0,
               interval: float = 0.01) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def fmt_ms(value: float) -> str:
    return "—" if value != value else (f"{value:.2f}" if value < 10 else f"{value:.1f}")


def render(rows: Sequence[Row]) -> str:
    header = ("operation", "handoff ms", "raw ms", "ratio", "calls h/r", "n", "raw baseline")
    lines: list[tuple[str, ...]] = [header]
    for row in rows:
        h, r = median(row.handoff_ms), median(row.raw_ms)
        ratio = ("—" if r != r or h != h or r == 0 else
                 f"{h / r:.2f}x" if h / r >= 0.1 else f"{h / r:.4f}x")
        calls = "/".join(str(int(median(c))) if c else "—"
                         for c in (row.handoff_calls, row.raw_calls))
        lines.append((row.name, fmt_ms(h), fmt_ms(r), ratio, calls,
                      str(len(row.handoff_ms)), row.raw_name))
    widths = [max(len(line[c]) for line in lines) for c in range(len(header))]
    right = {1, 2, 3, 4, 5}
    out = []
    for n, line in enumerate(lines):
        cells = [cell.rjust(widths[c]) if c in right else cell.ljust(widths[c])
                 for c, cell in enumerate(line)]
        out.append("  ".join(cells).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


# --------------------------------------------------------------------------------------------
# the sandbox


class SleepProvider(Provider):
    """A provider whose peer is a trivial long-running program (for launch timings)."""

    name = "sleep"

    def missing(self) -> str | None:
        return None

    def argv(self, launch: Launch) -> list[str]:
        return list(SLEEP_ARGV)


class Sandbox:
    """Temp dir, environment and private tmux socket of one benchmark run."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="handoff-bench-")).resolve()
        self.socket = f"handoff-bench-{uuid.uuid4().hex[:10]}"
        self.demo_socket = f"{self.socket}-demo"
        self._saved_env = dict(os.environ)
        home = self.root / "home"
        home.mkdir()
        (home / ".gitconfig").write_text(
            "[user]\n\tname = handoff bench\n\temail = bench@handoff.invalid\n"
            "[init]\n\tdefaultBranch = main\n", encoding="utf-8")
        tmux_tmpdir = self.root / "t"
        tmux_tmpdir.mkdir()
        env = {
            "HOME": str(home),
            "HANDOFF_HOME": str(self.root / "state"),
            "HANDOFF_TMUX_SOCKET": self.socket,
            "XDG_STATE_HOME": str(self.root / "xdg-state"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "TMPDIR": str(self.root / "tmp"),
        }
        (self.root / "tmp").mkdir()
        # A socket path must stay short (sun_path is ~104 bytes); else tmux's default dir.
        if len(str(tmux_tmpdir / f"tmux-{os.getuid()}" / self.demo_socket)) < 100:
            env["TMUX_TMPDIR"] = str(tmux_tmpdir)
        os.environ.update(env)
        for name in ("TMUX", "TMUX_PANE", "HANDOFF_TICKET_DIR", "HANDOFF_ROLE", "HANDOFF_TICKET"):
            os.environ.pop(name, None)
        self.tmux = Tmux(self.socket, self.root / "tmux-config")
        self.cwd = self.root / "work"
        self.cwd.mkdir()

    def socket_file(self, socket: str) -> Path:
        return Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}" / socket

    def tmux_raw(self, *args: str, check: bool = True) -> str:
        return raw("tmux", "-L", self.socket, *args, check=check)

    def close(self) -> None:
        for socket in (self.socket, self.demo_socket):
            if shutil.which("tmux"):
                subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True,
                               timeout=15, check=False)
            self.socket_file(socket).unlink(missing_ok=True)
        os.environ.clear()
        os.environ.update(self._saved_env)
        shutil.rmtree(self.root, ignore_errors=True)


def make_repo(parent: Path) -> Repo:
    """A git repo of REPO_FILES small files in 25 folders, one commit."""
    top = parent / "repo"
    for n in range(REPO_FILES):
        path = top / f"pkg{n % 25:02d}" / f"mod{n:03d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'"""Module {n}."""\n\nVALUE = {n}\n\n\ndef f{n}() -> int:\n'
                        f"    return VALUE * 2\n", encoding="utf-8")
    raw("git", "-C", str(top), "init", "-q", "-b", "main")
    raw("git", "-C", str(top), "add", "-A")
    raw("git", "-C", str(top), "commit", "-q", "-m", "bench repo")
    return Repo.at(top)


# --------------------------------------------------------------------------------------------
# the benchmarks


def bench_worktrees(box: Sandbox, reps: int) -> list[Row]:
    repo = make_repo(box.root)
    base = repo.resolve("HEAD")
    top = str(repo.top)
    create = Row("TicketWorktrees.create_implementer+create_reviewer", "git worktree add x2")
    remove = Row("TicketWorktrees.remove_all", "git worktree remove x2")

    def handoff_create(wt: TicketWorktrees) -> None:
        wt.create_implementer(base)
        wt.create_reviewer(base)

    def raw_create(i: int, impl: str, rev: str) -> None:
        raw("git", "-C", top, "worktree", "add", "-q", "-b", f"raw/R{i}", impl, base)
        raw("git", "-C", top, "worktree", "add", "-q", "--detach", rev, base)

    def raw_remove(impl: str, rev: str) -> None:
        raw("git", "-C", top, "worktree", "remove", impl)
        raw("git", "-C", top, "worktree", "remove", rev)

    for i in range(reps):
        wt = TicketWorktrees(repo, f"B{i}")
        raw_root = repo.top / ".worktrees" / f"R{i}"  # excluded from git like handoff's own
        impl, rev = str(raw_root / "implementer"), str(raw_root / "reviewer")
        create.both(i, partial(handoff_create, wt), partial(raw_create, i, impl, rev))
        remove.both(i, wt.remove_all, partial(raw_remove, impl, rev))
    return [create, remove]


def bench_tmux(box: Sandbox, reps: int) -> list[Row]:
    tmux, cwd = box.tmux, box.cwd
    # One holder session keeps the server up (exit-empty on), so no row pays the server start.
    tmux.new_session("holder", "holder", SLEEP_ARGV, cwd)
    new = Row("Tmux.new_session", "tmux new-session -d")
    stop = Row("Peers.stop (kill the session)", "tmux kill-session")

    def raw_new_session(name: str) -> None:
        box.tmux_raw("new-session", "-d", "-P", "-F", "#{pane_id}", "-s", name,
                     "-n", "orchestrator", "-x", str(WIDTH), "-y", str(HEIGHT),
                     "-c", str(cwd), "--", *SLEEP_ARGV)

    for i in range(reps):
        new.both(i, partial(tmux.new_session, f"h{i}", "orchestrator", SLEEP_ARGV, cwd),
                 partial(raw_new_session, f"r{i}"))
        stop.both(i, Peers(tmux, f"h{i}", box.root / "tdir").stop,
                  partial(box.tmux_raw, "kill-session", "-t", f"=r{i}"))

    launch = Row("Peers.launch (new window)", "tmux new-window -d")
    relaunch = Row("Peers.launch (relaunch: respawn)", "tmux respawn-pane -k")
    tmux.new_session("peers", "orchestrator", SLEEP_ARGV, cwd)
    box.tmux_raw("new-session", "-d", "-s", "rawpeers", "-n", "orchestrator", "--", *SLEEP_ARGV)
    peers = Peers(tmux, "peers", box.root / "tdir")
    provider = SleepProvider()
    env = allowlisted_env({"HANDOFF_ROLE": "implementer"})
    raw_panes: list[str] = []

    def raw_new_window() -> None:
        raw_panes.append(box.tmux_raw("new-window", "-d", "-P", "-F", "#{pane_id}", "-t",
                                      "=rawpeers:", "-n", "implementer", "-c", str(cwd),
                                      "--", *SLEEP_ARGV))

    def raw_respawn() -> None:
        box.tmux_raw("respawn-pane", "-k", "-t", raw_panes[-1], "-c", str(cwd), "--", *SLEEP_ARGV)

    for i in range(reps):
        brief = box.root / "tdir" / "inbox" / "implementer" / f"brief-{i}.md"
        spec = Launch(ticket="BENCH-1", role="implementer", worktree=cwd, brief=brief)
        launch.both(i, partial(peers.launch, provider, spec, env), raw_new_window)
        relaunch.both(i, partial(peers.launch, provider, spec, env), raw_respawn)
        pane = peers.pane("implementer")  # untimed clean-up for the next repetition
        if pane is not None:
            tmux.kill_pane(pane.id)
        box.tmux_raw("kill-pane", "-t", raw_panes[-1])
    return [new, stop, launch, relaunch]


def bench_paste(box: Sandbox, reps: int) -> list[Row]:
    tmux = box.tmux
    tmux.new_session("paste", "cat", ("cat",), box.cwd)
    pane = tmux.panes("paste")["cat"].id
    row = Row("Tmux.paste (a one-line message)", "tmux send-keys -l + Enter")

    def raw_send(text: str) -> None:
        box.tmux_raw("send-keys", "-t", pane, "-l", text)
        box.tmux_raw("send-keys", "-t", pane, "Enter")

    for i in range(reps):
        text = f"Read and follow {box.root}/inbox/brief-{i}.md"
        row.both(i, partial(tmux.paste, pane, text), partial(raw_send, text))
    tmux.kill_session("paste")
    return [row]


def write_brief(path: Path, fields: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # JSON is YAML: the scripted agent reads this frontmatter with yaml.safe_load.
    body = "\n".join(f"{key}: {json.dumps(value)}" for key, value in fields.items())
    path.write_text(f"---\n{body}\n---\n# Review round 1\n", encoding="utf-8")


def bench_deliver(box: Sandbox, reps: int) -> list[Row]:
    """Peers.deliver to the real scripted agent (as reviewer) vs raw send-keys + polling."""
    tmux, tdir = box.tmux, box.root / "deliver"
    repo = make_repo(box.root / "deliver-repo")
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

    tmux.new_session("deliver", "orchestrator", SLEEP_ARGV, box.cwd)
    peers = Peers(tmux, "deliver", tdir)
    provider = Scripted()
    env = allowlisted_env({"HANDOFF_ROLE": "reviewer"})
    pane = peers.launch(provider, Launch("BENCH-1", "reviewer", repo.top, brief("0")), env)
    done = [1]

    def settled() -> bool:
        screen = tmux.capture(pane)
        return sum(line.startswith(WAITING) for line in screen.splitlines()) >= done[0]

    wait_until(settled, "the scripted agent to finish its first brief")
    row = Row("Peers.deliver -> scripted agent took it", "send-keys + poll capture 10ms")

    def via_handoff(path: Path) -> None:
        if not peers.deliver_brief(provider, "reviewer", path):
            raise RuntimeError(f"Peers.deliver did not get {path} taken")

    def via_raw(path: Path) -> None:
        message = f"Read and follow {path}"
        box.tmux_raw("send-keys", "-t", pane, "-l", message)
        box.tmux_raw("send-keys", "-t", pane, "Enter")
        wait_until(lambda: any(line.startswith(TOOK) and message in line for line in
                               box.tmux_raw("capture-pane", "-p", "-J", "-S", "-", "-t",
                                            pane).splitlines()),
                   f"the scripted agent to take {path.name}")

    for i in range(reps):
        h_brief, r_brief = brief(f"h{i}"), brief(f"r{i}")
        order = ("raw", "handoff") if i % 2 else ("handoff", "raw")
        for kind in order:
            if kind == "handoff":
                row.handoff(partial(via_handoff, h_brief))
            else:
                row.raw(partial(via_raw, r_brief))
            done[0] += 1
            wait_until(settled, "the scripted agent to finish a brief")  # untimed
    tmux.kill_session("deliver")
    return [row]


def bench_watch(box: Sandbox, reps: int) -> list[Row]:
    """Latency from a rename into a folder until the waiter notices it."""
    folder, staging = box.root / "watch" / "inbox", box.root / "watch" / "staging"
    folder.mkdir(parents=True)
    staging.mkdir(parents=True)
    rng = random.Random(1234)
    row = Row("Watcher.wait wake-up after a rename", f"poll loop every {POLL_INTERVAL * 1000:.0f}ms")

    def renamer(name: str, delay: float, stamp: list[float]) -> threading.Thread:
        def go() -> None:
            time.sleep(delay)
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
                            raise RuntimeError("the watcher never woke up")
                else:
                    while not (folder / name).exists():
                        if time.monotonic() > deadline:
                            raise RuntimeError("the poll loop never saw the file")
                        time.sleep(POLL_INTERVAL)
                woke = time.perf_counter()
                thread.join()
                latency = (woke - stamp[0]) * 1000
                (row.handoff_ms if kind == "h" else row.raw_ms).append(latency)
                (row.handoff_calls if kind == "h" else row.raw_calls).append(0)
    return [row]


def bench_files(box: Sandbox, reps: int) -> list[Row]:
    folder = box.root / "files"
    folder.mkdir()
    events = Row(f"EventLog.append x{EVENTS}", "json.dumps lines, one open file")
    stamp = "2025-01-01T00:00:00.000+00:00"
    for i in range(reps):
        log = EventLog(folder / f"h{i}" / "events.jsonl")
        raw_path = folder / f"r{i}.jsonl"

        def append_all(log: EventLog = log) -> None:
            for k in range(EVENTS):
                log.append("handoff", round=k % 3, role="implementer", brief=f"brief-{k}.md")

        def dump_all(path: Path = raw_path) -> None:
            with path.open("a", encoding="utf-8") as handle:
                for k in range(EVENTS):
                    handle.write(json.dumps({"time": stamp, "kind": "handoff", "round": k % 3,
                                             "role": "implementer", "brief": f"brief-{k}.md"})
                                 + "\n")

        events.both(i, append_all, dump_all)

    save = Row("TicketDir.save (state.json)", "json.dump to a file")
    tdir = TicketDir(folder / "ticket" / "BENCH-1")
    tdir.path.mkdir(parents=True)
    state = State(ticket="BENCH-1", repo=str(box.root / "repo"), repo_key="repo-0123456789",
                  phase="reviewing", round=2, commits={"1": "a" * 40, "2": "b" * 40},
                  verdicts={"1": "fail"}, findings={"1": ["wordcount.py:3 miscounts"]},
                  worktrees={"implementer": "/x/implementer", "reviewer": "/x/reviewer"})
    raw_state = folder / "raw-state.json"

    def dump_state() -> None:
        with raw_state.open("w", encoding="utf-8") as handle:
            json.dump(asdict(state), handle, indent=2, sort_keys=True)

    for i in range(reps * 6):
        save.both(i, lambda: tdir.save(state), dump_state)
    return [events, save]


def bench_demo(box: Sandbox) -> tuple[Row, str]:
    """One whole `handoff demo` (a subprocess with its own HANDOFF_HOME and socket)."""
    exe = Path(sys.executable).with_name("handoff")
    argv = [str(exe), "demo"] if exe.exists() else [sys.executable, "-m", "handoff", "demo"]
    demo_tmp = box.root / "demo-tmp"
    demo_tmp.mkdir()
    env = dict(os.environ, HANDOFF_HOME=str(box.root / "demo-home"),
               HANDOFF_TMUX_SOCKET=box.demo_socket, TMPDIR=str(demo_tmp))
    row = Row("handoff demo (whole loop, 2 rounds)", "—")
    started = time.perf_counter()
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180,
                            check=False)
    row.handoff_ms.append((time.perf_counter() - started) * 1000)
    finished = [line for line in result.stdout.splitlines()
                if line.startswith("demo ") and not line.startswith("demo repo:")]
    summary = (finished[-1] if finished and result.returncode == 0 else
               f"exit {result.returncode}: {(result.stderr or result.stdout).strip()[-300:]}")
    return row, summary


# --------------------------------------------------------------------------------------------


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--reps", type=int, default=9, help="repetitions per row (default 9)")
    parser.add_argument("--no-demo", action="store_true", help="skip the whole `handoff demo`")
    args = parser.parse_args(argv)
    for tool in ("git", "tmux"):
        if shutil.which(tool) is None:
            print(f"bench: {tool} is not installed", file=sys.stderr)
            return 6
    reps = max(args.reps, 1)
    previous = signal.signal(signal.SIGTERM, _terminate)
    HANDOFF_CALLS.install()
    box = Sandbox()
    started = time.perf_counter()
    rows: list[Row] = []
    notes: list[str] = []
    try:
        sections: list[tuple[str, Callable[[], list[Row]]]] = [
            ("worktrees", lambda: bench_worktrees(box, reps)),
            ("tmux", lambda: bench_tmux(box, reps * 2)),
            ("paste", lambda: bench_paste(box, reps)),
            ("deliver", lambda: bench_deliver(box, max(reps - 1, 1))),
            ("watch", lambda: bench_watch(box, reps * 2)),
            ("files", lambda: bench_files(box, reps)),
        ]
        for name, section in sections:
            print(f"bench: {name} …", file=sys.stderr, flush=True)
            rows.extend(section())
        if not args.no_demo:
            print("bench: handoff demo …", file=sys.stderr, flush=True)
            row, summary = bench_demo(box)
            rows.append(row)
            notes.append(f"demo: {summary}")
    finally:
        HANDOFF_CALLS.restore()
        box.close()
        signal.signal(signal.SIGTERM, previous)
    print(f"handoff bench: median of repetitions, ms (git {raw('git', '--version')[12:]}, "
          f"{raw('tmux', '-V')}, {REPO_FILES}-file repo); ratio = handoff / raw\n")
    print(render(rows))
    for note in notes:
        print(f"\n{note}")
    print(f"\ntotal {time.perf_counter() - started:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
