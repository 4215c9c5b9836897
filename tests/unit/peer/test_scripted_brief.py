"""handoff.peer.scripted_brief: what the scripted agent reads of a brief's frontmatter."""

from __future__ import annotations

from pathlib import Path

from handoff.peer.scripted_brief import Brief, listed, words


def test_a_reviewers_brief_is_read_with_its_lists() -> None:
    brief = Brief.read({"ticket": "t", "role": "security", "kind": "reviewer", "round": "2",
                        "worktree": "/w", "plan": "/p/plan.md", "report": "/d/r.md",
                        "submit": ["handoff", "submit", 2], "commit": "abc",
                        "tests": [["pytest", "-q"], "not a list"],
                        "earlier": [{"id": "F1"}, "junk"], "weakened": ["W1"],
                        "unrequested": ["U1", "U2"], "unproven": ["P1"]})

    assert (brief.role, brief.kind, brief.round) == ("security", "reviewer", 2)
    assert brief.submit == ["handoff", "submit", "2"] and brief.worktree == Path("/w")
    assert brief.tests == (["pytest", "-q"], [])
    assert brief.earlier == ({"id": "F1"},)
    assert brief.asked == {"weakened": ("W1",), "unrequested": ("U1", "U2"), "unproven": ("P1",)}
    assert brief.test is None and brief.silent is False


def test_a_brief_that_names_no_kind_is_of_its_roles_kind() -> None:
    brief = Brief.read({"role": "implementer", "round": 1, "worktree": "/w", "plan": "/p",
                        "report": "/r", "submit": [], "test": ["make", "check"]})

    assert brief.kind == "implementer" and brief.test == ["make", "check"]
    assert brief.ticket == "" and brief.commit == ""


def test_listed_and_words_take_only_a_yaml_list() -> None:
    assert listed("a b") == [] and listed(None) == [] and listed([1, "x"]) == [1, "x"]
    assert words([1, None, "x"]) == ["1", "None", "x"] and words({"a": 1}) == []
