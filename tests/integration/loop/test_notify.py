"""Telling a ticket's person: the tmux message, the desktop notifier and the user's `notify`
command, for tickets run with the scripted agents in real tmux and git."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from handoff.loop import notify
from handoff.machinery import proc
from handoff.phases import Phase
from tests.conftest import wait_until
from tests.harness import (
    ADD_ONLY,
    ALL_TESTS,
    FIX_ADD,
    events,
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
from tests.unit.loop.test_notify import notice, tmux

RECORDER = """\
import json, os, sys
from pathlib import Path
got = sys.stdin.read()
ticket = json.loads(got)["ticket"] if got.strip() else ""
home = Path(os.environ.get("HANDOFF_HOME", "/nonexistent"))
report = bool(ticket) and any(home.glob(f"*/{ticket}/final-report.md"))
with Path(sys.argv[1]).open("a", encoding="utf-8") as out:
    out.write(json.dumps({"argv": sys.argv[2:], "stdin": got, "report": report}) + "\\n")
"""
HANGS = """\
import os, sys, time
from pathlib import Path
Path(sys.argv[1]).write_text(str(os.getpid()))
time.sleep(600)
"""
FAILS = "import sys; sys.stdin.read(); print('no route to the pager', file=sys.stderr); sys.exit(3)"
FIELDS = {"ticket", "repo", "phase", "round", "kind", "message", "time"}


def script(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def fake_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A recording `notify-send` first on PATH: what the orchestrator finds there."""
    folder = tmp_path / "fake-bin"
    folder.mkdir()
    path = folder / "notify-send"
    path.write_text(f"#!{sys.executable}\n" + RECORDER.replace("sys.argv[1]", repr(
        str(tmp_path / "desktop.jsonl"))).replace("sys.argv[2:]", "sys.argv[1:]"),
        encoding="utf-8")
    path.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return tmp_path / "desktop.jsonl"


def use_notify(handoff_home: Path, argv: list[str]) -> None:
    handoff_home.mkdir(parents=True, exist_ok=True)
    (handoff_home / "config.yaml").write_text(json.dumps({"notify": argv}), encoding="utf-8")



def shown_to_client(socket: str, text: str) -> bool:
    """tmux's message log holds `<client> message: text` for a message a client was shown
    (the command that asked for it is logged apart, as `command: display-message …`)."""
    return any(" message: " in line and text in line.split(" message: ", 1)[1]
               for line in tmux(socket, "show-messages").splitlines())


def test_a_person_is_told_when_needed_and_when_it_passed(
        repo: Path, tmp_path: Path, handoff_home: Path, socket: str, terminal: str,
        fake_bin: Path) -> None:
    told = tmp_path / "told.jsonl"
    use_notify(handoff_home, [sys.executable, str(script(tmp_path, "record.py", RECORDER)),
                              str(told), "--from-handoff"])
    plan = write_plan(tmp_path, plan_text(
        {1: {"status": "blocked", "question": "Should add() saturate?", "pause_until": "go"},
         2: {"edits": [FIX_ADD]}}, test=ADD_ONLY, review=[ADD_ONLY]))
    runner = spawn("start", "T-1", "--plan", str(plan), "--yes", "--foreground", cwd=repo,
                   log=tmp_path / "orchestrator.log")
    try:
        wait_event(handoff_home, "T-1", "launch", role="implementer")
        session = state(handoff_home, "T-1")["session"]
        assert tmux(socket, "show-options", "-v", "-t", f"={session}:", "status-left") \
            == "[#S] implementing r1 \n", "a new session's status line shows phase and round"
        # the person attaches from their own terminal (a second tmux server)
        subprocess.run(["tmux", "-L", terminal, "new-session", "-d", "-s", "user", "-x", "160",
                        "-y", "40", "--", "env", "-u", "TMUX", "tmux", "-L", socket,
                        "attach-session", "-t", f"={session}:"], check=True, timeout=15)
        wait_until(lambda: tmux(socket, "list-clients", "-t", f"={session}:").strip(),
                   what="the person's client on the ticket's session")
        release(ticket_path(handoff_home, "T-1"), "go")

        wait_phase(handoff_home, "T-1", "needs-human")
        wait_event(handoff_home, "T-1", "notified", notice="needs-human")
        assert shown_to_client(socket, "handoff T-1: needs-human (round 1: the implementer is "
                                       "blocked: Should add() saturate?")
        assert tmux(socket, "show-options", "-v", "-t", f"={session}:", "status-left") \
            == "[#S] needs-human r1 \n"
        assert handoff("answer", "T-1", "No: plain addition.", cwd=repo).returncode == 0
        assert wait_phase(handoff_home, "T-1", "passed", "escalated")["phase"] == "passed"
        assert runner.wait(timeout=30) == 0
    finally:
        runner.kill()
        runner.wait()

    got = records(told)
    assert [r["argv"] for r in got] == [["--from-handoff"]] * 2, "argv as configured, no shell"
    sent = [json.loads(r["stdin"]) for r in got]
    assert all(set(s) == FIELDS for s in sent), sent
    assert [(s["kind"], s["phase"], s["round"]) for s in sent] == [
        ("needs-human", "needs-human", 1), ("passed", "passed", 2)]
    assert all(s["ticket"] == "T-1" and s["repo"] == str(repo) for s in sent)
    assert "Should add() saturate?" in sent[0]["message"]
    assert "handoff/T-1" in sent[1]["message"], "a pass names the branch to take"
    assert [r["report"] for r in got] == [False, True], "told of the end: its report is there"
    assert shown_to_client(socket, "handoff T-1: passed (round 2:")
    assert tmux(socket, "show-options", "-v", "-t", f"={session}:", "status-left") \
        == "[#S] passed r2 \n"

    desktop = [r["argv"] for r in records(fake_bin)]
    assert desktop == [["--app-name=handoff", "handoff T-1: needs-human",
                        "round 1: the implementer is blocked: Should add() saturate? — next: "
                        "handoff answer T-1 TEXT"],
                       ["--app-name=handoff", "handoff T-1: passed",
                        f"round 2: {sent[1]['message']}"]]
    notified = [e for e in events(handoff_home, "T-1") if e["kind"] == "notified"]
    assert [(e["notice"], e["via"]) for e in notified] == [
        ("needs-human", ["tmux", "notify-send", "command"]),
        ("passed", ["tmux", "notify-send", "command"])]
    assert not [e for e in events(handoff_home, "T-1") if e["kind"] == "notify-failed"]
    log = handoff("log", "T-1", cwd=repo).stdout
    assert "told the person: passed (via tmux, notify-send, command)" in log


