"""handoff.protocol.frontmatter: YAML fields above, Markdown below, and exact errors."""

from __future__ import annotations

from typing import Any

import pytest

from handoff.protocol.frontmatter import FrontmatterError, join, split


def test_split_gives_fields_and_body() -> None:
    data, body = split("---\nstatus: done\nround: 2\n---\n## Changes\nFixed it.\n")
    assert data == {"status": "done", "round": 2}
    assert body == "## Changes\nFixed it.\n"


def test_a_byte_order_mark_is_ignored() -> None:
    data, body = split("\ufeff---\nkey: value\n---\nbody\n")
    assert data == {"key": "value"}
    assert body == "body\n"


def test_three_dots_also_close_the_frontmatter() -> None:
    data, body = split("---\nkey: value\n...\nbody\n")
    assert data == {"key": "value"}
    assert body == "body\n"


def test_empty_frontmatter_is_an_empty_mapping() -> None:
    assert split("---\n---\nbody\n") == ({}, "body\n")


def test_only_the_first_closing_line_ends_the_frontmatter() -> None:
    data, body = split("---\na: 1\n---\ntext\n---\nmore: text\n---\n")
    assert data == {"a": 1}
    assert body == "text\n---\nmore: text\n---\n"


def test_windows_line_endings() -> None:
    data, body = split("---\r\na: 1\r\n---\r\nbody\r\n")
    assert data == {"a": 1}
    assert body == "body\r\n"


@pytest.mark.parametrize("text", ["", "no frontmatter here\n", "# Title\n---\na: 1\n---\n",
                                  " text\n---\n"])
def test_text_without_an_opening_line_is_refused(text: str) -> None:
    with pytest.raises(FrontmatterError, match="---"):
        split(text)


def test_an_unclosed_frontmatter_is_refused() -> None:
    with pytest.raises(FrontmatterError, match="never closed"):
        split("---\nstatus: done\ncommit: abc1234\n")


def test_invalid_yaml_names_the_frontmatter_line() -> None:
    with pytest.raises(FrontmatterError) as caught:
        split("---\nstatus: done\ncommit: [abc\nround: 1\n---\nbody\n")
    message = str(caught.value)
    assert "YAML" in message
    assert "line" in message


def test_the_reported_line_points_at_the_broken_line() -> None:
    # the tab on frontmatter line 3 is what YAML cannot read
    with pytest.raises(FrontmatterError, match=r"frontmatter line 3\b"):
        split("---\na: 1\nb: 2\n\tc: 3\n---\n")


@pytest.mark.parametrize("head", ["- a\n- b\n", "just text\n", "42\n"])
def test_frontmatter_that_is_not_a_mapping_is_refused(head: str) -> None:
    with pytest.raises(FrontmatterError, match="mapping"):
        split(f"---\n{head}---\nbody\n")


@pytest.mark.parametrize("data", [
    {"ticket": "PROJ-1", "round": 2, "submit": ["/usr/bin/handoff", "submit", "/tmp/r.md"]},
    {"text": "ünïcode — 票", "multi": "line one\nline two\n", "empty": "", "none": None},
    {"looks_like_int": "007", "looks_like_bool": "yes", "colon": "a: b", "dashes": "---"},
    {"nested": {"a": [1, {"b": "c"}]}, "long": "word " * 400},
])
def test_join_then_split_round_trips(data: dict[str, Any]) -> None:
    body = "# Title\n\n---\n\nText with a rule above.\n"
    assert split(join(data, body)) == (data, body)


def test_join_keeps_the_order_of_the_fields() -> None:
    text = join({"z": 1, "a": 2, "m": 3}, "")
    assert [line.split(":")[0] for line in text.splitlines()[1:4]] == ["z", "a", "m"]


def test_yaml_aliases_are_read_within_a_bound_and_refused_past_it() -> None:
    data, _ = split("---\ntest: &t [python, -m, pytest]\nreview: [*t]\n---\nbody\n")
    assert data["review"] == [["python", "-m", "pytest"]]
    nested = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for prev, name in zip("abcd", "bcde", strict=True):
        nested.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 10)}]")
    with pytest.raises(FrontmatterError) as caught:
        split("---\n" + "\n".join(nested) + "\n---\nbody\n")
    assert "(frontmatter line 4)" in str(caught.value)
    assert "stand for more than 10000 values" in str(caught.value)


def test_a_word_of_a_vocabulary_is_written_as_its_plain_string() -> None:
    from handoff.phases import Phase
    from handoff.verdicts import Verdict

    text = join({"verdict": Verdict.FAIL, "phase": Phase.NEEDS_HUMAN}, "body\n")
    assert text.startswith("---\nverdict: fail\nphase: needs-human\n---\n"), text
