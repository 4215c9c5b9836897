"""The command line's contract where nothing but handoff itself runs, in this process
(tests/cli_here.py): what it refuses before it asks git or tmux anything, one clear line with
a hint and the documented exit code. The cases that need a repository are in
tests/integration/cli/test_app.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from handoff.build import version
from tests.cli_here import handoff_here
from tests.harness import ADD_ONLY, FIX_ADD, assert_clean_error, plan_text, write_plan


@pytest.mark.parametrize("ticket", ["../escape", "a/b", "-rf", ".hidden", "x" * 65, "a..b",
                                    "sp ace", "semi;colon"])
def test_hostile_ticket_ids_are_refused_before_anything_is_asked_or_made(
        ticket: str, tmp_path: Path, handoff_home: Path) -> None:
    """Refused before git is asked anything: this layer starts no process."""
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    done = handoff_here("start", "--plan", str(plan), "--yes", "--", ticket, cwd=tmp_path)
    assert_clean_error(done, 2, "invalid ticket id")
    assert not handoff_home.exists() or not any(handoff_home.rglob("state.json"))


def test_a_missing_plan_file_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    done = handoff_here("start", "T-1", "--plan", str(tmp_path / "nope.md"), cwd=tmp_path)
    assert_clean_error(done, 2, "nope.md")


def test_the_version_is_the_builds() -> None:
    done = handoff_here("--version")
    assert (done.returncode, done.stdout, done.stderr) == (0, f"handoff {version()}\n", "")


def test_an_unknown_command_is_a_usage_error_not_a_traceback() -> None:
    done = handoff_here("strat", "T-1")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "No such command 'strat'" in done.stderr