def test_an_escalated_ticket_is_told_and_no_desktop_is_no_failure(
        repo: Path, tmp_path: Path, handoff_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    told = tmp_path / "told.jsonl"
    use_notify(handoff_home, [sys.executable, str(script(tmp_path, "record.py", RECORDER)),
                              str(told)])
    # a PATH without any desktop notifier: just what the ticket runs (python, git, tmux, env)
    bare = tmp_path / "bare-bin"
    bare.mkdir()
    for tool in ("git", "tmux", "env"):
        found = subprocess.run(["which", tool], capture_output=True, text=True,
                               check=True).stdout.strip()
        (bare / tool).symlink_to(found)
    (bare / "python3").symlink_to(sys.executable)
    monkeypatch.setenv("PATH", str(bare))
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY,
                                          review=[ALL_TESTS]))
    done = handoff("start", "T-2", "--plan", str(plan), "--yes", "--foreground",
                   "--max-rounds", "1", cwd=repo, timeout=120)
    assert done.returncode != 0, done.stdout + done.stderr  # escalated
    assert state(handoff_home, "T-2")["phase"] == "escalated"

    sent = [json.loads(r["stdin"]) for r in records(told)]
    assert [(s["kind"], s["round"]) for s in sent] == [("escalated", 1)]
    assert set(sent[0]) == FIELDS and "max-rounds" in sent[0]["message"]
    assert [r["report"] for r in records(told)] == [True], "the final report is there to read"
    notified = [e for e in events(handoff_home, "T-2") if e["kind"] == "notified"]
    assert [(e["notice"], e["via"], e.get("desktop")) for e in notified] == [
        ("escalated", ["command"], "not available")], "no client attached: no tmux message"
    assert not [e for e in events(handoff_home, "T-2") if e["kind"] == "notify-failed"]


class Recorded:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def __call__(self, kind: str, **fields: Any) -> None:
        self.events.append({"kind": kind, **fields})

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["kind"] == kind]


def test_a_command_that_hangs_is_ended_within_its_bound(
        tmp_path: Path, fake_bin: Path) -> None:
    pid_file = tmp_path / "pid"
    record = Recorded()
    started = time.monotonic()
    notify.tell(notice(), None, "none", [sys.executable, str(script(tmp_path, "hang.py", HANGS)),
                                         str(pid_file)], tmp_path, record, timeout=1.0)
    took = time.monotonic() - started
    assert took < 1.0 + 2 * proc.KILL_GRACE + 2, f"the hanging command held it up {took:.1f}s"
    [failed] = record.of("notify-failed")
    assert failed["channel"] == "command" and failed["notice"] == "needs-human"
    assert "did not finish within 1s" in failed["reason"]
    assert not Path(f"/proc/{pid_file.read_text()}").exists() or \
        Path(f"/proc/{pid_file.read_text()}/stat").read_text().rsplit(")", 1)[-1].split()[0] \
        == "Z", "the command was ended with all it started"
    assert record.of("notified")[0]["via"] == ["notify-send"], "the desktop still got it"


