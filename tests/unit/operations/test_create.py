"""handoff.operations.create: the plans `start` reads, the ticket directory it writes, and
what it refuses before writing anything (real git repos, real ticket directories)."""

from __future__ import annotations

from pathlib import Path

import pytest

from handoff.errors import UsageError
from handoff.inputs import PLAN_LIMIT
from handoff.operations.create import (
    plans_to_start,
    read_plan,
)
from tests.tickets import PLAN


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_read_plan_refuses_what_is_no_plan_and_names_it(tmp_path: Path) -> None:
    assert read_plan(write(tmp_path / "plan.md", PLAN)) == PLAN
    binary = tmp_path / "plan.bin"
    binary.write_bytes(b"# plan\x00\x01")
    with pytest.raises(UsageError, match=r"the plan .*plan\.bin is a binary file"):
        read_plan(binary)
    huge = write(tmp_path / "huge.md", "x" * (PLAN_LIMIT + 1))
    with pytest.raises(UsageError, match=r"the plan P-9 .*huge\.md is larger than 1 MiB"):
        read_plan(huge, "the plan P-9")
    with pytest.raises(UsageError, match="cannot read the plan"):
        read_plan(tmp_path / "missing.md")


def test_plans_to_start_names_each_ticket_by_its_frontmatter_else_its_file(
        tmp_path: Path) -> None:
    named = write(tmp_path / "first.md", "---\nticket: PROJ-12\n---\n# One\n")
    by_file = write(tmp_path / "PROJ-13.md", "# Two\n")
    found = plans_to_start([named, by_file])
    assert [(p.ticket, p.path, p.text) for p in found] == [
        ("PROJ-12", named, "---\nticket: PROJ-12\n---\n# One\n"), ("PROJ-13", by_file, "# Two\n")]


def test_plans_to_start_refuses_a_bad_id_and_a_ticket_started_twice(tmp_path: Path) -> None:
    good = write(tmp_path / "A-1.md", "# One\n")
    bad = write(tmp_path / "no good.md", "# Two\n")
    with pytest.raises(UsageError) as refused:
        plans_to_start([good, bad])  # the second is wrong: none is returned to start
    assert str(bad) in refused.value.message
    assert "(taken from the file's name)" in refused.value.message
    assert "ticket: PROJ-12" in (refused.value.hint or "")
    again = write(tmp_path / "other.md", "---\nticket: A-1\n---\n# Three\n")
    with pytest.raises(UsageError) as twice:
        plans_to_start([good, again])
    assert twice.value.message == f"{good} and {again} both start ticket A-1"
