"""handoff.gate.run_gate: the orchestrator's own test run — argv only, timeout, capped log."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from handoff.gate import CAP, cap, run_gate
from tests.conftest import PYTHON, wait_until


def base_env() -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "HOME": os.environ["HOME"]}


def py(code: str, *args: str) -> list[str]:
    return [PYTHON, "-c", code, *args]


def alive(pid: int) -> bool:
    """True while pid runs (a zombie waiting to be reaped counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except FileNotFoundError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def spawned(tmp_path: Path) -> Iterator[Path]:
    """A pid file for a grandchild; kills that pid (only) if a test leaves it running."""
    pid_file = tmp_path / "grandchild.pid"
    yield pid_file
    if pid_file.exists():
        text = pid_file.read_text(encoding="utf-8").strip()
        if text.isdigit() and alive(int(text)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(text), signal.SIGKILL)


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


def test_cap_keeps_head_and_tail() -> None:
    text = "H" * 100 + "m" * 1000 + "T" * 100
    capped = cap(text, limit=200)
    assert capped.startswith("H" * 100)
    assert capped.endswith("T" * 100)
    assert "m" not in capped.replace("cut by handoff", "")
    assert "1000" in capped
    assert cap("short", limit=200) == "short"


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
