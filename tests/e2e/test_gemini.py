"""Whole tickets with the real Gemini CLI (0.61) as both peers, against the stand-in Gemini API:
its hooks reach the orchestrator through the settings layer handoff writes for each role, and
the person's own ~/.gemini/settings.json stays as it was.

Gemini reads that layer only when root owns it and every folder above it and no group or
other may write to any of them: the test's HANDOFF_HOME lives in a private folder outside /tmp
(under the test cache), made 700 here and removed afterwards.
"""

from __future__ import annotations

import json
import shlex
import shutil
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from handoff.providers.gemini import skipped_because
from handoff.providers.signals import read_signals
from tests.conftest import git
from tests.harness import (
    ADD_ONLY,
    ALL_TESTS,
    FIX_ADD,
    FIX_MUL,
    FIX_NEG,
    events,
    handoff,
    plan_text,
    processes_of,
    state,
    ticket_path,
    write_plan,
)
from tests.realcli import configure, role
from tests.standins import install
from tests.standins.gemini import GeminiStandIn

#: what the private HOME's ~/.gemini/settings.json says: the API key chosen (no auth screen),
#: and a setting of the person's own that must survive the ticket byte for byte
PERSONS_SETTINGS = ('{\n  "security": {"auth": {"selectedType": "gemini-api-key"}},\n'
                    '  "ui": {"hideTips": true}\n}\n')
#: screen rules that read nothing (as in test_e2e_setups): the peers are judged by hooks alone
BLIND = {"composer": "\u2603\u2603", "busy": "^never-busy-\u2603$",
         "turn_ended": "^never-ended-\u2603$"}
#: what the machine's own BeforeAgent hook adds to each prompt
MACHINE_CONTEXT = "machine-defaults-hook-was-here"
PLAN = plan_text({1: {"edits": [FIX_ADD]}, 2: {"edits": [FIX_MUL, FIX_NEG]}}, test=ADD_ONLY,
                 review=[ALL_TESTS])


