"""handoff.loop.gate.run_gate: the orchestrator's own test run — argv only, timeout, capped log."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from handoff.loop import gate
from handoff.loop.gate import CAP, TOKEN, end_left_gate, run_gate
from handoff.record.ticket import TicketDir
from tests.conftest import PYTHON, read_json, wait_until
from tests.unit.loop import test_gate as unit_tests
from tests.unit.loop.test_gate import alive

#: the fixtures this module's unit tests define, shared
orchestrator = unit_tests.orchestrator
spawned = unit_tests.spawned


def base_env() -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "HOME": os.environ["HOME"]}


def py(code: str, *args: str) -> list[str]:
    return [PYTHON, "-c", code, *args]


def test_pass(tmp_path: Path) -> None:
    log = tmp_path / "gate-1.log"
    result = run_gate(py("print('all 3 tests ok')"), tmp_path, base_env(), 30, log)
    assert result.passed
    assert result.exit_code == 0
    assert not result.timed_out
    assert "all 3 tests ok" in result.output
    assert "passed" in result.summary()


def test_fail_keeps_the_exit_code_and_stderr(tmp_path: Path) -> None:
    code = "import sys; print('1 failed'); sys.stderr.write('AssertionError: 5 != 6\\n'); sys.exit(3)"
    result = run_gate(py(code), tmp_path, base_env(), 30, tmp_path / "gate.log")
    assert not result.passed
    assert result.exit_code == 3
    assert "1 failed" in result.output
    assert "AssertionError: 5 != 6" in result.output
    assert "exit 3" in result.summary()


def test_runs_in_the_given_folder(tmp_path: Path) -> None:
    work = tmp_path / "worktree"
    work.mkdir()
    result = run_gate(py("import os; print(os.getcwd())"), work, base_env(), 30,
                      tmp_path / "gate.log")
    assert result.output.strip() == str(work)


def test_uses_only_the_given_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATE_SECRET", "leaked")
    env = {**base_env(), "GATE_ALLOWED": "yes"}
    code = "import os; print(os.environ.get('GATE_ALLOWED'), os.environ.get('GATE_SECRET'))"
    result = run_gate(py(code), tmp_path, env, 30, tmp_path / "gate.log")
    assert result.output.split() == ["yes", "None"]


def test_a_gate_runs_as_nice_as_asked_from_its_first_instruction(tmp_path: Path) -> None:
    # coreutils' `nice` prints its niceness as it starts: raised only after the fork (as the
    # gate's session weight is), it would print ours
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    result = run_gate(["nice"], tmp_path, base_env(), 30, tmp_path / "gate.log", nice=19)
    assert result.output.split() == ["19"] and result.argv == ("nice",)
    assert os.getpriority(os.PRIO_PROCESS, 0) == mine, "ours is left as it was"


def test_timeout_kills_the_whole_process_group(tmp_path: Path, spawned: Path) -> None:
    child = (
        "import subprocess, sys\n"
        "grandchild = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "with open(sys.argv[1] + '.tmp', 'w') as f: f.write(str(grandchild.pid))\n"
        "import os; os.replace(sys.argv[1] + '.tmp', sys.argv[1])\n"
        "print('spawned', flush=True)\n"
        "grandchild.wait()\n"
    )
    started = time.monotonic()
    result = run_gate(py(child, str(spawned)), tmp_path, base_env(), 4, tmp_path / "gate.log")
    elapsed = time.monotonic() - started
    assert result.timed_out
    assert not result.passed
    assert result.exit_code is None
    assert "timed out" in result.summary()
    assert elapsed < 30, "run_gate waited for the grandchild instead of killing it"
    assert "spawned" in result.output
    pid = int(spawned.read_text(encoding="utf-8"))
    wait_until(lambda: not alive(pid), timeout=10, what=f"grandchild {pid} to be killed")


def test_output_is_capped_in_the_log_keeping_head_and_tail(tmp_path: Path) -> None:
    code = "print('FIRST-ERROR'); print('x' * 300000); print('FINAL-SUMMARY')"
    log = tmp_path / "gate.log"
    result = run_gate(py(code), tmp_path, base_env(), 30, log)
    assert result.passed
    text = log.read_text(encoding="utf-8")
    assert "FIRST-ERROR" in text
    assert "FINAL-SUMMARY" in text
    assert "cut by handoff" in text
    assert len(text) < CAP + 2000


def test_missing_program_is_a_127_result(tmp_path: Path) -> None:
    log = tmp_path / "gate.log"
    result = run_gate(["handoff-no-such-test-runner", "-q"], tmp_path, base_env(), 30, log)
    assert result.exit_code == 127
    assert not result.passed
    assert not result.timed_out
    assert "handoff-no-such-test-runner" in result.output
    assert "handoff-no-such-test-runner" in log.read_text(encoding="utf-8")


def test_non_executable_program_is_a_127_result(tmp_path: Path) -> None:
    script = tmp_path / "run-tests"
    script.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    script.chmod(0o644)
    result = run_gate([str(script)], tmp_path, base_env(), 30, tmp_path / "gate.log")
    assert result.exit_code == 127
    assert not result.passed


def test_log_has_the_command_and_the_summary(tmp_path: Path) -> None:
    log = tmp_path / "ticket" / "gate-2.log"
    argv = py("import sys; print('ran'); sys.exit(1)", "--flag")
    result = run_gate(argv, tmp_path, base_env(), 30, log)
    lines = log.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "$ " + " ".join(argv)
    assert "ran" in lines
    assert lines[-1] == f"# {result.summary()}"
    assert "exit 1" in lines[-1]
    assert str(tmp_path) in log.read_text(encoding="utf-8")


def test_no_shell_arguments_are_literal(tmp_path: Path) -> None:
    hostile = "$(touch pwned) `touch pwned2`; touch pwned3 | cat"
    result = run_gate(py("import sys; print(sys.argv[1])", hostile), tmp_path, base_env(), 30,
                      tmp_path / "gate.log")
    assert result.passed
    assert result.output.strip() == hostile
    for name in ("pwned", "pwned2", "pwned3"):
        assert not (tmp_path / name).exists()


# ---- bytes, not lines: a flood is kept as head and tail, never whole in memory ------------------


def test_one_huge_line_is_capped_in_bytes_in_the_result_and_the_log(tmp_path: Path) -> None:
    code = ("import sys; sys.stdout.write('FIRST-ERROR ' + 'x' * 5_000_000 + ' FINAL-SUMMARY\\n');"
            " sys.exit(1)")
    log = tmp_path / "gate.log"
    result = run_gate(py(code), tmp_path, base_env(), 60, log)
    assert result.exit_code == 1
    assert len(result.output.encode()) < CAP + 200
    assert result.output.startswith("FIRST-ERROR")
    assert result.output.rstrip().endswith("FINAL-SUMMARY")
    assert f"[{5_000_000 + 27 - CAP} bytes cut by handoff]" in result.output
    assert log.stat().st_size < CAP + 2000


def test_a_flood_never_sits_whole_in_the_orchestrators_memory(tmp_path: Path) -> None:
    """run_gate in a fresh process: its peak RSS grows by far less than the 50 MB printed."""
    script = (
        "import resource, sys\n"
        "from pathlib import Path\n"
        "from handoff.loop.gate import run_gate\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "flood = [sys.executable, '-c', \"import sys; sys.stdout.write('y' * 50_000_000)\"]\n"
        "result = run_gate(flood, Path(sys.argv[1]), {'PATH': '/usr/bin:/bin'}, 60,\n"
        "                  Path(sys.argv[1]) / 'gate.log')\n"
        "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print(after - before, len(result.output))\n"
    )
    done = subprocess.run([PYTHON, "-c", script, str(tmp_path)], capture_output=True, text=True,
                          timeout=120, check=True)
    grown_kib, kept = (int(x) for x in done.stdout.split())
    assert kept < CAP + 200
    assert grown_kib < 16 * 1024, f"peak RSS grew by {grown_kib} KiB for a 50 MB line"


def test_multibyte_output_is_cut_on_character_boundaries(tmp_path: Path) -> None:
    code = "print('é' * 100_000)"
    result = run_gate(py(code), tmp_path, {**base_env(), "PYTHONIOENCODING": "utf-8"}, 30,
                      tmp_path / "gate.log")
    assert "\ufffd" not in result.output
    assert len(result.output.encode()) < CAP + 200
    assert set(result.output.replace("bytes cut by handoff", "").strip()) <= set("é\n…[] 0123456789")


# ---- nothing of a gate outlives it ----------------------------------------------------------


def members(pgid: int) -> list[int]:
    """Live (not zombie) processes of a process group, read from /proc by the test itself."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


