"""Diagnostics: `--verbose` / HANDOFF_DEBUG=1 logs every subprocess and event; an unexpected
failure is one line, a crash log and its own exit status; the command line runs in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from handoff.cli import app as cli
from handoff.cli import entry
from handoff.errors import EXIT_CRASH
from tests.harness import ADD_ONLY, FIX_ADD, handoff, plan_text, ticket_path, write_plan


def test_verbose_logs_every_subprocess_with_its_status_and_time(repo: Path) -> None:
    done = handoff("--verbose", "doctor", cwd=repo)
    runs = [line for line in done.stderr.splitlines() if "] run " in line]
    assert any("git" in line and "-> exit 0 (" in line and line.endswith(" ms)")
               for line in runs), done.stderr
    assert any("tmux" in line for line in runs), done.stderr
    quiet = handoff("doctor", cwd=repo)
    assert "] run " not in quiet.stderr, "off unless asked"


def test_a_verbose_run_logs_to_the_tickets_handoff_log(repo: Path, tmp_path: Path,
                                                        handoff_home: Path) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY,
                                          review=[ADD_ONLY]))
    done = handoff("--verbose", "start", "D-1", "--plan", str(plan), "--yes", "--foreground",
                   cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = (ticket_path(handoff_home, "D-1") / "handoff.log").read_text().splitlines()
    runs = [line.split("] run ", 1)[1] for line in lines if "] run " in line]
    assert any("worktree add" in run for run in runs), "git, through GitPython"
    assert any("new-session" in run for run in runs), "tmux, through libtmux"
    events = [json.loads(line.split("] event ", 1)[1]) for line in lines if "] event " in line]
    assert [e["to"] for e in events if e["kind"] == "phase"][-1] == "passed"
    assert any(e["kind"] == "submission" and e["accepted"] for e in events)

    quiet = handoff("start", "D-2", "--plan", str(plan), "--yes", "--foreground", cwd=repo)
    assert quiet.returncode == 0
    assert not (ticket_path(handoff_home, "D-2") / "handoff.log").exists()


def test_an_unexpected_failure_is_one_line_a_crash_log_and_its_own_status(
        isolated: dict[str, str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the board fell over\nsecond line")

    # handoff's own code, standing in for a bug: the click command typer built from the app
    monkeypatch.setattr(cli, "command", lambda: broken)
    assert entry.run(["providers"]) == EXIT_CRASH == 70
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "handoff: internal error: RuntimeError: the board fell over"
    assert "Traceback" not in "\n".join(err)
    path = Path(err[1].split(" are in ", 1)[1].split(";", 1)[0])
    assert path.parent == Path(isolated["HOME"]) / ".cache" / "handoff" / "crash"
    log = path.read_text()
    assert log.startswith("command: handoff providers\nhandoff: 0.1.0\n")
    assert "git: git version" in log and "tmux: tmux" in log
    assert "Traceback (most recent call last)" in log and "RuntimeError: the board fell over" in log
    assert path.stat().st_mode & 0o777 == 0o600
