"""Tickets on other machines (issue 22): a real OpenSSH server on 127.0.0.1 stands for each
host (tests/sshd.py), with a HOME, HANDOFF_HOME and tmux socket of the test's own there, and
handoff as installed here on its PATH. Every command is the real CLI, as a person types it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from handoff.config import load
from handoff.machinery import relay
from handoff.machinery.repo import Repo
from handoff.operations.remote import BASE_PREFIX, Remote
from handoff.record import placed
from handoff.record.lock import holder
from handoff.record.placed import Placement
from tests.conftest import PYTHON, git, wait_until
from tests.faults.catalog import fault
from tests.harness import (
    ADD_ONLY,
    ALL_TESTS,
    FIX_ADD,
    FIX_MUL,
    FIX_NEG,
    TOUCH_README,
    handoff,
    pane_screen,
    plan_text,
    processes_of,
    release,
    state,
    wait_phase,
    write_plan,
)
from tests.realcli import configure, role, stand_in_errors
from tests.sshd import SshServer, free_port
from tests.standins.anthropic import AnthropicStandIn
from tests.standins.homes import CLAUDE_TOKEN, claude_home


@pytest.fixture(scope="session")
def ssh_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    server = SshServer(tmp_path_factory.mktemp("sshd"))
    yield server
    server.close()


@dataclass
class HostSide:
    """A host as the test sees it from the inside: its handoff home and tmux socket."""

    name: str
    home: Path
    socket: str
    root: Path
    #: what every login there gets (tests/sshd.py's authorized_keys)
    env: dict[str, str]

    def tmux(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True,
                              text=True, timeout=15)


def _host_env(root: Path, socket: str, scratch: str) -> dict[str, str]:
    home = root / "home"
    home.mkdir(parents=True)
    (home / ".gitconfig").write_text("[user]\n\tname = the host\n\temail = host@handoff.invalid\n"
                                     "[init]\n\tdefaultBranch = main\n", encoding="utf-8")
    return {"HOME": str(home), "HANDOFF_HOME": str(root / "state"),
            "HANDOFF_TMUX_SOCKET": socket, "TMUX_TMPDIR": os.environ.get("TMUX_TMPDIR", "/tmp"),
            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
            "TMPDIR": scratch, "XDG_RUNTIME_DIR": scratch, "XDG_STATE_HOME": str(root / "xdg"),
            "GIT_CONFIG_NOSYSTEM": "1"}


@pytest.fixture
def hosts(ssh_server: SshServer, tmp_path: Path,
          handoff_home: Path) -> Iterator[dict[str, HostSide]]:
    """build1 and build2 (max_parallel 1 each), in this test's config.yaml."""
    sides, envs, scratches = {}, {}, []
    for name in ("build1", "build2"):
        socket = f"handoff-host-{uuid.uuid4().hex[:8]}"
        scratch = tempfile.mkdtemp(prefix="hh-", dir="/tmp")
        scratches.append(scratch)
        envs[name] = _host_env(tmp_path / name, socket, scratch)
        sides[name] = HostSide(name, tmp_path / name / "state", socket, tmp_path / name,
                               envs[name])
    ssh_server.serve(envs)
    handoff_home.mkdir(mode=0o700, exist_ok=True)
    (handoff_home / "config.yaml").write_text(yaml.safe_dump({"hosts": {
        name: {"ssh": ssh_server.argv(name), "max_parallel": 1} for name in sides}}),
        encoding="utf-8")
    yield sides
    for side in sides.values():
        relay.end(side.home)
        side.tmux("kill-server")
    for scratch in scratches:
        shutil.rmtree(scratch, ignore_errors=True)


def rows(repo: Path) -> dict[str, dict[str, object]]:
    done = handoff("status", "--json", "--all", cwd=repo)
    assert done.returncode == 0, done.stderr
    return {str(row["ticket"]): row for row in json.loads(done.stdout)}


def paused_plan(tmp_path: Path, name: str) -> Path:
    """Round 1 commits the fix, then waits for a file `go` in its ticket folder."""
    return write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD], "pause_before_report": "go"}},
                                          test=ADD_ONLY), name)


