"""`handoff finish --push` and `--pr` (handoff.operations.forge), and the credentials a remote's
URL holds kept from peers (handoff.machinery.credentials): a local bare remote, a `gh`
stand-in on PATH that records what it was given, the real CLI, git and bubblewrap."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from handoff.errors import EXIT_MISSING_TOOL, EXIT_USAGE
from handoff.loop import fences
from handoff.loop.workspace import Workspace
from handoff.machinery import sandbox
from handoff.record.ticket import TicketDir
from tests.conftest import git
from tests.harness import events, handoff, state, ticket_path
from tests.unit.operations.test_forge import FORGE_URL, TOKEN
from tests.unit.operations.test_train import NOTES, fixed_base, pass_ticket


def with_remotes(repo: Path, tmp_path: Path) -> Path:
    """origin: a bare repository here, holding main; forge: a URL with a token in it."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "-q", "origin", "main")
    git(repo, "remote", "add", "forge", FORGE_URL)
    return remote


def stand_in_gh(tmp_path: Path) -> tuple[Path, Path]:
    """A gh on PATH that records its argv and its stdin, and prints a pull request's URL."""
    folder = tmp_path / "bin"
    folder.mkdir()
    record = tmp_path / "gh-said"
    script = folder / "gh"
    script.write_text(f"#!{sys.executable}\nimport json, sys\n"
                      f"open({str(record)!r}, 'w').write(json.dumps({{'argv': sys.argv[1:], "
                      "'stdin': sys.stdin.read()}))\n"
                      "print('Creating pull request for handoff/Q into main')\n"
                      "print('https://github.com/team/calc/pull/7')\n")
    script.chmod(0o755)
    return folder, record


def leaked(home: Path, ticket: str, *outputs: str) -> list[str]:
    """Where the token shows up: the outputs, and every file of the ticket's folder."""
    found = [f"output {i}" for i, out in enumerate(outputs) if TOKEN in out]
    for path in ticket_path(home, ticket).rglob("*"):
        if path.is_file() and TOKEN.encode() in path.read_bytes():
            found.append(str(path))
    return found