STRAGGLER = (
    "import subprocess, sys\n"
    "straggler = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
    "with open(sys.argv[1], 'w') as f: f.write(str(straggler.pid))\n"
    "print('leader done', flush=True)\n"
    "sys.exit(4)\n"
)


def test_the_leaders_exit_ends_the_gate_and_its_stragglers(tmp_path: Path, spawned: Path) -> None:
    """A process the command left behind holds the output pipe open: the gate still ends when
    the command exits, with its exit code, and the leftover is ended with it."""
    started = time.monotonic()
    result = run_gate(py(STRAGGLER, str(spawned)), tmp_path, base_env(), 60, tmp_path / "gate.log")
    assert time.monotonic() - started < 20, "the gate waited for the straggler's pipe"
    assert result.exit_code == 4 and not result.timed_out
    assert "leader done" in result.output
    straggler = int(spawned.read_text(encoding="utf-8"))
    wait_until(lambda: not alive(straggler), timeout=10, what="the straggler to be ended")


TRAPS_TERM = (
    "import signal, sys, time\n"
    "def cleanup(signum, frame):\n"
    "    open(sys.argv[1], 'w').write('cleaned up')\n"
    "    sys.exit(1)\n"
    "signal.signal(signal.SIGTERM, cleanup)\n"
    "print('waiting', flush=True)\n"
    "time.sleep(120)\n"
)


