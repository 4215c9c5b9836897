"""handoff.machinery.relay: commands handed to the warm process (handoff.cli.warm), with real
processes, a real tmux server and real tickets."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from handoff.config import PEER_NICE
from handoff.machinery import relay
from handoff.operations.resume import ORCHESTRATOR_NICE
from handoff.processes import alive
from handoff.record.address import Address
from handoff.record.lock import holder
from tests.conftest import wait_until
from tests.faults.catalog import fault
from tests.harness import (
    ADD_ONLY,
    FIX_ADD,
    as_peer,
    handoff,
    pane_screen,
    plan_text,
    release,
    spawn,
    state,
    stop_runner,
    ticket_path,
    wait_event,
    wait_phase,
    write_plan,
)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _nice(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


def warm_processes(home: Path) -> list[int]:
    """The warm processes of home (not their children, which share their command line: a
    child's parent is its warm process)."""
    marker = f"HANDOFF_HOME={home}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or "handoff.cli.warm" not in _cmdline(int(entry.name)):
            continue
        try:
            if marker not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            if "handoff.cli.warm" in _cmdline(_parent(int(entry.name))):
                continue
        except (OSError, IndexError, ValueError):
            continue
        found.append(int(entry.name))
    return found


def test_a_relayed_command_says_and_ends_as_it_would_in_a_process_of_its_own(
        repo: Path, handoff_home: Path) -> None:
    alone = handoff("resume", "NOPE", cwd=repo, env={**os.environ, relay.ENV: "0"})
    assert not (handoff_home / relay.FOLDER).exists(), "HANDOFF_WARM=0 starts no warm process"
    relayed = handoff("resume", "NOPE", cwd=repo)
    assert (relayed.returncode, relayed.stdout, relayed.stderr) == \
        (alone.returncode, alone.stdout, alone.stderr)
    assert relayed.returncode == 3 and "no ticket 'NOPE'" in relayed.stderr
    servers = wait_until(lambda: warm_processes(handoff_home), 10, "the warm process")
    assert len(servers) == 1
    pid_file = handoff_home / relay.FOLDER / f"{relay.key()}.pid"
    assert int(pid_file.read_text()) == servers[0]
    socket_file = handoff_home / relay.FOLDER / f"{relay.key()}.sock"
    assert socket_file.stat().st_mode & 0o777 == 0o600
    # the second command is served by the same warm process
    again = handoff("resume", "NOPE", cwd=repo)
    assert again.returncode == 3 and warm_processes(handoff_home) == servers
    assert relay.end(handoff_home) == servers
    wait_until(lambda: not alive(servers[0]), 10, "the warm process to end")
    assert not socket_file.exists(), "it removes its socket as it ends"


def test_twenty_commands_at_once_start_one_warm_process(repo: Path, handoff_home: Path) -> None:
    commands = [subprocess.Popen([sys.executable, "-m", "handoff", "resume", f"NOPE-{n}"],
                                 cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                for n in range(20)]
    said = [command.communicate(timeout=120) for command in commands]
    assert [c.returncode for c in commands] == [3] * 20, said
    assert all(f"no ticket 'NOPE-{n}'" in err.decode() for n, (_, err) in enumerate(said))
    assert len(warm_processes(handoff_home)) == 1


def _paused_plan(tmp_path: Path, home: Path | None = None) -> Path:
    """Round 1 pauses before its report until a file `go` appears; the gate says its niceness
    and (home) whether it sees the warm process's folder."""
    look = f"ls -a {home / relay.FOLDER} 2>&1; " if home is not None else ""
    return write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD], "pause_before_report": "go"}},
                                          test=["sh", "-c", "echo niceness $(nice); " + look
                                                + " ".join(ADD_ONLY)]))


