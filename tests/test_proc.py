"""handoff.proc.run: argv only, always a timeout, failures as readable HandoffErrors."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from handoff import proc
from handoff.errors import ExternalFailure, HandoffError, MissingTool
from tests.conftest import PYTHON


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
