"""A whole ticket whose commit changes what decides which tests run (issue 32, "a gate weakened
without a word"): every reviewer is shown the change among the weakened tests and must answer
it; one answered unjustified fails the round, and the ticket passes once it is taken back.
Real tmux and git, the scripted agents, driven through the CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.conftest import git
from tests.faults.catalog import fault
from tests.harness import (
    ALL_TESTS,
    FIX_ADD,
    FIX_MUL,
    FIX_NEG,
    events,
    handoff,
    plan_text,
    state,
    ticket_path,
    write_plan,
)

DESELECT = {"file": "pytest.ini", "content": '[pytest]\naddopts = -k "not test_neg"\n'}


@fault("32", "the implementer commits a pytest-style run filter (unittest's load_tests "
       "equivalent here: a pytest.ini with `-k \"not test_neg\"`) that narrows which tests "
       "run, and no test is deleted or skipped",
       "the change is listed to every reviewer as a weakened test (a test-config entry) that a "
       "pass must answer; answered unjustified, the round fails",
       "the commit; the reviewers' answers")
def test_a_test_configuration_change_is_shown_to_every_reviewer_and_must_be_answered(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    (repo / ".handoff.yaml").write_text(yaml.safe_dump(
        {"roles": {"implementer": {"provider": "scripted"}, "reviewer": {"provider": "scripted"},
                   "security": {"provider": "scripted", "kind": "reviewer"}}}, sort_keys=False))
    git(repo, "add", ".handoff.yaml")
    git(repo, "commit", "-q", "-m", "team")
    plan = plan_text({1: {"edits": [FIX_ADD, FIX_MUL, FIX_NEG, DESELECT],
                          "security": {"weakened": {"W1": "unjustified"}}},
                      2: {"edits": [{"file": "pytest.ini", "delete": True}]}}, test=ALL_TESTS)
    path = write_plan(tmp_path, plan, "TC-1.md")
    done = handoff("start", "TC-1", "--plan", str(path), "--yes", "--foreground", cwd=repo,
                   timeout=150)
    assert done.returncode == 0, done.stdout + done.stderr
    final = state(handoff_home, "TC-1")
    # the gate passed in round 1 (the unittest gate never reads pytest.ini): only the review
    # stopped it
    assert final["gates"]["1"] == "pass" and final["verdicts"] == {"1": "fail", "2": "pass"}
    assert final["weakened"]["1"] == [
        {"id": "W1", "file": "pytest.ini", "line": 1, "kind": "test-config",
         "text": 'new file: +[pytest] | +addopts = -k "not test_neg"'}]
    assert final["weakened"]["2"] == []  # taken back: nothing left to answer
    folder = ticket_path(handoff_home, "TC-1")
    for who in ("reviewer", "security"):
        brief = (folder / "inbox" / who / "brief-1.md").read_text()
        assert "pytest.ini:1: test configuration changed" in brief
        assert 'addopts = -k "not test_neg"' in brief
    verdicts: dict[str, Any] = {e["role"]: e for e in events(handoff_home, "TC-1")
                                if e["kind"] == "verdict" and e["round"] == 1}
    assert verdicts["reviewer"]["weakened"] == ["W1 justified"]
    assert verdicts["security"]["weakened"] == ["W1 unjustified"]
    assert verdicts["security"]["verdict"] == "fail"
