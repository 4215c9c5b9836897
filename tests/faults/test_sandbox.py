"""The sandbox, attacked: a hostile peer (tests/faults/attacker.py) tries one escape per case in
a real ticket. With the sandbox on it is stopped and then does its job, and the ticket passes;
with `sandbox: off` the same attack gets through (so each case can fail)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import git
from tests.faults.catalog import fault
from tests.harness import (
    ADD_ONLY,
    FIX_ADD,
    handoff,
    paused_ticket,
    plan_text,
    state,
    stop_runner,
    ticket_path,
    wait_phase,
    write_plan,
)

ATTACKER = Path(__file__).with_name("attacker.py")
SCRIPTED_SCREEN = {"turn_ended": "^scripted: waiting for the next message",
                   "busy": "^scripted: took"}


def attacker(attack: str) -> dict[str, object]:
    return {"provider": "command", "markers": SCRIPTED_SCREEN,
            "command": [sys.executable, str(ATTACKER), attack, "{role}", "{message}"]}


def attacked(repo: Path, tmp_path: Path, home: Path, isolated: dict[str, str],
             monkeypatch: pytest.MonkeyPatch, attack: str, mode: str,
             role: str = "implementer") -> dict[str, object]:
    """Run one ticket with role played by the attacker; what it found, and the ticket's end."""
    tmp_path.mkdir(exist_ok=True)
    user = Path(isolated["HOME"])
    (user / ".ssh").mkdir(mode=0o700)
    (user / ".ssh" / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nfake\n")
    (user / "important").mkdir()
    (user / "important" / "thesis.tex").write_text("years of work\n")
    (user / ".claude").mkdir()  # the person's own Claude Code login
    (user / ".claude" / ".credentials.json").write_text('{"claudeAiOauth": {"accessToken": '
                                                        '"sk-ant-oat01-fake"}}')
    remote = user / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    home.mkdir(parents=True, exist_ok=True)
    roles = {role: attacker(attack)}
    (home / "config.yaml").write_text(yaml.safe_dump(
        {"roles": roles, "sandbox": mode, "env_allow": ["ATTACK_REMOTE"]}), encoding="utf-8")
    ticket = f"ATK-{attack}-{mode}"
    plan = plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY, review=[ADD_ONLY])
    monkeypatch.setenv("ATTACK_REMOTE", f"file://{remote}")
    done = handoff("start", ticket, "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    final = wait_phase(home, ticket, "passed", "escalated", "needs-human", timeout=90)
    found = ticket_path(home, ticket) / "drafts" / role / f"attack-{attack}.json"
    assert found.is_file(), f"the attacker never ran: {final['reason']}"
    result: dict[str, object] = json.loads(found.read_text())
    result["final"] = final
    result["remote_refs"] = git(remote, "for-each-ref", "--format=%(refname)")
    handoff("stop", ticket, cwd=repo)
    return result


CASES = [
    ("ssh-key", "implementer", "reads a fake ~/.ssh/id_ed25519"),
    ("other-worktree", "implementer", "writes into the reviewer's worktree"),
    ("forged-report", "implementer", "writes review-report-1.md into the ticket directory"),
    ("tmux-panes", "implementer", "lists the panes of handoff's tmux server"),
    ("peer-environ", "reviewer", "reads the implementer's /proc/<pid>/environ (its keys)"),
    ("move-main", "implementer", "moves refs/heads/main"),
    ("git-hook", "implementer", "writes the repository's .git/hooks/"),
    ("push", "implementer", "runs git push to a local bare remote (file://)"),
    ("rm-home", "implementer", "runs rm -rf ~/important"),
    ("cli-login", "implementer", "reads the person's own Claude Code login "
     "(~/.claude/.credentials.json), whatever CLI it runs"),
    ("writable-census", "implementer", "lists every mount of its view it may write that is "
     "not its own (checkout, admin folder, objects, drafts, signals, CLI state, a private "
     "tmpfs): a place another peer, ticket or the person reads"),
    ("writable-census", "reviewer", "the same census, as the reviewer"),
    ("read-impl-report", "reviewer", "reads the implementer's report, the event log and the "
     "ticket's state (a reviewer is blind to how the code was written)"),
]


@fault("19.1", "a hostile peer tries an escape: " + "; ".join(c[2] for c in CASES),
       "stopped by the sandbox (bubblewrap: read-only root, hidden credentials and handoff "
       "home, private /tmp, its own PID namespace); the attacker then does its job and the "
       "ticket passes. With sandbox: off each gets through",
       "the person's home, keys, repository refs, hooks and the other peer's worktree")
@pytest.mark.parametrize(("attack", "role"), [(c[0], c[1]) for c in CASES],
                         ids=[c[0] for c in CASES])
def test_an_escape_is_stopped_by_the_sandbox_and_gets_through_without_it(
        attack: str, role: str, repo: Path, tmp_path: Path, handoff_home: Path,
        isolated: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    fenced = attacked(repo, tmp_path / "on", handoff_home, isolated, monkeypatch, attack, "on",
                      role)
    assert fenced["got_through"] is False, fenced
    final = fenced["final"]
    assert isinstance(final, dict) and final["phase"] == "passed", final
    assert (Path(isolated["HOME"]) / "important" / "thesis.tex").is_file()
    assert git(repo, "rev-parse", "main") == git(repo, "rev-parse", "handoff/ATK-" + attack
                                                 + "-on~1"), "main did not move"
    assert fenced["remote_refs"] == ""
    # the same attack, unfenced, in a fresh repository of the same kind
    plain = attacked_again(repo, tmp_path, handoff_home, isolated, monkeypatch, attack, role)
    assert plain["got_through"] is True, plain


def attacked_again(repo: Path, tmp_path: Path, home: Path, isolated: dict[str, str],
                   monkeypatch: pytest.MonkeyPatch, attack: str,
                   role: str) -> dict[str, object]:
    user = Path(isolated["HOME"])
    for made in (".ssh", "important", "remote.git", ".claude"):
        shutil.rmtree(user / made, ignore_errors=True)
    return attacked(repo, tmp_path / "off", home, isolated, monkeypatch, attack, "off", role)


def started_with(home: Path, word: str) -> list[int]:
    """Live processes of this test's handoff home whose command line holds word."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            env = (proc / "environ").read_bytes().split(b"\0")
            argv = (proc / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if f"HANDOFF_HOME={home}".encode() in env and word.encode() in argv:
            found.append(int(proc.name))
    return found


@fault("19.2", "the gate, in the sandbox, hangs with a child process of its own",
       "ended at gate_timeout with its whole PID namespace (no process of it outlives the "
       "gate); the gate's log names the plan's command, not the sandbox's",
       "the round's commit and report, the gate log")
def test_a_sandboxed_gate_is_bounded_and_leaves_no_process(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    handoff_home.mkdir(parents=True, exist_ok=True)
    (handoff_home / "config.yaml").write_text("sandbox: on\ngate_timeout: 3\n"
                                              "max_gate_bounces: 1\n", encoding="utf-8")
    # the implementer runs the same command before it reports: only the gate hangs
    hang = ["sh", "-c", 'test -z "$HANDOFF_GATE_TOKEN" || { sleep 617 & echo gate up; sleep 617; }']
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=hang))
    done = handoff("start", "SG-1", "--plan", str(plan), "--yes", "--foreground", cwd=repo,
                   timeout=120)
    assert "sandbox: bubblewrap" in done.stdout, done.stdout
    final = state(handoff_home, "SG-1")
    assert final["phase"] == "escalated" and "timed out after 3s" in final["reason"], final
    assert "bwrap" not in final["reason"]
    log = (ticket_path(handoff_home, "SG-1") / "gate-1.log").read_text()
    assert log.startswith("$ sh -c") and "gate up" in log
    assert started_with(handoff_home, "sleep 617") == []
    assert handoff("close", "SG-1", cwd=repo).returncode == 0


def bwrap_args(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")


def pairs(args: list[str], flag: str) -> set[str]:
    """The destinations of every `flag SRC DEST` (or `flag DEST` for --tmpfs) in args."""
    found = set()
    for i, arg in enumerate(args):
        if arg == flag:
            found.add(args[i + 1] if flag == "--tmpfs" else args[i + 2])
    return found


def test_the_layout_a_sandboxed_peer_gets(repo: Path, tmp_path: Path, handoff_home: Path,
                                          isolated: dict[str, str]) -> None:
    """What the implementer's bubblewrap is told, read from its own command line: the rules
    behind the attacks above, including those the tests' temp folders would hide anyway."""
    git(repo, "branch", "handoff/OTHER")  # another ticket's branch
    runner, folder, current = paused_ticket(repo, tmp_path, handoff_home, "LAY-1")
    try:
        panes = subprocess.run(["tmux", "-L", str(current["socket"]), "list-panes", "-s", "-t",
                                f"={current['session']}", "-F", "#{window_name} #{pane_pid}"],
                               capture_output=True, text=True, timeout=15, check=True).stdout
        pid = int(next(line.split()[1] for line in panes.splitlines()
                       if line.startswith("implementer ")))
        args = bwrap_args(pid)
        assert Path(args[0]).name == "bwrap", args[:3]
        worktrees = repo / ".worktrees"
        common = repo / ".git"
        writable, hidden = pairs(args, "--bind"), pairs(args, "--tmpfs")
        readable = pairs(args, "--ro-bind")
        assert str(worktrees / "LAY-1" / "implementer") in writable
        assert str(worktrees / "LAY-1" / "reviewer") not in writable | readable
        assert str(worktrees) in hidden, "every other checkout is hidden"
        assert str(folder / "drafts" / "implementer") in writable
        assert str(folder / "drafts" / "reviewer") not in writable
        assert str(folder) in readable and str(folder / "grants") in hidden
        assert str(handoff_home) in hidden and "/tmp" in hidden
        assert str(common / "objects") in writable
        admin = common / "worktrees" / "implementer"
        assert str(admin) in writable, "its HEAD, index and logs: it commits"
        # what tells git where its configuration lives stays read-only in what it writes
        for pinned in (admin / "commondir", admin / "gitdir", admin / "config.worktree",
                       worktrees / "LAY-1" / "implementer" / ".git"):
            assert str(pinned) in readable, pinned
        # no ref at all: handoff moves the ticket branch
        assert not [path for path in writable if "/refs/" in path or path.endswith("/refs")]
        assert str(common / "refs" / "heads" / "main") not in writable
        assert str(common) in readable and str(common / "config") not in writable
        assert str(Path(isolated["HOME"]) / ".ssh") not in writable
        assert "--unshare-pid" in args and "--die-with-parent" in args
        assert args[args.index("--") + 1:][:3] == [sys.executable, "-m",
                                                   "handoff.peer.scripted_agent"]
    finally:
        stop_runner(runner)
