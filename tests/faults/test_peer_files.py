"""What a peer leaves where it may write, attacked (issue 32): handoff reads, copies and lists
those places from outside the fence, with the person's full rights. A FIFO must not hold the
orchestrator, a link must not carry a file outside the fence back to where the peer reads, and a
client of the ticket's socket must not hold the loop. Each case runs in a real ticket, sandbox
on, the attacker being the peer (tests/faults/attacker.py) or the real Claude Code."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from handoff.protocol import intake
from tests.faults.catalog import fault
from tests.harness import (
    ADD_ONLY,
    FIX_ADD,
    events,
    handoff,
    plan_text,
    ticket_path,
    wait_phase,
    write_plan,
)
from tests.realcli import configure, role, stand_in_errors
from tests.standins.anthropic import AnthropicStandIn
from tests.standins.homes import claude_home

ATTACKER = Path(__file__).with_name("attacker.py")
SCRIPTED_SCREEN = {"turn_ended": "^scripted: waiting for the next message",
                   "busy": "^scripted: took"}
KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nthe person's key\n"
#: what the link in the signal folder names: words a Notification hook would carry to the log
SIGNAL_SECRET = "SECRET-words-of-a-file-outside-the-fence"


def secrets_outside(home: Path) -> Path:
    """The person's ~/.ssh, hidden from every fenced peer: a key, and a file a hook signal's
    reader would take words from."""
    ssh = home / ".ssh"
    ssh.mkdir(mode=0o700)
    (ssh / "id_ed25519").write_text(KEY)
    (ssh / "signal.json").write_text(json.dumps({"hook_event_name": "Notification",
                                                 "message": SIGNAL_SECRET}))
    # changed lately, as a file a person's tools keep writing: a link's time is its target's,
    # and only signals written since the peer's launch are read
    later = time.time() + 3600
    os.utime(ssh / "signal.json", (later, later))
    return ssh


def attacked_ticket(repo: Path, tmp_path: Path, home: Path, attack: str,
                    ticket: str) -> tuple[dict[str, Any], float]:
    """A one-round ticket, sandbox on, whose implementer plays attack then its part: its end,
    and how long it took."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump({"sandbox": "on", "roles": {"implementer": {
        "provider": "command", "markers": SCRIPTED_SCREEN,
        "command": [sys.executable, str(ATTACKER), attack, "{role}", "{message}"]}}}),
        encoding="utf-8")
    plan = plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY, review=[ADD_ONLY])
    started = time.monotonic()
    done = handoff("start", ticket, "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    final = wait_phase(home, ticket, "passed", "escalated", "needs-human", timeout=90)
    took = time.monotonic() - started
    planted = ticket_path(home, ticket) / "drafts" / "implementer" / f"attack-{attack}.json"
    assert planted.is_file(), f"the attacker never ran: {final['reason']}"
    return final, took


@fault("32", "a peer plants, as hook signals in its own signal folder, a FIFO and a link to a "
       "file outside its fence (~/.ssh/signal.json, words a Notification hook would carry)",
       "neither is opened: only the folder's regular files are read, through no link, each up "
       "to 64 KiB and 256 a look; the ticket passes in its usual time",
       "the orchestrator's loop; the FIFO and the link, left as they were; the words of the file "
       "outside, in no event")
def test_a_fifo_and_a_link_in_the_signal_folder_neither_hold_the_loop_nor_leak(
        repo: Path, tmp_path: Path, handoff_home: Path, isolated: dict[str, str]) -> None:
    secrets_outside(Path(isolated["HOME"]))
    final, took = attacked_ticket(repo, tmp_path, handoff_home, "signal-traps", "SIG-1")
    assert final["phase"] == "passed", final
    # a one-round scripted ticket passes in a few seconds; the FIFO once held it for ever
    assert took < 45, f"the ticket took {took:.0f} s"
    folder = ticket_path(handoff_home, "SIG-1") / "signals" / "implementer"
    assert stat.S_ISFIFO((folder / "stop.trap.json").lstat().st_mode), "left as it was"
    assert (folder / "notification.leak.json").is_symlink()
    log = (ticket_path(handoff_home, "SIG-1") / "events.jsonl").read_text()
    assert SIGNAL_SECRET not in log
    assert handoff("close", "SIG-1", cwd=repo).returncode == 0


def event_time(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(str(event["time"])).timestamp()


@fault("32", "a peer's own process keeps a connection to the ticket's intake.sock open, sending "
       "one byte a second and never a whole request, and connects again when cut",
       "each connection gets one deadline (5 s from its accept) for its whole request and is "
       "then closed, an `intake` event naming its pid; the connections taken meanwhile are read "
       "side by side, so the peer's honest `handoff submit` is answered within the deadline "
       "and the ticket passes",
       "the orchestrator's loop; the honest report, judged and filed")
def test_a_client_trickling_into_the_intake_socket_is_cut_and_honest_reports_still_go_in(
        repo: Path, tmp_path: Path, handoff_home: Path, isolated: dict[str, str]) -> None:
    final, _ = attacked_ticket(repo, tmp_path, handoff_home, "intake-trickle", "TRK-1")
    assert final["phase"] == "passed", final
    folder = ticket_path(handoff_home, "TRK-1")
    log = events(handoff_home, "TRK-1")
    cut = [e for e in log if e["kind"] == "intake"]
    assert cut and all(isinstance(e["pid"], int) and e["pid"] > 0 for e in cut), cut
    assert all("closed unjudged" in e["why"] for e in cut), cut
    [submitted] = [e for e in log if e["kind"] == "submitted" and e["role"] == "implementer"]
    assert submitted["pid"] not in {e["pid"] for e in cut}
    # the scripted peer writes its draft, then runs `handoff submit` at once: from the draft to
    # the report's filing is the submit's start, its wait for the orchestrator and the judging
    [draft] = (folder / "drafts" / "implementer").glob("implementer-1*.md")
    waited = event_time(submitted) - draft.stat().st_mtime
    assert waited < intake.READ_TIMEOUT, f"the honest submit took {waited:.1f} s"
    trickled = [json.loads(line) for line in
                (folder / "drafts" / "implementer" / "trickle.jsonl").read_text().splitlines()]
    told = [t for t in trickled if t["event"] == "cut"]
    assert told and "did not reach the orchestrator whole" in told[0]["said"], trickled
    # the honest submit came while the peer trickled (it reconnects at once when cut)
    opened = [t["time"] for t in trickled if t["event"] == "connected"]
    assert opened[0] < draft.stat().st_mtime, "the trickling began before the honest submit"
    assert handoff("close", "TRK-1", "--force", cwd=repo).returncode == 0


#: run by the real Claude Code as the reviewer's test command: every session log of its own
#: project folder (the CLI's state folder, which the fence lets it write) made a link to the key
PLANT = ("d=\"${CLAUDE_CONFIG_DIR:-$HOME/.claude}/projects/$(pwd | sed 's/[^A-Za-z0-9]/-/g')\"; "
         "for f in \"$d\"/*.jsonl; do ln -sf \"$HOME/.ssh/id_ed25519\" \"$f\" && "
         "echo planted \"$f\"; done")


@fault("32", "the real Claude Code, as reviewer, runs a command that makes its own session log "
       "(in its writable state folder) a link to ~/.ssh/id_ed25519, which its fence hides",
       "the log is copied to transcripts/ only from beneath the CLI's state folder, through no "
       "link: this one is not copied (the implementer's honest log still is)",
       "the key, out of the ticket folder the relaunched peer reads; the honest transcripts")
def test_a_session_log_made_a_link_to_a_key_is_not_copied_into_the_ticket(
        repo: Path, tmp_path: Path, handoff_home: Path, isolated: dict[str, str],
        claude: Path, anthropic: AnthropicStandIn) -> None:
    user = Path(isolated["HOME"])
    secrets_outside(user)
    claude_home(user, [repo])
    configure(handoff_home, {"implementer": role("claude", claude),
                             "reviewer": role("claude", claude)}, sandbox="on")
    plan = plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY,
                     review=[ADD_ONLY, ["sh", "-c", PLANT]])
    done = handoff("start", "KEY-1", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr + stand_in_errors(anthropic)
    assert "sandbox: bubblewrap" in done.stdout, done.stdout
    folder = ticket_path(handoff_home, "KEY-1")
    # wherever the reviewer's CLI keeps its state (~/.claude, or a folder of its own)
    links = [p for base in (user, handoff_home) for p in base.rglob("*.jsonl") if p.is_symlink()]
    assert links and all("reviewer" in p.parent.name for p in links), \
        f"the reviewer planted its link: {links}"
    kept = {p.name: p.read_text(errors="replace") for p in
            (folder / "transcripts").glob("*.session.jsonl")}
    assert not [name for name, text in kept.items() if "PRIVATE KEY" in text], kept.keys()
    assert "reviewer-1.session.jsonl" not in kept
    assert any(name.startswith("implementer-") and "Read and follow" in text
               for name, text in kept.items()), f"the honest log is still kept: {kept.keys()}"
    assert (user / ".ssh" / "id_ed25519").read_text() == KEY
    assert handoff("close", "KEY-1", cwd=repo).returncode == 0
