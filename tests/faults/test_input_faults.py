"""Bad input at `handoff start`: a plan that never ends or is binary, a config that is not UTF-8
or asks for a timeout that never comes, a `.worktrees` that is a file, ticket ids git refuses.
Each is one clear message and exit 2, before anything is created — driven through the real CLI.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from handoff.errors import UsageError
from handoff.record.store import TICKET_ID, ref_problem, validate_ticket_id
from tests.conftest import git
from tests.faults.catalog import fault
from tests.harness import handoff, plan_text, tmux_alive, write_plan


def refused(done: subprocess.CompletedProcess[str], *said: str) -> None:
    """One clear message, exit 2, no traceback."""
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("handoff: error: "), done.stderr
    for text in said:
        assert text in done.stderr, done.stderr


def nothing_created(repo: Path, home: Path, socket: str) -> None:
    """No ticket record, no branch, no worktree, no tmux server: the refusal changed nothing."""
    assert not list(home.glob("*/*/state.json"))
    assert git(repo, "branch", "--list", "handoff/*") == ""
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert not tmux_alive(socket)


@pytest.fixture
def plan(tmp_path: Path) -> Path:
    return write_plan(tmp_path, plan_text({1: {"edits": []}}))


@fault("6", "`handoff start --plan /dev/zero` (a plan that never ends)",
       "refused at once: exit 2, it is no regular file (a regular one is read up to the plan "
       "limit, 1 MiB, plus one byte)",
       "everything as it was: no ticket, branch, worktree or tmux server")
def test_a_plan_that_never_ends_is_refused_at_once(repo: Path, handoff_home: Path,
                                                    socket: str) -> None:
    done = handoff("start", "P-1", "--plan", "/dev/zero", "--yes", cwd=repo, timeout=30)
    refused(done, "/dev/zero", "is not a regular file")
    nothing_created(repo, handoff_home, socket)


@fault("18.10", "`handoff submit` of a FIFO (a peer's report path that nobody writes to)",
       "refused at once: exit 1, not accepted, it is no regular file; nothing filed",
       "the ticket as it was")
def test_submit_of_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "report.md"
    os.mkfifo(fifo)
    folder = tmp_path / "ticket"
    folder.mkdir()
    done = handoff("submit", "--dir", str(folder), "--role", "implementer", "--round", "1",
                   str(fifo), timeout=30)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "NOT accepted" in done.stderr and f"the report {fifo} is not a regular file" in done.stderr
    assert list(folder.iterdir()) == []


@fault("19", "a binary file as the plan",
       "refused: exit 2, 'not UTF-8 text' or 'a binary file', naming the file",
       "the plan file untouched; no ticket, branch, worktree or tmux server")
@pytest.mark.parametrize("kind", ["executable", "nul-bytes"])
def test_a_binary_plan_is_one_clear_message(kind: str, repo: Path, tmp_path: Path,
                                            handoff_home: Path, socket: str) -> None:
    data = Path(sys.executable).resolve().read_bytes()[:4096] if kind == "executable" \
        else b"# plan\n\x00\x00\x00 zeros inside\n"
    binary = tmp_path / "plan.bin"
    binary.write_bytes(data)
    done = handoff("start", "P-2", "--plan", str(binary), "--yes", cwd=repo)
    refused(done, str(binary))
    assert "not UTF-8 text" in done.stderr or "binary file" in done.stderr
    assert binary.read_bytes() == data
    nothing_created(repo, handoff_home, socket)


@fault("19", "a `.handoff.yaml` that is not UTF-8",
       "refused: exit 2 naming the file and the first bad byte",
       "the config file untouched; no ticket, branch, worktree or tmux server")
def test_a_config_that_is_not_utf8_is_one_clear_message(
        repo: Path, plan: Path, handoff_home: Path, socket: str) -> None:
    config = repo / ".handoff.yaml"
    data = "max_rounds: 2  # café\n".encode("latin-1")
    config.write_bytes(data)
    done = handoff("start", "P-3", "--plan", str(plan), "--yes", cwd=repo)
    refused(done, str(config), "not UTF-8 text")
    assert config.read_bytes() == data
    nothing_created(repo, handoff_home, socket)


@fault("19", "`gate_timeout: .nan` (or .inf) in `.handoff.yaml`",
       "refused: exit 2, the key must be a positive number of seconds up to 30 days",
       "the config file untouched; no ticket, branch, worktree or tmux server")
@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", "1e400"])
def test_a_timeout_that_never_comes_is_refused(value: str, repo: Path, plan: Path,
                                               handoff_home: Path, socket: str) -> None:
    (repo / ".handoff.yaml").write_text(f"gate_timeout: {value}\n", encoding="utf-8")
    done = handoff("start", "P-4", "--plan", str(plan), "--yes", cwd=repo)
    refused(done, "'gate_timeout' must be a positive number of seconds")
    nothing_created(repo, handoff_home, socket)


@fault("19", "`.worktrees` in the repo is a file",
       "`start` refuses at once (exit 2: the path must be a folder; move or rename it) instead "
       "of an orchestrator failing in the background",
       "the file and its content; no ticket, branch or tmux server")
def test_a_worktrees_file_is_refused_before_the_ticket_starts(
        repo: Path, plan: Path, handoff_home: Path, socket: str) -> None:
    blocker = repo / ".worktrees"
    blocker.write_text("my notes, not a folder\n", encoding="utf-8")
    done = handoff("start", "P-5", "--plan", str(plan), "--yes", cwd=repo)
    refused(done, str(blocker), "is a file", "move or rename")
    assert blocker.read_text(encoding="utf-8") == "my notes, not a folder\n"
    nothing_created(repo, handoff_home, socket)


HOSTILE = ["x.lock", "a.", "PROJ-1.lock", "release.", "a..b", "-x", "a/b", "a@{1}", "a b"]


@fault("20", "ticket ids git refuses as branch names (`x.lock`, `a.`, …) or that are not one "
             "plain folder name",
       "refused up front: exit 2 naming git's rule for the branch handoff/<id>, instead of "
       "failing later in the background",
       "no ticket, branch, worktree or tmux server")
@pytest.mark.parametrize("ticket", HOSTILE)
def test_ticket_ids_git_refuses_are_refused_up_front(ticket: str, repo: Path, plan: Path,
                                                     handoff_home: Path, socket: str) -> None:
    done = handoff("start", "--plan", str(plan), "--yes", "--", ticket, cwd=repo)
    refused(done, f"invalid ticket id {ticket!r}")
    nothing_created(repo, handoff_home, socket)


def git_accepts(branch: str) -> bool:
    return subprocess.run(["git", "check-ref-format", "--branch", branch], capture_output=True,
                          timeout=30).returncode == 0


NAMES = [
    "PROJ-123", "a", "x.y_z-1", "release.2024.05", "lock", "x.lockx", "x.LOCK", "a.b.c",
    "x.lock", "a.", "a..b", "..", ".", ".a", "a/.b", "a/b.lock", "a.lock/b", "a/b", "a//b", "/a",
    "a/", "a@{1}", "a@b", "a@", "@", "@a", "a{", "a}", "-a", "a/-b", "a b", "a\tb", "a~1", "a^",
    "a:b", "a?", "a*", "a[1]", "a\\b", "a\x7f", "a\x01", "ü", "票-1", "x/y.", "x./y", "HEAD",
    "refs/heads/x", "a.lock.", "a/..", "a/.", "",
]


@pytest.mark.parametrize("name", NAMES)
def test_the_ref_rules_agree_with_git_check_ref_format(name: str) -> None:
    """ref_problem is git's `check-ref-format --branch` without running git: for the branch
    handoff/<name> every ticket id makes, both say the same."""
    branch = f"handoff/{name}"
    assert (ref_problem(branch) == "") == git_accepts(branch), (branch, ref_problem(branch))


@pytest.mark.parametrize("name", NAMES)
def test_an_id_is_accepted_exactly_when_it_is_a_plain_name_git_accepts(name: str) -> None:
    plain = bool(TICKET_ID.fullmatch(name)) and ".." not in name
    expected = plain and git_accepts(f"handoff/{name}")
    try:
        assert validate_ticket_id(name) == name
        accepted = True
    except UsageError as exc:
        accepted = False
        assert repr(name) in exc.message and exc.hint
    assert accepted == expected, name
