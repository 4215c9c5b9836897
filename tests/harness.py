"""Driving handoff as a user does, for the end-to-end tests: the real CLI in subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import libtmux
import yaml

from tests.conftest import unittest_argv, wait_until

T = TypeVar("T")

FIX_ADD = {"file": "calc.py", "replace": "return a - b", "with": "return a + b"}
FIX_MUL = {"file": "calc.py", "replace": "    return a + b\n\n\ndef neg",
           "with": "    return a * b\n\n\ndef neg"}
FIX_NEG = {"file": "calc.py", "replace": "    return a\n", "with": "    return -a\n"}
TOUCH_README = {"file": "NOTES.md", "content": "unrelated change\n"}
#: a must-fix a scripted security reviewer raises on round 1's commit ...
LOGGED: dict[str, Any] = {"file": "calc.py", "line": 2,
                          "reason": "the sum is written to a world-readable log"}
#: ... and round 2's mend of it: the line it named changes
MEND = {"file": "calc.py", "replace": "    return a + b\n\n\ndef mul",
        "with": "    return a + b  # not logged\n\n\ndef mul"}

ALL_TESTS = unittest_argv("tests.test_calc")
ADD_ONLY = unittest_argv("tests.test_calc.AddTest")


def plan_text(rounds: dict[int, dict[str, Any]], test: list[str] | None = None,
              review: list[list[str]] | None = None, **more: Any) -> str:
    front: dict[str, Any] = dict(more)
    if test is not None:
        front["test"] = test
    if review is not None:
        front["review"] = review
    head = f"---\n{yaml.safe_dump(front, width=1000)}---\n" if front else ""
    blocks = "".join(
        f"```handoff-script\n{yaml.safe_dump({'round': n, **spec}, width=1000)}```\n\n"
        for n, spec in rounds.items())
    return f"{head}# Fix calc\n\nMake the calc tests pass.\n\n{blocks}"


def write_plan(folder: Path, text: str, name: str = "plan.md") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def handoff(*args: str, cwd: Path | None = None, timeout: float = 90,
            input_text: str | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([sys.executable, "-m", "handoff", *args], cwd=cwd,
                              capture_output=True, text=True, timeout=timeout,
                              input=input_text or "", env=dict(os.environ) if env is None
                              else env)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"handoff {' '.join(args)} hung for {timeout}s\n"
                             f"output: {exc.stdout!r}\n{diagnose()}") from None


def diagnose() -> str:
    """Every ticket's events and every pane's screen: what a hang looked like, for CI logs."""
    home = Path(os.environ["HANDOFF_HOME"])
    parts = []
    for log in sorted(home.glob("*/*/events.jsonl")):
        parts.append(f"== {log}\n{log.read_text()[-6000:]}")
    socket = os.environ["HANDOFF_TMUX_SOCKET"]
    panes = subprocess.run(["tmux", "-L", socket, "list-panes", "-a", "-F",
                            "#{pane_id} #{session_name}:#{window_name} dead=#{pane_dead}"],
                           capture_output=True, text=True, timeout=15).stdout
    for line in panes.splitlines():
        screen = subprocess.run(["tmux", "-L", socket, "capture-pane", "-p", "-t",
                                 line.split()[0]], capture_output=True, text=True,
                                timeout=15).stdout
        parts.append(f"== pane {line}\n{screen.strip()[-3000:]}")
    return "\n".join(parts)


def spawn(*args: str, cwd: Path | None = None, log: Path) -> subprocess.Popen[bytes]:
    """A long-running handoff (a foreground orchestrator), its output to log."""
    handle = log.open("wb")
    return subprocess.Popen([sys.executable, "-m", "handoff", *args], cwd=cwd, stdout=handle,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=dict(os.environ))


def ticket_path(home: Path, ticket: str) -> Path:
    matches = list(home.glob(f"*/{ticket}/state.json"))
    assert len(matches) == 1, f"expected one ticket dir for {ticket}, found {matches}"
    return matches[0].parent


def state(home: Path, ticket: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ticket_path(home, ticket) / "state.json").read_text())
    return data


def events(home: Path, ticket: str) -> list[dict[str, Any]]:
    path = ticket_path(home, ticket) / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_phase(home: Path, ticket: str, *phases: str, timeout: float = 60) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        if not list(home.glob(f"*/{ticket}/state.json")):
            return None
        current = state(home, ticket)
        return current if current["phase"] in phases else None
    return explained(lambda: wait_until(reached, timeout, f"{ticket} to reach {phases}"))


def wait_event(home: Path, ticket: str, kind: str, timeout: float = 60,
               **match: Any) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        if not list(home.glob(f"*/{ticket}/events.jsonl")):
            return None
        for event in events(home, ticket):
            if event["kind"] == kind and all(event.get(k) == v for k, v in match.items()):
                return event
        return None
    return explained(lambda: wait_until(found, timeout, f"event {kind} {match} of {ticket}"))


def wait_briefed(home: Path, ticket: str, role: str, timeout: float = 60) -> dict[str, Any]:
    """The role's peer handed its brief: launched on it, or (a warm reviewer) pasted it."""
    def found() -> dict[str, Any] | None:
        if not list(home.glob(f"*/{ticket}/events.jsonl")):
            return None
        return next((e for e in events(home, ticket) if e.get("role") == role and (
            e["kind"] == "brief" or (e["kind"] == "launch" and e.get("brief")))), None)
    return explained(lambda: wait_until(found, timeout, f"{role}'s brief in {ticket}"))


