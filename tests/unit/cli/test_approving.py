"""handoff.cli.approving: `handoff plan` takes one act at a time, refused before any ticket is
looked at (in this process: tests/cli_here.py); the acts themselves are
tests/integration/operations/test_drafting.py's and tests/e2e/test_planner.py's."""

from __future__ import annotations

import pytest

from tests.cli_here import handoff_here
from tests.harness import assert_clean_error


@pytest.mark.parametrize("acts", [("--approve", "--refuse"), ("--edit", "--redraft", "note"),
                                  ("--approve", "--edit")])
def test_one_act_at_a_time(acts: tuple[str, ...]) -> None:
    done = handoff_here("plan", "T-1", *acts)
    assert_clean_error(done, 2, "one of --approve, --edit, --redraft and --refuse at a time")


def test_a_ticket_that_is_not_there_is_named() -> None:
    assert_clean_error(handoff_here("plan", "NOPE-1"), 3, "NOPE-1")
