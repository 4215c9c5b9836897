"""handoff.providers.probe: asking an installed CLI about itself, bounded and without a shell."""

from __future__ import annotations

import sys
from pathlib import Path

from handoff.providers.probe import exit_status, help_text


def test_help_text_is_what_the_program_prints_on_both_streams() -> None:
    code = "import sys; print('usage: x'); print('--flag', file=sys.stderr)"
    assert help_text([sys.executable, "-c", code]) == "usage: x\n--flag\n"


def test_help_text_of_a_program_that_cannot_run_or_hangs_is_empty(tmp_path: Path) -> None:
    assert help_text([str(tmp_path / "no-such-cli"), "--help"]) == ""
    hangs = [sys.executable, "-c", "import time; print('late', flush=True); time.sleep(30)"]
    assert help_text(hangs, timeout=0.5) == ""


def test_exit_status_gives_the_code_and_output_without_a_shell(tmp_path: Path) -> None:
    code = "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"
    assert exit_status([sys.executable, "-c", code]) == (3, "out\nerr\n")
    marker = tmp_path / "ran"
    status, output = exit_status(["echo", f"$(touch {marker})"])
    assert status == 0 and "$(touch" in output and not marker.exists(), "no shell expands it"


def test_exit_status_of_a_program_that_cannot_run_or_hangs_is_none(tmp_path: Path) -> None:
    status, why = exit_status([str(tmp_path / "no-such-cli")])
    assert status is None and "no-such-cli" in why
    status, why = exit_status([sys.executable, "-c", "input()"], timeout=30)
    assert status == 1 and "EOFError" in why, "stdin is closed: a prompt cannot wait on it"
    status, _ = exit_status([sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5)
    assert status is None