def final_report(home: Path, ticket: str, timeout: float = 30) -> str:
    """The ticket's final report, waited for: it is written just after the phase changed."""
    path = ticket_path(home, ticket) / "final-report.md"
    wait_until(path.is_file, timeout, f"{ticket}'s final report")
    return path.read_text(encoding="utf-8")


def explained(wait: Callable[[], T]) -> T:
    """A wait whose timeout failure carries the diagnosis."""
    try:
        return wait()
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{diagnose()}") from None


def worktree_count(repo: Path) -> int:
    out = subprocess.run(["git", "-C", str(repo), "worktree", "list", "--porcelain"],
                         capture_output=True, text=True, check=True, timeout=30).stdout
    return sum(1 for line in out.splitlines() if line.startswith("worktree "))


def windows(socket: str, session: str) -> dict[str, bool]:
    """Window name → pane alive, read with libtmux: a second, independent tmux client."""
    server = libtmux.Server(socket_name=socket)
    found = server.sessions.get(session_name=session, default=None)
    if found is None:
        return {}
    return {str(w.window_name): w.active_pane is not None and w.active_pane.pane_dead != "1"
            for w in found.windows}


def with_inotify_watches(limit: int, argv: list[str]) -> list[str]:
    """argv run in a user namespace of its own whose inotify watches are capped at limit (a
    real kernel limit, as a busy machine reaches fs.inotify.max_user_watches), nothing else
    of the machine changed."""
    return ["unshare", "--user", "--map-root-user", "sh", "-c",
            f'echo {limit} > /proc/sys/user/max_inotify_watches && exec "$@"', "sh", *argv]


def tmux_alive(socket: str) -> bool:
    done = subprocess.run(["tmux", "-L", socket, "list-sessions"], capture_output=True,
                          timeout=15)
    return done.returncode == 0


def processes_of(home: Path, *names: str) -> list[str]:
    """Live processes started for this test's tickets (their environment names its
    HANDOFF_HOME) whose command line mentions one of names: what must be gone after close."""
    found = []
    marker = f"HANDOFF_HOME={home}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        if stat.rsplit(")", 1)[-1].split()[0] == "Z":
            continue  # a zombie has exited; only its parent's bookkeeping is left
        if marker in environ and any(name in cmdline for name in names):
            found.append(f"{proc.name}: {cmdline[:200]}")
    return found


def release(folder: Path, name: str) -> None:
    """Write the flag a paused scripted peer waits for (`pause_until: name`): in the ticket
    folder and in every role's drafts folder, which is all of the ticket folder a sandboxed
    tester or reviewer sees."""
    (folder / name).write_text("go\n")
    for drafts in (folder / "drafts").glob("*/"):
        (drafts / name).write_text("go\n")


def type_into(home: Path, ticket: str, role: str, text: str) -> None:
    """text typed into the role's pane, then Enter, as a person at its terminal would."""
    st = state(home, ticket)
    target = f"={st['session']}:{role}"
    for keys in (["-l", text], ["Enter"]):
        subprocess.run(["tmux", "-L", st["socket"], "send-keys", "-t", target, *keys],
                       check=True, timeout=15)


def running(*argv: str) -> int | None:
    """The pid of a live process whose command line starts with argv (a `sleep` of a length
    nothing else uses: a sandboxed process's own pids are its namespace's, its command line is
    how it is found from outside)."""
    wanted = [part.encode() for part in argv]
    for entry in Path("/proc").iterdir():
        try:
            found = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if found[:len(wanted)] == wanted:
            return int(entry.name)
    return None


