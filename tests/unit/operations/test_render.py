"""handoff.operations.render.event_line: one readable line (or a few) per event, for every kind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from handoff.operations.render import event_line
from handoff.record.events import EventLog

SHA = "9fceb02d0ae598e95dc970b74767f19372d61af8"
TIME = "2024-05-01T12:34:56.789+00:00"


def event(kind: str, round_: int = 2, role: str = "", **fields: Any) -> dict[str, Any]:
    return {"time": TIME, "kind": kind, "round": round_, "role": role, **fields}


def test_every_line_starts_with_time_round_and_role() -> None:
    text = event_line(event("submitted", role="implementer", report="impl-report-2.md"))
    assert text.startswith("12:34:56")
    assert " r2 " in text
    assert "implementer" in text
    assert text.index("12:34:56") < text.index("r2") < text.index("implementer")


def test_no_role_means_no_role_in_the_line() -> None:
    text = event_line(event("orchestrator", pid=4242))
    assert "implementer" not in text and "reviewer" not in text
    assert text == text.rstrip()


def test_created() -> None:
    text = event_line(event("created", round_=0, base="HEAD", base_commit=SHA, repo="/src/r"))
    assert "created" in text
    assert SHA[:7] in text


@pytest.mark.parametrize("reason", ["plan approved", ""])
def test_phase(reason: str) -> None:
    moves: dict[str, Any] = {"from": "implementing", "to": "gating"}
    text = event_line(event("phase", reason=reason, **moves))
    assert "implementing" in text and "gating" in text
    assert text.index("implementing") < text.index("gating")
    if reason:
        assert reason in text
    else:
        assert "()" not in text


def test_launch() -> None:
    text = event_line(event("launch", role="reviewer", provider="claude",
                          brief="/state/r-1/PROJ-7/inbox/reviewer/brief-2.md"))
    assert "claude" in text
    assert "brief-2.md" in text
    assert "/state/r-1" not in text  # the long folder is left out


def test_launch_with_a_reason() -> None:
    text = event_line(event("launch", role="implementer", provider="scripted", reason="relaunch",
                          brief="/x/inbox/implementer/brief-1.md"))
    assert "relaunch" in text and "scripted" in text and "brief-1.md" in text


def test_launch_after_a_rejected_report_does_not_print_none() -> None:
    text = event_line(event("launch", role="reviewer", reason="report rejected"))
    assert "report rejected" in text
    assert "None" not in text
    assert "  [" not in text


def test_brief() -> None:
    text = event_line(event("brief", role="implementer", brief="/x/inbox/implementer/brief-3.md",
                          by="paste"))
    assert "brief-3.md" in text and "paste" in text


@pytest.mark.parametrize("by", ["hand", "orchestrator"])
def test_recycle(by: str) -> None:
    text = event_line(event("recycle", role="reviewer", by=by))
    assert "recycle" in text and by in text


def test_submitted() -> None:
    assert "review-report-2.md" in event_line(event("submitted", role="reviewer",
                                                  report="review-report-2.md"))


def test_an_accepted_submission() -> None:
    text = event_line(event("submission", role="reviewer", report="review-report-2.md", accepted=True))
    assert "accepted" in text and "review-report-2.md" in text
    assert "rejected" not in text


def test_a_rejected_submission_lists_every_problem() -> None:
    problems = ["'commit' must be a commit hash", "missing section(s): '## Changes'"]
    text = event_line(event("submission", role="implementer", report="impl-report-2.rejected-1.md",
                          accepted=False, problems=problems))
    assert "rejected" in text and "impl-report-2.rejected-1.md" in text
    for problem in problems:
        assert problem in text


def test_gate_running_shows_the_command() -> None:
    text = event_line(event("gate", result="running", command=["python", "-m", "pytest", "-q"],
                          commit=SHA))
    assert "python -m pytest -q" in text


@pytest.mark.parametrize("result", ["pass", "fail"])
def test_gate_result_with_its_summary(result: str) -> None:
    text = event_line(event("gate", result=result, summary="exit 1 after 2.1s", log="gate-2.log"))
    assert result in text and "exit 1 after 2.1s" in text


def test_a_skipped_gate_says_why() -> None:
    text = event_line(event("gate", result="skipped", reason="the plan names no test command"))
    assert "skipped" in text and "the plan names no test command" in text


def test_verdict() -> None:
    must = ["calc.py:2: add() subtracts", "calc.py:6: mul() adds"]
    text = event_line(event("verdict", role="reviewer", verdict="fail", commit=SHA, must_fix=must,
                          should_fix=[]))
    assert "fail" in text.lower()
    assert SHA[:7] in text
    for finding in must:
        assert finding in text


def test_a_verdict_with_many_findings_stays_short() -> None:
    must = [f"f{i}.py:{i}: problem number {i}" for i in range(20)]
    text = event_line(event("verdict", role="reviewer", verdict="fail", commit=SHA, must_fix=must))
    assert must[0] in text
    assert len(text.splitlines()) < len(must)


def test_a_passing_verdict() -> None:
    text = event_line(event("verdict", role="reviewer", verdict="pass", commit=SHA, must_fix=[]))
    assert "pass" in text.lower() and SHA[:7] in text
    assert len(text.splitlines()) == 1


def test_death() -> None:
    text = event_line(event("death", role="implementer", exit_status=137, existed=True, relaunches=2))
    assert "137" in text and "2" in text


def test_final_report() -> None:
    assert "escalated" in event_line(event("final-report", outcome="escalated", reason="x"))


def test_answer() -> None:
    text = event_line(event("answer", role="human", file="answer-1.md"))
    assert "answer-1.md" in text and "human" in text


def test_stopped_by_someone_and_by_a_signal() -> None:
    assert "hand" in event_line(event("stopped", by="hand", orchestrator=4242))
    text = event_line(event("stopped", phase="reviewing"))
    assert "stopped" in text
    assert "None" not in text


def test_orchestrator() -> None:
    assert "4242" in event_line(event("orchestrator", pid=4242))


def test_worktrees() -> None:
    text = event_line(event("worktrees", implementer="/r/.worktrees/PROJ-7/implementer",
                          reviewer="/r/.worktrees/PROJ-7/reviewer"))
    assert "/r/.worktrees/PROJ-7/implementer" in text


def test_session() -> None:
    text = event_line(event("session", session="PROJ-7-0123ab", socket="handoff-test"))
    assert "PROJ-7-0123ab" in text and "handoff-test" in text


def test_an_unknown_kind_shows_its_kind_and_fields() -> None:
    text = event_line(event("mystery", role="reviewer", brief="/x/brief-2.md"))
    assert "mystery" in text and "/x/brief-2.md" in text


def test_judgements_about_a_peer_show_their_evidence() -> None:
    peer = event_line(event("peer", role="implementer", state="turn-ended",
                          evidence="hook Stop: the turn ended"))
    assert "implementer is turn-ended" in peer and "hook Stop" in peer
    nudge = event_line(event("nudge", role="implementer", delivered=False,
                           why="a draft sits in the input line", evidence="hook Stop"))
    assert "NOT taken: a draft sits in the input line" in nudge and "hook Stop" in nudge
    escalated = event_line(event("escalate", role="reviewer", state="dialog (trust)",
                               evidence="dialog (trust): Yes, I trust this folder",
                               fix="answer: [trust]", screen="reviewer-1.log"))
    assert "needs a person: dialog (trust)" in escalated
    assert "fix: answer: [trust]" in escalated and "transcripts/reviewer-1.log" in escalated
    answered = event_line(event("dialog", role="implementer", state="dialog (trust)",
                              keys=["Down", "Enter"], answered="trusted the repository",
                              evidence="Yes, I trust this folder"))
    assert "Down+Enter" in answered and "trusted the repository" in answered


def test_an_unknown_kind_without_fields_is_just_its_kind() -> None:
    text = event_line(event("heartbeat"))
    assert text.endswith("heartbeat")


def test_an_event_without_time_or_round_still_renders() -> None:
    text = event_line({"kind": "orchestrator", "pid": 4242})
    assert "r0" in text and "4242" in text


def test_events_read_back_from_the_log_render(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    log.append("phase", round=1, reason="plan approved", **{"from": "awaiting-approval",
                                                            "to": "implementing"})
    log.append("verdict", round=1, role="reviewer", verdict="fail", commit=SHA,
               must_fix=["calc.py:2: wrong"])
    events, _ = log.read()
    lines = [event_line(e) for e in events]
    assert "awaiting-approval" in lines[0] and "implementing" in lines[0]
    assert "calc.py:2: wrong" in lines[1]
    assert all(" r1 " in line for line in lines)


def test_error_names_the_phase_and_the_message() -> None:
    text = event_line(event("error", phase="gating", message="git checkout failed: disk full"))
    assert "gating" in text and "disk full" in text


def test_forgery_names_the_set_aside_file_and_why() -> None:
    text = event_line(event("forgery", role="reviewer", report="review-report-2.forged-1.md",
                          why="it has no receipt from `handoff submit`"))
    assert "FORGED" in text and "review-report-2.forged-1.md" in text
    assert "no receipt" in text and "reviewer" in text


def test_tmux_trouble_says_what_and_for_how_long() -> None:
    failing = event_line(event("tmux", role="implementer", state="failing",
                             message="tmux list-panes did not finish", patience=30.0))
    assert "failing" in failing and "did not finish" in failing and "30s" in failing
    back = event_line(event("tmux", role="implementer", state="answering", after=12.4))
    assert "answering again after 12s" in back


def test_state_restored_names_the_source_and_the_kept_file() -> None:
    text = event_line(event("state-restored", source="state.json.bak",
                          kept="state.json.corrupt-1", problem="not valid JSON"))
    assert "state.json.bak" in text and "state.json.corrupt-1" in text


def test_a_worktree_made_again_names_where_the_old_folder_went() -> None:
    text = event_line(event("worktree", role="implementer", path="/r/.worktrees/T/implementer",
                          created=True, setup=True,
                          displaced="/r/.worktrees/T/implementer.displaced-20261130T001500Z"))
    assert "made again" in text and "displaced-20261130T001500Z" in text and "setup ran" in text