def test_push_sends_the_reviewed_commit_as_its_branch_and_never_the_base(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    fixed_base(repo)
    remote = with_remotes(repo, tmp_path)
    commit = pass_ticket(repo, tmp_path, "P", [NOTES])
    main, remote_main = git(repo, "rev-parse", "main"), git(remote, "rev-parse", "main")
    # two remotes, and main has none of its own: which one is not guessed
    ask = handoff("finish", "P", "--push", cwd=repo)
    assert ask.returncode == EXIT_USAGE and "--remote NAME" in ask.stderr, ask.stderr
    done = handoff("finish", "P", "--push", "--remote", "origin", cwd=repo, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert git(remote, "rev-parse", "refs/heads/handoff/P") == commit
    assert git(remote, "rev-parse", "main") == remote_main, "the base was not pushed"
    assert git(repo, "rev-parse", "main") == main, "nor merged here"
    assert "pushed" in done.stdout and "P stays passed" in done.stdout, done.stdout
    assert "merged result:" in done.stdout, "tested before it was pushed"
    assert state(handoff_home, "P")["phase"] == "passed"
    [pushed] = [e for e in events(handoff_home, "P") if e["kind"] == "pushed"]
    assert pushed["remote"] == "origin" and pushed["commit"] == commit
    # the same again: nothing to force, and it says so as a success
    again = handoff("finish", "P", "--push", "--remote", "origin", cwd=repo, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    # a branch that someone else moved on the remote is refused, never overwritten
    tree = git(repo, "rev-parse", "main^{tree}")
    theirs = git(repo, "commit-tree", tree, "-p", main, "-m", "someone else's work")
    git(repo, "push", "-q", "--force", "origin", f"{theirs}:refs/heads/handoff/P")
    moved = handoff("finish", "P", "--push", "--remote", "origin", cwd=repo, timeout=120)
    assert moved.returncode == 1 and "refused handoff/P" in moved.stderr, moved.stderr
    assert git(remote, "rev-parse", "refs/heads/handoff/P") == theirs
    assert not leaked(handoff_home, "P", ask.stderr, done.stdout, moved.stderr)


def test_pr_opens_a_pull_request_with_the_persons_gh(repo: Path, tmp_path: Path,
                                                    handoff_home: Path) -> None:
    fixed_base(repo)
    with_remotes(repo, tmp_path)
    commit = pass_ticket(repo, tmp_path, "Q", [NOTES])
    folder, record = stand_in_gh(tmp_path)
    env = dict(os.environ, PATH=f"{folder}{os.pathsep}{os.environ['PATH']}")
    done = handoff("finish", "Q", "--pr", "--remote", "origin", cwd=repo, timeout=120, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "pull request https://github.com/team/calc/pull/7" in done.stdout, done.stdout
    said = json.loads(record.read_text())
    assert said["argv"][:6] == ["pr", "create", "--base", "main", "--head", "handoff/Q"]
    title = (ticket_path(handoff_home, "Q") / "ticket.md").read_text().splitlines()[2]
    assert said["argv"][6:8] == ["--title", f"Q: {title}"], said["argv"]
    assert said["argv"][-2:] == ["--body-file", "-"]
    report = (ticket_path(handoff_home, "Q") / "final-report.md").read_text()
    assert said["stdin"] == report and "passed" in report
    [pushed] = [e for e in events(handoff_home, "Q") if e["kind"] == "pushed"]
    assert pushed["pull_request"] == "https://github.com/team/calc/pull/7"
    assert pushed["commit"] == commit and not leaked(handoff_home, "Q", done.stdout)


def test_pr_without_gh_pushes_and_says_how_to_install_it(repo: Path, tmp_path: Path,
                                                        handoff_home: Path) -> None:
    fixed_base(repo)
    remote = with_remotes(repo, tmp_path)
    commit = pass_ticket(repo, tmp_path, "G", [NOTES])
    folder = tmp_path / "only-git"
    folder.mkdir()
    for tool in ("git", "bwrap"):
        found = shutil.which(tool)
        if found:
            (folder / tool).symlink_to(found)
    env = dict(os.environ, PATH=str(folder))
    done = handoff("finish", "G", "--pr", "--remote", "origin", cwd=repo, timeout=120, env=env)
    assert done.returncode == EXIT_MISSING_TOOL, done.stdout + done.stderr
    assert "gh (GitHub CLI) is not on PATH" in done.stderr and "cli.github.com" in done.stderr
    assert git(remote, "rev-parse", "refs/heads/handoff/G") == commit, "pushed all the same"


def test_no_peer_reads_the_credentials_a_remote_url_holds(repo: Path, tmp_path: Path,
                                                         handoff_home: Path) -> None:
    fixed_base(repo)
    with_remotes(repo, tmp_path)
    git(repo, "config", "http.https://github.com/.extraheader", f"AUTHORIZATION: bearer {TOKEN}")
    pass_ticket(repo, tmp_path, "K", [NOTES])
    support = sandbox.support()
    assert support.bwrap, f"bubblewrap is needed here: {support.why}"
    ws = Workspace.open(handoff_home, TicketDir(ticket_path(handoff_home, "K")))
    fence = fences.gate(home=handoff_home, repo=ws.repo, worktrees=ws.worktrees,
                        config=ws.config, env=ws.gate_env())
    config = ws.repo.common_dir / "config"
    seen = subprocess.run(sandbox.wrap(support.bwrap, fence, ["cat", str(config)]),
                          capture_output=True, text=True, timeout=30, check=True).stdout
    assert TOKEN not in seen, seen
    assert "url = https://github.com/team/calc.git" in seen and "[remote \"origin\"]" in seen
    # git in the fence still reads the remotes (only the secret is gone)
    remotes = subprocess.run(sandbox.wrap(support.bwrap, fence, ["git", "remote", "-v"]),
                             capture_output=True, text=True, timeout=30, check=True).stdout
    assert "forge\thttps://github.com/team/calc.git" in remotes and TOKEN not in remotes
    assert TOKEN in config.read_text(), "the person's own config is untouched"