def in_peer(home: Path, ticket: str, role: str, argv: list[str],
            timeout: float = 90) -> subprocess.CompletedProcess[str]:
    """argv run in the role's own session, as a person types `!command` into its terminal
    (the scripted agent's bash mode, as Claude Code's): a command of the peer's CLI itself.
    Its output and exit status come back through files in the role's drafts folder, which a
    sandboxed peer may write."""
    import shlex
    import uuid

    drafts = ticket_path(home, ticket) / "drafts" / role
    drafts.mkdir(parents=True, exist_ok=True)
    token = uuid.uuid4().hex[:8]
    out, err, status = (drafts / f"run-{token}.{name}" for name in ("out", "err", "status"))
    command = (f"{shlex.join(argv)} > {shlex.quote(str(out))} 2> {shlex.quote(str(err))}; "
               f"echo $? > {shlex.quote(str(status))}")
    type_into(home, ticket, role, f"!{command}")

    def done() -> str | None:
        text = status.read_text().strip() if status.exists() else ""
        return text if text.isdigit() else None
    code = wait_until(done, timeout, f"`{' '.join(argv[:3])}` to run in the {role}'s session")
    return subprocess.CompletedProcess(argv, int(code), out.read_text(), err.read_text())


def as_peer(home: Path, ticket: str, role: str) -> dict[str, str]:
    """The environment of the role's live peer process: what a command typed in that peer's
    own terminal runs with (run from elsewhere, it is still not the peer's: `in_peer`)."""
    st = state(home, ticket)
    panes = subprocess.run(["tmux", "-L", st["socket"], "list-panes", "-s", "-t",
                            f"={st['session']}", "-F", "#{window_name} #{pane_pid}"],
                           capture_output=True, text=True, timeout=15, check=True).stdout
    pids = [line.split()[1] for line in panes.splitlines() if line.split()[0] == role]
    assert pids, f"no {role} pane in {panes!r}"

    def launched() -> dict[str, str] | None:
        # the pane's launcher replaces itself by the CLI: until then its environment is tmux's
        if b"launcher.py" in Path(f"/proc/{pids[0]}/cmdline").read_bytes():
            return None
        environ = Path(f"/proc/{pids[0]}/environ").read_bytes().split(b"\0")
        return dict(entry.decode().split("=", 1) for entry in environ if b"=" in entry)
    return wait_until(launched, timeout=30, what=f"the {role}'s launcher to start its CLI")


def pane_screen(folder: Path, role: str, current: dict[str, object]) -> str:
    """What the role's pane shows, read with plain tmux on the ticket's socket."""
    done = subprocess.run(["tmux", "-L", str(current["socket"]), "capture-pane", "-p", "-t",
                           f"={current['session']}:{role}"], capture_output=True, text=True,
                          timeout=15)
    return done.stdout


def paused_ticket(repo: Path, tmp_path: Path, home: Path, ticket: str,
                  **script: object) -> tuple[subprocess.Popen[bytes], Path, dict[str, object]]:
    """A foreground orchestrator whose implementer committed round 1 and now waits (paused
    before its report) for a file `go` in the ticket folder (which a sandboxed peer sees, unlike
    the test's own folder); returns it, the ticket folder and its state."""
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD], "pause_before_report": "go",
                                               **script}}, test=ADD_ONLY))
    runner = spawn("start", ticket, "--plan", str(plan), "--yes", "--foreground", cwd=repo,
                   log=tmp_path / f"{ticket}.log")
    wait_event(home, ticket, "launch", role="implementer")
    folder = ticket_path(home, ticket)
    current = state(home, ticket)
    wait_until(lambda: "paused until" in pane_screen(folder, "implementer", current),
               what="the implementer to commit and pause")
    return runner, folder, current


def stop_runner(runner: subprocess.Popen[bytes]) -> None:
    if runner.poll() is None:
        runner.kill()
    runner.wait(timeout=30)


def assert_clean_error(done: subprocess.CompletedProcess[str], code: int, *needles: str) -> None:
    """done failed as the CLI's contract says: its exit code, one `handoff: error:` line with
    each of needles, no traceback."""
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout
    assert done.stderr.startswith("handoff: error:"), done.stderr
    for needle in needles:
        assert needle in done.stderr, (needle, done.stderr)