def left_on(side: HostSide, mirror: Path) -> list[str]:
    """What of handoff's is still there on the host: worktrees, a tmux server, processes."""
    found = [f"worktree {line}" for line in
             git(mirror, "worktree", "list", "--porcelain").splitlines()[1:]
             if line.startswith("worktree ")]
    if side.tmux("list-sessions").returncode == 0:
        found.append("a tmux server with sessions")
    return found + processes_of(side.home, "handoff", "tmux", "scripted")


def test_a_ticket_on_a_host_passes_there_shows_here_and_is_finished_here(
        repo: Path, tmp_path: Path, handoff_home: Path, hosts: dict[str, HostSide],
        terminal: str) -> None:
    build1 = hosts["build1"]
    remote_plan = write_plan(tmp_path, plan_text(
        {1: {"edits": [FIX_ADD]}, 2: {"edits": [FIX_MUL, FIX_NEG]}}, test=ADD_ONLY,
        review=[ALL_TESTS]), "remote.md")
    started = handoff("start", "R-1", "--plan", str(remote_plan), "--yes", "--host", "build1",
                      cwd=repo)
    assert started.returncode == 0, started.stderr
    assert "runs on host build1" in started.stdout
    assert "sandbox: bubblewrap" in started.stdout, "its peers are fenced in there as here"
    assert not list(handoff_home.glob("*/R-1")), "its record is on the host, not here"
    local_plan = write_plan(tmp_path, plan_text({1: {"edits": [TOUCH_README]}},
                                                test=[PYTHON, "-c", "pass"]), "local.md")
    assert handoff("start", "L-1", "--plan", str(local_plan), "--yes", cwd=repo).returncode == 0
    again = handoff("start", "R-1", "--plan", str(local_plan), "--yes", cwd=repo)
    assert again.returncode != 0 and "already runs on host build1" in again.stderr

    wait_phase(build1.home, "R-1", "passed", timeout=90)
    wait_phase(handoff_home, "L-1", "passed", timeout=60)
    shown = rows(repo)
    assert shown["R-1"]["host"] == "build1" and shown["R-1"]["phase"] == "passed"
    assert shown["R-1"]["round"] == 2 and shown["R-1"]["local_repo"] == str(repo.resolve())
    assert "host" not in shown["L-1"] and shown["L-1"]["phase"] == "passed"
    table = handoff("status", cwd=repo).stdout
    assert any(line.startswith("R-1 ") and "@ build1" in line for line in table.splitlines())
    log = handoff("log", "R-1", cwd=repo)
    assert log.returncode == 0 and "reviewer verdict PASS" in log.stdout
    # as typed, but --repo: a path of this machine, which the host is never given
    as_json = handoff("log", "--repo", str(tmp_path / "not-there"), "R-1", "--json", cwd=repo)
    assert as_json.returncode == 0, as_json.stderr
    assert any(event["kind"] == "verdict" for event in json.loads(as_json.stdout))

    # attach reaches the host's tmux: a client of the host's server, from a terminal here
    subprocess.run(["tmux", "-L", terminal, "new-session", "-d", "-x", "160", "-y", "40",
                    "-c", str(repo), "--", sys.executable, "-m", "handoff", "attach", "R-1"],
                   check=True, timeout=15)
    wait_until(lambda: build1.tmux("list-clients").stdout.strip(), 30,
               "a client attached to the host's tmux")

    # the board shows it beside the local one, its repository here and its host (a second
    # session of the same terminal: a server just killed may still hold its socket)
    subprocess.run(["tmux", "-L", terminal, "new-session", "-d", "-s", "board", "-x", "180",
                    "-y", "40", "-c", str(repo), "--", sys.executable, "-m", "handoff",
                    "watch"], check=True, timeout=15)

    def board_lines() -> list[str]:
        screen = subprocess.run(["tmux", "-L", terminal, "capture-pane", "-p", "-t", "board"],
                                capture_output=True, text=True, timeout=15).stdout
        lines = [line for line in screen.splitlines() if "R-1" in line or "L-1" in line]
        both = any("R-1" in line for line in lines) and any("L-1" in line for line in lines)
        return lines if both else []
    shown_lines = wait_until(board_lines, 30, "the board to show R-1 beside L-1")
    assert any("R-1" in line and "repo @ build1" in line and "passed" in line
               for line in shown_lines), shown_lines
    assert any("L-1" in line and "@" not in line for line in shown_lines), shown_lines
    subprocess.run(["tmux", "-L", terminal, "kill-server"], capture_output=True, timeout=15)

    mirror = Path(str(shown["R-1"]["repo"]))
    there = next(build1.home.glob("*/R-1/final-report.md")).read_text(encoding="utf-8")
    finished = handoff("finish", "R-1", cwd=repo, timeout=120)
    assert finished.returncode == 0, finished.stderr
    merged = git(repo, "show", "main:calc.py")
    assert "return a + b" in merged and "return a * b" in merged and "return -a" in merged
    message = git(repo, "log", "-1", "--format=%B", "main")
    assert "on host build1" in message
    # its outcome is here: in the merge's message, and the whole report kept, named by finish
    body = [line.replace("**", "") for line in there.splitlines()
            if line and not line.startswith("# ")]
    assert body and all(line in message for line in body), (body, message)
    kept = handoff_home / "from-hosts" / "build1" / "R-1" / "final-report.md"
    assert kept.read_text(encoding="utf-8") == there
    assert {oct(p.stat().st_mode & 0o777) for p in (kept.parent, kept.parent.parent,
                                                    kept.parent.parent.parent)} == {"0o700"}
    assert f"its final report is {kept}" in finished.stdout, finished.stdout
    assert git(repo, "rev-parse", "handoff/R-1") == shown["R-1"]["commit"]
    assert git(repo, "status", "--porcelain") == "", "the checkout moved with main, clean"
    assert "R-1" not in rows(repo)
    wait_until(lambda: not left_on(build1, mirror), 30,
               f"nothing of R-1 left on the host: {left_on(build1, mirror)}")
    assert git(mirror, "for-each-ref", "refs/heads/handoff-base", "refs/heads/handoff") == ""
    # the mirror itself holds nothing of anyone's now: gc here runs gc there, which removes it
    swept = handoff("gc", "--json", cwd=repo)
    assert swept.returncode == 0, swept.stderr
    assert {"kind": "mirror", "path": str(mirror), "host": "build1", "removed": True} \
        .items() <= next(i for i in json.loads(swept.stdout) if i["kind"] == "mirror").items()
    assert not mirror.exists()


