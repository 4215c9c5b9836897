"""handoff.machinery.proc.run: argv only, always a timeout, failures as readable HandoffErrors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from handoff.errors import ExternalFailure, HandoffError, MissingTool
from handoff.machinery import proc
from tests.conftest import PYTHON, wait_until


def test_returns_the_result(tmp_path: Path) -> None:
    result = proc.run([PYTHON, "-c", "import os; print(os.getcwd())"], cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout.strip() == str(tmp_path)


def test_passes_input_and_environment() -> None:
    code = "import os, sys; print(sys.stdin.read().upper(), os.environ.get('PROC_X'))"
    result = proc.run([PYTHON, "-c", code], input_text="hello", env={"PROC_X": "42"})
    assert result.stdout.split() == ["HELLO", "42"]


def test_missing_program_is_missing_tool() -> None:
    with pytest.raises(MissingTool) as info:
        proc.run(["handoff-no-such-program", "--version"])
    assert "handoff-no-such-program" in info.value.message
    assert "handoff-no-such-program" in info.value.hint
    assert info.value.exit_code == 6


def test_timeout_is_a_clear_external_failure() -> None:
    started = time.monotonic()
    with pytest.raises(ExternalFailure) as info:
        proc.run([PYTHON, "-c", "import time; time.sleep(60)"], timeout=0.5)
    assert time.monotonic() - started < 30
    assert "did not finish within 0.5s" in info.value.message
    assert PYTHON in info.value.message
    assert info.value.hint


def test_non_zero_exit_with_check_names_the_command_and_stderr() -> None:
    code = "import sys; sys.stderr.write('warming up\\nfatal: no such ref\\n'); sys.exit(3)"
    with pytest.raises(ExternalFailure) as info:
        proc.run([PYTHON, "-c", code])
    assert PYTHON in info.value.message
    assert "failed" in info.value.message
    assert "fatal: no such ref" in info.value.message


def test_non_zero_exit_without_output_names_the_exit_code() -> None:
    with pytest.raises(ExternalFailure) as info:
        proc.run([PYTHON, "-c", "import sys; sys.exit(7)"])
    assert "exit 7" in info.value.message


def test_non_zero_exit_falls_back_to_stdout() -> None:
    with pytest.raises(ExternalFailure) as info:
        proc.run([PYTHON, "-c", "import sys; print('only on stdout'); sys.exit(1)"])
    assert "only on stdout" in info.value.message


def test_non_zero_exit_without_check_returns_the_result() -> None:
    result = proc.run([PYTHON, "-c", "import sys; sys.stderr.write('bad'); sys.exit(4)"],
                      check=False)
    assert result.returncode == 4
    assert result.stderr == "bad"


def test_no_shell(tmp_path: Path) -> None:
    hostile = "$(touch pwned); touch pwned2"
    result = proc.run([PYTHON, "-c", "import sys; print(sys.argv[1])", hostile], cwd=tmp_path)
    assert result.stdout.strip() == hostile
    assert not (tmp_path / "pwned").exists()
    assert not (tmp_path / "pwned2").exists()


def test_missing_working_folder_is_not_a_missing_tool(tmp_path: Path) -> None:
    missing = tmp_path / "gone"
    with pytest.raises(HandoffError) as info:
        proc.run([PYTHON, "-c", "pass"], cwd=missing)
    assert not isinstance(info.value, MissingTool)
    assert str(missing) in info.value.message


def test_non_executable_program_is_a_handoff_error(tmp_path: Path) -> None:
    script = tmp_path / "setup-deps"
    script.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    script.chmod(0o644)
    with pytest.raises(HandoffError) as info:
        proc.run([str(script)])
    assert str(script) in info.value.message


def gone(pid: int) -> bool:
    """The process has ended (a zombie waiting for its reaper has ended too)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"


SPAWNS_AND_HANGS = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
    "open(sys.argv[1], 'w').write(f'{child.pid}\\n')\n"
    "time.sleep(300)\n"
)


