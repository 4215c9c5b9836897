"""tmux faults: the server killed or stopped mid-round, a peer's process or pane killed, and
secrets in the environment of the `handoff start` that started the server.

Each case runs a whole ticket with the scripted agents through the real CLI, real tmux on the
test's own socket and a real git repo. The fault is done with plain tmux and signals, as a
person or a crash would do it, while a peer waits for a `go` file in the ticket folder.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from handoff.machinery.patience import PATIENT_CALLS
from handoff.machinery.tmux import TIMEOUT_VARIABLE
from handoff.providers.signals import signal_argv
from handoff.signs import PROMPT
from tests.conftest import git, wait_until
from tests.faults.catalog import fault
from tests.harness import (
    ADD_ONLY,
    ALL_TESTS,
    FIX_ADD,
    FIX_MUL,
    FIX_NEG,
    events,
    final_report,
    handoff,
    plan_text,
    release,
    spawn,
    state,
    ticket_path,
    wait_event,
    wait_phase,
    write_plan,
)

#: seconds one tmux call may take in these tests ($HANDOFF_TMUX_TIMEOUT; 15 by default): the
#: bounds are what is tested, not their length
CALL_TIMEOUT = 5.0

SECRETS = {"AWS_SECRET_ACCESS_KEY": "aws-fault-secret-4f1c", "GITHUB_TOKEN": "ghp_fault_secret_9b2e"}


def tmux(socket: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Plain tmux on the test's socket, as a person (or a peer) would run it."""
    return subprocess.run(["tmux", "-L", socket, *args], capture_output=True, text=True,
                          timeout=15)


def screen(socket: str, session: str, role: str) -> str:
    return tmux(socket, "capture-pane", "-p", "-t", f"={session}:{role}").stdout


def pane_pid(socket: str, session: str, role: str) -> int:
    out = tmux(socket, "list-panes", "-t", f"={session}:{role}", "-F", "#{pane_pid}").stdout
    return int(out.split()[0])


def server_pid(socket: str) -> int:
    return int(tmux(socket, "display-message", "-p", "#{pid}").stdout.strip())


def environ(pid: int) -> str:
    return Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace").replace("\0", "\n")


def kinds(home: Path, ticket: str, kind: str, **match: Any) -> list[dict[str, Any]]:
    if not list(home.glob(f"*/{ticket}/events.jsonl")):
        return []  # not made yet
    return [e for e in events(home, ticket)
            if e["kind"] == kind and all(e.get(k) == v for k, v in match.items())]


def deaths_seen(home: Path, ticket: str, count: int) -> bool:
    return len(kinds(home, ticket, "death")) == count


def launches(home: Path, ticket: str, role: str) -> int:
    return len(kinds(home, ticket, "launch", role=role))


class Ticket:
    """A ticket run in the foreground whose peer (role) waits for `go` in round 1."""

    def __init__(self, ticket: str, repo: Path, tmp_path: Path, home: Path, socket: str,
                 role: str = "implementer", two_rounds: bool = False) -> None:
        self.ticket, self.repo, self.tmp_path, self.home, self.socket = (
            ticket, repo, tmp_path, home, socket)
        self.role = role
        round1: dict[str, Any] = {"edits": [FIX_ADD]}
        if role == "implementer":
            round1["pause_until"] = "go"
        else:
            round1["reviewer"] = {"pause_until": "go"}
        rounds = {1: round1, 2: {"edits": [FIX_MUL, FIX_NEG]}} if two_rounds else {1: round1}
        plan = plan_text(rounds, test=ADD_ONLY, review=[ALL_TESTS if two_rounds else ADD_ONLY])
        self.plan = write_plan(tmp_path, plan)
        self.log = tmp_path / f"{ticket}.log"
        self.runner = spawn("start", ticket, "--plan", str(self.plan), "--yes", "--foreground",
                            cwd=repo, log=self.log)

    @property
    def folder(self) -> Path:
        return ticket_path(self.home, self.ticket)

    @property
    def session(self) -> str:
        return str(state(self.home, self.ticket)["session"])

    def paused(self, launched: int = 1) -> None:
        """Wait until the role's launched-th process sits paused on its brief."""
        wait_until(lambda: launches(self.home, self.ticket, self.role) >= launched,
                   timeout=90, what=f"launch {launched} of the {self.role}")
        wait_until(lambda: "paused until" in screen(self.socket, self.session, self.role),
                   timeout=90, what=f"the {self.role} to pause")

    def go(self) -> None:
        release(self.folder, "go")

    def hook(self) -> None:
        """What the peer's CLI hook does when a turn starts: the shipped script drops a signal
        file, which wakes the orchestrator to look at the peer."""
        folder = self.folder / "signals" / self.role
        subprocess.run(signal_argv(folder, PROMPT), check=True, timeout=15,
                       stdin=subprocess.DEVNULL, capture_output=True)

    def finished(self, code: int = 0) -> dict[str, Any]:
        final = wait_phase(self.home, self.ticket, "passed", "escalated", timeout=180)
        assert self.runner.wait(timeout=60) == code, self.log.read_text()
        return final

    def kept(self, rounds: int) -> None:
        """What a finished ticket keeps: one commit per round, every report, the final one."""
        assert git(self.repo, "rev-list", "--count", f"main..handoff/{self.ticket}") == str(rounds)
        for n in range(1, rounds + 1):
            assert (self.folder / f"impl-report-{n}.md").is_file()
            assert (self.folder / f"review-report-{n}.md").is_file()
        assert (self.folder / "final-report.md").is_file()
        assert not kinds(self.home, self.ticket, "error")

    def end(self) -> None:
        if self.runner.poll() is None:
            self.runner.kill()
        self.runner.wait()


