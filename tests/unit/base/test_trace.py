"""handoff.trace: with HANDOFF_DEBUG=1 every subprocess and event is written down, secrets
taken out; off, nothing is written and `logging` is never loaded."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from handoff import trace


@pytest.fixture
def sinks(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process's sinks, emptied for the test and closed after it (they are module state)."""
    monkeypatch.setattr(trace, "_sinks", [])
    monkeypatch.setenv(trace.ENV, "0")  # restored after the test, whatever enable() set
    yield
    for sink in trace._sinks:
        if sink is not sys.stderr:
            sink.close()


def test_off_nothing_is_written(sinks: None, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    assert not trace.enabled()
    log = tmp_path / "handoff.log"
    trace.to_file(log)
    trace.to_stderr()
    trace.command(["git", "status"], 0, time.monotonic())
    trace.event({"event": "phase", "to": "gating"})
    assert not log.exists() and capsys.readouterr().err == ""


@pytest.mark.parametrize("value", ["", "0"])
def test_an_empty_or_zero_variable_is_off(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(trace.ENV, value)
    assert not trace.enabled()


def test_on_commands_and_events_go_to_the_tickets_log(sinks: None, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    trace.enable()
    assert trace.enabled()
    log = tmp_path / "handoff.log"
    trace.to_file(log)
    trace.command(["git", "commit", "-m", "two words"], 1, time.monotonic())
    trace.command(["sleep", 300], None, time.monotonic())
    trace.event({"event": "phase", "to": "gating", "at": Path("/t")})
    lines = log.read_text().splitlines()
    assert log.stat().st_mode & 0o777 == 0o600, "the user's alone"
    assert "run git commit -m 'two words' -> exit 1 (" in lines[0] and lines[0].endswith(" ms)")
    assert "run sleep 300 -> killed at its bound" in lines[1]
    assert lines[2].endswith('event {"event": "phase", "to": "gating", "at": "/t"}')
    assert all(f"[{os.getpid()}]" in line for line in lines)


def test_to_stderr_writes_there_once(sinks: None, capsys: pytest.CaptureFixture[str]) -> None:
    trace.enable()
    trace.to_stderr()
    trace.to_stderr()  # a second call adds no second sink
    trace.event({"event": "x"})
    assert capsys.readouterr().err.count('event {"event": "x"}') == 1


def test_secrets_never_reach_a_line(sinks: None, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-0123456789")
    monkeypatch.setenv("SHORT_TOKEN", "abc")  # too short to find safely: left alone
    monkeypatch.setenv("EDITOR_NAME", "sk-ant-editor")  # a name that says nothing secret
    assert trace.redacted("curl -H sk-ant-0123456789") == "curl -H <ANTHROPIC_API_KEY>"
    assert trace.redacted("GH_TOKEN=ghp_x1 other=1 db_password=p") == (
        "GH_TOKEN=<redacted> other=1 db_password=<redacted>")
    assert trace.redacted("sk-ant-editor abc") == "sk-ant-editor abc"
    trace.enable()
    log = tmp_path / "handoff.log"
    trace.to_file(log)
    trace.command(["env", "OPENAI_API_KEY=sk-live", "x", "sk-ant-0123456789"], 0,
                  time.monotonic())
    line = log.read_text()
    assert "sk-live" not in line and "sk-ant-0123456789" not in line
    assert "OPENAI_API_KEY=<redacted>" in line and "<ANTHROPIC_API_KEY>" in line