@pytest.fixture
def private() -> Iterator[Path]:
    """A 700 folder of this test's own outside /tmp, in a tree root owns and only root writes
    (the test cache): the place gemini takes a settings layer from."""
    runs = install.CACHE / "run"
    runs.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder = runs / uuid.uuid4().hex[:12]
    folder.mkdir(mode=0o700)
    try:
        why = skipped_because(folder / "state" / "layer.json")
        assert why is None, f"gemini would skip a settings layer in {folder}: {why}"
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def home(private: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """HANDOFF_HOME in the private folder: the ticket directories hold the settings layers."""
    path = private / "state"
    monkeypatch.setenv("HANDOFF_HOME", str(path))
    return path


@pytest.fixture
def gemini_api() -> Iterator[GeminiStandIn]:
    with GeminiStandIn() as api:
        yield api


@pytest.fixture
def gemini(isolated: dict[str, str], gemini_api: GeminiStandIn,
           monkeypatch: pytest.MonkeyPatch) -> Path:
    """The pinned gemini, pointed at the stand-in; its HOME is the test's private one."""
    path = install.binary("gemini")
    settings = Path(isolated["HOME"]) / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(PERSONS_SETTINGS, encoding="utf-8")
    monkeypatch.setenv("GEMINI_API_KEY", "standin")
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", gemini_api.base_url)
    return path


def stand_in_errors(api: GeminiStandIn) -> str:
    return "\nstand-in errors: " + "; ".join(api.errors) if api.errors else ""


def run_ticket(ticket: str, repo: Path, tmp_path: Path, api: GeminiStandIn) -> None:
    done = handoff("start", ticket, "--plan", str(write_plan(tmp_path, PLAN)), "--yes",
                   "--foreground", cwd=repo, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr + stand_in_errors(api)


def judged(log: list[dict[str, Any]], who: str) -> list[dict[str, Any]]:
    return [e for e in log if e["kind"] == "peer" and e["role"] == who]


def untouched(isolated: dict[str, str], repo: Path) -> None:
    """The person's settings byte for byte, and no .gemini/ settings in any worktree."""
    settings = Path(isolated["HOME"]) / ".gemini" / "settings.json"
    assert settings.read_bytes() == PERSONS_SETTINGS.encode()
    assert [p for p in repo.rglob(".gemini")] == [], "nothing written into a worktree"


def test_gemini_implements_and_reviews_a_ticket_fail_then_pass_heard_through_its_hooks(
        repo: Path, tmp_path: Path, home: Path, isolated: dict[str, str], gemini: Path,
        gemini_api: GeminiStandIn) -> None:
    configure(home, {"implementer": role("gemini", gemini), "reviewer": role("gemini", gemini)})
    doctor = handoff("doctor", cwd=repo)
    assert "watched by hooks, the screen as fallback" in doctor.stdout, doctor.stdout
    assert "gemini hooks" not in doctor.stdout, doctor.stdout

    run_ticket("GM-1", repo, tmp_path, gemini_api)
    final = state(home, "GM-1")
    assert final["phase"] == "passed" and final["verdicts"] == {"1": "fail", "2": "pass"}
    assert "return a * b" in git(repo, "show", "handoff/GM-1:calc.py")
    assert git(repo, "log", "-2", "--format=%s", "handoff/GM-1").splitlines() == \
        ["GM-1: round 2", "GM-1: round 1"]

    folder = ticket_path(home, "GM-1")
    prompts = gemini_api.turn_prompts()
    for who in ("implementer", "reviewer"):
        for n in (1, 2):
            brief = folder / "inbox" / who / f"brief-{n}.md"
            assert prompts.count(f"Read and follow {brief}") == 1, (who, n, prompts)
    log = events(home, "GM-1")
    assert [e for e in log if e["kind"] in ("nudge", "escalate", "delivery-failed")] == []
    for who in ("implementer", "reviewer"):
        assert any(e["state"] == "working" and e["evidence"].startswith("hook ")
                   for e in judged(log, who)), (who, judged(log, who))
        # each role's own layer: handoff's hooks only, 600, in the ticket directory
        layer = folder / "gemini" / f"{who}-system-defaults.json"
        assert stat.S_IMODE(layer.stat().st_mode) == 0o600
        hooks = json.loads(layer.read_text())["hooks"]
        assert sorted(hooks) == ["AfterAgent", "BeforeAgent", "Notification"]
        # the hooks ran in gemini with the JSON it gives them on stdin
        said = {s.event: s.data for s in read_signals(folder / "signals" / who, 0)}
        assert said["prompt"]["hook_event_name"] == "BeforeAgent"
        assert said["prompt"]["prompt"] == f"Read and follow {folder / 'inbox' / who / 'brief-2.md'}"
        # the implementer's last turn surely ended before the ticket did (the reviewer's may
        # not have: the ticket ends, and its peers with it, the moment its report is taken)
        if who == "implementer" or "stop" in said:
            assert said["stop"]["hook_event_name"] == "AfterAgent"
            assert said["stop"]["prompt_response"] == "I filed my report."
    untouched(isolated, repo)

    closed = handoff("close", "GM-1", cwd=repo)
    assert closed.returncode == 0, closed.stderr
    assert processes_of(home, "gemini") == []
    assert not gemini_api.errors, gemini_api.errors


def test_a_gemini_ticket_passes_on_hook_signals_alone_and_keeps_the_machines_own_defaults(
        repo: Path, tmp_path: Path, home: Path, private: Path, isolated: dict[str, str],
        gemini: Path, gemini_api: GeminiStandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    """No screen rule matches anything: every judgement of either peer comes from a hook. The
    machine's own system defaults (here named by GEMINI_CLI_SYSTEM_DEFAULTS_PATH, with a
    comment and a BeforeAgent hook of its own) still apply: its hook runs beside handoff's, and
    what it adds to the prompt reaches the model."""
    context = json.dumps({"hookSpecificOutput": {"additionalContext": MACHINE_CONTEXT}})
    machine = private / "system-defaults.json"
    machine.write_text("// the administrator's defaults\n" + json.dumps({
        "ui": {"hideBanner": True},
        "hooks": {"BeforeAgent": [{"hooks": [{"type": "command", "name": "machine-context",
                                              "command": f"echo {shlex.quote(context)}"}]}]}}),
        encoding="utf-8")
    monkeypatch.setenv("GEMINI_CLI_SYSTEM_DEFAULTS_PATH", str(machine))
    configure(home, {"implementer": role("gemini", gemini, markers=BLIND),
                     "reviewer": role("gemini", gemini, markers=BLIND)})

    run_ticket("GM-2", repo, tmp_path, gemini_api)
    final = state(home, "GM-2")
    assert final["phase"] == "passed" and final["verdicts"] == {"1": "fail", "2": "pass"}
    log = events(home, "GM-2")
    for who in ("implementer", "reviewer"):
        mine = judged(log, who)
        assert any(e["state"] == "working" and e["evidence"].startswith("hook ") for e in mine), \
            (who, mine)
        # no judgement of this peer came from its screen: the rules matched nothing
        assert all(e["evidence"].startswith("hook ") for e in mine
                   if e["state"] in ("working", "turn-ended")), (who, mine)
    assert [e for e in log if e["kind"] in ("escalate", "delivery-failed")] == []

    folder = ticket_path(home, "GM-2")
    for who in ("implementer", "reviewer"):
        # each round's turn began with a hook (and the implementer's ended with one: a
        # reviewer's last may not have, its peer ended with the ticket the moment it filed)
        signalled = [s.event for s in read_signals(folder / "signals" / who, 0)]
        assert signalled.count("prompt") == 2, (who, signalled)
        assert who == "reviewer" or signalled.count("stop") == 2, (who, signalled)
    layer = json.loads((folder / "gemini" / "implementer-system-defaults.json").read_text())
    assert layer["ui"] == {"hideBanner": True}, "the machine's defaults are carried over"
    names = [h["name"] for d in layer["hooks"]["BeforeAgent"] for h in d["hooks"]]
    assert names == ["machine-context", "handoff-prompt"]
    sent = [json.dumps(e.body) for e in gemini_api.turns()]
    assert any(MACHINE_CONTEXT in body for body in sent), "the machine's own hook ran too"
    untouched(isolated, repo)
    assert handoff("close", "GM-2", cwd=repo).returncode == 0
    assert not gemini_api.errors, gemini_api.errors
