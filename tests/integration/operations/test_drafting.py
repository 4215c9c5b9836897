"""handoff.operations.drafting: a plan waiting for approval, read, edited, drafted again or
refused by its person, on tickets made as `start` makes them (real git; the planner's own runs
are tests/e2e/test_planner.py's)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from handoff.errors import UsageError
from handoff.operations import drafting
from tests.tickets import moved, new_ticket


def test_only_a_plan_waiting_for_approval_is_handled_and_the_table_says_what_instead(
        repo: Path, handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    assert drafting.waiting_plan(handoff_home, "T-1", repo).tdir.path == ws.tdir.path
    moved(ws, "passed", round=1)
    with pytest.raises(UsageError) as caught:
        drafting.waiting_plan(handoff_home, "T-1", repo)
    assert caught.value.message == "T-1 is passed: it has no plan waiting for approval"
    assert "handoff finish T-1" in caught.value.hint


def test_a_persons_own_plan_is_shown_as_theirs_and_has_no_planner_to_redraft_it(
        repo: Path, handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    shown = drafting.show(ws)
    assert shown.draft == 0 and "--redraft" not in shown.said[-1]
    assert not any("drafted by the planner" in line for line in shown.summary)
    with pytest.raises(UsageError) as caught:
        drafting.redraft(ws, "again")
    assert "is yours, not a planner's" in caught.value.message
    assert ws.state().phase == "awaiting-approval", "nothing moved"


def test_an_editor_that_fails_leaves_the_plan_and_keeps_the_copy(
        repo: Path, handoff_home: Path, tmp_path: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    before = ws.tdir.plan_md.read_text(encoding="utf-8")
    editor = tmp_path / "edit.py"
    editor.write_text("import sys\nfrom pathlib import Path\n"
                      "Path(sys.argv[1]).write_text('half a thought')\nsys.exit(1)\n")
    with pytest.raises(UsageError) as caught:
        drafting.edit(ws, [sys.executable, str(editor)])
    assert "exited 1" in caught.value.message and "--edit opens it again" in caught.value.hint
    assert ws.tdir.plan_md.read_text(encoding="utf-8") == before
    assert (ws.tdir.path / drafting.EDITING).read_text(encoding="utf-8") == "half a thought"
    with pytest.raises(UsageError) as missing:
        drafting.edit(ws, [str(tmp_path / "no-such-editor")])
    assert "could not be started" in missing.value.message


def test_the_editor_is_visual_then_editor_then_vi(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VISUAL", "code --wait")
    monkeypatch.setenv("EDITOR", "nano")
    assert drafting.your_editor() == ["code", "--wait"]
    monkeypatch.delenv("VISUAL")
    assert drafting.your_editor() == ["nano"]
    monkeypatch.delenv("EDITOR")
    assert drafting.your_editor() == ["vi"] and "EDITOR" not in os.environ
