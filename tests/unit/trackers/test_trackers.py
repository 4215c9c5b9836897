"""handoff.trackers: an issue from a tracker, as handoff keeps it. Its ticket id is one handoff
accepts; its text is what a planner reads; whatever the tracker sent is cleaned of what a
terminal takes as a command and bounded, by the seam itself, for every adapter."""

from __future__ import annotations

from dataclasses import replace

import pytest

from handoff.errors import ExternalFailure
from handoff.record.store import validate_ticket_id
from handoff.trackers import BODY_LIMIT, TITLE_LIMIT, TrackedIssue, bounded, cleaned, one_line

URL = "https://github.com/team/calc/issues/123"


def issue(**changed: object) -> TrackedIssue:
    fields: dict[str, object] = {"tracker": "github", "ref": "123", "title": "Divide by zero",
                                 "body": "calc 1/0 crashes.", "url": URL, "labels": ("bug",)}
    fields.update(changed)
    return TrackedIssue(**fields)  # type: ignore[arg-type]


def test_a_github_issue_becomes_ticket_gh_and_its_number() -> None:
    made = issue()
    assert made.ticket_id == "gh-123"
    assert validate_ticket_id(made.ticket_id) == "gh-123"
    assert made.state == "open", "open unless the tracker says otherwise"


@pytest.mark.parametrize("tracker, ref, expected", [("jira", "PROJ-42", "jira-PROJ-42"),
                                                     ("linear", "ENG-7", "linear-ENG-7")])
def test_a_tracker_without_a_short_prefix_uses_its_name(tracker: str, ref: str,
                                                         expected: str) -> None:
    made = issue(tracker=tracker, ref=ref)
    assert made.ticket_id == expected and validate_ticket_id(made.ticket_id) == expected


@pytest.mark.parametrize("ref", ["", "12/3", "../x", "a--b", "-1", "1.2", "x" * 41, "1\n2",
                                 "gh 1"])
def test_a_ref_that_would_make_no_ticket_id_is_refused(ref: str) -> None:
    with pytest.raises(ExternalFailure, match="cannot make a ticket id of"):
        issue(ref=ref)


def test_a_trackers_name_is_letters_and_digits() -> None:
    with pytest.raises(ValueError, match="lower-case"):
        issue(tracker="Git Hub")


def test_the_text_is_a_heading_the_body_and_where_it_came_from() -> None:
    assert issue().text == ("# Divide by zero\n\ncalc 1/0 crashes.\n\n"
                            f"(from {URL}; labels: bug)\n")


def test_the_text_without_a_body_labels_or_title_is_still_well_formed() -> None:
    assert issue(body="  \n\n ", labels=()).text == f"# Divide by zero\n\n(from {URL})\n"
    assert issue(title="", body="", labels=()).text == f"# github issue 123\n\n(from {URL})\n"


def test_the_text_says_a_closed_issue_is_closed() -> None:
    closed = issue(state="CLOSED", labels=("bug", "ui"))
    assert closed.state == "closed"
    assert closed.text.endswith(f"(from {URL}; labels: bug, ui; the issue is closed)\n")


def test_escape_sequences_and_control_characters_are_taken_out() -> None:
    made = issue(title="\x1b]0;owned\x07Fix \x1b[31mred\x1b[0m\tlogin\x00",
                 body="Steps:\r\n1. run\x1b[2J\x1b[H it\r\n\tthen\x08 \x9bthis\x7f\rend\x1b",
                 labels=("\x1b[1mbug\x1b[0m", "\x00", "good  first\nissue"),
                 url="https://github.com/team/calc/issues/123\x1b[8m", state="OPEN\x1b[0m")
    assert made.title == "Fix red login"
    assert made.body == "Steps:\n1. run it\n\tthen this\nend", "newline and tab stay"
    assert made.labels == ("bug", "good first issue"), "a label left empty goes"
    assert made.url == URL and made.state == "open"
    assert not any((0 <= ord(c) < 32 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f
                   for c in made.text)


def test_a_url_with_credentials_is_kept_without_them() -> None:
    made = issue(url="https://bot:ghp_s3cret@github.example.com/team/calc/issues/123")
    assert made.url == "https://github.example.com/team/calc/issues/123"
    assert "s3cret" not in made.text


def test_a_long_title_is_cut_to_its_bound_with_a_note() -> None:
    made = issue(title="word " * 100)  # 499 characters once its blanks are one each
    assert len(made.title) == TITLE_LIMIT == 200
    assert made.title.startswith("word word ")
    assert made.title.endswith(" … (cut here: 499 characters in all)")
    assert "\n" not in made.title


def test_a_long_body_is_cut_to_its_bound_with_a_note_that_says_where_the_rest_is() -> None:
    made = issue(body="first line\n" + "x" * 30_000 + "\nlast line")
    assert len(made.body) == BODY_LIMIT == 20_000
    assert made.body.startswith("first line\nxxx")
    assert made.body.endswith(f"xxx\n\n… (cut here: the body has 30,021 characters; "
                              f"read all of it at {URL})")
    assert "last line" not in made.body


def test_text_at_its_bound_is_kept_whole_and_cleaning_again_changes_nothing() -> None:
    whole = issue(title="t" * 200, body="b" * 20_000)
    assert whole.title == "t" * 200 and whole.body == "b" * 20_000
    cut = issue(title="t" * 201, body="b" * 20_001, labels=("l" * 150,))
    assert replace(cut) == cut
    assert cut.labels == ("l" * 99 + "…",)


def test_labels_are_bounded_in_number() -> None:
    assert len(issue(labels=tuple(f"l{i}" for i in range(150))).labels) == 100


def test_the_helpers_an_adapter_may_use_alone() -> None:
    assert cleaned("a\x1b[1mb\x1b[0m\r\nc\x00") == "ab\nc"
    assert one_line(" a\n\tb\x1b]2;t\x07 c ") == "a b c"
    assert bounded("abcdef", 6, "!") == "abcdef"
    assert bounded("abcdefg", 6, "!") == "abcde!"
    assert bounded("abcdefg", 2, "[cut]") == "[c", "never longer than the bound"
