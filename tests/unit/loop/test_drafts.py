"""handoff.loop.drafts: a planner's plan checked against the base commit's tree before a
person sees it."""

from __future__ import annotations

import sys

from handoff.loop.drafts import problems
from handoff.protocol.reports import parse
from handoff.role import Kind

PATHS = frozenset({"calc.py", "tests", "tests/test_calc.py", "tests/__init__.py"})
GROUNDING = "## Grounding\n- `calc.py`: add subtracts\n- tests/test_calc.py: AddTest\n"


def report(front: str, body: str) -> list[str]:
    text = (f"---\nstatus: done\ncommit: '{'a' * 40}'\n{front}---\n# Fix add\n\nDo it.\n\n"
            f"{body}")
    parsed, said = parse(text, Kind.PLANNER, role="planner")
    assert parsed is not None, said
    return problems(parsed, PATHS, None)


def test_a_grounded_plan_with_a_real_command_on_real_files_passes() -> None:
    assert report(f"test: [{sys.executable}, -m, unittest, tests/test_calc.py]\n",
                  GROUNDING) == []
    assert report("test: python3 -m pytest -q tests/test_calc.py::test_add\n", GROUNDING) == []


def test_a_made_up_file_a_missing_test_file_and_an_unknown_program_are_each_named() -> None:
    said = report("test: no-such-runner tests/test_nothere.py\n",
                  "## Grounding\n- `calc_utils.py`: where add lives\n- `calc.py`\n")
    assert len(said) == 3, said
    assert any("no-such-runner" in p and "PATH" in p for p in said)
    assert any("tests/test_nothere.py" in p and "not in the base commit" in p for p in said)
    assert any("calc_utils.py" in p and "not in the base commit" in p for p in said)


def test_no_command_is_refused_unless_the_repository_sets_one() -> None:
    text = f"---\nstatus: done\ncommit: '{'a' * 40}'\n---\n# Fix add\n\nDo it.\n\n{GROUNDING}"
    parsed, _ = parse(text, Kind.PLANNER, role="planner")
    assert parsed is not None
    [said] = problems(parsed, PATHS, None)
    assert "names no verification command" in said
    assert problems(parsed, PATHS, ("python3", "-m", "pytest")) == []


def test_the_grounding_must_name_a_file_and_a_fenced_block_in_it_is_not_a_list() -> None:
    script = "```handoff-script\nround: 1\nedits:\n- file: calc.py\n```\n"
    said = report("test: python3 -m pytest\n", f"## Grounding\n\n{script}")
    assert said == ["'## Grounding' names no file: list each file you read and each test "
                    "file you found, one list item each, its path first (`src/x.py`: why)"]


def test_a_plan_that_does_not_parse_as_a_plan_is_sent_back_with_why() -> None:
    [said] = report("test: ''\n", GROUNDING)
    assert said.startswith("the drafted plan: 'test' is empty"), said