@pytest.mark.parametrize("role", ["implementer", "reviewer"])
@fault("13", "the tmux server killed (`tmux kill-server`) mid-round under a --foreground "
             "orchestrator, while the implementer or the reviewer works",
       "a `tmux` event says the server was gone; the session is made again as `resume` does "
       "and the peer relaunched on its brief (a bounded relaunch); the ticket finishes",
       "the ticket folder, both worktrees and the branch; every round's commit and reports")
def test_tmux_server_killed_mid_round_the_ticket_finishes(
        role: str, repo: Path, tmp_path: Path, handoff_home: Path, socket: str) -> None:
    run = Ticket("T-K", repo, tmp_path, handoff_home, socket, role=role,
                 two_rounds=role == "reviewer")
    try:
        run.paused()
        old_server = server_pid(socket)
        assert tmux(socket, "kill-server").returncode == 0

        gone = wait_event(handoff_home, "T-K", "tmux", state="server-gone", timeout=60)
        assert gone["role"] == role and "server" in gone["message"]
        remade = wait_event(handoff_home, "T-K", "session", reason="the tmux server was gone",
                            timeout=60)
        assert remade["session"] == run.session
        run.paused(launched=2)
        assert server_pid(socket) != old_server, "a new server runs the ticket's session"
        run.go()
        final = run.finished()
    finally:
        run.end()
    assert final["phase"] == "passed"
    relaunched = kinds(handoff_home, "T-K", "launch", role=role, reason="tmux server gone")
    assert len(relaunched) == 1 and relaunched[0]["round"] == 1
    assert not kinds(handoff_home, "T-K", "death"), "a lost server is not a peer's death"
    run.kept(rounds=2 if role == "reviewer" else 1)


@fault("", "a peer's process killed with SIGKILL, again and again, while it works",
       "each death is an event (with its transcript) and a relaunch on the same brief; past "
       "max_relaunches the ticket is needs-human, and an answer carries on the same round",
       "the peer's screens as transcripts; the round's commit and reports")
def test_peer_process_killed_is_relaunched_within_its_bound(
        repo: Path, tmp_path: Path, handoff_home: Path, socket: str) -> None:
    (repo / ".handoff.yaml").write_text("max_relaunches: 1\n", encoding="utf-8")
    git(repo, "add", ".handoff.yaml")
    git(repo, "commit", "-q", "-m", "config")
    run = Ticket("T-P", repo, tmp_path, handoff_home, socket)
    try:
        for killed in (1, 2):
            run.paused(launched=killed)
            os.kill(pane_pid(socket, run.session, "implementer"), signal.SIGKILL)
            wait_until(partial(deaths_seen, handoff_home, "T-P", killed), timeout=60,
                       what=f"death {killed} to be seen")
        waiting = wait_phase(handoff_home, "T-P", "needs-human", timeout=60)
        assert "died 2 times" in waiting["reason"]
        assert launches(handoff_home, "T-P", "implementer") == 2, "one relaunch, then a person"

        assert handoff("answer", "T-P", "Carry on.", cwd=repo).returncode == 0
        run.paused(launched=3)
        run.go()
        final = run.finished()
    finally:
        run.end()
    assert final["phase"] == "passed" and final["round"] == 1
    deaths = kinds(handoff_home, "T-P", "death")
    assert [d["existed"] for d in deaths] == [True, True]
    transcripts = list((run.folder / "transcripts").glob("implementer-*.log"))
    assert any("paused until" in t.read_text() for t in transcripts), "its screen was kept"
    run.kept(rounds=1)


