"""handoff.protocol.plan: the verification command, the reviewer's commands and handoff-script blocks."""

from __future__ import annotations

import pytest

from handoff.errors import UsageError
from handoff.inputs import PLAN_LIMIT
from handoff.protocol.plan import parse

PROSE = "# Fix the calculator\n\nMake add() add.\n"


def test_a_plan_without_frontmatter_is_plain_prose() -> None:
    plan = parse(PROSE)
    assert plan.text == PROSE
    assert plan.test is None
    assert plan.review == ()
    assert plan.review_commands == ()
    assert plan.scripts == {}


def test_the_plan_text_is_kept_whole() -> None:
    text = f"---\ntest: make test\n---\n{PROSE}"
    assert parse(text).text == text


def test_test_as_a_command_line() -> None:
    plan = parse("---\ntest: python -m pytest -q 'tests/a b.py' -k \"x or y\"\n---\n" + PROSE)
    assert plan.test == ("python", "-m", "pytest", "-q", "tests/a b.py", "-k", "x or y")


def test_test_as_a_list_of_arguments() -> None:
    plan = parse("---\ntest: [python, -m, pytest, 'tests/a b.py']\n---\n" + PROSE)
    assert plan.test == ("python", "-m", "pytest", "tests/a b.py")


def test_review_defaults_to_the_test_command() -> None:
    plan = parse("---\ntest: make check\n---\n" + PROSE)
    assert plan.review == ()
    assert plan.review_commands == (("make", "check"),)


def test_an_empty_review_list_also_defaults_to_the_test_command() -> None:
    plan = parse("---\ntest: make check\nreview: []\n---\n" + PROSE)
    assert plan.review_commands == (("make", "check"),)


def test_review_as_one_command_line() -> None:
    plan = parse("---\ntest: make unit\nreview: make all\n---\n" + PROSE)
    assert plan.test == ("make", "unit")
    assert plan.review_commands == (("make", "all"),)


def test_review_as_a_list_of_strings_and_argument_lists() -> None:
    plan = parse("---\ntest: make unit\nreview:\n  - python -m pytest -q\n  - [ruff, check, .]\n---\n"
                 + PROSE)
    assert plan.review_commands == (("python", "-m", "pytest", "-q"), ("ruff", "check", "."))


def test_review_without_test() -> None:
    plan = parse("---\nreview: [make lint]\n---\n" + PROSE)
    assert plan.test is None
    assert plan.review_commands == (("make", "lint"),)


def test_a_byte_order_mark_before_the_frontmatter() -> None:
    assert parse("\ufeff---\ntest: make\n---\n" + PROSE).test == ("make",)


SCRIPTED = f"""---
test: make test
---
{PROSE}
```python
round: 99
```

```handoff-script
round: 1
implementer:
  - edit: {{file: calc.py, replace: a - b, with: a + b}}
reviewer:
  verdict: fail
```

Some words between the blocks.

```handoff-script
round: 2
reviewer:
  verdict: pass
```
"""


def test_handoff_script_blocks_by_round() -> None:
    plan = parse(SCRIPTED)
    assert set(plan.scripts) == {1, 2}
    assert plan.scripts[1]["implementer"] == [{"edit": {"file": "calc.py", "replace": "a - b",
                                                        "with": "a + b"}}]
    assert plan.scripts[1]["reviewer"] == {"verdict": "fail"}
    assert plan.scripts[2]["reviewer"] == {"verdict": "pass"}


def test_a_plan_without_frontmatter_can_still_carry_scripts() -> None:
    plan = parse(PROSE + "\n```handoff-script\nround: 1\nreviewer: {verdict: pass}\n```\n")
    assert plan.test is None
    assert plan.scripts == {1: {"round": 1, "reviewer": {"verdict": "pass"}}}


def test_malformed_yaml_in_the_frontmatter() -> None:
    with pytest.raises(UsageError) as caught:
        parse("---\ntest: [make\n---\n" + PROSE, source="plan.md")
    assert caught.value.exit_code == 2
    assert caught.value.message.startswith("plan.md:")
    assert "YAML" in caught.value.message


def test_an_unclosed_frontmatter() -> None:
    with pytest.raises(UsageError, match=r"^plan\.md: .*never closed"):
        parse("---\ntest: make\n" + PROSE, source="plan.md")


@pytest.mark.parametrize("key", ["tests", "verify", "reviewers"])
def test_unknown_frontmatter_keys_are_named(key: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse(f"---\ntest: make\n{key}: make\n---\n" + PROSE, source="plan.md")
    assert key in caught.value.message
    assert "plan.md" in caught.value.message
    assert "test" in caught.value.hint and "review" in caught.value.hint


@pytest.mark.parametrize(("head", "key"), [
    ("test: ''", "test"),
    ("test: []", "test"),
    ("test: \"python -c 'unclosed\"", "test"),
    ("test: 42", "test"),
    ("test: {cmd: make}", "test"),
    ("test: [python, 3]", "test"),
    ("test:", "test"),
    ("review: [make, '']", "review[1]"),
    ("review: [make, 5]", "review[1]"),
    ("review: [make, [ruff, 1]]", "review[1]"),
    ("review: 7", "review[0]"),
])
def test_bad_commands_are_usage_errors_naming_the_key(head: str, key: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse(f"---\n{head}\n---\n" + PROSE, source="plan.md")
    assert caught.value.message.startswith("plan.md:")
    assert f"'{key}'" in caught.value.message


@pytest.mark.parametrize("block", ["reviewer: {verdict: pass}", "round: one", "- round: 1",
                                   "round: [1"])
def test_a_bad_handoff_script_block_is_a_usage_error(block: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse(PROSE + f"\n```handoff-script\n{block}\n```\n", source="plan.md")
    assert caught.value.message.startswith("plan.md:")
    assert "handoff-script" in caught.value.message


def test_a_plan_larger_than_the_limit_is_refused() -> None:
    text = "# Plan\n\n" + "word " * (PLAN_LIMIT // 5)
    with pytest.raises(UsageError) as caught:
        parse(text, source="plan.md")
    assert caught.value.message == "plan.md is larger than 1024 KiB"
    assert "every brief" in caught.value.hint
    assert parse(text[:PLAN_LIMIT]).text == text[:PLAN_LIMIT]


@pytest.mark.parametrize("text", ["", "  \n\n", "---\ntest: pytest\n---\n", "---\n---\n\n  \n",
                                  "\ufeff\n"])
def test_an_empty_plan_is_refused_saying_what_it_lacks(text: str) -> None:
    with pytest.raises(UsageError) as refused:
        parse(text, "plan.md")
    assert refused.value.message == "plan.md is empty: it says nothing the ticket must do"
    assert "Acceptance criteria" in refused.value.hint
    assert parse("---\ntest: pytest\n---\nFix add.\n").test == ("pytest",)


def test_prove_mutants_is_the_one_proof_a_plan_may_ask_for() -> None:
    assert parse("---\nprove: mutants\n---\n# Fix\n").prove == ("mutants",)
    assert parse("---\nprove: [mutants, mutants]\n---\n# Fix\n").prove == ("mutants",)
    assert parse("# Fix\n").prove == ()
    for bad in ("prove: everything", "prove: [mutants, fuzz]", "prove: {a: 1}"):
        with pytest.raises(UsageError, match="'prove' knows only 'mutants'"):
            parse(f"---\n{bad}\n---\n# Fix\n")