def test_a_timed_out_gate_gets_term_first_to_clean_up(tmp_path: Path) -> None:
    marker = tmp_path / "term-seen"
    result = run_gate(py(TRAPS_TERM, str(marker)), tmp_path, base_env(), 2, tmp_path / "gate.log")
    assert result.timed_out
    assert marker.read_text() == "cleaned up"


def test_a_gate_that_ignores_term_is_killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gate, "GRACE", 1.0)
    code = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('deaf', flush=True); time.sleep(120)")
    started = time.monotonic()
    result = run_gate(py(code), tmp_path, base_env(), 2, tmp_path / "gate.log")
    assert result.timed_out and "deaf" in result.output
    assert time.monotonic() - started < 15


def running_record(record: Path) -> dict[str, object]:
    def ready() -> dict[str, object] | None:
        data = read_json(record)
        return data if data and data.get("pid") and members(int(str(data["pid"]))) else None
    return wait_until(ready, timeout=20, what="the gate's record with its pid")


def test_the_running_gate_is_recorded_with_proof_of_identity(
        orchestrator: tuple[subprocess.Popen[bytes], Path]) -> None:
    child, record = orchestrator
    data = running_record(record)
    pid = int(str(data["pid"]))
    assert data["pgid"] == pid
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    assert data["start"] == stat[19], "the leader's start time, from /proc/<pid>/stat"
    assert data["boot"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    token = f"{TOKEN}={data['token']}".encode()
    assert token in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    assert data["orchestrator"] == child.pid


def test_a_stopped_orchestrator_ends_its_gate_and_the_record(
        orchestrator: tuple[subprocess.Popen[bytes], Path]) -> None:
    child, record = orchestrator
    pgid = int(str(running_record(record)["pgid"]))
    wait_until(lambda: len(members(pgid)) == 2, what="the gate and its child")
    child.terminate()
    assert child.wait(timeout=30) == 1
    assert members(pgid) == [], "SIGTERM left the gate's processes running"
    assert not record.exists()


def test_a_gate_left_by_a_killed_orchestrator_is_ended_from_its_record(
        orchestrator: tuple[subprocess.Popen[bytes], Path]) -> None:
    child, record = orchestrator
    data = running_record(record)
    pgid = int(str(data["pgid"]))
    wait_until(lambda: len(members(pgid)) == 2, what="the gate and its child")
    child.kill()
    child.wait()
    assert len(members(pgid)) == 2, "kill -9 leaves the gate running: what is to be mended"
    ended = end_left_gate(record, grace=2.0)
    assert ended is not None
    assert ended["pid"] == pgid and ended["left_by"] == child.pid
    assert ended["ended"] == {str(pgid): "SIGTERM"}
    assert members(pgid) == []
    assert not record.exists()
    assert end_left_gate(record) is None, "nothing recorded: nothing to do"


def test_a_leader_gone_but_a_member_with_the_token_left_is_still_ours(
        orchestrator: tuple[subprocess.Popen[bytes], Path]) -> None:
    child, record = orchestrator
    data = running_record(record)
    pgid = int(str(data["pgid"]))
    wait_until(lambda: len(members(pgid)) == 2, what="the gate and its child")
    child.kill()
    child.wait()
    os.kill(pgid, signal.SIGKILL)  # the leader dies; its child stays in the group
    wait_until(lambda: len(members(pgid)) == 1, what="only the gate's child left")
    # once reaped, a leader is no longer there to match its start time (whether pid 1 reaps it
    # soon is up to the machine): only the token can prove the group is the gate's
    record.write_text(json.dumps({**data, "start": ""}), encoding="utf-8")
    ended = end_left_gate(record, grace=2.0)
    assert ended is not None and ended["ended"] == {str(pgid): "SIGTERM"}
    assert members(pgid) == []


@pytest.fixture
def stranger() -> Iterator[subprocess.Popen[bytes]]:
    """A process in a group of its own that is no gate of ours."""
    child = subprocess.Popen([PYTHON, "-c", "import time; time.sleep(120)"],
                             start_new_session=True)
    yield child
    child.kill()
    child.wait()


@pytest.mark.parametrize("lie", ["start", "boot", "token"])
def test_a_group_that_cannot_be_proven_ours_is_left_alone(
        lie: str, tmp_path: Path, stranger: subprocess.Popen[bytes]) -> None:
    """A record naming a live group whose leader is not the process recorded (a reused pid), on
    another boot, or whose token it does not carry: nothing is signalled, the record goes."""
    stat = Path(f"/proc/{stranger.pid}/stat").read_text().rsplit(")", 1)[1].split()
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    data = {"pid": stranger.pid, "pgid": stranger.pid, "start": stat[19], "boot": boot,
            "token": "0" * 32, "argv": ["make", "test"], "orchestrator": 1}
    if lie == "start":
        data["start"] = str(int(stat[19]) - 1)
    elif lie == "boot":
        data["boot"] = "another-boot"
    else:
        data["start"] = ""
    record = TicketDir(tmp_path).gate_running
    record.write_text(json.dumps(data), encoding="utf-8")
    ended = end_left_gate(record, grace=1.0)
    assert ended is not None and ended["ended"] == {}
    assert stranger.poll() is None and members(stranger.pid) == [stranger.pid]
    assert not record.exists()


def test_a_file_that_is_no_program_is_a_127_result(tmp_path: Path) -> None:
    script = tmp_path / "run-tests"
    script.write_bytes(b"\x7fELF not really\n")  # executable, but exec() refuses it (ENOEXEC)
    script.chmod(0o755)
    result = run_gate([str(script)], tmp_path, base_env(), 30, tmp_path / "gate.log",
                      record=TicketDir(tmp_path).gate_running)
    assert result.exit_code == 127 and not result.passed
    assert "cannot run" in result.output
    assert not TicketDir(tmp_path).gate_running.exists(), "no gate runs: none is recorded"


def test_the_callers_work_meanwhile_runs_once_the_command_started(tmp_path: Path) -> None:
    """meanwhile runs while the command runs: the command waits for a file meanwhile writes,
    so the gate passes only if meanwhile ran before its end was awaited."""
    flag, record = tmp_path / "flag", tmp_path / "gate-running.json"
    seen: list[object] = []

    def meanwhile() -> None:
        seen.append(json.loads(record.read_text())["pid"])  # the command is recorded, started
        flag.write_text("go")

    waits = ("import os, sys, time\n"
             "deadline = time.monotonic() + 30\n"
             "while not os.path.exists(sys.argv[1]):\n"
             "    if time.monotonic() > deadline: sys.exit(4)\n"
             "    time.sleep(0.01)\n")
    result = run_gate(py(waits, str(flag)), tmp_path, base_env(), 60, tmp_path / "gate.log",
                      record=record, meanwhile=meanwhile)
    assert result.passed, result.output
    assert len(seen) == 1 and isinstance(seen[0], int)


def test_an_error_of_the_work_meanwhile_ends_the_command_and_its_record(
        tmp_path: Path) -> None:
    record, pids = tmp_path / "gate-running.json", []

    def meanwhile() -> None:
        pids.append(int(json.loads(record.read_text())["pid"]))
        raise RuntimeError("tmux went away")

    with pytest.raises(RuntimeError, match="tmux went away"):
        run_gate(py("import time; time.sleep(60)"), tmp_path, base_env(), 60,
                 tmp_path / "gate.log", record=record, meanwhile=meanwhile)
    assert not alive(pids[0]), "the command ended with the error"
    assert not record.exists()


def test_the_work_meanwhile_runs_too_when_the_command_cannot_start(tmp_path: Path) -> None:
    ran: list[bool] = []
    result = run_gate([str(tmp_path / "no-such-program")], tmp_path, base_env(), 30,
                      tmp_path / "gate.log", meanwhile=lambda: ran.append(True))
    assert result.exit_code == 127 and ran == [True]