def test_a_host_that_freezes_goes_dark_and_its_ticket_carries_on_through_a_crash(
        repo: Path, tmp_path: Path, handoff_home: Path, hosts: dict[str, HostSide],
        ssh_server: SshServer) -> None:
    build1 = hosts["build1"]
    started = handoff("start", "R-2", "--plan", str(paused_plan(tmp_path, "r2.md")), "--yes",
                      "--host", "build1", cwd=repo)
    assert started.returncode == 0, started.stderr
    folder = wait_until(lambda: list(build1.home.glob("*/R-2/state.json")), 30,
                        "R-2's record on the host")[0].parent
    current = state(build1.home, "R-2")
    wait_until(lambda: "paused until" in pane_screen(folder, "implementer", current), 60,
               "the implementer to commit and pause")

    # sshd stopped (SIGSTOP): status answers within its bound and says so
    ssh_server.freeze()
    try:
        began = time.monotonic()
        dark = rows(repo)["R-2"]
        took = time.monotonic() - began
    finally:
        ssh_server.thaw()
    assert dark["phase"] == "unreachable" and "build1" in str(dark["reason"]), dark
    assert took < 25, f"status took {took:.1f}s with a frozen host"

    # its orchestrator killed there (-9): status says it died, resume carries it on
    orchestrator = holder(folder / "lock")
    assert orchestrator is not None
    os.kill(orchestrator, signal.SIGKILL)
    wait_until(lambda: rows(repo)["R-2"]["run"] == "died", 30, "R-2's orchestrator seen dead")
    resumed = handoff("resume", "--all", cwd=repo)  # as after the host's reboot
    assert resumed.returncode == 0, resumed.stderr + resumed.stdout
    assert "build1: R-2: resumed in tmux session" in resumed.stdout, resumed.stdout
    wait_until(lambda: holder(folder / "lock") not in (None, orchestrator), 30,
               "a new orchestrator on the host")
    # stopped and resumed from here, with sshd restarted in between
    stopped = handoff("stop", "R-2", cwd=repo)
    assert stopped.returncode == 0 and rows(repo)["R-2"]["run"] == "stopped", stopped.stderr
    ssh_server.restart()
    assert handoff("resume", "R-2", cwd=repo).returncode == 0
    wait_until(lambda: "paused until" in pane_screen(folder, "implementer",
                                                     state(build1.home, "R-2")), 60,
               "the implementer relaunched on its round, paused again")

    # a connection cut mid-round (its sshd side killed): the ticket goes on, and is seen again
    follower = subprocess.Popen([sys.executable, "-m", "handoff", "log", "R-2", "--follow"],
                                cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        sessions = wait_until(lambda: _sshd_sessions(ssh_server), 30,
                              "the follower's ssh session")
        for pid in sessions:
            os.kill(pid, signal.SIGKILL)
        assert follower.wait(timeout=30) != 0, "the follower saw its connection go"
    finally:
        if follower.poll() is None:
            follower.kill()
        follower.wait(timeout=10)
    release(folder, "go")
    wait_phase(build1.home, "R-2", "passed", timeout=60)
    passed = rows(repo)["R-2"]
    assert passed["phase"] == "passed"
    # a copy of another R-2's report, closed on build1 before under the same id, stays too
    kept = handoff_home / "from-hosts" / "build1" / "R-2" / "final-report.md"
    kept.parent.mkdir(parents=True)
    kept.write_text("# R-2, the one before\n", encoding="utf-8")
    closed = handoff("close", "R-2", cwd=repo)
    assert closed.returncode == 0, closed.stderr
    assert git(repo, "rev-parse", "handoff/R-2") == passed["commit"], "its work came back"
    assert kept.read_text(encoding="utf-8") == (folder / "final-report.md").read_text(
        encoding="utf-8")
    assert kept.with_name("final-report.2.md").read_text(encoding="utf-8") == \
        "# R-2, the one before\n"
    assert f"its final report is {kept}" in closed.stdout, closed.stdout


def _sshd_sessions(server: SshServer) -> list[int]:
    """The per-connection sshd processes of the server (children of its listener)."""
    children = Path(f"/proc/{server.process.pid}/task/{server.process.pid}/children")
    return [int(pid) for pid in children.read_text().split()]


def test_auto_placement_fills_each_host_then_queues(
        repo: Path, tmp_path: Path, handoff_home: Path, hosts: dict[str, HostSide]) -> None:
    config = yaml.safe_load((handoff_home / "config.yaml").read_text(encoding="utf-8"))
    (handoff_home / "config.yaml").write_text(yaml.safe_dump(
        {**config, "max_parallel": 1, "placement": "auto"}), encoding="utf-8")
    plan = paused_plan(tmp_path, "p.md")
    placed_on = {}
    for ticket in ("A-1", "A-2", "A-3", "A-4"):
        done = handoff("start", ticket, "--plan", str(plan), "--yes", cwd=repo)
        assert done.returncode == 0, done.stderr
        placed_on[ticket] = next((h for h in hosts if f"runs on host {h}" in done.stdout),
                                 "local")
    assert placed_on == {"A-1": "local", "A-2": "build1", "A-3": "build2", "A-4": "local"}
    wait_phase(handoff_home, "A-4", "queued", timeout=30)
    shown = rows(repo)
    assert shown["A-4"]["phase"] == "queued" and shown["A-2"]["host"] == "build1"
    # A-3 closed there by hand first: here, close still ends it and forgets it
    mirror = Path(str(shown["A-3"]["repo"]))
    by_hand = subprocess.run([sys.executable, "-m", "handoff", "close", "A-3", "--force",
                              "--repo", str(mirror)], env=hosts["build2"].env,
                             capture_output=True, text=True, timeout=60)
    assert by_hand.returncode == 0, by_hand.stderr
    for ticket in ("A-2", "A-3"):
        closed = handoff("close", ticket, "--force", cwd=repo)
        assert closed.returncode == 0, closed.stderr
        assert "final report" not in closed.stdout, "closed before it had one"
        assert f"{ticket}: closed on host" in closed.stdout
    assert not (handoff_home / "from-hosts").exists()
    assert set(rows(repo)) == {"A-1", "A-4"}


@fault("", "a start on a host cut short after its placement was saved (this machine crashed, "
       "sshd went away), or its push refused by the host (its disk full)",
       "`close` forgets a ticket the host never started, whatever git says of the branch never "
       "made; a refused push forgets its placement at once and says git's whole message",
       "the host's mirror and this machine's record: nothing half made is left")
def test_a_host_ticket_whose_start_was_cut_short_is_closed_and_a_refused_push_leaves_none(
        repo: Path, tmp_path: Path, handoff_home: Path, hosts: dict[str, HostSide]) -> None:
    """A start cut short after its placement was saved (this machine crashed, sshd went away)
    leaves a ticket the host never started: before the mirror was made there (C-1), or with
    its base pushed but no start (C-2). `close` forgets each, whatever git says of the branch
    that was never made. A push the host refuses (its disk full) leaves no ticket at all."""
    build1 = hosts["build1"]
    local = Repo.at(repo)
    remote = Remote(load(handoff_home, None).host("build1"))
    mirror = Path(str(remote.state(local.key).said["mirror"]))
    commit = local.resolve("HEAD")
    for ticket, where in (("C-1", build1.root / "never-made"), ("C-2", mirror)):
        placed.save(handoff_home, Placement(ticket=ticket, host="build1", repo=str(repo),
                                            mirror=str(where), base="HEAD",
                                            base_commit=commit, base_branch="main"))
    remote.push(local, commit, f"{BASE_PREFIX}C-2", str(mirror))
    shown = rows(repo)
    assert shown["C-2"]["phase"] == "gone" and "handoff close C-2" in str(shown["C-2"]["hint"])
    for ticket in ("C-1", "C-2"):
        closed = handoff("close", ticket, cwd=repo, timeout=120)
        assert closed.returncode == 0, closed.stderr
        assert f"{ticket}: closed on host build1" in closed.stdout, closed.stdout
    assert not {"C-1", "C-2"} & set(rows(repo)), "forgotten here"
    assert git(mirror, "for-each-ref", "refs/heads/handoff-base") == "", "its base ref too"
    assert not (build1.root / "never-made").exists(), "nothing made where none was"

    refuse = mirror / ".git" / "hooks" / "pre-receive"
    refuse.write_text("#!/bin/sh\necho 'No space left on device' >&2\nexit 1\n")
    refuse.chmod(0o755)
    plan = write_plan(tmp_path, plan_text({1: {"edits": [TOUCH_README]}},
                                          test=[PYTHON, "-c", "pass"]))
    started = handoff("start", "C-3", "--plan", str(plan), "--yes", "--host", "build1",
                      cwd=repo, timeout=120)
    assert started.returncode != 0 and "No space left on device" in started.stderr, \
        started.stderr
    assert "Traceback" not in started.stderr
    assert "C-3" not in rows(repo) and not placed.every(handoff_home), "no ticket was left"


def test_hosts_and_doctor_say_which_host_is_ready_and_how_to_mend_the_others(
        repo: Path, handoff_home: Path, hosts: dict[str, HostSide],
        ssh_server: SshServer) -> None:
    config = yaml.safe_load((handoff_home / "config.yaml").read_text(encoding="utf-8"))
    old = "import json; print(json.dumps({'handoff': '0.0.1', 'code': 'other'}))"
    config["hosts"]["build2"]["handoff"] = [PYTHON, "-c", old]  # an older handoff there
    argv = ssh_server.argv("build1")
    at = argv.index("-p") + 1
    config["hosts"]["gone"] = {"ssh": [*argv[:at], str(free_port()), *argv[at + 1:]]}
    (handoff_home / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")

    listed = handoff("hosts", "--json", cwd=repo)
    assert listed.returncode == 1
    by = {h["name"]: h for h in json.loads(listed.stdout)}
    assert by["build1"]["ready"] and by["build1"]["max_parallel"] == 1
    assert not by["build2"]["ready"] and "handoff 0.0.1" in by["build2"]["problem"]
    assert not by["gone"]["ready"] and "refused" in by["gone"]["problem"]

    checks = {c["what"]: c for c in json.loads(handoff("doctor", "--json", cwd=repo).stdout)}
    assert checks["host build1"]["level"] == "OK"
    assert checks["host build2"]["level"] == "FAIL"
    assert "pip install tmux-handoff==" in checks["host build2"]["fix"]
    assert checks["host gone"]["level"] == "FAIL" and "refused" in checks["host gone"]["detail"]
    refused = handoff("start", "X-1", "--plan", "-", "--yes", "--host", "build2", cwd=repo,
                      input_text=plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    assert refused.returncode != 0 and "handoff 0.0.1" in refused.stderr
    assert not (handoff_home / "placed" / "X-1.json").exists()
    assert git(repo, "ls-remote", "--heads", ".", "handoff/*") == ""

    # gc: a host that does not answer is said, and a placement whose ticket its host no longer
    # has (closed there by hand) is forgotten here
    placed.save(handoff_home, Placement("Z-9", "build1", str(repo), "/nowhere", "HEAD",
                                        "0" * 40))
    swept = json.loads(handoff("gc", "--json", cwd=repo).stdout)
    assert {"kind": "host", "host": "gone", "removable": False}.items() <= next(
        i for i in swept if i.get("host") == "gone").items()
    assert any(i["kind"] == "placement" and i["removed"] and "Z-9" in i["why"] for i in swept)
    assert placed.load(handoff_home, "Z-9") is None


def test_claude_as_both_peers_on_a_host_fails_then_passes_and_is_finished_here(
        repo: Path, tmp_path: Path, hosts: dict[str, HostSide], ssh_server: SshServer,
        claude: Path, anthropic: AnthropicStandIn) -> None:
    build1 = hosts["build1"]
    # the host's own set-up, as a person makes it there: its CLI logged in (the stand-in's
    # token in its login environment), its config naming claude for both roles, the folder
    # its tickets' worktrees live in trusted
    ssh_server.serve({name: {**side.env, "ANTHROPIC_BASE_URL": anthropic.base_url,
                             "ANTHROPIC_AUTH_TOKEN": CLAUDE_TOKEN, "IS_SANDBOX": "1"}
                      for name, side in hosts.items()})
    configure(build1.home, {"implementer": role("claude", claude),
                            "reviewer": role("claude", claude)})
    claude_home(Path(build1.env["HOME"]), [build1.home / "mirrors" / Repo.at(repo).key])
    plan = plan_text({1: {"edits": [FIX_ADD]}, 2: {"edits": [FIX_MUL, FIX_NEG]}},
                     test=ADD_ONLY, review=[ALL_TESTS])
    started = handoff("start", "CH-1", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                      "--host", "build1", cwd=repo)
    assert started.returncode == 0, started.stderr
    final = wait_phase(build1.home, "CH-1", "passed", "escalated", "needs-human", timeout=240)
    assert final["phase"] == "passed", stand_in_errors(anthropic)
    assert final["verdicts"] == {"1": "fail", "2": "pass"}
    shown = rows(repo)["CH-1"]
    assert shown["host"] == "build1" and shown["phase"] == "passed"
    assert shown["team"] == {"implementer": "implementer", "reviewer": "reviewer"}
    finished = handoff("finish", "CH-1", cwd=repo, timeout=120)
    assert finished.returncode == 0, finished.stderr
    assert "return a * b" in git(repo, "show", "main:calc.py")
    subjects = git(repo, "log", "--format=%s", "handoff/CH-1").splitlines()
    assert subjects[:2] == ["CH-1: round 2", "CH-1: round 1"], "claude's own commits, there"