@fault("", "a peer's tmux pane killed (`tmux kill-pane`) while it works",
       "the missing window is a death: an event, then the peer relaunched in a new window on "
       "the same brief, whatever its old process left running ended first",
       "the round's commit and reports; the session and the other windows")
def test_peer_pane_killed_is_relaunched_in_a_new_window(
        repo: Path, tmp_path: Path, handoff_home: Path, socket: str) -> None:
    run = Ticket("T-W", repo, tmp_path, handoff_home, socket)
    try:
        run.paused()
        assert tmux(socket, "kill-pane", "-t", f"={run.session}:implementer").returncode == 0
        death = wait_event(handoff_home, "T-W", "death", timeout=60)
        assert death["existed"] is False
        run.paused(launched=2)
        run.go()
        final = run.finished()
    finally:
        run.end()
    assert final["phase"] == "passed"
    assert kinds(handoff_home, "T-W", "launch", role="implementer", reason="relaunch")
    run.kept(rounds=1)


class Stop:
    """The tmux server stopped with SIGSTOP: every call hangs until its timeout."""

    def __init__(self, socket: str) -> None:
        self.socket, self.pid = socket, 0

    def fail(self) -> None:
        self.pid = server_pid(self.socket)
        os.kill(self.pid, signal.SIGSTOP)

    def mend(self) -> None:
        if self.pid:
            os.kill(self.pid, signal.SIGCONT)


class Refuse:
    """tmux refuses every client at once: the socket's folder became writable by others."""

    def __init__(self, tmpdir: Path) -> None:
        self.folder = tmpdir / f"tmux-{os.getuid()}"

    def fail(self) -> None:
        self.folder.chmod(0o777)

    def mend(self) -> None:
        self.folder.chmod(0o700)


def tmux_fails_then_resume_finishes(run: Ticket, fault: Stop | Refuse, said: str) -> float:
    """Break tmux under a paused peer: the orchestrator tells it, gives up within its bound
    (exit 1, an error event), relaunches nothing; once mended, `resume` finishes the ticket.
    Returns how long the orchestrator held on."""
    home, ticket = run.home, run.ticket
    try:
        run.paused()
        session, peer = run.session, pane_pid(run.socket, run.session, "implementer")
        fault.fail()
        began = time.monotonic()
        # a hook fires while tmux is out: the look it wakes finds tmux out (without one, the
        # next look at a hooked peer at work may be monitor.HOOKED_LOOK, 30 s, away)
        run.hook()
        failing = wait_event(home, ticket, "tmux", state="failing", timeout=CALL_TIMEOUT + 30)
        assert said in failing["message"]
        code = run.runner.wait(timeout=(1 + PATIENT_CALLS + 1) * CALL_TIMEOUT + 60)
        held = time.monotonic() - began
        output = run.log.read_text()
        assert code == 1, output
        assert "has not answered" in output and "handoff resume" in output
        assert "Traceback" not in output
        error = kinds(home, ticket, "error")
        assert len(error) == 1 and "has not answered" in error[0]["message"]
        current = state(home, ticket)
        assert current["phase"] == "implementing" and current["relaunches"] == 0
        assert not kinds(home, ticket, "death"), "tmux failing is not a peer's death"

        fault.mend()
        resumed = spawn("resume", ticket, "--foreground", cwd=run.repo,
                        log=run.tmp_path / "resume.log")
        try:
            wait_event(home, ticket, "orchestrator", pid=resumed.pid, timeout=60)
            assert pane_pid(run.socket, session, "implementer") == peer, "the same peer goes on"
            run.go()
            final = wait_phase(home, ticket, "passed", "escalated", timeout=180)
            assert resumed.wait(timeout=60) == 0, (run.tmp_path / "resume.log").read_text()
        finally:
            if resumed.poll() is None:
                resumed.kill()
            resumed.wait()
    finally:
        fault.mend()
        run.end()
    assert final["phase"] == "passed"
    assert launches(home, ticket, "implementer") == 1, "the peer was never relaunched"
    assert git(run.repo, "rev-list", "--count", f"main..handoff/{ticket}") == "1"
    for name in ("impl-report-1.md", "review-report-1.md", "final-report.md"):
        assert (run.folder / name).is_file()
    return held


@fault("17", "the tmux server stopped with SIGSTOP mid-round (every tmux call hangs)",
       "no call waits past its timeout and the silence is never taken for a death: a `tmux` "
       "event says tmux is failing, and after a bounded patience the orchestrator exits 1 with "
       "an `error` event; after SIGCONT, `handoff resume` finishes the ticket",
       "the live peer and its session; the round's commit and reports after resume")
