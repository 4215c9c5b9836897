"""Nothing handoff runs outside a fence is steered by what a peer wrote into git's files.

A worktree's admin folder (`<common>/worktrees/<name>/`) says where git's configuration and
hooks live (`commondir`), and a peer may write its own; the commit under review may hold code
that rewrites the gate's and the reviewer's. handoff's own git in a checkout pins the git dirs it
recorded and runs no hook or fsmonitor, and the fences keep those files read-only. Each case is
a whole ticket with a hostile peer (tests/faults/attacker.py), sandbox on and off.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import git
from tests.faults.catalog import fault
from tests.faults.test_sandbox import SCRIPTED_SCREEN
from tests.harness import (
    ADD_ONLY,
    ALL_TESTS,
    FIX_ADD,
    FIX_MUL,
    FIX_NEG,
    events,
    handoff,
    plan_text,
    state,
    ticket_path,
    wait_phase,
    write_plan,
)

ATTACKER = Path(__file__).with_name("attacker.py")


def hostile(repo: Path, tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch,
            attack: str, mode: str, marker: Path,
            plan: str | None = None) -> tuple[str, dict[str, object]]:
    """A ticket whose implementer is the attacker; the ticket's id and its final state."""
    home.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, str(ATTACKER), attack, "{role}", "{message}"]
    (home / "config.yaml").write_text(yaml.safe_dump({
        "roles": {"implementer": {"provider": "command", "markers": SCRIPTED_SCREEN,
                                  "command": command}},
        "sandbox": mode, "env_allow": ["ATTACK_MARKER"]}), encoding="utf-8")
    monkeypatch.setenv("ATTACK_MARKER", str(marker))
    ticket = f"GB-{attack}-{mode}"
    text = plan or plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY, review=[ADD_ONLY])
    done = handoff("start", ticket, "--plan", str(write_plan(tmp_path, text)), "--yes",
                   cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    return ticket, wait_phase(home, ticket, "passed", "escalated", "needs-human", timeout=90)


def attack_result(home: Path, ticket: str, attack: str) -> dict[str, object]:
    found = ticket_path(home, ticket) / "drafts" / "implementer" / f"attack-{attack}.json"
    assert found.is_file(), "the attacker never ran"
    result: dict[str, object] = json.loads(found.read_text())
    return result


@fault("32", "the implementer points its worktree's admin folder (`commondir`) at a common dir "
             "of its own whose config sets core.fsmonitor and core.hooksPath to its program, "
             "and commits code that does the same to the gate's and the reviewer's admin "
             "folders when they run the tests",
       "sandbox on: every one of those files is read-only in its fence, the writes fail. "
       "sandbox off: they are written, and still nothing runs: handoff's git in a checkout "
       "uses the git dirs it recorded (GIT_DIR, GIT_COMMON_DIR) and no hook or fsmonitor",
       "the person's machine (the program never ran as handoff); the ticket, which passes")
@pytest.mark.parametrize("mode", ["on", "off"])
def test_a_redirected_commondir_runs_nothing_of_the_peers(
        repo: Path, tmp_path: Path, handoff_home: Path, monkeypatch: pytest.MonkeyPatch,
        mode: str) -> None:
    marker = tmp_path / "ran-outside"
    ticket, final = hostile(repo, tmp_path, handoff_home, monkeypatch, "redirect-commondir",
                            mode, marker)
    result = attack_result(handoff_home, ticket, "redirect-commondir")
    evil = ticket_path(handoff_home, ticket) / "drafts" / "implementer" / "evil-common"
    escaped = sorted(p.name for p in evil.glob("escaped-*")) if evil.is_dir() else []
    assert not marker.exists(), marker.read_text()
    assert final["phase"] == "passed", final.get("reason")
    if mode == "on":
        assert result["got_through"] is False, result
        assert escaped == [], "the gate and the reviewer could not rewrite theirs either"
    else:  # written; never followed by handoff
        assert result["got_through"] is True, result
        assert escaped == ["escaped-gate", "escaped-reviewer"], escaped
    handoff("close", ticket, cwd=repo)
    assert not marker.exists(), "close ran none of it either"


@fault("32", "the person's own post-checkout hook runs what the checkout holds (as pre-commit "
             "or husky hooks do), and handoff checks out the commit under review",
       "handoff's git on a ticket's checkouts runs no hook (`worktree add` and every checkout "
       "of the gate's and the reviewers' included): the commit's files never run as the person",
       "the person's hook, untouched and still run by their own git")
def test_the_persons_hooks_never_run_on_a_peers_commit(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    marker = tmp_path / "hook-ran"
    hook = repo / ".git" / "hooks" / "post-checkout"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(f"#!/bin/sh\necho \"$(pwd)\" >> {marker}\n")
    hook.chmod(0o755)
    plan = plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY, review=[ADD_ONLY])
    done = handoff("start", "GB-hook", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert state(handoff_home, "GB-hook")["phase"] == "passed"
    assert handoff("close", "GB-hook", cwd=repo).returncode == 0
    ran = marker.read_text().splitlines() if marker.exists() else []
    assert [line for line in ran if "/.worktrees/" in line] == [], ran
    git(repo, "checkout", "-q", "-b", "mine")
    assert marker.read_text().splitlines()[-1] == str(repo), "the person's git still runs it"


@fault("32", "with the sandbox off, the implementer turns its ticket branch into a symbolic "
             "ref to main, then the round's commit is put on the branch",
       "handoff never moves a branch through a symbolic ref: it says so and waits for a "
       "person; main does not move (with the sandbox on no peer writes a ref at all)",
       "main; the implementer's commit; the ticket at needs-human")
def test_a_symbolic_ticket_branch_never_moves_main(
        repo: Path, tmp_path: Path, handoff_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    main = git(repo, "rev-parse", "main")
    ticket, final = hostile(repo, tmp_path, handoff_home, monkeypatch, "symref-main", "off",
                            tmp_path / "unused")
    assert attack_result(handoff_home, ticket, "symref-main")["got_through"] is True
    assert git(repo, "rev-parse", "main") == main, "main moved"
    assert final["phase"] == "needs-human", final
    assert "symbolic ref to refs/heads/main" in str(final["reason"])


@fault("32", "a peer of one ticket plants branch handoff/NEXT (with a backdoor) for a ticket "
             "not yet started (with the sandbox off; on, it cannot write a ref)",
       "`handoff start NEXT` refuses: a new ticket starts its branch itself and never takes "
       "one over; it names the branch and its commit",
       "the planted branch, untouched, for the person to look at")
@pytest.mark.parametrize("mode", ["on", "off"])
def test_a_planted_branch_is_never_taken_over(
        repo: Path, tmp_path: Path, handoff_home: Path, monkeypatch: pytest.MonkeyPatch,
        mode: str) -> None:
    ticket, final = hostile(repo, tmp_path, handoff_home, monkeypatch, "plant-branch", mode,
                            tmp_path / "unused")
    result = attack_result(handoff_home, ticket, "plant-branch")
    assert result["got_through"] is (mode == "off"), result
    assert final["phase"] == "passed", final.get("reason")
    planted = git(repo, "branch", "--list", "handoff/NEXT")
    assert bool(planted) is (mode == "off")
    if mode == "off":
        tip = git(repo, "rev-parse", "handoff/NEXT")
        plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}), "next.md")
        refused = handoff("start", "NEXT", "--plan", str(plan), "--yes", cwd=repo)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "handoff/NEXT already exists" in refused.stderr and tip[:10] in refused.stderr
        assert git(repo, "rev-parse", "handoff/NEXT") == tip
        assert not (repo / ".worktrees" / "NEXT").exists()
    assert [e for e in events(handoff_home, ticket) if e["kind"] == "error"] == []