def test_timeout_ends_the_whole_process_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    started = time.monotonic()
    with pytest.raises(ExternalFailure) as info:
        proc.run([PYTHON, "-c", SPAWNS_AND_HANGS, str(pids)], timeout=2)
    assert time.monotonic() - started < 15
    assert "did not finish within 2s" in info.value.message
    grandchild = int(pids.read_text())
    wait_until(lambda: gone(grandchild), timeout=10, what="the grandchild to be ended too")


def test_a_finished_child_is_not_held_up_past_its_timeout_by_what_it_left(tmp_path: Path) -> None:
    """A command that ended but left a background process holding its output is taken as
    finished at the timeout, and that process is ended."""
    pid_file = tmp_path / "bg.pid"
    script = f"sleep 300 & echo $! > {pid_file}; echo done"
    result = proc.run(["/bin/sh", "-c", script], timeout=1.5)
    assert result.returncode == 0
    assert result.stdout.strip() == "done"
    wait_until(lambda: gone(int(pid_file.read_text())), timeout=10, what="the sleep to end")


def test_an_interrupted_run_ends_its_child(tmp_path: Path) -> None:
    class Interrupted(Exception):
        pass

    def interrupt(signum: int, frame: object) -> None:
        raise Interrupted

    pid_file = tmp_path / "child.pid"
    code = ("import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); "
            "time.sleep(300)")
    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        with pytest.raises(Interrupted):
            proc.run([PYTHON, "-c", code, str(pid_file)], timeout=60)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    wait_until(lambda: pid_file.exists() and gone(int(pid_file.read_text())), timeout=10,
               what="the child to be ended with the interrupted call")


def test_the_child_leads_its_own_session() -> None:
    code = "import os; print(os.getsid(0), os.getpgrp(), os.getpid())"
    sid, group, pid = proc.run([PYTHON, "-c", code]).stdout.split()
    assert sid == group == pid
    assert int(sid) != os.getsid(0)


def test_stdin_is_dev_null_unless_input_is_given() -> None:
    """Run from a process whose stdin holds text (a terminal, a pipe): the child sees none."""
    child = "import os, sys; print(os.path.realpath('/proc/self/fd/0'), repr(sys.stdin.read()))"
    outer = f"from handoff.machinery import proc; print(proc.run([{PYTHON!r}, '-c', {child!r}]).stdout)"
    seen = subprocess.run([PYTHON, "-c", outer], input="typed by a person\n", text=True,
                          capture_output=True, timeout=60, check=True).stdout
    assert seen.split() == ["/dev/null", "''"]


def test_git_locating_variables_never_reach_a_child(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in proc.REPO_LOCATING:
        monkeypatch.setenv(name, "/elsewhere")
    kept = {"GIT_AUTHOR_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.invalid",
            "GIT_CEILING_DIRECTORIES": "/ceiling", "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_SSH_COMMAND": "ssh -o BatchMode=yes"}
    for name, value in kept.items():
        monkeypatch.setenv(name, value)
    code = "import json, os; print(json.dumps({k: v for k, v in os.environ.items() if 'GIT' in k}))"
    seen = json.loads(proc.run([PYTHON, "-c", code]).stdout)
    assert not proc.REPO_LOCATING & set(seen)
    assert {name: seen.get(name) for name in kept} == kept
    given = json.loads(proc.run([PYTHON, "-c", code],
                                env={"GIT_DIR": "/elsewhere", "GIT_AUTHOR_NAME": "Ada"}).stdout)
    assert given == {"GIT_AUTHOR_NAME": "Ada"}


def test_the_scrubbed_list_is_gits_own_list_of_repository_variables() -> None:
    """git names what locates a repository (`rev-parse --local-env-vars`): all of it is dropped
    except the config entries, which say how the user wants git to behave."""
    listed = set(proc.run(["git", "rev-parse", "--local-env-vars"]).stdout.split())
    config = {"GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT"}
    assert listed - config <= proc.REPO_LOCATING
    assert proc.REPO_LOCATING - listed == {"GIT_NAMESPACE"}