def test_a_tickets_orchestrator_is_a_child_of_the_warm_process_and_its_peers_yield_to_it(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    plan = _paused_plan(tmp_path, handoff_home)
    handoff_home.mkdir(mode=0o700)
    (handoff_home / "config.yaml").write_text("env_allow: [HANDOFF_RELAYED]\n", encoding="utf-8")
    secret = "sk-ant-relayed-0123456789"
    done = handoff("start", "W-1", "--plan", str(plan), "--yes", cwd=repo,
                   env={**os.environ, "HANDOFF_RELAYED": "through both", "ANTHROPIC_API_KEY": secret})
    assert done.returncode == 0, done.stderr
    folder = ticket_path(handoff_home, "W-1")
    current = state(handoff_home, "W-1")
    wait_until(lambda: "paused until" in pane_screen(folder, "implementer", current),
               what="the implementer to commit and pause")
    orchestrator = holder(folder / "lock")
    assert orchestrator is not None
    (server,) = warm_processes(handoff_home)
    assert _parent(orchestrator) == server, "forked by the warm process, not a new interpreter"
    # ps shows what it runs (the window's `handoff resume`), not the warm process's command
    assert _cmdline(orchestrator).startswith("handoff resume W-1"), _cmdline(orchestrator)
    assert "handoff.cli.warm" in _cmdline(server), "the warm process keeps its own"
    assert _nice(orchestrator) == ORCHESTRATOR_NICE
    pids = _window_pids(current)
    # the orchestrator's window holds the launcher, which handed the command over itself: no
    # second interpreter was started for `handoff resume`
    assert "launcher.py" in _cmdline(pids["orchestrator"])
    assert _parent(orchestrator) != pids["orchestrator"]
    peer = pids["implementer"]
    # the environment went with the command (start's, then the orchestrator's launch file),
    # never on a command line nor into the warm process's own
    assert as_peer(handoff_home, "W-1", "implementer")["HANDOFF_RELAYED"] == "through both"
    for pid in (server, orchestrator, pids["orchestrator"]):
        assert secret not in _cmdline(pid)
        assert secret.encode() not in Path(f"/proc/{pid}/environ").read_bytes()
    assert _nice(peer) == PEER_NICE
    assert Path(f"/proc/{peer}/autogroup").read_text().split()[-1] == str(PEER_NICE)
    release(folder, "go")
    wait_event(handoff_home, "W-1", "gate", result="pass", timeout=90)
    gate_log = (folder / "gate-1.log").read_text()
    assert f"niceness {PEER_NICE}" in gate_log, f"the gate runs as nice as the peers: {gate_log}"
    # the warm process forks commands outside the sandbox: its socket is in the handoff home,
    # which the sandbox hides
    assert (handoff_home / relay.FOLDER / f"{relay.key()}.sock").exists()
    assert "No such file or directory" in gate_log and ".sock" not in gate_log, gate_log


def _window_pids(current: dict[str, object]) -> dict[str, int]:
    panes = subprocess.run(["tmux", "-L", str(current["socket"]), "list-panes", "-s", "-t",
                            f"={current['session']}", "-F", "#{window_name} #{pane_pid}"],
                           capture_output=True, text=True, timeout=15, check=True).stdout
    return {name: int(pid) for name, pid in (line.split() for line in panes.splitlines())}


def test_signals_reach_the_command_and_a_gone_client_hangs_it_up(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    """The orchestrator's window holds the relaying launcher: a signal sent to it reaches the
    orchestrator (SIGTERM: it stops, 130), and its death (kill -9) hangs the orchestrator up as
    a closed window would (SIGHUP); either way the ticket is left as it is for `resume`."""
    plan = _paused_plan(tmp_path)
    for ticket, how in (("S-1", signal.SIGTERM), ("S-2", signal.SIGKILL)):
        done = handoff("start", ticket, "--plan", str(plan), "--yes", cwd=repo)
        assert done.returncode == 0, done.stderr
        wait_event(handoff_home, ticket, "launch", role="implementer")
        lock = ticket_path(handoff_home, ticket) / "lock"
        orchestrator = holder(lock)
        current = state(handoff_home, ticket)
        window = _window_pids(current)["orchestrator"]
        assert orchestrator is not None and orchestrator != window
        assert _cmdline(orchestrator).startswith(f"handoff resume {ticket}"), "a warm child"
        os.kill(window, how)
        wait_until(lambda lock=lock: holder(lock) is None, 30,  # type: ignore[misc]
                   f"{ticket}'s orchestrator to end")
        wait_until(lambda pid=orchestrator: not alive(pid), 30,  # type: ignore[misc]
                   "its process to be gone")
        assert state(handoff_home, ticket)["phase"] == "implementing"
        if how == signal.SIGTERM:  # its exit status came back to the window's program
            def dead_status(current: dict[str, object] = current) -> list[str] | None:
                said = subprocess.run(
                    ["tmux", "-L", str(current["socket"]), "list-panes", "-s", "-t",
                     f"={current['session']}", "-F", "#{window_name} #{pane_dead_status}"],
                    capture_output=True, text=True, timeout=15, check=True).stdout
                if "orchestrator 130" in said.splitlines():
                    return said.splitlines()
                # Debian's tmux 3.3a can lose a pane child's SIGCHLD (libutempter): a job's
                # own SIGCHLD makes it reap every zombie (tests/unit/machinery/test_tmux.py, `ended`)
                subprocess.run(["tmux", "-L", str(current["socket"]), "run-shell", "true"],
                               capture_output=True, timeout=15)
                return None
            wait_until(dead_status, 30, "the window's program to end with the status 130")
    resumed = handoff("resume", "S-1", "--yes", cwd=repo)
    assert resumed.returncode == 0, resumed.stderr
    release(ticket_path(handoff_home, "S-1"), "go")
    wait_phase(handoff_home, "S-1", "reviewing", "passed", timeout=90)


def test_a_foreground_run_typed_in_a_terminal_is_that_terminals_own_process(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    runner = spawn("start", "F-1", "--plan", str(_paused_plan(tmp_path)), "--yes",
                   "--foreground", cwd=repo, log=tmp_path / "F-1.log")
    try:
        wait_event(handoff_home, "F-1", "launch", role="implementer")
        assert holder(ticket_path(handoff_home, "F-1") / "lock") == runner.pid
    finally:
        stop_runner(runner)


def test_a_warm_process_that_never_comes_up_costs_a_command_half_a_second_once(
        repo: Path, handoff_home: Path, tmp_path: Path) -> None:
    where = handoff_home / relay.FOLDER
    where.mkdir(parents=True)
    started = time.monotonic()
    assert relay._wait_connect(str(where), 30) is None  # nobody holds the lock: it gives up
    assert time.monotonic() - started < relay.LOCK_GRACE + 2
    relay._failed(str(where))
    done = handoff("resume", "NOPE", cwd=repo)
    assert done.returncode == 3 and "no ticket 'NOPE'" in done.stderr
    assert warm_processes(handoff_home) == [], "none is started again while the failure is fresh"


def test_killing_the_warm_process_ends_no_ticket(repo: Path, tmp_path: Path,
                                                 handoff_home: Path) -> None:
    plan = _paused_plan(tmp_path)
    done = handoff("start", "K-1", "--plan", str(plan), "--yes", cwd=repo)
    assert done.returncode == 0, done.stderr
    wait_event(handoff_home, "K-1", "launch", role="implementer")
    (server,) = warm_processes(handoff_home)
    orchestrator = holder(ticket_path(handoff_home, "K-1") / "lock")
    assert orchestrator is not None and _parent(orchestrator) == server
    os.kill(server, signal.SIGKILL)
    wait_until(lambda: not alive(server), 10, "the warm process to die")
    assert alive(orchestrator), "its orchestrator runs on"
    release(ticket_path(handoff_home, "K-1"), "go")
    wait_phase(handoff_home, "K-1", "passed", timeout=90)
    # the next command finds the dead one's socket, starts a new warm process and is served
    again = handoff("resume", "NOPE", cwd=repo)
    assert again.returncode == 3
    new = wait_until(lambda: warm_processes(handoff_home), 10, "a new warm process")
    assert new != [server]


def test_a_command_that_gave_up_on_a_stuck_warm_process_is_never_run_there_too(
        tmp_path: Path, handoff_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A warm process that says the child's pid only after the command gave up waiting hears
    no `go`: the child never runs what the command then runs on its own."""
    where = handoff_home / relay.FOLDER
    where.mkdir(parents=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with Address(str(where), f"{relay.key()}.sock") as address:  # a long tmp path too
        listener.bind(address.path)
    listener.listen(1)
    heard: list[bytes] = []

    def late() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(1 << 20)  # the request
            time.sleep(1.0)  # stuck (longer than the command waits): the fault itself
            try:
                conn.sendall(b"pid 4242\n")
                conn.settimeout(10)
                heard.append(conn.recv(16))
            except OSError:  # the command has hung up (EPIPE, ECONNRESET): nothing to hear
                heard.append(b"")

    monkeypatch.setattr(relay, "SERVE_WAIT", 0.3)
    server = threading.Thread(target=late)
    server.start()
    try:
        assert relay.relay(["resume", "NOPE"], str(handoff_home)) is None
    finally:
        server.join(timeout=20)
        listener.close()
    assert heard == [b""], "the command hung up: no go"


@fault("", "the warm process is stopped (SIGSTOP) while commands are relayed to it",
       "each command says so and runs in a process of its own within a second, not after 30 s; a "
       "pipe reading its output ends with it (the stopped process was never handed it); once "
       "continued, the warm process serves again",
       "every command's output and exit status")
def test_a_stopped_warm_process_is_given_up_on_at_once_and_holds_none_of_the_output(
        repo: Path, handoff_home: Path) -> None:
    """SIGSTOP of the warm process (a debugger, a mistaken signal): a relayed command says so
    and runs in a process of its own within a second or two, not after SERVE_WAIT; a pipe
    reading its output ends with it (the stopped process was never handed the pipe)."""
    assert handoff("close", "NOPE", cwd=repo).returncode == 3  # the warm process is up
    (server,) = warm_processes(handoff_home)
    os.kill(server, signal.SIGSTOP)
    try:
        started = time.monotonic()
        reader = subprocess.Popen([sys.executable, "-m", "handoff", "close", "NOPE"], cwd=repo,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _, err = reader.communicate(timeout=20)  # EOF: nothing else holds its output
        took = time.monotonic() - started
        assert reader.returncode == 3, err
        assert f"the warm process (pid {server}) is stopped; it runs in a process of its own" \
            in err.decode(), err
        assert b"no ticket 'NOPE'" in err
        assert took < relay.SERVE_WAIT / 3, took
    finally:
        os.kill(server, signal.SIGCONT)
    assert handoff("close", "NOPE", cwd=repo).returncode == 3, "it serves again once continued"