SETUP_HOOK = '''import pathlib, sys
# the repository's set-up step, run by post_create in every new checkout
pathlib.Path("set-up").write_text("done\\n")
'''
#: the implementer's version of it: what a committed `postinstall` script would do
HOSTILE_HOOK = '''import os, pathlib
pathlib.Path("set-up").write_text("done\\n")
try:
    key = (pathlib.Path.home() / ".ssh" / "id_ed25519").read_text()
except OSError:
    key = ""
try:
    with open(os.environ["SETUP_MARKER"], "a") as out:
        out.write(f"ran as the person in {os.getcwd()}; key: {bool(key)}\\n")
except (OSError, KeyError):
    pass
'''


@fault("32", "post_create (`[[python, setup.py]]`, as `npm ci` runs a package's install "
             "scripts) sets up the gate's and the reviewer's checkouts at the implementer's "
             "commit, whose setup.py reads ~/.ssh and writes outside the checkout",
       "sandbox on: it runs in the gate's fence (with its limits): no key, nothing written "
       "outside its checkout; the set-up still succeeds. sandbox off: it runs as you",
       "the person's home; the set-up's output in each checkout")
@pytest.mark.parametrize("mode", ["on", "off"])
def test_post_create_of_a_peers_commit_runs_fenced(
        repo: Path, tmp_path: Path, handoff_home: Path, isolated: dict[str, str],
        monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    (repo / "setup.py").write_text(SETUP_HOOK)
    (repo / ".gitignore").write_text("__pycache__/\nset-up\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a set-up step")
    ssh = Path(isolated["HOME"]) / ".ssh"
    ssh.mkdir(mode=0o700)
    (ssh / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nfake\n")
    marker = tmp_path / "setup-ran-outside"
    monkeypatch.setenv("SETUP_MARKER", str(marker))
    handoff_home.mkdir(parents=True, exist_ok=True)
    # the gate's checkout is then made (and set up) at the implementer's commit, not beside
    # round 1 at the base
    (handoff_home / "config.yaml").write_text(yaml.safe_dump({
        "sandbox": mode, "post_create": [[sys.executable, "setup.py"]], "base_tests": False}),
        encoding="utf-8")
    edits = [FIX_ADD, {"file": "setup.py", "content": HOSTILE_HOOK}]
    plan = write_plan(tmp_path, plan_text({1: {"edits": edits}}, test=ADD_ONLY,
                                          review=[ADD_ONLY]))
    done = handoff("start", f"GB-setup-{mode}", "--plan", str(plan), "--yes", "--foreground",
                   cwd=repo, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("gate", "reviewer"):
        assert (repo / ".worktrees" / f"GB-setup-{mode}" / name / "set-up").is_file()
    gate = repo / ".worktrees" / f"GB-setup-{mode}" / "gate"
    assert "SETUP_MARKER" in (gate / "setup.py").read_text(), "set up at the peer's commit"
    if mode == "on":
        assert not marker.exists(), marker.read_text()
    else:  # the same commit's set-up, unfenced: it ran as the person, and read the key
        assert "key: True" in marker.read_text()


@fault("32", "the implementer leaves a `.lock` beside its ticket branch (as a crashed git "
             "would), so handoff's move of the branch to the round's commit fails",
       "sandbox on: it cannot write under refs/. sandbox off: the ticket waits for a person "
       "with git's own words naming the lock file; nothing crashes, main does not move",
       "the implementer's commit (in its checkout), the branch at the base, main")
@pytest.mark.parametrize("mode", ["on", "off"])
def test_a_locked_ticket_branch_is_said_not_crashed_on(
        repo: Path, tmp_path: Path, handoff_home: Path, monkeypatch: pytest.MonkeyPatch,
        mode: str) -> None:
    main = git(repo, "rev-parse", "main")
    ticket, final = hostile(repo, tmp_path, handoff_home, monkeypatch, "lock-branch", mode,
                            tmp_path / "unused")
    assert attack_result(handoff_home, ticket, "lock-branch")["got_through"] is (mode == "off")
    assert git(repo, "rev-parse", "main") == main
    if mode == "on":
        assert final["phase"] == "passed", final.get("reason")
        return
    assert final["phase"] == "needs-human", final
    assert f"handoff/{ticket}.lock" in str(final["reason"]), final["reason"]
    assert git(repo, "rev-parse", f"handoff/{ticket}") == main, "the branch stayed at the base"
    made = git(repo / ".worktrees" / ticket / "implementer", "rev-parse", "HEAD")
    assert made != main and git(repo, "cat-file", "-t", made) == "commit", "the work is kept"
    assert [e for e in events(handoff_home, ticket) if e["kind"] == "error"] == []


@fault("32", "the repository has extensions.worktreeConfig; the implementer writes its admin "
             "folder's `config.worktree` (which git then reads as configuration) naming a "
             "program of its own as core.fsmonitor",
       "sandbox on: the file is read-only in its fence. sandbox off: written, and handoff "
       "refuses to run git in that checkout: the ticket waits for a person, naming the file; "
       "the program never runs as handoff",
       "the person's machine; the implementer's checkout and commit")
@pytest.mark.parametrize("mode", ["on", "off"])
def test_a_peers_worktree_config_is_refused_not_read(
        repo: Path, tmp_path: Path, handoff_home: Path, monkeypatch: pytest.MonkeyPatch,
        mode: str) -> None:
    git(repo, "config", "extensions.worktreeConfig", "true")
    marker = tmp_path / "fsmonitor-ran"
    ticket, final = hostile(repo, tmp_path, handoff_home, monkeypatch, "worktree-config", mode,
                            marker)
    assert attack_result(handoff_home, ticket, "worktree-config")["got_through"] is \
        (mode == "off")
    ran = marker.read_text().splitlines() if marker.exists() else []
    assert [line for line in ran if "as handoff" in line] == [], ran
    if mode == "on":
        assert final["phase"] == "passed", final.get("reason")
        return
    assert final["phase"] == "needs-human", final
    assert "config.worktree" in str(final["reason"]), final["reason"]
    assert [e for e in events(handoff_home, ticket) if e["kind"] == "error"] == []
    handoff("close", ticket, "--force", cwd=repo)
    ran = marker.read_text().splitlines() if marker.exists() else []
    assert [line for line in ran if "as handoff" in line] == [], "close ran none of it either"


#: round 1's test command, committed by the implementer: run by the gate, it leaves a
#: compiled calc.py of its own making (an unchecked-hash .pyc: Python loads it whatever the
#: source says) and a stray file in the gate's checkout, ignored by .gitignore
PLANT = '''import importlib.util, os, pathlib, py_compile, sys, tempfile
if os.environ.get("HANDOFF_GATE_TOKEN"):
    evil = pathlib.Path(tempfile.mkdtemp()) / "calc.py"
    evil.write_text("PLANTED = True\\n" + pathlib.Path("calc.py").read_text())
    cache = pathlib.Path(importlib.util.cache_from_source("calc.py"))
    cache.parent.mkdir(exist_ok=True)
    py_compile.compile(str(evil), cfile=str(cache),
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    pathlib.Path("planted-by-round-1").write_text("x")
print("planted")
'''
#: round 2's: what the gate imports must be what the commit holds
PROBE = '''import pathlib, sys
sys.path.insert(0, ".")
import calc
stray = pathlib.Path("planted-by-round-1").exists()
print(f"calc planted: {getattr(calc, 'PLANTED', False)}; stray file: {stray}")
sys.exit(1 if getattr(calc, "PLANTED", False) or stray else 0)
'''


@fault("32", "round 1's code, run by the gate, leaves an unchecked-hash calc.pyc of its own "
             "(and a stray file) in the gate's checkout, ignored by .gitignore, so that round "
             "2's gate would import code the commit does not hold",
       "each round's checkout is exactly its commit: every file git does not track (ignored "
       "ones included, but the post_create output) is removed before the gate runs again",
       "the ticket, which passes on what its commit holds")
def test_a_rounds_leftovers_never_reach_the_next_gate(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    (repo / ".gitignore").write_text("__pycache__/\nplanted-*\n")
    git(repo, "commit", "-qam", "ignore strays")
    handoff_home.mkdir(parents=True, exist_ok=True)
    (handoff_home / "config.yaml").write_text(yaml.safe_dump({"base_tests": False}))
    probe = [sys.executable, "probe.py"]
    plan = plan_text({1: {"edits": [FIX_ADD, {"file": "probe.py", "content": PLANT}]},
                      2: {"edits": [FIX_MUL, FIX_NEG, {"file": "probe.py", "content": PROBE}]}},
                     test=probe, review=[ALL_TESTS])
    done = handoff("start", "GB-strays", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    final = state(handoff_home, "GB-strays")
    assert final["phase"] == "passed" and final["round"] == 2, final.get("reason")
    tdir = ticket_path(handoff_home, "GB-strays")
    assert "planted" in (tdir / "gate-1.log").read_text(), "round 1 planted them"
    assert "calc planted: False; stray file: False" in (tdir / "gate-2.log").read_text()


@fault("32", "the implementer plants links to a folder of the person's in every place it may "
             "write that handoff later copies or removes (its checkout, its admin folder, its "
             "drafts, signals and CLI state); then `handoff close --force`",
       "close removes the ticket's checkouts and its peers' state without following a link: "
       "the link goes, what it names stays (sandbox on and off)",
       "the person's folder and every file in it")
@pytest.mark.parametrize("mode", ["on", "off"])
def test_close_never_removes_through_a_peers_link(
        repo: Path, tmp_path: Path, handoff_home: Path, monkeypatch: pytest.MonkeyPatch,
        mode: str) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work\n")
    ticket, final = hostile(repo, tmp_path, handoff_home, monkeypatch, "link-out", mode,
                            precious)
    result = attack_result(handoff_home, ticket, "link-out")
    assert result["got_through"] is True and "/implementer" in str(result["detail"]), result
    assert final["phase"] == "passed", final.get("reason")
    closed = handoff("close", ticket, "--force", cwd=repo)
    assert closed.returncode == 0, closed.stdout + closed.stderr
    assert not (repo / ".worktrees" / ticket).exists()
    assert (precious / "thesis.tex").read_text() == "years of work\n"