def test_a_failing_or_missing_command_is_an_event_not_a_stop(
        tmp_path: Path, fake_bin: Path) -> None:
    record = Recorded()
    notify.tell(notice("escalated"), None, "none", [sys.executable, "-c", FAILS], tmp_path,
                record)
    notify.tell(notice("passed"), None, "none", [str(tmp_path / "no-such-notifier")], tmp_path,
                record)
    failed = record.of("notify-failed")
    assert [(f["notice"], f["channel"]) for f in failed] == [("escalated", "command"),
                                                              ("passed", "command")]
    assert "exited with 3: no route to the pager" in failed[0]["reason"]
    assert "not installed" in failed[1]["reason"]
    assert [e["via"] for e in record.of("notified")] == [["notify-send"], ["notify-send"]]


def test_a_failing_desktop_notifier_is_recorded(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "notify-send").write_text(
        f"#!{sys.executable}\nimport sys\nprint('Cannot autolaunch D-Bus', file=sys.stderr)\n"
        "sys.exit(1)\n", encoding="utf-8")
    (folder / "notify-send").chmod(0o755)
    monkeypatch.setenv("PATH", str(folder))
    record = Recorded()
    notify.tell(notice(), None, "none", [], tmp_path, record)
    [failed] = record.of("notify-failed")
    assert failed["channel"] == "desktop" and "Cannot autolaunch D-Bus" in failed["reason"]
    assert record.of("notified")[0]["via"] == []


def test_a_plan_nobody_approved_at_a_terminal_is_told(
        repo: Path, tmp_path: Path, handoff_home: Path, fake_bin: Path) -> None:
    """`handoff start` without --yes and without a terminal (a script or an agent started it):
    the ticket waits for approval, and the person hears of it, on the desktop and through
    their command (there is no session yet)."""
    told = tmp_path / "told.jsonl"
    use_notify(handoff_home, [sys.executable, str(script(tmp_path, "record.py", RECORDER)),
                              str(told)])
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    started = handoff("start", "T-7", "--plan", str(plan), cwd=repo)
    assert started.returncode == 1 and "waiting for approval" in started.stderr
    [sent] = [json.loads(r["stdin"]) for r in records(told)]
    assert (sent["ticket"], sent["kind"], sent["phase"]) == ("T-7", "awaiting-approval",
                                                             "awaiting-approval")
    assert "handoff resume T-7 --yes" in sent["message"]
    [desktop] = [r["argv"] for r in records(fake_bin)]
    assert desktop[1] == "handoff T-7: awaiting-approval"
    [notified] = [e for e in events(handoff_home, "T-7") if e["kind"] == "notified"]
    assert notified["via"] == ["notify-send", "command"]
    approved = handoff("resume", "T-7", "--yes", "--foreground", cwd=repo)
    assert approved.returncode == 0, approved.stdout + approved.stderr
    assert [json.loads(r["stdin"])["kind"] for r in records(told)] == [
        "awaiting-approval", "passed"], "approved once: not told again"


def test_a_stopped_tmux_server_is_asked_once_and_the_rest_is_told(
        socket: str, handoff_home: Path, tmp_path: Path, fake_bin: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from handoff.machinery import tmux as tmux_module
    from handoff.machinery.tmux import Tmux
    from handoff.record.ticket import State

    server = Tmux(socket, handoff_home)
    server.new_session("s", "main", [sys.executable, "-c", "import time; time.sleep(600)"],
                       tmp_path)
    pid = int(server.run("display-message", "-p", "#{pid}"))
    monkeypatch.setattr(tmux_module, "TMUX_TIMEOUT", 1.0)
    record = Recorded()
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        notify.phase_changed(State(ticket="T-9", repo=str(tmp_path), repo_key="k",
                                   phase=Phase.NEEDS_HUMAN, round=1, session="s"),
                             server, [], tmp_path, record)
        took = time.monotonic() - started
    finally:
        os.kill(pid, signal.SIGCONT)
    # one tmux call timed out (the status line); asking for clients and showing the message
    # would have cost a bound each
    assert took < 1.0 + proc.KILL_GRACE + 1.5, f"the stopped server held it up {took:.1f}s"
    assert record.of("notified")[0]["via"] == ["notify-send"]
    assert [r["argv"][1] for r in records(fake_bin)] == ["handoff T-9: needs-human"]
