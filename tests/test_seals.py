"""Seals: a stamp proves one role's report for one round, once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from handoff.processes import environ
from handoff.record import seals
from handoff.record.seals import Seals
from tests.conftest import wait_until


def test_a_stamp_proves_only_the_role_and_round_it_was_granted_for(tmp_path: Path) -> None:
    book, seal = Seals(tmp_path), seals.new()
    book.grant("reviewer", 2, seal)
    assert book.check("reviewer", 2, seals.stamp(seal, "reviewer", 2)) == ""
    assert "not the one" in book.check("reviewer", 3, seals.stamp(seal, "reviewer", 3))
    assert "not the one" in book.check("implementer", 2, seals.stamp(seal, "implementer", 2))
    assert "not the one" in book.check("reviewer", 2, seals.stamp(seals.new(), "reviewer", 2))
    assert "no stamp" in book.check("reviewer", 2, "")


def test_a_spent_stamp_files_nothing_again(tmp_path: Path) -> None:
    book, seal = Seals(tmp_path), seals.new()
    book.grant("implementer", 1, seal)
    value = seals.stamp(seal, "implementer", 1)
    book.spend(value)
    assert "used before" in book.check("implementer", 1, value)


def test_the_records_hold_no_stamp_and_no_seal(tmp_path: Path) -> None:
    book, seal = Seals(tmp_path), seals.new()
    book.grant("reviewer", 1, seal)
    value = seals.stamp(seal, "reviewer", 1)
    book.spend(value)
    written = "".join(p.read_text() for p in (tmp_path / "seals").iterdir())
    assert seal not in written and value not in written
    assert {oct(p.stat().st_mode & 0o777) for p in (tmp_path / "seals").iterdir()} == {"0o600"}


def test_the_seal_of_a_live_process_is_read_from_its_environment() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE, env={**os.environ, seals.ENV: "abc123"})
    try:
        # until the child has exec'd, /proc shows the parent's environment
        assert wait_until(lambda: environ(child.pid).get(seals.ENV) == "abc123", 10, "the child's exec")
        assert environ(os.getpid()).get(seals.ENV, "") == os.environ.get(seals.ENV, "")
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=10)
    assert environ(child.pid) == {}