def test_tmux_server_stopped_the_orchestrator_gives_up_and_resume_finishes(
        repo: Path, tmp_path: Path, handoff_home: Path, socket: str, short_calls: None) -> None:
    run = Ticket("T-Z", repo, tmp_path, handoff_home, socket)
    held = tmux_fails_then_resume_finishes(run, Stop(socket), "did not answer within")
    print(f"the orchestrator gave up {held:.1f}s after SIGSTOP")


@pytest.fixture
def short_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every handoff the test runs gives a tmux call CALL_TIMEOUT seconds."""
    monkeypatch.setenv(TIMEOUT_VARIABLE, f"{CALL_TIMEOUT:g}")


@pytest.fixture
def own_tmpdir(monkeypatch: pytest.MonkeyPatch, socket: str) -> Iterator[Path]:
    """A TMUX_TMPDIR of the test's own (short: a socket path has at most 107 bytes)."""
    folder = Path(tempfile.mkdtemp(prefix="hx-", dir="/tmp"))
    monkeypatch.setenv("TMUX_TMPDIR", str(folder))
    yield folder
    # its server first: without its socket nobody could reach it to end it
    tmux(socket, "kill-server")
    shutil.rmtree(folder, ignore_errors=True)


@fault("17", "every tmux client refused mid-round while the server and the peer live on "
             "(tmux: the socket's folder 'has unsafe permissions')",
       "the error is a tmux failure, never a 'pane gone': no death, no relaunch, a `tmux` "
       "event, then exit 1 with an `error` event after a bounded patience; once mended, "
       "`handoff resume` finishes the ticket",
       "the live peer and its session; the round's commit and reports after resume")
def test_tmux_refusing_clients_is_no_death_and_resume_finishes(
        repo: Path, tmp_path: Path, handoff_home: Path, socket: str, own_tmpdir: Path,
        short_calls: None) -> None:
    run = Ticket("T-R", repo, tmp_path, handoff_home, socket)
    tmux_fails_then_resume_finishes(run, Refuse(own_tmpdir), "unsafe permissions")


@fault("2", "secrets (AWS_SECRET_ACCESS_KEY, GITHUB_TOKEN) in the environment of the "
            "`handoff start` that starts the tmux server",
       "the server is started with the peers' allowlisted environment: neither "
       "`tmux show-environment -g`, the session's environment, the server's "
       "/proc/<pid>/environ nor any peer's or window's process holds them",
       "the ticket finishes as usual; no file of the ticket folder holds a secret")
