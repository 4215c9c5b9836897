"""A ticket started from its text (issue 36): a planner peer drafts the plan in a read-only
checkout of the base, its draft is checked as a plan before a person sees it, and only a
person (or `start --yes`, for a plan that validated) approves it. Real tmux and git; the
scripted agent plans from the ticket's `handoff-planner` block as a real CLI would from prose."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import PYTHON, wait_until
from tests.harness import (
    ADD_ONLY,
    FIX_ADD,
    events,
    handoff,
    in_peer,
    release,
    state,
    ticket_path,
    wait_phase,
)
from tests.integration.trackers.test_github import gh_issue, made_stand_in

GROUNDED = ("# Fix add\n\nIn `calc.py`, make `add` return the sum.\n\n## Acceptance criteria\n"
            "- add(2, 3) is 5\n\n## Grounding\n- `calc.py`: add subtracts its arguments\n"
            "- `tests/test_calc.py`: AddTest covers add\n\n"
            f"```handoff-script\n{yaml.safe_dump({'round': 1, 'edits': [FIX_ADD]})}```\n")
MADE_UP = ("# Fix add\n\nIn `calc_utils.py`, fix add.\n\n## Grounding\n"
           "- `calc_utils.py`: where add lives\n")


def ticket_file(tmp_path: Path, drafts: list[dict[str, Any]], **script: Any) -> Path:
    """The one line a person writes, and (for the scripted planner) what it files, in order."""
    block = yaml.safe_dump({"drafts": drafts, **script}, sort_keys=False, width=1000)
    path = tmp_path / "ticket.md"
    path.write_text(f"Fix the add function in calc.py: add(2, 3) must be 5.\n\n"
                    f"~~~handoff-planner\n{block}~~~\n", encoding="utf-8")
    return path


def planner_config(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump(
        {"roles": {"planner": {"provider": "scripted"}}}), encoding="utf-8")


def test_a_one_line_ticket_becomes_a_checked_plan_and_runs_to_passed_with_yes(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    """A draft naming a made-up file and a test file that is not there is sent back with both
    problems; the mended draft becomes plan.md, is approved by --yes (it validated), and the
    ticket runs on it to passed."""
    planner_config(handoff_home)
    ticket = ticket_file(tmp_path, [
        {"test": [PYTHON, "-m", "unittest", "tests/test_nothere.py"], "body": MADE_UP},
        {"test": ADD_ONLY, "body": GROUNDED}])
    done = handoff("start", "P-1", "--ticket-file", str(ticket), "--yes", "--foreground",
                   cwd=repo, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    said = events(handoff_home, "P-1")
    refused = [e for e in said if e["kind"] == "submission" and e.get("role") == "planner"
               and e.get("accepted") is False]
    assert refused, "the first draft was sent back"
    problems = " ".join(refused[0]["problems"])
    assert "calc_utils.py" in problems and "tests/test_nothere.py" in problems, problems
    drafted = next(e for e in said if e["kind"] == "plan-drafted")
    assert drafted["test"] == ADD_ONLY and any("calc.py" in g for g in drafted["grounding"])
    approved = next(e for e in said if e["kind"] == "plan-approved")
    assert approved["by"] == "--yes"
    plan = (ticket_path(handoff_home, "P-1") / "plan.md").read_text(encoding="utf-8")
    assert "In `calc.py`, make `add` return the sum." in plan and "calc_utils" not in plan
    assert yaml.safe_load(plan.split("---")[1])["test"] == ADD_ONLY
    ticket_md = (ticket_path(handoff_home, "P-1") / "ticket.md").read_text(encoding="utf-8")
    assert "add(2, 3) must be 5" in ticket_md
    final = state(handoff_home, "P-1")
    assert final["phase"] == "passed" and final["round"] == 1
    phases = [e["to"] for e in said if e["kind"] == "phase"]
    assert phases[:2] == ["implementing", "gating"] or "awaiting-approval" not in phases


def test_the_planner_reads_only_and_cannot_approve_its_own_plan_a_person_does(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    """Without --yes the drafted plan waits for a person. While it drafts, the planner's own
    session can neither change its checkout nor approve: only the person's approval starts
    the loop."""
    planner_config(handoff_home)
    ticket = ticket_file(tmp_path, [{"test": ADD_ONLY, "body": GROUNDED}], pause_until="go")
    started = handoff("start", "P-2", "--ticket-file", str(ticket), cwd=repo, timeout=60)
    assert started.returncode == 0, started.stderr
    assert "drafts the plan" in started.stderr and "handoff resume P-2 --yes" in started.stderr
    wait_until(lambda: any(e["kind"] == "peer" and e["role"] == "planner"
                           for e in events(handoff_home, "P-2")), 30, "the planner at work")
    checkout = Path(str(state(handoff_home, "P-2")["worktrees"]["planner"]))
    wrote = in_peer(handoff_home, "P-2", "planner",
                    ["sh", "-c", f"echo planted > {checkout / 'planted.py'}"])
    assert wrote.returncode != 0 and not (checkout / "planted.py").exists(), \
        "the planner's checkout is read-only to it"
    approve = in_peer(handoff_home, "P-2", "planner",
                      [sys.executable, "-m", "handoff", "resume", "P-2", "--yes"])
    assert approve.returncode != 0, approve.stdout
    release(ticket_path(handoff_home, "P-2"), "go")
    wait_phase(handoff_home, "P-2", "awaiting-approval", timeout=60)
    assert not [e for e in events(handoff_home, "P-2") if e["kind"] == "plan-approved"], \
        "nobody but the person approves"
    shown = handoff("status", "P-2", cwd=repo)
    assert "awaiting-approval" in shown.stdout and "handoff resume P-2 --yes" in shown.stdout
    approved = handoff("resume", "P-2", "--yes", cwd=repo)
    assert approved.returncode == 0, approved.stderr
    final = wait_phase(handoff_home, "P-2", "passed", "escalated", "needs-human", timeout=120)
    assert final["phase"] == "passed", final["reason"]


def test_an_issue_becomes_the_ticket_and_gh_failures_are_one_line_each(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    """`start --issue 7` reads the issue with the person's gh (a stand-in on PATH): its title
    and body are the planner's ticket, its id gh-7, and the ticket runs to passed. An issue
    that does not exist, gh logged out and gh missing each end in one line, with nothing
    made."""
    planner_config(handoff_home)
    gh = made_stand_in(tmp_path / "gh")
    folder = gh.folder
    block = yaml.safe_dump({"drafts": [{"test": ADD_ONLY, "body": GROUNDED}]}, width=1000)
    gh.add(gh_issue(7, "add subtracts", f"add(2, 3) is -1.\n\n~~~handoff-planner\n{block}~~~\n"))
    with_gh = {**os.environ, "PATH": f"{folder / 'bin'}:{os.environ['PATH']}"}
    done = handoff("start", "--issue", "7", "--yes", "--foreground", cwd=repo, env=with_gh,
                   timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert state(handoff_home, "gh-7")["phase"] == "passed"
    ticket_md = (ticket_path(handoff_home, "gh-7") / "ticket.md").read_text(encoding="utf-8")
    assert "add subtracts" in ticket_md and "add(2, 3) is -1." in ticket_md
    assert "https://github.com/team/calc/issues/7" in ticket_md
    report = (ticket_path(handoff_home, "gh-7") / "final-report.md").read_text(encoding="utf-8")
    assert "**Issue:** https://github.com/team/calc/issues/7" in report, "it links back"
    assert gh.said()[0]["argv"][:3] == ["issue", "view", "7"]

    missing = handoff("start", "--issue", "999", cwd=repo, env=with_gh)
    assert missing.returncode == 3 and "issue #999 not found" in missing.stderr, missing.stderr
    gh.act("logged-out")
    logged_out = handoff("start", "--issue", "8", cwd=repo, env=with_gh)
    assert logged_out.returncode == 1 and "gh auth login" in logged_out.stderr
    without = {**os.environ, "PATH": ":".join(
        p for p in os.environ["PATH"].split(":") if not (Path(p) / "gh").exists())}
    no_gh = handoff("start", "--issue", "8", cwd=repo, env=without)
    assert no_gh.returncode == 6 and "gh (GitHub CLI) is not on PATH" in no_gh.stderr
    for failed in (missing, logged_out, no_gh):
        assert failed.stderr.count("handoff: error:") == 1 and "Traceback" not in failed.stderr
    assert sorted(p.name for p in ticket_path(handoff_home, "gh-7").parent.iterdir()
                  if not p.name.startswith(".")) == ["gh-7"], "no other ticket was made"


def test_a_person_reads_edits_redrafts_and_approves_or_refuses_a_drafted_plan(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    """`handoff plan` shows the draft with what the planner read; an edit that names a test
    file the base lacks is refused and kept, a good one taken; another draft carries the
    person's note to the planner; the approved plan runs to passed. A refused ticket leaves
    nothing."""
    planner_config(handoff_home)
    second = GROUNDED.replace("# Fix add", "# Fix add, second draft")
    ticket = ticket_file(tmp_path, [{"test": ADD_ONLY, "body": GROUNDED}],
                         drafts_2=[{"test": ADD_ONLY, "body": second}])
    assert handoff("start", "P-3", "--ticket-file", str(ticket), cwd=repo).returncode == 0
    wait_phase(handoff_home, "P-3", "awaiting-approval", timeout=60)
    wait_until(lambda: handoff("plan", "P-3", cwd=repo).returncode == 0, 30,
               "its orchestrator to end at the approval")
    shown = handoff("plan", "P-3", cwd=repo)
    assert "In `calc.py`, make `add` return the sum." in shown.stdout
    assert "drafted by the planner (draft 1) from the ticket's text; it read: calc.py, " \
           "tests/test_calc.py" in shown.stdout, shown.stdout
    assert "handoff plan P-3 --approve" in shown.stdout

    folder = ticket_path(handoff_home, "P-3")
    before = (folder / "plan.md").read_text(encoding="utf-8")
    editor = tmp_path / "edit.py"
    editor.write_text("import sys\nfrom pathlib import Path\np = Path(sys.argv[-1])\n"
                      "p.write_text(p.read_text().replace(sys.argv[1], sys.argv[2]))\n")
    bad = {**os.environ, "EDITOR": f"{sys.executable} {editor} tests.test_calc.AddTest "
                                   "tests/test_gone.py"}
    refused = handoff("plan", "P-3", "--edit", cwd=repo, env=bad)
    assert refused.returncode == 2 and "tests/test_gone.py is not in the base commit" in \
        refused.stderr, refused.stderr
    assert (folder / "plan.md").read_text(encoding="utf-8") == before, "the plan as it was"
    assert "tests/test_gone.py" in (folder / "plan.edit.md").read_text(encoding="utf-8")
    good = {**os.environ, "EDITOR": f"{sys.executable} {editor} tests/test_gone.py "
                                    "tests.test_calc.AddTest"}
    edited = handoff("plan", "P-3", "--edit", cwd=repo, env=good)
    assert edited.returncode == 0, edited.stderr
    assert not (folder / "plan.edit.md").exists()
    assert any(e["kind"] == "plan-edited" for e in events(handoff_home, "P-3"))

    again = handoff("plan", "P-3", "--redraft", "say which test covers it", cwd=repo)
    assert again.returncode == 0, again.stderr
    wait_until(lambda: state(handoff_home, "P-3")["phase"] == "awaiting-approval" and
               state(handoff_home, "P-3")["round"] == 2, 60, "the second draft")
    brief = (folder / "inbox" / "planner" / "brief-2.md").read_text(encoding="utf-8")
    assert "say which test covers it" in brief and "plan-draft-1.md" in brief
    assert "# Fix add, second draft" in (folder / "plan.md").read_text(encoding="utf-8")
    assert (folder / "plan-draft-1.md").read_text(encoding="utf-8").startswith("---")
    wait_until(lambda: handoff("plan", "P-3", cwd=repo).returncode == 0, 30,
               "its orchestrator to end at the approval")
    approved = handoff("plan", "P-3", "--approve", cwd=repo)
    assert approved.returncode == 0, approved.stderr
    final = wait_phase(handoff_home, "P-3", "passed", "escalated", "needs-human", timeout=120)
    assert final["phase"] == "passed", final["reason"]

    assert handoff("start", "P-4", "--ticket-file", str(ticket), cwd=repo).returncode == 0
    wait_phase(handoff_home, "P-4", "awaiting-approval", timeout=60)
    wait_until(lambda: handoff("plan", "P-4", cwd=repo).returncode == 0, 30,
               "its orchestrator to end at the approval")
    no = handoff("plan", "P-4", "--refuse", cwd=repo)
    assert no.returncode == 0 and "nothing of it is kept" in no.stdout, no.stdout + no.stderr
    assert not list(handoff_home.glob("*/P-4"))
    assert not (repo / ".worktrees" / "P-4").exists()


def test_a_batch_of_issues_by_label_or_by_number_each_drafted_in_its_own_window(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    """`--label handoff` starts a ticket for each open issue with the label (their drafts
    then wait for approval, listed by status); `--issues` with an issue that does not exist
    starts none; `--issues 9 --yes` runs to passed."""
    planner_config(handoff_home)
    gh = made_stand_in(tmp_path / "gh")
    block = yaml.safe_dump({"drafts": [{"test": ADD_ONLY, "body": GROUNDED}]}, width=1000)
    body = f"add(2, 3) is -1.\n\n~~~handoff-planner\n{block}~~~\n"
    for number, labels in ((7, ("handoff", "bug")), (8, ("handoff",)), (9, ("bug",))):
        gh.add(gh_issue(number, f"add is wrong ({number})", body, labels=labels))
    with_gh = {**os.environ, "PATH": f"{gh.folder / 'bin'}:{os.environ['PATH']}"}
    labelled = handoff("start", "--label", "handoff", cwd=repo, env=with_gh)
    assert labelled.returncode == 0, labelled.stderr
    assert "2 of 2 started" in labelled.stdout
    for ticket in ("gh-7", "gh-8"):
        wait_phase(handoff_home, ticket, "awaiting-approval", timeout=60)
    assert not list(handoff_home.glob("*/gh-9")), "issue 9 has no such label"
    listed = handoff("status", cwd=repo)
    assert all(f"handoff plan {t}" in listed.stdout for t in ("gh-7", "gh-8")), listed.stdout

    refused = handoff("start", "--issues", "9", "999", cwd=repo, env=with_gh)
    assert refused.returncode == 3 and "issue #999 not found" in refused.stderr
    assert not list(handoff_home.glob("*/gh-9")), "one unreadable issue starts none"
    started = handoff("start", "--issues", "9", "--yes", cwd=repo, env=with_gh)
    assert started.returncode == 0, started.stderr
    final = wait_phase(handoff_home, "gh-9", "passed", "escalated", "needs-human", timeout=120)
    assert final["phase"] == "passed", final["reason"]


def test_at_a_terminal_start_waits_for_the_draft_and_asks_its_person(
        repo: Path, tmp_path: Path, handoff_home: Path, terminal: str) -> None:
    """`start --ticket` typed at a terminal waits for the draft, shows it as `handoff plan`
    does, and asks: a redraft with a note is waited for and shown in turn; yes runs it."""
    from tests.e2e.test_terminal import program_ended, run_in_terminal, screen

    planner_config(handoff_home)
    second = GROUNDED.replace("# Fix add", "# Fix add, as you asked")
    ticket = ticket_file(tmp_path, [{"test": ADD_ONLY, "body": GROUNDED}],
                         drafts_2=[{"test": ADD_ONLY, "body": second}])
    run_in_terminal(terminal, repo, "start", "P-5", "--ticket-file", str(ticket))
    asked = "Approve it? [y]es, [e]dit, [r]edraft with a note, [n]o, [l]ater:"
    wait_until(lambda: asked in screen(terminal), 60, "the draft and the question")
    shown = screen(terminal)
    assert "it read: calc.py, tests/test_calc.py" in shown, shown
    assert state(handoff_home, "P-5")["phase"] == "awaiting-approval"

    def keys(*typed: str) -> None:
        for text in typed:
            subprocess.run(["tmux", "-L", terminal, "send-keys", "-t", "=user:", "-l", text],
                           check=True, timeout=15)
            subprocess.run(["tmux", "-L", terminal, "send-keys", "-t", "=user:", "Enter"],
                           check=True, timeout=15)
    keys("r")
    wait_until(lambda: "What should the next draft do differently?" in screen(terminal), 30,
               "the note asked for")
    keys("say it plainly")
    wait_until(lambda: "# Fix add, as you asked" in screen(terminal) and
               screen(terminal).count(asked) >= 1, 60, "the second draft and the question")
    brief = (ticket_path(handoff_home, "P-5") / "inbox" / "planner" / "brief-2.md")
    assert "say it plainly" in brief.read_text(encoding="utf-8")
    keys("y")
    wait_until(lambda: program_ended(terminal), 60, "start to end once approved")
    final = wait_phase(handoff_home, "P-5", "passed", "escalated", "needs-human", timeout=120)
    assert final["phase"] == "passed", final["reason"]