def test_secrets_never_reach_the_tmux_server(repo: Path, tmp_path: Path, handoff_home: Path,
                                             socket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TMUX", "/tmp/tmux-0/the-users-own,4242,0")  # started from inside tmux
    run = Ticket("T-E", repo, tmp_path, handoff_home, socket)
    try:
        run.paused()
        # what any peer can read with plain tmux on the socket
        readable = {
            "show-environment -g": tmux(socket, "show-environment", "-g").stdout,
            "show-environment -t": tmux(socket, "show-environment", "-t",
                                        f"={run.session}:").stdout,
            "server environ": environ(server_pid(socket)),
        }
        panes = tmux(socket, "list-panes", "-s", "-t", f"={run.session}:", "-F",
                     "#{window_name} #{pane_pid}").stdout.split("\n")
        for line in filter(None, panes):
            window, pid = line.split()
            readable[f"{window} environ"] = environ(int(pid))
        assert "PATH=" in readable["server environ"], "the server environ was read"
        assert {"orchestrator environ", "implementer environ"} <= set(readable)
        for where, text in readable.items():
            for name, value in SECRETS.items():
                assert value not in text, f"{name} leaks through {where}"
        assert "TMUX=" not in readable["server environ"]
        run.go()
        final = run.finished()
    finally:
        run.end()
    assert final["phase"] == "passed"
    run.kept(rounds=1)
    for path in run.folder.rglob("*"):
        if path.is_file():
            text = path.read_bytes().decode(errors="replace")
            assert not any(v in text for v in SECRETS.values()), path
    assert json.loads((run.folder / "state.json").read_text())["phase"] == "passed"



@fault("2", "`handoff start` in the background from a shell with its own TMUX_TMPDIR (and a "
            "TMUX of the person's own tmux)",
       "TMUX_TMPDIR is part of the allowlist, TMUX is not: the server, the orchestrator in its "
       "window and every peer share the one socket under TMUX_TMPDIR",
       "the ticket finishes on one server; no second server in /tmp")
def test_a_background_ticket_keeps_to_the_socket_under_tmux_tmpdir(
        repo: Path, tmp_path: Path, handoff_home: Path, socket: str, own_tmpdir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMUX", "/tmp/tmux-0/the-users-own,4242,0")
    stray = Path("/tmp") / f"tmux-{os.getuid()}" / socket
    plan = plan_text({1: {"edits": [FIX_ADD], "pause_until": "go"}}, test=ADD_ONLY,
                     review=[ADD_ONLY])
    started = handoff("start", "T-B", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                      cwd=repo)
    assert started.returncode == 0, started.stderr
    try:
        wait_event(handoff_home, "T-B", "launch", role="implementer", timeout=60)
        session = str(state(handoff_home, "T-B")["session"])
        windows = tmux(socket, "list-windows", "-t", f"={session}:", "-F", "#{window_name}")
        assert set(windows.stdout.split()) == {"orchestrator", "implementer"}, windows.stderr
        release(ticket_path(handoff_home, "T-B"), "go")
        final = wait_phase(handoff_home, "T-B", "passed", "escalated", timeout=120)
    finally:
        if stray.exists():  # the server the fault would start: reachable only without our folder
            subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True,
                           timeout=15, env={k: v for k, v in os.environ.items()
                                            if k != "TMUX_TMPDIR"})
            stray.unlink(missing_ok=True)
    assert final["phase"] == "passed"
    assert not stray.exists(), "a second tmux server was started outside TMUX_TMPDIR"
    assert git(repo, "rev-list", "--count", "main..handoff/T-B") == "1"
    folder = ticket_path(handoff_home, "T-B")
    final_report(handoff_home, "T-B")
    for name in ("impl-report-1.md", "review-report-1.md"):
        assert (folder / name).is_file()


#: one tmux call's bound, its client's process-group ending, and room for handoff's own work
CALL_BOUND = CALL_TIMEOUT + 2 * 2.0 + 30


@fault("", "the tmux server on the socket stopped with SIGSTOP (another ticket's session on "
            "it) when `handoff start` runs",
       "start ends within one tmux call's bound: exit 1 with one message that tmux did not "
       "answer, never a hang or a traceback",
       "the other session and its server, which go on after SIGCONT")
def test_start_on_a_stopped_server_ends_within_its_bound(
        repo: Path, tmp_path: Path, handoff_home: Path, socket: str, short_calls: None) -> None:
    assert tmux(socket, "new-session", "-d", "-s", "other", "sleep 600").returncode == 0
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY,
                                          review=[ADD_ONLY]))
    stop = Stop(socket)
    stop.fail()
    try:
        began = time.monotonic()
        started = handoff("start", "T-S", "--plan", str(plan), "--yes", cwd=repo,
                          timeout=3 * CALL_BOUND)
        took = time.monotonic() - began
    finally:
        stop.mend()
    output = started.stdout + started.stderr
    assert started.returncode == 1, output
    assert "did not answer within" in output and "Traceback" not in output
    assert took < 2 * CALL_BOUND, f"start held on {took:.0f}s"
    assert tmux(socket, "has-session", "-t", "=other:").returncode == 0, "the server lives on"


@pytest.mark.parametrize("verb", ["stop", "close"])
@fault("", "the tmux server stopped with SIGSTOP while a ticket's peer works, then "
            "`handoff stop` or `handoff close`",
       "the command ends within its bound with one message that tmux did not answer (exit 1), "
       "never a hang or a traceback; after SIGCONT the same command succeeds",
       "the live peer and its session until the command runs again")
def test_stop_and_close_on_a_stopped_server_end_within_their_bound(
        repo: Path, tmp_path: Path, handoff_home: Path, socket: str, verb: str,
        short_calls: None) -> None:
    run = Ticket(f"T-{verb[0].upper()}", repo, tmp_path, handoff_home, socket)
    stop = Stop(socket)
    try:
        run.paused()
        run.end()  # the foreground orchestrator: its own bound is proved above
        stop.fail()
        began = time.monotonic()
        failed = handoff(verb, run.ticket, cwd=repo, timeout=4 * CALL_BOUND)
        took = time.monotonic() - began
        stop.mend()
        output = failed.stdout + failed.stderr
        assert failed.returncode == 1, output
        assert "did not answer within" in output and "Traceback" not in output
        assert took < 3 * CALL_BOUND, f"{verb} held on {took:.0f}s"
        again = handoff(verb, run.ticket, cwd=repo)
        assert again.returncode == 0, again.stdout + again.stderr
    finally:
        stop.mend()
        run.end()
